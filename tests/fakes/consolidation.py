"""In-memory fakes for consolidation: runs (the contract of DynamoRunRepository) and the neighbours a
pass asks the index for."""

from __future__ import annotations

from tests.fakes.tree import HOLD, InMemoryMemoryRepository, InMemoryRecordRepository
from uhp_memories.domain.consolidation.model import Run
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.local.hashing import HashingEmbedder

RUN = "run"


class InMemoryRunRepository:
    """Runs kept under their memory, with the marker that holds it while they run."""

    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories

    def start(self, run: Run) -> None:
        with self.memories.lock:
            taken = run.id in self.memories.kept_under(run.tenant, run.memory_id, RUN)
            # One condition in DynamoDB's transaction, so one error for both failures.
            if taken or not self.memories.live(run.tenant, run.memory_id):
                raise TreeChanged(run.memory_id)
            self.memories.keep(run.tenant, run.memory_id, RUN, run.id, run)
            self.memories.keep(run.tenant, run.memory_id, HOLD, run.id, run.id)

    def save(self, run: Run, release: bool) -> None:
        with self.memories.lock:
            self.memories.keep(run.tenant, run.memory_id, RUN, run.id, run)
            if release:
                self.memories.drop(run.tenant, run.memory_id, HOLD, run.id)

    def get(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        return self.memories.kept_under(tenant, memory_id, RUN).get(run_id)

    def list(self, tenant: str, memory_id: str) -> list[Run]:
        """By run id, the order of their DynamoDB sort keys."""
        return list(self.memories.kept_under(tenant, memory_id, RUN).values())


class ScanningNeighbours:
    """The Neighbours a pass asks the index, answered by scanning the in-memory records (a fake may read
    everything; the pass it serves never does): cosine over a hashing bag-of-words embedding."""

    def __init__(self, records: InMemoryRecordRepository) -> None:
        self.records = records
        self.embedder = HashingEmbedder()

    def _current(self, tenant: str, memory_id: str) -> list[RecordVersion]:
        return [v for _, v in self.records.scan_active(tenant, memory_id, None)]

    def _text(self, record: RecordVersion) -> str:
        return record.content if isinstance(record.content, str) else ""

    def similar(self, record: RecordVersion, limit: int) -> list[tuple[str, float]]:
        [mine] = self.embedder.embed([self._text(record)])
        scored = []
        for other in self._current(record.tenant, record.memory_id):
            if other.id == record.id or other.type != record.type:
                continue
            [theirs] = self.embedder.embed([self._text(other)])
            scored.append((other.id, sum(a * b for a, b in zip(mine, theirs, strict=True))))
        return sorted(scored, key=lambda s: -s[1])[:limit]

    def same_subject(self, record: RecordVersion, key: str, limit: int) -> list[str]:
        return [v.id for v in self._current(record.tenant, record.memory_id)
                if v.id != record.id and v.type == record.type and v.attributes.get("key") == key][:limit]

    def expired(self, tenant: str, memory_id: str, now: str, limit: int) -> list[str]:
        return [v.id for v in self._current(tenant, memory_id) if v.valid_to is not None and v.valid_to < now][:limit]
