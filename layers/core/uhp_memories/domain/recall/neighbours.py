"""What a consolidation pass asks the search index (domain/consolidation/service.py Neighbours): a record's
nearest records, the records of its subject, and the expired ones, each within one memory. Read from
the index, so a pass never scans its memory; the pass reads every hit back from DynamoDB before
acting on it, so an index that lags can only make it do less, never act on a stale record."""

from __future__ import annotations

from collections.abc import Callable

from uhp_memories.domain.filters import parse_filter
from uhp_memories.domain.recall.engine import RecallEngine, text_of
from uhp_memories.domain.records.model import RecordVersion


class IndexNeighbours:
    def __init__(self, engine: RecallEngine, text: Callable[[RecordVersion], str] = text_of) -> None:
        self._engine = engine
        self._text = text

    def similar(self, record: RecordVersion, limit: int) -> list[tuple[str, float]]:
        text = self._text(record)
        if not text.strip():
            return []
        known = self._engine.index.get(record.tenant, record.memory_id, record.id)
        vector = known.embedding if known is not None and known.embedding is not None else None
        if vector is None:
            vector = self._engine.embed_query(text)
        hits = self._engine.search(
            record.tenant, record.memory_id, vector=vector, text=text, types=(record.type,), limit=limit + 1
        )
        return [(h.record_id, float(h.signals.get("query", 0.0))) for h in hits if h.record_id != record.id][:limit]

    def same_subject(self, record: RecordVersion, key: str, limit: int) -> list[str]:
        flt = parse_filter({"field": "attributes.key", "op": "eq", "value": key})
        hits = self._engine.search(record.tenant, record.memory_id, filters=flt, types=(record.type,), limit=limit)
        return [h.record_id for h in hits if h.record_id != record.id]

    def expired(self, tenant: str, memory_id: str, now: str, limit: int) -> list[str]:
        flt = parse_filter({"field": "time.valid_to", "op": "lt", "value": now})
        return [h.record_id for h in self._engine.search(tenant, memory_id, filters=flt, limit=limit)]
