"""The vector signal of the embedded engine: each memory's vectors as one float32 matrix in memory,
loaded on first search and updated on every write, so a search over 100,000 documents is one
matrix-vector product (einsum, on one thread: OpenBLAS's threaded gemv loses to it on a busy two-core
machine, docs/benchmarks.md)."""

from __future__ import annotations

from sys import intern
from typing import Any

import numpy as np

from uhp_memories.domain.recall.model import Candidate, EmbeddingModelMismatch
from uhp_memories.local.embedded.sql import Admission


def unit_vector(values: Any, dimensions: int, model_id: str) -> np.ndarray:
    """A vector as the store keeps it: float32, L2-normalized (so a dot product is a cosine)."""
    vector = np.asarray(values, dtype=np.float32).reshape(-1)
    if vector.size != dimensions:
        raise EmbeddingModelMismatch(f"{model_id} ({dimensions} dimensions)", f"a vector of {vector.size}")
    if not np.all(np.isfinite(vector)):
        raise ValueError("a vector holds a non-finite value")
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class VectorBlock:
    """The vectors of one memory as a growable float32 matrix, with the document id, record id, write
    time, type and active flag of each row. Removal swaps the last row into the hole, so writes are
    O(1)."""

    def __init__(self, dimensions: int, capacity: int = 64) -> None:
        self.n = 0
        self.vectors = np.zeros((capacity, dimensions), dtype=np.float32)
        self.doc_ids = np.zeros(capacity, dtype=np.int64)
        self.active = np.zeros(capacity, dtype=bool)
        self.record_ids: list[str] = []
        self.chain_ids: list[str] = []
        self.written: list[str] = []
        self.types: list[str] = []
        self.row_of: dict[int, int] = {}  # document id -> row
        self.row_of_record: dict[str, int] = {}  # record id -> row
        self.version = 0  # bumped by every change: what was computed from the rows is stale after it
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None
        self._scanned: tuple[bytes, int, np.ndarray] | None = None  # the last query, version, scores

    @classmethod
    def load(cls, dimensions: int, rows: list[tuple[Any, ...]]) -> VectorBlock:
        """From the store's vector rows: (id, record id, chain id, status, embedding, written_at, type)."""
        block = cls(dimensions, capacity=max(64, len(rows)))
        n = len(rows)
        if n:
            block.vectors[:n] = np.frombuffer(b"".join(r[4] for r in rows), dtype=np.float32).reshape(n, dimensions)
            block.doc_ids[:n] = [r[0] for r in rows]
            block.active[:n] = [r[3] == "active" for r in rows]
            block.record_ids = [r[1] for r in rows]
            block.chain_ids = [r[2] for r in rows]
            block.written = [intern(r[5]) for r in rows]  # shared by many rows (log.py says why)
            block.types = [intern(r[6]) for r in rows]
            block.row_of = {int(r[0]): i for i, r in enumerate(rows)}
            block.row_of_record = {r[1]: i for i, r in enumerate(rows)}
            block.n = n
        return block

    def candidate(self, row: int, memory_id: str, score: float) -> Candidate:
        fields = (self.record_ids[row], self.chain_ids[row], memory_id, self.types[row], self.written[row], score)
        return tuple.__new__(Candidate, fields)  # (ports.Candidate: the fast way to build one)

    def put(
        self, doc_id: int, record_id: str, chain_id: str, vector: bytes, active: bool, written: str, type_: str
    ) -> None:
        self.version += 1
        row = self.row_of.get(doc_id)
        if row is None:
            if self.n == len(self.doc_ids):
                self._grow()
            row = self.n
            self.n += 1
            self.row_of[doc_id] = row
            self.row_of_record[record_id] = row
            self.record_ids.append(record_id)
            self.chain_ids.append(chain_id)
            self.written.append(intern(written))
            self.types.append(intern(type_))
            self.doc_ids[row] = doc_id
            self._sorted = None
        else:
            self.chain_ids[row] = chain_id
            self.written[row] = intern(written)
            self.types[row] = intern(type_)
        self.vectors[row] = np.frombuffer(vector, dtype=np.float32)
        self.active[row] = active

    def remove(self, doc_id: int) -> None:
        row = self.row_of.pop(doc_id, None)
        if row is None:
            return
        self.version += 1
        del self.row_of_record[self.record_ids[row]]
        last = self.n - 1
        if row != last:
            moved = int(self.doc_ids[last])
            self.vectors[row] = self.vectors[last]
            self.doc_ids[row] = moved
            self.active[row] = self.active[last]
            self.record_ids[row] = self.record_ids[last]
            self.chain_ids[row] = self.chain_ids[last]
            self.written[row] = self.written[last]
            self.types[row] = self.types[last]
            self.row_of[moved] = row
            self.row_of_record[self.record_ids[row]] = row
        self.vectors[last] = 0.0
        self.record_ids.pop()
        self.chain_ids.pop()
        self.written.pop()
        self.types.pop()
        self.n = last
        self._sorted = None

    def rows_of(self, doc_ids: np.ndarray) -> np.ndarray:
        """The rows of these documents, skipping documents without a vector."""
        rows = self.rows_at(doc_ids)
        return rows[rows >= 0]

    def rows_at(self, doc_ids: np.ndarray) -> np.ndarray:
        """The row of each of these documents, -1 for a document without a vector."""
        if self._sorted is None:
            order = np.argsort(self.doc_ids[: self.n], kind="stable")
            self._sorted = (self.doc_ids[: self.n][order], order)
        ids, order = self._sorted
        if ids.size == 0 or doc_ids.size == 0:
            return np.full(doc_ids.size, -1, dtype=np.int64)
        at = np.searchsorted(ids, doc_ids)
        at[at >= ids.size] = 0
        return np.where(ids[at] == doc_ids, order[at], -1)

    def _grow(self) -> None:
        capacity = len(self.doc_ids) * 2
        vectors = np.zeros((capacity, self.vectors.shape[1]), dtype=np.float32)
        vectors[: self.n] = self.vectors[: self.n]
        doc_ids = np.zeros(capacity, dtype=np.int64)
        doc_ids[: self.n] = self.doc_ids[: self.n]
        active = np.zeros(capacity, dtype=bool)
        active[: self.n] = self.active[: self.n]
        self.vectors, self.doc_ids, self.active = vectors, doc_ids, active


def similarity(block: VectorBlock, query: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """The query's similarity to every row of the block (or to these rows). The last scan of every
    row is kept: ranking asks for the similarity of a few hundred of the same rows right after it,
    and reading them from the scan costs a fraction of gathering their vectors again (measured on
    LoCoMo's memories: docs/performance.md, "Figures behind design choices in the code")."""
    key = query.tobytes()
    scanned = block._scanned
    if scanned is not None and scanned[0] == key and scanned[1] == block.version:
        return scanned[2] if rows is None else scanned[2][rows]
    if rows is not None:
        return np.einsum("ij,j->i", block.vectors[rows], query)
    scores = np.einsum("ij,j->i", block.vectors[: block.n], query)
    block._scanned = (key, block.version, scores)
    return scores


def nearest_rows(
    block: VectorBlock, scores: np.ndarray, depth: int, min_similarity: float | None, admission: Admission
) -> np.ndarray:
    """The rows of the best `depth` admitted documents by similarity (`scores`, one per row) above
    `min_similarity`, best first (ties: lower record id)."""
    if block.n == 0:
        return np.empty(0, dtype=np.int64)
    if admission.narrowed:
        rows = _admitted_rows(block, scores, depth, min_similarity, admission)
    else:
        rows = np.flatnonzero(block.active[: block.n])
    if min_similarity is not None:
        rows = rows[scores[rows] > min_similarity]
    if rows.size > depth:
        rows = rows[np.argpartition(-scores[rows], depth - 1)[:depth]]
    ordered = sorted(rows.tolist(), key=lambda r: (-float(scores[r]), block.record_ids[r]))
    return np.asarray(ordered, dtype=np.int64)


def _admitted_rows(
    block: VectorBlock, scores: np.ndarray, depth: int, min_similarity: float | None, admission: Admission
) -> np.ndarray:
    """The rows the filter admits, or enough of the best of them to hold the filter's top `depth`.

    Checking the filter on the best `m` rows by similarity is exact once `depth` of them pass: any
    admitted row outside those `m` scores lower than all of them. Otherwise `m` grows, and past a
    quarter of the memory the filter runs over the whole memory."""
    m = depth * 4
    while m < block.n // 4:
        best = np.argpartition(-scores, m - 1)[:m]
        kept = best[admission.passing(block.doc_ids[best])]
        exhausted = min_similarity is not None and scores[best].min() <= min_similarity
        if kept.size >= depth or exhausted:
            return kept
        m *= 4
    return block.rows_of(admission.every())
