"""The embedded search engine: stdlib sqlite3 (FTS5 for BM25) with numpy vectors, on disk or in memory.

Local mode and tests use it; it is never imported by a deployed handler (numpy).

- Documents live in one `docs` table; each memory (a *scope*: tenant + memory id) has its own FTS5
  table, so BM25 statistics and postings belong to that memory alone. Attribute values are
  flattened into `attrs` (path, kind, value), indexed for equality and ranges.
- Vectors are stored per document (float32, L2-normalized) and kept in memory as one matrix per
  scope, loaded on first search and updated on every write, so a search over 100,000 documents
  is one matrix-vector product.
- Every filter (types, fields, include, as_of) is applied inside each signal before its top-k cut:
  the vector signal scores only the documents the filter admits, the BM25 signal joins the same
  WHERE clause. The scope (tenant + memory id) is part of every statement.
- Relative fusion (ports.Fusion) is completed here, where every similarity is at hand: a document
  the words found gets its similarity too, and an episode is read with the episodes logged around
  it. The log (each memory's episodes in write order) is kept beside the vectors, appended to as
  episodes are indexed and read again from the table after anything else.
- Erase leaves nothing behind: `secure_delete` zeroes freed content, the memory's FTS index is
  merged so deleted postings go, and the WAL is checkpointed and truncated.
- One connection, one lock: writes and searches are serialized, which the local gateway's threads
  need and two cores do not mind.
"""

# SQL text in this module is built from constants and integer table names only; every value is bound
# as a parameter, so string-built statements (S608) are safe here.
# ruff: noqa: S608

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from uhp_memories.domain.filters import TIME_FIELDS
from uhp_memories.domain.timefmt import parse_instant
from uhp_memories.search.errors import EmbeddingModelMismatch
from uhp_memories.search.fusion import Ranked, candidate_depth, fuse, query_terms, relative_factors
from uhp_memories.search.ports import Fusion, Hit, SearchDocument, SearchRequest
from uhp_memories.search.predicates import (
    BOOLEAN,
    NULL,
    NUMBER,
    All,
    Any_,
    Compare,
    Const,
    Equals,
    FieldRef,
    Not,
    Predicate,
    Present,
    attribute_leaves,
    lower,
    path_key,
)

SCHEMA_VERSION = "1"
# BM25 of a query + text request runs on these while the request's vectors are scored (_signals).
_TEXT_LEGS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bm25")
# A word found in more documents of a memory than this is common: it adds to the BM25 score of the
# documents that match a rarer word of the same query, and finds no document on its own (as
# Elasticsearch's common-terms query). A query of common words only is scored in full.
COMMON_DOCS = 2000
_Where = tuple[str, list[Any]]  # a WHERE fragment over `docs d` and its parameters
_SQL_OPS = {"lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
_INT64 = (-(2**63), 2**63 - 1)
_DOC_COLUMNS = (
    "d.record_id, d.chain_id, d.type, d.status, d.attributes, d.valid_from, d.valid_to, d.written_at, "
    "d.invalidated_at, d.text, d.embedding"
)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scopes (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, memory_id TEXT NOT NULL, UNIQUE (tenant, memory_id));
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY,
    scope INTEGER NOT NULL,
    record_id TEXT NOT NULL,
    chain_id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    attributes TEXT NOT NULL,
    valid_from TEXT,
    valid_to TEXT,
    written_at TEXT NOT NULL,
    invalidated_at TEXT,
    text TEXT NOT NULL,
    embedding BLOB,
    UNIQUE (scope, record_id));
CREATE INDEX IF NOT EXISTS docs_by_time ON docs (scope, written_at);
-- Covers visibility, types and time filters: a filtered search reads this index, not the rows.
CREATE INDEX IF NOT EXISTS docs_visible ON docs (scope, status, type, written_at, invalidated_at, valid_from, valid_to);
CREATE TABLE IF NOT EXISTS attrs (doc INTEGER NOT NULL, scope INTEGER NOT NULL, path TEXT NOT NULL,
    kind TEXT NOT NULL, v);
CREATE INDEX IF NOT EXISTS attrs_lookup ON attrs (scope, path, kind, v);
CREATE INDEX IF NOT EXISTS attrs_by_doc ON attrs (doc, path, kind, v);
"""


class EmbeddedSearchIndex:
    """A SearchIndex on sqlite3 + numpy. `path` is a file (WAL mode) or ":memory:"."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        model_id: str,
        dimensions: int,
        fusion: Fusion | None = None,
        scrub_erased: bool = True,
        common_docs: int | None = COMMON_DOCS,
    ) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        self._model_id = model_id
        self._dimensions = dimensions
        self._fusion = fusion or Fusion()
        self._scrub = scrub_erased
        self._common_docs = common_docs
        self._lock = threading.RLock()
        self._on_disk = str(path) != ":memory:"
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA secure_delete = ON")
        if self._on_disk:
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
        self._blocks: dict[int, _VectorBlock] = {}
        try:
            self._db.executescript(_SCHEMA)
            self._bind_model()
        except BaseException:
            self._db.close()
            raise

    # -- bookkeeping -------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def close(self) -> None:
        with self._lock:
            self._blocks.clear()
            self._db.close()

    def _bind_model(self) -> None:
        stored = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        given = {"model_id": self._model_id, "dimensions": str(self._dimensions), "schema": SCHEMA_VERSION}
        if not stored:
            self._db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", list(given.items()))
            return
        if stored.get("model_id") != self._model_id or stored.get("dimensions") != str(self._dimensions):
            raise EmbeddingModelMismatch(
                f"{stored.get('model_id')} ({stored.get('dimensions')} dimensions)",
                f"{self._model_id} ({self._dimensions} dimensions)",
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _scope(self, tenant: str, memory_id: str, create: bool = False) -> int | None:
        row = self._db.execute(
            "SELECT id FROM scopes WHERE tenant = ? AND memory_id = ?", (tenant, memory_id)
        ).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        scope = int(
            self._db.execute("INSERT INTO scopes (tenant, memory_id) VALUES (?, ?)", (tenant, memory_id)).lastrowid or 0
        )
        self._db.execute(
            f"CREATE VIRTUAL TABLE {_fts(scope)} USING fts5(text, content='docs', content_rowid='id', "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        return scope

    # -- writes ------------------------------------------------------------------------------

    def index(self, docs: Sequence[SearchDocument]) -> None:
        prepared = [(doc, self._vector_bytes(doc)) for doc in docs]
        with self._lock:
            changes: list[tuple[int, int, SearchDocument, bytes | None]] = []
            with self._transaction():
                for doc, vector in prepared:
                    written = self._upsert(doc, vector)
                    if written is not None:
                        changes.append((*written, doc, vector))
            for scope, doc_id, doc, vector in changes:
                block = self._blocks.get(scope)
                if block is None:
                    continue
                if vector is None:
                    block.remove(doc_id)
                else:
                    block.put(
                        doc_id, doc.record_id, doc.chain_id, vector, doc.status == "active",
                        _instant(doc.written_at) or "", doc.type,
                    )

    def _vector_bytes(self, doc: SearchDocument) -> bytes | None:
        if doc.embedding is None:
            return None
        return _unit_vector(doc.embedding, self._dimensions, self._model_id).tobytes()

    def _upsert(self, doc: SearchDocument, vector: bytes | None) -> tuple[int, int] | None:
        scope = self._scope(doc.tenant, doc.memory_id, create=True)
        assert scope is not None
        fts = _fts(scope)
        row = self._db.execute(
            "SELECT id, text, invalidated_at FROM docs WHERE scope = ? AND record_id = ?", (scope, doc.record_id)
        ).fetchone()
        if row is not None and row[2] is not None and doc.invalidated_at is None:
            return None  # a closed version never reopens: this is a late image of it
        values = (
            doc.chain_id,
            doc.type,
            doc.status,
            json.dumps(dict(doc.attributes), separators=(",", ":")),
            _instant(doc.valid_from),
            _instant(doc.valid_to),
            _instant(doc.written_at),
            _instant(doc.invalidated_at),
            doc.text,
            vector,
        )
        if row is None:
            doc_id = int(
                self._db.execute(
                    "INSERT INTO docs (chain_id, type, status, attributes, valid_from, valid_to, written_at, "
                    "invalidated_at, text, embedding, scope, record_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (*values, scope, doc.record_id),
                ).lastrowid
                or 0
            )
        else:
            doc_id = int(row[0])
            self._db.execute(
                "UPDATE docs SET chain_id=?, type=?, status=?, attributes=?, valid_from=?, valid_to=?, "
                "written_at=?, invalidated_at=?, text=?, embedding=? WHERE id = ?",
                (*values, doc_id),
            )
            self._db.execute("DELETE FROM attrs WHERE doc = ?", (doc_id,))
            if row[1] != doc.text:
                self._db.execute(f"INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', ?, ?)", (doc_id, row[1]))
        if row is None or row[1] != doc.text:
            self._db.execute(f"INSERT INTO {fts}(rowid, text) VALUES (?, ?)", (doc_id, doc.text))
        self._db.executemany(
            "INSERT INTO attrs (doc, scope, path, kind, v) VALUES (?, ?, ?, ?, ?)",
            [
                (doc_id, scope, path_key(parts), kind, _sql_value(kind, value))
                for parts, kind, value in attribute_leaves(doc.attributes)
            ],
        )
        return scope, doc_id

    def delete(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        with self._lock:
            scope = self._scope(tenant, memory_id)
            if scope is None:
                return
            fts = _fts(scope)
            removed: list[int] = []
            with self._transaction():
                for record_id in record_ids:
                    row = self._db.execute(
                        "SELECT id, text FROM docs WHERE scope = ? AND record_id = ?", (scope, record_id)
                    ).fetchone()
                    if row is None:
                        continue
                    self._db.execute(f"INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', ?, ?)", row)
                    self._db.execute("DELETE FROM attrs WHERE doc = ?", (row[0],))
                    self._db.execute("DELETE FROM docs WHERE id = ?", (row[0],))
                    removed.append(int(row[0]))
                if removed and self._scrub:
                    # Merge the memory's FTS segments: a delete only adds a tombstone until then.
                    self._db.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
            block = self._blocks.get(scope)
            for doc_id in removed:
                if block is not None:
                    block.remove(doc_id)
            if removed:
                self._checkpoint()

    def delete_memory(self, tenant: str, memory_id: str) -> None:
        with self._lock:
            scope = self._scope(tenant, memory_id)
            if scope is None:
                return
            with self._transaction():
                self._db.execute(f"DROP TABLE {_fts(scope)}")
                self._db.execute("DELETE FROM attrs WHERE scope = ?", (scope,))
                self._db.execute("DELETE FROM docs WHERE scope = ?", (scope,))
                self._db.execute("DELETE FROM scopes WHERE id = ?", (scope,))
            self._blocks.pop(scope, None)
            self._checkpoint()

    def _checkpoint(self) -> None:
        if self._on_disk and self._scrub:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, memory_id: str, record_id: str) -> SearchDocument | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT s.tenant, s.memory_id, {_DOC_COLUMNS} FROM docs d JOIN scopes s ON s.id = d.scope "
                "WHERE s.tenant = ? AND s.memory_id = ? AND d.record_id = ?",
                (tenant, memory_id, record_id),
            ).fetchone()
        if row is None or row[0] != tenant or row[1] != memory_id:
            return None
        embedding = None if row[12] is None else np.frombuffer(row[12], dtype=np.float32).tolist()
        return SearchDocument(
            tenant=row[0],
            memory_id=row[1],
            record_id=row[2],
            chain_id=row[3],
            type=row[4],
            status=row[5],
            attributes=json.loads(row[6]),
            valid_from=row[7],
            valid_to=row[8],
            written_at=row[9],
            invalidated_at=row[10],
            text=row[11],
            embedding=embedding,
        )

    def search(self, request: SearchRequest) -> list[Hit]:
        fusion = request.fusion or self._fusion
        query = None
        if request.vector is not None:
            query = _unit_vector(request.vector, self._dimensions, self._model_id)
        with self._lock:
            found = [
                self._signals(request, scope, memory_id, query, fusion)
                for memory_id in request.memory_ids
                if (scope := self._scope(request.tenant, memory_id)) is not None
            ]
            if not found:
                return []
            legs = _merged(found)
            context: dict[str, float] | None = None
            if fusion.method == "relative" and legs and "recency" not in legs:
                # One scale for every memory searched: each signal's best across all of them.
                factors = relative_factors(fusion, legs)
                context = {}
                for f in found:
                    context.update(self._complete(f, fusion, factors) or {})
                legs = _merged(found)
        return fuse(request, fusion, legs, context)

    def _signals(
        self, request: SearchRequest, scope: int, memory_id: str, query: np.ndarray | None, fusion: Fusion
    ) -> _Found:
        """The signals of one memory searched: each one's best `depth` admitted documents."""
        scan, probe = _where(request, scope), _where(request, scope, correlated=True)
        narrowed = request.include != "active" or request.as_of is not None or request.has_filters
        depth = candidate_depth(request, fusion)
        found = _Found(scope=scope, memory_id=memory_id, probe=probe if narrowed else None)
        by_meaning = query is not None and fusion.query_weight > 0
        by_words = request.text is not None and fusion.text_weight > 0
        words: Future[tuple[list[Ranked], list[int]]] | None = None
        if by_words:
            text_leg = partial(
                self._text_leg, scope, query_terms(request.text), *probe, depth, memory_id, current_only=not narrowed
            )
            if by_meaning and not narrowed:
                # BM25 runs in SQLite, which lets go of the GIL: on another core while the vectors are
                # scored here. (Not when the request narrows: its vector signal queries SQLite too.)
                self._block(scope)
                words = _TEXT_LEGS.submit(text_leg)
        if by_meaning and query is not None:
            block = self._block(scope)
            found.similarity = np.einsum("ij,j->i", block.vectors[: block.n], query)
            found.legs["query"], found.query_rows = self._vector_leg(
                block, found.similarity, (scan, probe) if narrowed else None, depth, fusion, memory_id
            )
        if by_words:
            found.legs["text"], found.text_docs = words.result() if words else text_leg()
        if request.vector is None and request.text is None:
            found.legs["recency"] = self._recency_leg(*scan, request.limit, found)
        return found

    def _vector_leg(
        self,
        block: _VectorBlock,
        scores: np.ndarray,
        narrowed: tuple[_Where, _Where] | None,
        depth: int,
        fusion: Fusion,
        memory_id: str,
    ) -> tuple[list[Ranked], np.ndarray]:
        """The best `depth` admitted rows by similarity, and those rows. (einsum, in search, runs on
        one thread: OpenBLAS's threaded gemv loses to it on a busy two-core machine.)"""
        if block.n == 0:
            return [], np.empty(0, dtype=np.int64)
        if narrowed is None:
            rows = np.flatnonzero(block.active[: block.n])
        else:
            rows = self._admitted_rows(block, scores, narrowed, depth, fusion.min_similarity)
        if fusion.min_similarity is not None:
            rows = rows[scores[rows] > fusion.min_similarity]
        if rows.size > depth:
            rows = rows[np.argpartition(-scores[rows], depth - 1)[:depth]]
        ordered = sorted(rows.tolist(), key=lambda r: (-float(scores[r]), block.record_ids[r]))
        ranked = [Ranked(block.record_ids[r], block.chain_ids[r], float(scores[r]), memory_id) for r in ordered]
        return ranked, np.asarray(ordered, dtype=np.int64)

    def _complete(self, found: _Found, fusion: Fusion, factors: dict[str, float]) -> dict[str, float] | None:
        """What relative fusion reads beyond the two cuts. Every document the words found gets its
        similarity (added to the query signal). With context, the episodes logged within the window
        around a candidate get theirs too, and the answer maps each of them, and each candidate, to
        the best own score among its admitted neighbours. `probe` is the request's filter when it
        narrows the memory (None: the current active versions). `factors` are relative fusion's, over
        every memory searched. Vectorised: a memory of 100,000 documents costs what its few hundred
        candidates do."""
        scope, legs, probe = found.scope, found.legs, found.probe
        block = self._block(scope)
        if block.n == 0:
            return None
        similarity = found.similarity
        text_rows, text_scores = [], []
        for item, doc in zip(legs.get("text", ()), found.text_docs, strict=True):
            row = block.row_of.get(doc)
            if row is not None:
                text_rows.append(row)
                text_scores.append(item.score)
        text_at = np.asarray(text_rows, dtype=np.int64)
        candidates = np.unique(np.concatenate([found.query_rows, text_at]))
        to_complete = [text_at]
        context: dict[str, float] | None = None
        sequence = self._sequence(scope, block, fusion.context_types) if fusion.uses_context else None
        placed = sequence.position[candidates] if sequence is not None else np.empty(0, dtype=np.int64)
        placed = placed[placed >= 0]
        if sequence is not None and placed.size:
            window = fusion.context_window
            # Positions within the window of a candidate (they may be returned), and within twice the
            # window (their own neighbours, which weigh their context).
            near = _spread(placed, window, sequence.n)
            reach = _spread(placed, 2 * window, sequence.n)
            rows = sequence.rows[reach]
            admitted = np.isin(rows, candidates)
            others = np.flatnonzero(~admitted)
            admitted[others] = self._admitted(block, rows[others], probe)
            own = np.zeros(rows.size)
            if "query" in factors and similarity is not None:
                close = similarity[rows]
                counted = admitted if fusion.min_similarity is None else admitted & (close > fusion.min_similarity)
                own += factors["query"] * np.where(counted, np.maximum(close, 0.0), 0.0)
            if "text" in factors and text_rows:
                words = dict(zip(text_rows, text_scores, strict=True))
                own += factors["text"] * np.fromiter((words.get(r, 0.0) for r in rows.tolist()), float, rows.size)
            best = np.zeros(rows.size)
            for step in range(1, window + 1):
                for shift in (step, -step):
                    at = np.searchsorted(reach, reach + shift)
                    inside = at < reach.size
                    at[~inside] = 0
                    hit = inside & (reach[at] == reach + shift) & admitted[at]
                    best = np.maximum(best, np.where(hit, own[at], 0.0))
            keep = np.isin(reach, near) & admitted
            lifted = zip(rows[keep].tolist(), best[keep].tolist(), strict=True)
            context = {block.record_ids[r]: b for r, b in lifted if b > 0}
            to_complete.append(rows[keep])
        if similarity is not None and "query" in legs:
            extra = np.unique(np.concatenate(to_complete))
            extra = extra[~np.isin(extra, found.query_rows)]
            if fusion.min_similarity is not None:
                extra = extra[similarity[extra] > fusion.min_similarity]
            legs["query"] = legs["query"] + [
                Ranked(block.record_ids[r], block.chain_ids[r], float(similarity[r]), found.memory_id)
                for r in extra.tolist()
            ]
        return context

    def _admitted(self, block: _VectorBlock, rows: np.ndarray, probe: _Where | None) -> np.ndarray:
        """Whether the request admits each of these rows: the current active ones, or the filter's."""
        if rows.size == 0 or probe is None:
            return block.active[rows]
        return self._passing(block.doc_ids[rows], probe)

    def _passing(self, doc_ids: np.ndarray, probe: _Where) -> np.ndarray:
        """Whether each of these documents passes the request's (correlated) filter, in one query."""
        where, params = probe
        passed = self._db.execute(
            f"SELECT d.id FROM docs d WHERE d.id IN (SELECT value FROM json_each(?)) AND {where}",
            [json.dumps(doc_ids.tolist()), *params],
        ).fetchall()
        return np.isin(doc_ids, np.fromiter((r[0] for r in passed), dtype=np.int64, count=len(passed)))

    def _sequence(self, scope: int, block: _VectorBlock, types: tuple[str, ...]) -> _Sequence | None:
        """The memory's log of documents of these types (with vectors), in write order."""
        sequence = block.sequence
        if sequence is None or sequence.types != types:
            marks = ",".join("?" * len(types))
            rows = self._db.execute(
                f"SELECT id, written_at, record_id FROM docs WHERE scope = ? AND embedding IS NOT NULL "
                f"AND type IN ({marks}) ORDER BY written_at, record_id",
                (scope, *types),
            ).fetchall()
            placed = [(block.row_of[r[0]], (r[1], r[2])) for r in rows if r[0] in block.row_of]
            sequence = _Sequence(types, [p[0] for p in placed], len(block.doc_ids), placed[-1][1] if placed else None)
            block.sequence = sequence
        return sequence if sequence.n else None

    def _admitted_rows(
        self,
        block: _VectorBlock,
        scores: np.ndarray,
        narrowed: tuple[_Where, _Where],
        depth: int,
        min_similarity: float | None,
    ) -> np.ndarray:
        """The rows the filter admits, or enough of the best of them to hold the filter's top `depth`.

        Checking the filter on the best `m` rows by similarity is exact once `depth` of them pass: any
        admitted row outside those `m` scores lower than all of them. Otherwise `m` grows, and past a
        quarter of the memory the filter runs over the whole memory."""
        (scan, scan_params), probe = narrowed
        m = depth * 4
        while m < block.n // 4:
            best = np.argpartition(-scores, m - 1)[:m]
            kept = best[self._passing(block.doc_ids[best], probe)]
            exhausted = min_similarity is not None and scores[best].min() <= min_similarity
            if kept.size >= depth or exhausted:
                return kept
            m *= 4
        admitted = self._db.execute(f"SELECT d.id FROM docs d WHERE {scan}", scan_params).fetchall()
        return block.rows_of(np.fromiter((r[0] for r in admitted), dtype=np.int64, count=len(admitted)))

    def _text_leg(
        self,
        scope: int,
        terms: list[str],
        where: str,
        params: list[Any],
        depth: int,
        memory_id: str,
        current_only: bool = False,
    ) -> tuple[list[Ranked], list[int]]:
        """The best `depth` documents by BM25, and their document ids. `current_only`: the request
        admits exactly the current active versions (no filter, no as_of)."""
        if not terms:
            return [], []
        fts = _fts(scope)
        found = {
            t: self._db.execute(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (_phrase(t),)).fetchone()[0]
            for t in terms
        }
        present = [t for t in terms if found[t]]
        if not present:
            return [], []
        rare = [t for t in present if self._common_docs is None or found[t] <= self._common_docs]
        match, match_args = f"{fts} MATCH ?", [_any_of(present)]
        if rare and len(rare) < len(present):
            # Common words score only the documents that match a rarer word of the query: scoring
            # every document that holds a common word is what makes BM25 slow on a large memory.
            match += f" AND +{fts}.rowid IN (SELECT rowid FROM {fts} WHERE {fts} MATCH ?)"
            match_args.append(_any_of(rare))
        if current_only:
            best = self._best_current_by_words(scope, match, match_args, depth)
            if best is not None:
                return [Ranked(r[1], r[2], r[0], memory_id) for r in best], [r[3] for r in best]
        rows = self._db.execute(
            f"SELECT d.record_id, d.chain_id, -bm25({fts}) AS s, d.id FROM {fts} JOIN docs d ON d.id = {fts}.rowid "
            f"WHERE {match} AND {where} ORDER BY s DESC, d.record_id LIMIT ?",
            [*match_args, *params, depth],
        ).fetchall()
        return [Ranked(r[0], r[1], float(r[2]), memory_id) for r in rows], [int(r[3]) for r in rows]

    def _best_current_by_words(
        self, scope: int, match: str, match_args: list[Any], depth: int
    ) -> list[tuple[float, str, str, int]] | None:
        """The text signal's best `depth` current active documents as (score, record id, chain id,
        document id), read from the FTS index alone and checked against the vector block's flags:
        joining every match to its row costs as much as scoring it. Exact: a cut is kept only when
        its last score is above every score the LIMIT left out. None when the block cannot tell (a
        document without a vector) or the best are too far down: the join answers then."""
        block = self._block(scope)
        fts = _fts(scope)
        wanted = 2 * depth
        while wanted <= 32 * depth:
            rows = self._db.execute(
                f"SELECT rowid, -bm25({fts}) AS s FROM {fts} WHERE {match} ORDER BY s DESC LIMIT ?",
                [*match_args, wanted],
            ).fetchall()
            kept = []
            for doc, score in rows:
                row = block.row_of.get(doc)
                if row is None:
                    return None
                if block.active[row]:
                    kept.append((float(score), block.record_ids[row], block.chain_ids[row], int(doc)))
            kept.sort(key=lambda k: (-k[0], k[1]))
            if len(rows) < wanted or (len(kept) >= depth and kept[depth - 1][0] > rows[-1][1]):
                return kept[:depth]
            wanted *= 4
        return None

    def _recency_leg(self, where: str, params: list[Any], limit: int, found: _Found) -> list[Ranked]:
        """The newest `limit` admitted documents (their write times noted, to merge memories)."""
        rows = self._db.execute(
            f"SELECT d.record_id, d.chain_id, d.written_at FROM docs d WHERE {where} "
            "ORDER BY d.written_at DESC, d.record_id DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
        found.written.update((r[0], r[2]) for r in rows)
        return [Ranked(r[0], r[1], 0.0, found.memory_id) for r in rows]

    def _block(self, scope: int) -> _VectorBlock:
        block = self._blocks.get(scope)
        if block is None:
            rows = self._db.execute(
                "SELECT id, record_id, chain_id, status, embedding, written_at, type FROM docs "
                "WHERE scope = ? AND embedding IS NOT NULL ORDER BY id",
                (scope,),
            ).fetchall()
            block = _VectorBlock.load(self._dimensions, rows)
            self._blocks[scope] = block
        return block


# -- the vector cache of one memory ------------------------------------------------------------


@dataclass
class _Found:
    """What the signals found in one memory searched, for relative fusion to complete."""

    scope: int
    memory_id: str
    probe: _Where | None  # the request's filter, when it narrows the memory (None: current active)
    legs: dict[str, list[Ranked]] = field(default_factory=dict)
    similarity: np.ndarray | None = None  # the query's similarity to every row of the memory's block
    query_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    text_docs: list[int] = field(default_factory=list)
    written: dict[str, str] = field(default_factory=dict)  # record id -> written_at (recency)


def _merged(found: Sequence[_Found]) -> dict[str, list[Ranked]]:
    """The signals of every memory searched, one ranking per signal: best first (recency: newest)."""
    if len(found) == 1:
        return found[0].legs
    legs: dict[str, list[Ranked]] = {}
    written: dict[str, str] = {}
    for f in found:
        written.update(f.written)
        for name, ranking in f.legs.items():
            legs.setdefault(name, []).extend(ranking)
    for name, ranking in legs.items():
        if name == "recency":
            ranking.sort(key=lambda item: (written[item.record_id], item.record_id), reverse=True)
        else:
            ranking.sort(key=lambda item: (-item.score, item.record_id))
    return legs


class _Sequence:
    """A memory's log: the block rows of some document types in write order (written_at, then the
    record id, which grows in the order ids were made: the order of an observe call's episodes), with
    each row's position. The order is the record's own, so a reindex rebuilds the same log. Appends
    stay cheap; anything else (an erase, a write older than the last) makes the block drop it, to be
    read again in order."""

    def __init__(self, types: tuple[str, ...], rows: list[int], capacity: int, last: tuple[str, str] | None) -> None:
        self.types = types
        self.n = len(rows)
        self.rows = np.zeros(max(64, 2 * self.n), dtype=np.int64)
        self.rows[: self.n] = rows
        self.position = np.full(max(capacity, 1), -1, dtype=np.int64)
        self.position[self.rows[: self.n]] = np.arange(self.n)
        self.last = last

    def follows(self, key: tuple[str, str]) -> bool:
        return self.last is None or key >= self.last

    def append(self, row: int, key: tuple[str, str]) -> None:
        if self.n == len(self.rows):
            self.rows = np.concatenate([self.rows, np.zeros(len(self.rows), dtype=np.int64)])
        if row >= len(self.position):
            self.fit(row + 1)
        self.rows[self.n] = row
        self.position[row] = self.n
        self.n += 1
        self.last = key

    def fit(self, capacity: int) -> None:
        if capacity > len(self.position):
            grown = np.full(max(capacity, 2 * len(self.position)), -1, dtype=np.int64)
            grown[: len(self.position)] = self.position
            self.position = grown


class _VectorBlock:
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
        self.row_of: dict[int, int] = {}
        self.sequence: _Sequence | None = None
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def load(cls, dimensions: int, rows: list[tuple[Any, ...]]) -> _VectorBlock:
        block = cls(dimensions, capacity=max(64, len(rows)))
        n = len(rows)
        if n:
            block.vectors[:n] = np.frombuffer(b"".join(r[4] for r in rows), dtype=np.float32).reshape(n, dimensions)
            block.doc_ids[:n] = [r[0] for r in rows]
            block.active[:n] = [r[3] == "active" for r in rows]
            block.record_ids = [r[1] for r in rows]
            block.chain_ids = [r[2] for r in rows]
            block.written = [r[5] for r in rows]
            block.types = [r[6] for r in rows]
            block.row_of = {int(r[0]): i for i, r in enumerate(rows)}
            block.n = n
        return block

    def put(
        self, doc_id: int, record_id: str, chain_id: str, vector: bytes, active: bool, written: str, type_: str
    ) -> None:
        row = self.row_of.get(doc_id)
        if row is None:
            if self.n == len(self.doc_ids):
                self._grow()
            row = self.n
            self.n += 1
            self.row_of[doc_id] = row
            self.record_ids.append(record_id)
            self.chain_ids.append(chain_id)
            self.written.append(written)
            self.types.append(type_)
            self.doc_ids[row] = doc_id
            self._sorted = None
            sequence = self.sequence
            if sequence is not None and type_ in sequence.types:
                if sequence.follows((written, record_id)):
                    sequence.append(row, (written, record_id))
                else:
                    self.sequence = None
        else:
            if (self.written[row], self.types[row]) != (written, type_):
                self.sequence = None
            self.record_ids[row] = record_id
            self.chain_ids[row] = chain_id
            self.written[row] = written
            self.types[row] = type_
        self.vectors[row] = np.frombuffer(vector, dtype=np.float32)
        self.active[row] = active

    def remove(self, doc_id: int) -> None:
        row = self.row_of.pop(doc_id, None)
        if row is None:
            return
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
        self.vectors[last] = 0.0
        self.record_ids.pop()
        self.chain_ids.pop()
        self.written.pop()
        self.types.pop()
        self.n = last
        self._sorted = None
        self.sequence = None

    def rows_of(self, doc_ids: np.ndarray) -> np.ndarray:
        """The rows of these documents, skipping documents without a vector."""
        if self._sorted is None:
            order = np.argsort(self.doc_ids[: self.n], kind="stable")
            self._sorted = (self.doc_ids[: self.n][order], order)
        ids, order = self._sorted
        if ids.size == 0 or doc_ids.size == 0:
            return np.empty(0, dtype=np.int64)
        at = np.searchsorted(ids, doc_ids)
        at[at >= ids.size] = 0
        found = ids[at] == doc_ids
        return order[at[found]]

    def _grow(self) -> None:
        capacity = len(self.doc_ids) * 2
        vectors = np.zeros((capacity, self.vectors.shape[1]), dtype=np.float32)
        vectors[: self.n] = self.vectors[: self.n]
        doc_ids = np.zeros(capacity, dtype=np.int64)
        doc_ids[: self.n] = self.doc_ids[: self.n]
        active = np.zeros(capacity, dtype=bool)
        active[: self.n] = self.active[: self.n]
        self.vectors, self.doc_ids, self.active = vectors, doc_ids, active
        if self.sequence is not None:
            self.sequence.fit(capacity)


# -- SQL helpers -------------------------------------------------------------------------------


def _spread(positions: np.ndarray, width: int, size: int) -> np.ndarray:
    """The sorted positions within `width` of any of these, inside [0, size)."""
    spread = np.unique((positions[:, None] + np.arange(-width, width + 1)[None, :]).reshape(-1))
    return spread[(spread >= 0) & (spread < size)]


def _fts(scope: int) -> str:
    return f"fts_{int(scope)}"


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _any_of(terms: list[str]) -> str:
    return " OR ".join(_phrase(t) for t in terms)


def _instant(value: str | None) -> str | None:
    return None if value is None else parse_instant(value)


def _unit_vector(values: Any, dimensions: int, model_id: str) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32).reshape(-1)
    if vector.size != dimensions:
        raise EmbeddingModelMismatch(f"{model_id} ({dimensions} dimensions)", f"a vector of {vector.size}")
    if not np.all(np.isfinite(vector)):
        raise ValueError("a vector holds a non-finite value")
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _sql_value(kind: str, value: Any) -> Any:
    if kind == BOOLEAN:
        return int(bool(value))
    if kind == NUMBER:
        return value if isinstance(value, float) or _INT64[0] <= value <= _INT64[1] else float(value)
    if kind == NULL:
        return None
    return value


@dataclass
class _Sql:
    """A predicate compiled to a WHERE fragment over `docs d`, with its positional parameters."""

    scope: int
    as_of: str | None
    params: list[Any]
    correlated: bool = False

    def compile(self, pred: Predicate) -> str:
        if isinstance(pred, Const):
            return "1" if pred.value else "0"
        if isinstance(pred, Not):
            return f"NOT ({self.compile(pred.part)})"
        if isinstance(pred, (All, Any_)):
            joiner = " AND " if isinstance(pred, All) else " OR "
            return "(" + joiner.join(self.compile(p) for p in pred.parts) + ")"
        if pred.field.kind == "attr":
            return self._attribute(pred)
        column = self._column(pred.field)
        if isinstance(pred, Present):
            return f"({column} IS NOT NULL)"
        if isinstance(pred, Equals):
            self.params.append(pred.value)
            return f"COALESCE({column} = ?, 0)"
        self.params.append(pred.value)
        return f"COALESCE({column} {_SQL_OPS[pred.op]} ?, 0)"

    def _column(self, ref: FieldRef) -> str:
        if ref.kind == "type":
            return "d.type"
        if ref.name not in TIME_FIELDS:
            raise ValueError(f"unknown time field {ref.name}")
        if ref.name == "invalidated_at" and self.as_of is not None:
            # As of T, a close that came after T has not happened yet.
            self.params.append(self.as_of)
            return "(CASE WHEN d.invalidated_at <= ? THEN d.invalidated_at END)"
        return f"d.{ref.name}"

    def _attribute(self, pred: Present | Equals | Compare) -> str:
        if self.correlated:  # probe each candidate document: cheap when the candidates are few
            self.params.append(pred.field.path_key)
            sql = "EXISTS (SELECT 1 FROM attrs WHERE attrs.doc = d.id AND path = ?"
        else:  # list the admitted documents once: cheap when the whole memory is scanned
            self.params.extend((self.scope, pred.field.path_key))
            sql = "d.id IN (SELECT doc FROM attrs WHERE scope = ? AND path = ?"
        if isinstance(pred, Present):
            return sql + ")"
        self.params.append(pred.kind)
        if pred.kind == NULL:
            return sql + " AND kind = ?)"
        self.params.append(_sql_value(pred.kind, pred.value))
        op = "=" if isinstance(pred, Equals) else _SQL_OPS[pred.op]
        return sql + f" AND kind = ? AND v {op} ?)"


def _where(request: SearchRequest, scope: int, correlated: bool = False) -> tuple[str, list[Any]]:
    """The whole filter of one request: its memory, its visibility, its types and its fields.

    `correlated` checks attribute conditions per candidate row (for a few candidates: the text
    signal's matches, the vector signal's best rows); otherwise they are listed once (for scans)."""
    params: list[Any] = [scope]
    clauses = ["d.scope = ?"]
    if request.as_of is None:
        if request.include == "active":
            clauses.append("d.status = 'active'")
    else:
        clauses.append("d.written_at <= ?")
        params.append(request.as_of)
        if request.include == "active":
            clauses.append("(d.invalidated_at IS NULL OR d.invalidated_at > ?)")
            params.append(request.as_of)
    if request.types:
        clauses.append("d.type IN (" + ",".join("?" * len(request.types)) + ")")
        params.extend(request.types)
    predicate = lower(request.filters)
    if predicate != Const(True):
        compiler = _Sql(scope, request.as_of, params, correlated)
        clauses.append(compiler.compile(predicate))
    return " AND ".join(clauses), params
