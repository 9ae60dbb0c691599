"""EmbeddedSearchIndex: the SearchIndex port on the embedded store (store.py), its vectors
(vectors.py), its BM25 (words.py) and its episode logs (log.py). It stores and retrieves; ranking is
domain/recall/ranking.py's, as for every adapter.

Every filter (types, fields, include, as_of) is applied inside each signal before its top-k cut: the
vector signal scores only the documents the filter admits, the BM25 signal joins the same WHERE
clause (sql.py). The scope (tenant + memory id) is part of every statement.

One connection, one lock: writes and reads are serialized, which the local gateway's threads need
and two cores do not mind.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from uhp_memories.domain.recall.model import Candidate, CandidateQuery, LogStretches, SearchDocument, SearchRequest
from uhp_memories.local.embedded.log import Admitted, EpisodeLog
from uhp_memories.local.embedded.sql import PROBE_MAX, Admission
from uhp_memories.local.embedded.store import DocumentStore, instant
from uhp_memories.local.embedded.vectors import VectorBlock, nearest_rows, similarity, unit_vector
from uhp_memories.local.embedded.words import COMMON_DOCS, best_by_words, mentioned

# BM25 of a query + text request runs on these while the request's vectors are scored (candidates):
# SQLite lets go of the GIL, so the two use both cores and the search takes less time (measured:
# docs/benchmarks.md, "Latency targets").
_TEXT_LEGS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bm25")
_Change = tuple[int, int, SearchDocument, bytes | None]  # scope, document id, document, vector
_new = tuple.__new__  # builds a Candidate by the hundred (ports.Candidate)


class EmbeddedSearchIndex:
    """A SearchIndex on sqlite3 + numpy. `path` is a file (WAL mode) or ":memory:"."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        model_id: str,
        dimensions: int,
        scrub_erased: bool = True,
        common_docs: int | None = COMMON_DOCS,
    ) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        self._model_id = model_id
        self._dimensions = dimensions
        self._common_docs = common_docs
        self._lock = threading.RLock()
        self._store = DocumentStore(path, model_id=model_id, dimensions=dimensions, scrub_erased=scrub_erased)
        self._blocks: dict[int, VectorBlock] = {}  # scope -> its vectors, once searched
        self._logs: dict[int, EpisodeLog] = {}  # scope -> its episode log, once read

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def close(self) -> None:
        with self._lock:
            self._blocks.clear()
            self._logs.clear()
            self._store.close()

    # -- writes ------------------------------------------------------------------------------

    def index(self, docs: Sequence[SearchDocument]) -> None:
        prepared = [(doc, self._vector_bytes(doc)) for doc in docs]
        with self._lock:
            changes: list[_Change] = []
            with self._store.transaction():
                for doc, vector in prepared:
                    written = self._store.upsert(doc, vector)
                    if written is not None:
                        changes.append((*written, doc, vector))
            for change in changes:
                self._follow(change)

    def _follow(self, change: _Change) -> None:
        """Keep the memory's cached vectors and log in step with one document written."""
        scope, doc_id, doc, vector = change
        written, active = instant(doc.written_at) or "", doc.status == "active"
        block = self._blocks.get(scope)
        if block is not None:
            if vector is None:
                block.remove(doc_id)
            else:
                block.put(doc_id, doc.record_id, doc.chain_id, vector, active, written, doc.type)
        log = self._logs.get(scope)
        if log is not None and not log.put(doc.record_id, doc_id, doc.chain_id, doc.type, written, active):
            del self._logs[scope]

    def _vector_bytes(self, doc: SearchDocument) -> bytes | None:
        if doc.embedding is None:
            return None
        return unit_vector(doc.embedding, self._dimensions, self._model_id).tobytes()

    def delete(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        with self._lock:
            scope = self._store.scope(tenant, memory_id)
            if scope is None:
                return
            removed = self._store.delete(scope, record_ids)
            if not removed:
                return
            block = self._blocks.get(scope)
            for doc_id in removed:
                if block is not None:
                    block.remove(doc_id)
            self._logs.pop(scope, None)

    def delete_memory(self, tenant: str, memory_id: str) -> None:
        with self._lock:
            scope = self._store.scope(tenant, memory_id)
            if scope is None:
                return
            self._store.delete_memory(scope)
            self._blocks.pop(scope, None)
            self._logs.pop(scope, None)

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, memory_id: str, record_id: str) -> SearchDocument | None:
        with self._lock:
            return self._store.get(tenant, memory_id, record_id)

    def candidates(self, request: SearchRequest, asked: CandidateQuery) -> dict[str, list[Candidate]]:
        query = None if request.vector is None else unit_vector(request.vector, self._dimensions, self._model_id)
        with self._lock:
            found = [
                self._candidates_in(request, scope, memory_id, query if asked.by_meaning else None, asked)
                for memory_id in request.memory_ids
                if (scope := self._store.scope(request.tenant, memory_id)) is not None
            ]
        return _merged(found, asked)

    def mentioned(self, request: SearchRequest, terms: Sequence[str]) -> frozenset[str]:
        found: set[str] = set()
        with self._lock:
            for memory_id in request.memory_ids:
                scope = self._store.scope(request.tenant, memory_id)
                left = [t for t in terms if t not in found]
                if scope is not None and left:
                    probe = Admission.of(self._store.db, request, scope).probe
                    found |= mentioned(self._store.db, scope, left, probe)
        return frozenset(found)

    def _candidates_in(
        self, request: SearchRequest, scope: int, memory_id: str, query: np.ndarray | None, asked: CandidateQuery
    ) -> dict[str, list[Candidate]]:
        """The candidates of one memory searched."""
        admission = Admission.of(self._store.db, request, scope)
        legs: dict[str, list[Candidate]] = {}
        words: Future[list[Candidate]] | None = None
        if asked.terms:
            current = None if admission.narrowed else self._block(scope)
            text_leg = partial(
                best_by_words, self._store.db, scope, memory_id, asked.terms, admission.probe, asked.depth,
                self._common_docs, current,
            )
            if query is not None and not admission.narrowed:
                # On another core while the vectors are scored here. (Not when the request narrows:
                # its vector signal queries SQLite too.)
                words = _TEXT_LEGS.submit(text_leg)
        if query is not None:
            block = self._block(scope)
            scores = similarity(block, query)
            rows = nearest_rows(block, scores, asked.depth, asked.min_similarity, admission).tolist()
            rids, chains, kinds, written = block.record_ids, block.chain_ids, block.types, block.written
            legs["query"] = [
                _new(Candidate, (rids[r], chains[r], memory_id, kinds[r], written[r], s))
                for r, s in zip(rows, scores[rows].tolist(), strict=True)
            ]
        if asked.terms:
            legs["text"] = words.result() if words else text_leg()
        if asked.newest:
            legs["recency"] = self._newest(admission, asked.newest, memory_id)
        return legs

    def _newest(self, admission: Admission, limit: int, memory_id: str) -> list[Candidate]:
        where, params = admission.scan
        rows = self._store.db.execute(
            f"SELECT d.record_id, d.chain_id, d.type, d.written_at FROM docs d WHERE {where} "  # noqa: S608
            "ORDER BY d.written_at DESC, d.record_id DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
        return [Candidate(r[0], r[1], memory_id, r[2], r[3]) for r in rows]

    def similarities(self, request: SearchRequest, documents: Sequence[Candidate]) -> dict[str, float]:
        if request.vector is None:
            return {}
        query = unit_vector(request.vector, self._dimensions, self._model_id)
        with self._lock:
            return self._similarities(request, query, documents)

    def _similarities(
        self, request: SearchRequest, query: np.ndarray, documents: Sequence[Candidate]
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        for memory_id, docs in _by_memory(request, documents).items():
            scope = self._store.scope(request.tenant, memory_id)
            if scope is None:
                continue
            block = self._block(scope)
            row_of = block.row_of_record
            placed = [(d.record_id, row) for d in docs if (row := row_of.get(d.record_id)) is not None]
            if placed:
                rows = np.fromiter((row for _, row in placed), dtype=np.int64, count=len(placed))
                scores = similarity(block, query, rows).tolist()  # the scan's, when it was just made
                out.update(zip((rid for rid, _ in placed), scores, strict=True))
        return out

    def log_around(
        self,
        request: SearchRequest,
        documents: Sequence[Candidate],
        types: Sequence[str],
        reach: int,
        scoring: Sequence[Candidate] = (),
    ) -> LogStretches:
        types = tuple(types)
        query = None if request.vector is None else unit_vector(request.vector, self._dimensions, self._model_id)
        stretches: list[list[Candidate]] = []
        without_vector: list[str] = []
        with self._lock:
            for memory_id, docs in _by_memory(request, documents).items():
                scope = self._store.scope(request.tenant, memory_id)
                if scope is None:
                    continue
                log = self._log(scope, types)
                placed = [at for d in docs if (at := log.position.get(d.record_id)) is not None]
                admission = Admission.of(self._store.db, request, scope)
                admitted = _admitted_in(log, admission) if admission.narrowed else None
                positions, starts = log.around(np.asarray(placed, dtype=np.int64), reach, admitted)
                scores = [0.0] * positions.size
                if query is not None and positions.size:
                    block = self._block(scope)
                    rows = block.rows_at(log.doc_ids[positions])
                    has = rows >= 0
                    known = np.zeros(positions.size)
                    known[has] = similarity(block, query, rows[has])  # the scan's, when it was just made
                    scores = known.tolist()
                    without_vector.extend(log.record_ids[at] for at in positions[~has].tolist())
                rids, chains, kinds, written = log.record_ids, log.chain_ids, log.kinds, log.written
                entries = [
                    _new(Candidate, (rids[at], chains[at], memory_id, kinds[at], written[at], score))
                    for at, score in zip(positions.tolist(), scores, strict=True)
                ]
                stretches.extend(entries[a:b] for a, b in zip(starts, [*starts[1:], len(entries)], strict=True))
            scored = self._similarities(request, query, scoring) if query is not None and scoring else {}
        return LogStretches(stretches, frozenset(without_vector), scored)

    def _block(self, scope: int) -> VectorBlock:
        block = self._blocks.get(scope)
        if block is None:
            block = VectorBlock.load(self._dimensions, self._store.vector_rows(scope))
            self._blocks[scope] = block
        return block

    def _log(self, scope: int, types: tuple[str, ...]) -> EpisodeLog:
        log = self._logs.get(scope)
        if log is None or log.types != types:
            log = EpisodeLog(types, self._store.log_rows(scope, types))
            self._logs[scope] = log
        return log


def _admitted_in(log: EpisodeLog, admission: Admission) -> Admitted:
    """Whether the request admits the log's documents at these positions: checked one by one for a
    few, or by listing every admitted document of the log's types for more than PROBE_MAX."""

    def admitted(positions: np.ndarray) -> np.ndarray:
        if admission.every_version:
            return np.ones(positions.size, dtype=bool)
        doc_ids = log.doc_ids[positions]
        if positions.size > PROBE_MAX:
            return np.isin(doc_ids, admission.every(log.types))
        return admission.passing(doc_ids)

    return admitted


def _by_memory(request: SearchRequest, documents: Sequence[Candidate]) -> dict[str, Sequence[Candidate]]:
    """These documents by the memory they are in, only the request's memories."""
    if not request.also:  # one memory: the common case, one pass
        own = request.memory_id
        return {own: [d for d in documents if d.memory_id == own or not d.memory_id]}
    grouped: dict[str, list[Candidate]] = {}
    searched = request.memory_ids
    for doc in documents:
        memory_id = doc.memory_id or request.memory_id
        if memory_id in searched:
            grouped.setdefault(memory_id, []).append(doc)
    return dict(grouped)


def _merged(found: Sequence[dict[str, list[Candidate]]], asked: CandidateQuery) -> dict[str, list[Candidate]]:
    """The candidates of every memory searched, one list per signal asked for, cut across them: best
    first (recency: newest first)."""
    names: dict[str, int] = {}
    if asked.by_meaning:
        names["query"] = asked.depth
    if asked.terms:
        names["text"] = asked.depth
    if asked.newest:
        names["recency"] = asked.newest
    if len(found) == 1:
        return {name: found[0].get(name, []) for name in names}
    legs: dict[str, list[Candidate]] = {}
    for name, size in names.items():
        every: list[Candidate] = [c for legs_of in found for c in legs_of.get(name, ())]
        if name == "recency":
            every.sort(key=lambda c: (c.written_at, c.record_id), reverse=True)
        else:
            every.sort(key=lambda c: (-c.score, c.record_id))
        legs[name] = every[:size]
    return legs
