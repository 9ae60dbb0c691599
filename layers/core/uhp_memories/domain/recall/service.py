"""Recall (§6): read one memory by meaning, words and fields, fused into one ranking; say why each
result came, what was asked and not done (`degraded`), and when nothing answers (`abstain`).

A `query` alone is searched by its meaning and by its words (a result its words found says `query` in
`why`, which names the request's signals: RecallInput.named); scores are on one scale across
requests, the first result's being the answer's confidence, and `abstain` is true exactly when that
is below 0.5 (AbstainPolicy, Calibration).

Recall reads the one memory in the path; `depth` adds descendants the caller may read, level by
level, capped at MAX_DEPTH (the cap is reported, never applied in silence). The index is derived
and may lag: every hit is read back from DynamoDB, the source of truth, before it is returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.filters import matches, parse_filter
from uhp_memories.domain.limits import MAX_DEPTH, RECALL_LIMIT_MAX
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.overlap import IN_ORDER, Overlap, Pending
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.providers.ports import (
    RECALL_CANDIDATES_MAX,
    RECALL_CANDIDATES_PER_RESULT,
    RecordProvider,
)
from uhp_memories.domain.recall.abstain import AbstainPolicy, Judgement, unmatched_names
from uhp_memories.domain.recall.model import (
    NOTHING_ASKED,
    QUERY_NOT_EMBEDDED,
    RECALL_LIMIT_DEFAULT,
    MemoryUnavailable,
    QueryNotEmbedded,
    RecallAnswer,
    RecallInput,
    RecallResult,
)
from uhp_memories.domain.recall.ports import MemoryNeighbours, RecalledRecords, RecallIndex, SearchHit
from uhp_memories.domain.records.model import INCLUDE_VALUES, RecordVersion

logger = logging.getLogger(__name__)










def _checked_limit(request: RecallInput) -> int:
    """The request's limit, once its shape is checked (memory_invalid otherwise)."""
    limit = request.limit if request.limit is not None else RECALL_LIMIT_DEFAULT
    if not 1 <= limit <= RECALL_LIMIT_MAX:
        raise MemoryInvalid(f"limit must be between 1 and {RECALL_LIMIT_MAX}")
    if request.include not in INCLUDE_VALUES:
        raise MemoryInvalid(f"include must be one of {list(INCLUDE_VALUES)}")
    if request.depth < 0:
        raise MemoryInvalid("depth is 0 (this memory only) or more")
    if not request.asks:
        raise MemoryInvalid(NOTHING_ASKED)
    return limit


@dataclass(frozen=True)
class _ProviderHit:
    """Another provider's hit, as abstain reads a hit (SearchHit)."""

    record_id: str
    score: float
    why: tuple[str, ...]
    signals: Any
    memory_id: str




























class RecallService:
    """Recall (§6): one memory, and its descendants to a depth, read by meaning, words and fields."""

    def __init__(
        self,
        ports: Ports,
        memories: MemoryNeighbours,
        records: RecalledRecords,
        index: Callable[[], RecallIndex | None],
        abstain: AbstainPolicy | None = None,
        overlap: Overlap = IN_ORDER,
    ) -> None:
        self._ports = ports
        # Where a reader can go from the memory is read beside the search (bootstrap: a thread pool).
        self._overlap = overlap
        self._memories = memories
        self._records = records
        self._index = index
        self._abstain = abstain or AbstainPolicy()

    def recall(self, caller: Caller, memory_id: str, request: RecallInput) -> RecallAnswer:
        """Recall in one memory (and its descendants to `depth`) for the caller: the access check, the
        search, every hit read back from the source of truth, abstain, and one answer."""
        # The query is embedded while the caller's access is checked and the memories to search are
        # read; nothing of the memory is read for it, and its answer is dropped if access fails.
        index = self._index()
        embedding = index.embedding(request.query) if index and request.query else None
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        limit = _checked_limit(request)
        flt = parse_filter(request.filters)
        provider = self._ports.providers.of(memory)
        if provider is not None:  # another provider keeps this memory's records (§10)
            return self._recall_in(provider, access, memory, request, flt, limit, index)
        instant = self._records.resolve_as_of(caller, memory_id, request.as_of) if request.as_of else None
        degraded: list[str] = []
        depth = request.depth
        if depth > MAX_DEPTH:
            depth = MAX_DEPTH
            degraded.append(f"depth:capped_at_{MAX_DEPTH}")
        if index is None:
            raise MemoryUnavailable("the search index of this provider is not connected")
        searched, neighbours = self._reach(access, memory, depth)
        searched_for, vector = self._meaning(request, embedding, degraded)
        # One search of every memory reached, fused as one ranking: every signal on one scale, so a
        # weak memory's best match does not rank beside a strong one's.
        also = [m.id for m in searched[1:]]
        hits = index.search(
            caller.tenant, memory.id, query=searched_for.query, text=searched_for.text, filters=flt,
            types=request.types, include=request.include, as_of=instant, limit=limit, vector=vector, also=also,
        )
        parent, children = neighbours.result()
        best = self._read_back(caller, searched, hits, request.include, instant)[:limit]
        judged = self._abstain.judge(
            searched_for,
            [hit for _, hit in best],
            index.model_id,
            unmatched=lambda words: unmatched_names(
                index, caller.tenant, memory.id, words, filters=flt, types=request.types,
                include=request.include, as_of=instant, also=also,
            ),
        )
        ranked = [(record, hit.score, request.named(hit.why)) for record, hit in best]
        return self._answer(access, ranked, judged, parent, children, degraded)

    def _reach(
        self, access: AccessView, memory: Memory, depth: int
    ) -> tuple[list[Memory], Pending[tuple[MemorySummary | None, list[MemorySummary]]]]:
        """The memories to search (this one, and its readable descendants to `depth`), and where a reader
        can go from here (the parent and the readable children). At depth 0, the common request, the
        latter is read beside the search, which does not need the children: one DynamoDB round trip
        fewer in the recall's own time. Deeper, the children are read once, for both. The access view
        is used by one thread at a time: the search does not read it."""
        if depth == 0:
            return [memory], self._overlap.start(self._memories.neighbours, access, memory)
        below = self._ports.memories.children(access.caller.tenant, memory.id)
        searched = self._memories_to_search(access, memory, depth, below)
        return searched, IN_ORDER.start(self._memories.neighbours, access, memory, below)

    @staticmethod
    def _meaning(
        request: RecallInput, embedding: Future[Any] | None, degraded: list[str]
    ) -> tuple[RecallInput, Sequence[float] | None]:
        """What is searched (a query alone is searched by its words too: RecallInput.searched) and the
        query's vector, embedded once for every memory searched. Without its meaning, a question still
        has its words: they are searched (as text, when no text was given), and `degraded` says so."""
        searched_for = request.searched()
        try:
            return searched_for, (embedding.result() if embedding else None)
        except QueryNotEmbedded:
            degraded.append(QUERY_NOT_EMBEDDED)
            words = request.text if request.text is not None else request.query
            return replace(request, query=None, text=words), None

    def _read_back(
        self, caller: Caller, searched: Sequence[Memory], hits: Sequence[SearchHit], include: str,
        instant: str | None,
    ) -> list[tuple[RecordVersion, SearchHit]]:
        """The hits as the source of truth holds them, best first (ties: the memory searched first): the
        index is derived and may lag, so each hit is read back from DynamoDB and kept only if it still
        answers; never a record of a memory this recall did not search."""
        order = {m.id: i for i, m in enumerate(searched)}
        by_memory: dict[str, list[SearchHit]] = {}
        for hit in hits:
            by_memory.setdefault(hit.memory_id or searched[0].id, []).append(hit)
        scored: list[tuple[float, int, RecordVersion, SearchHit]] = []
        for memory_id, found_there in by_memory.items():
            if memory_id not in order:
                continue
            found = self._ports.records.get_many(caller.tenant, memory_id, [hit.record_id for hit in found_there])
            for hit in found_there:
                record = self._confirmed(found.get(hit.record_id), include, instant)
                if record is not None:
                    scored.append((hit.score, -order[memory_id], record, hit))
        scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [(record, hit) for _, _, record, hit in scored]

    def _answer(
        self,
        access: AccessView,
        ranked: Sequence[tuple[RecordVersion, float, tuple[str, ...]]],
        judged: Judgement,
        parent: MemorySummary | None,
        children: list[MemorySummary],
        degraded: list[str],
    ) -> RecallAnswer:
        """The one answer of every recall. The ranking's scores are relative to this request (its best
        match of each signal is 1): each is shown as its share of the best one times the answer's
        confidence, so the first result's score is the confidence, which a reader compares across
        requests."""
        top = max((score for _, score, _ in ranked), default=0.0)
        return RecallAnswer(
            results=[
                RecallResult(
                    self._records.view(access, record),
                    round(judged.confidence * (score / top if top > 0 else 1.0), 6),
                    why,
                )
                for record, score, why in ranked
            ],
            parent=parent,
            children=children,
            degraded=degraded,
            abstain=judged.abstain,
        )

    def _recall_in(
        self,
        provider: RecordProvider,
        access: AccessView,
        memory: Memory,
        request: RecallInput,
        flt: Any,
        limit: int,
        index: RecallIndex | None,
    ) -> RecallAnswer:
        """Recall in a memory another provider keeps: its search, by the signals it has (§10.2); the
        fields the adapter applies over what it answers; what it lacks said in `degraded`, never ignored
        (§6.3); scores and abstain on the same scale as the native provider's, when it embeds with the
        stage's model (mem0 does: it is given ours)."""
        if request.as_of:
            self._ports.providers.require_native(memory, "as_of (reading a memory as it stood)")
        degraded: list[str] = []
        if request.depth > 0:
            degraded.append("depth:capped_at_0")  # each memory's provider answers for that memory alone
        searched_for = request.searched()
        if request.text:  # words the caller sent (a query's own words are asked of a word index only)
            degraded.append("text:not_supported")
        wanted = set(request.types)
        if searched_for.query:
            # Over-asked, for the fields and types the adapter applies over what the provider answers.
            asked = min(limit * RECALL_CANDIDATES_PER_RESULT, RECALL_CANDIDATES_MAX)
            answered = provider.recall(memory, searched_for.query, None, asked, request.include)
            degraded += [d for d in answered.degraded if d not in degraded]
            found = [(v, score, why) for v, score, why in answered.hits
                     if (not wanted or v.type in wanted) and matches(flt, v)][:limit]
            if answered.truncated and len(found) < limit:
                # Fields, types or status were applied over the top candidates only, and left fewer than
                # asked for: a match past them was not looked at (§6.3: never silently).
                degraded.append(f"filters:over_top_{asked}")
        elif request.text:
            found = []
        else:  # fields (and types) alone: the memory's newest records that match
            found = []
            for _, version in provider.scan(memory, request.include, None):
                if (not wanted or version.type in wanted) and matches(flt, version):
                    found.append((version, 1.0, ("filters" if request.filters else "types",)))
                    if len(found) == limit:
                        break
        hits = [_ProviderHit(v.id, score, why, {"query": score} if "query" in why else {}, memory.id)
                for v, score, why in found]
        judged = self._abstain.judge(
            replace(searched_for, text=None) if searched_for.query else searched_for,
            hits, index.model_id if index is not None else None,
        )
        parent, children = self._memories.neighbours(access, memory)
        ranked = [(v, score, request.named(why)) for v, score, why in found]
        return self._answer(access, ranked, judged, parent, children, degraded)

    def _memories_to_search(
        self, access: AccessView, memory: Memory, depth: int, children: Sequence[Memory]
    ) -> list[Memory]:
        """This memory, then its readable descendants level by level down to `depth` (`children`:
        the memory's own, already read)."""
        found = [memory]
        frontier = [memory]
        for _ in range(depth):
            next_level: list[Memory] = []
            for node in frontier:
                below = children if node is memory else self._ports.memories.children(access.caller.tenant, node.id)
                access.from_store(below)
                for child in below:
                    if not child.deleting and "read" in access.privileges(child.id):
                        next_level.append(child)
            found.extend(next_level)
            frontier = next_level
        return found

    @staticmethod
    def _confirmed(record: RecordVersion | None, include: str, instant: str | None) -> RecordVersion | None:
        """The hit as DynamoDB holds it now (read back in one batch), if it still answers the request
        (the index may lag)."""
        if record is None:
            return None
        if instant is not None:
            if include == "active" and not record.held_at(instant):
                return None
            if record.written_at > instant:
                return None
            return record.as_of(instant)
        if include == "active" and not (record.is_current and record.status == "active"):
            return None
        return record
