"""The embedded engine's storage: one SQLite database (stdlib sqlite3, FTS5), on disk or in memory.

- Documents live in one `docs` table; each memory (a *scope*: tenant + memory id) has its own FTS5
  table, so BM25 statistics and postings belong to that memory alone. Attribute values are
  flattened into `attrs` (path, kind, value), indexed for equality and ranges.
- Vectors are stored per document (float32, L2-normalized, as bytes); the index keeps them in memory
  as one matrix per memory (vectors.py).
- Erase leaves nothing behind: `secure_delete` zeroes freed content, the memory's FTS index is
  merged so deleted postings go, and the WAL is checkpointed and truncated.

Not thread-safe on its own: the index serializes every call with one lock.
"""

# SQL text in this module is built from constants and integer table names only; every value is bound
# as a parameter, so string-built statements (S608) are safe here.
# ruff: noqa: S608

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from uhp_memories.adapters.predicates import attribute_leaves, path_key
from uhp_memories.domain.recall.model import EmbeddingModelMismatch, SearchDocument
from uhp_memories.domain.timefmt import parse_instant
from uhp_memories.local.embedded.sql import sql_value

SCHEMA_VERSION = "1"
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


def fts_table(scope: int) -> str:
    """The name of one memory's FTS5 table."""
    return f"fts_{int(scope)}"


def instant(value: str | None) -> str | None:
    return None if value is None else parse_instant(value)


class DocumentStore:
    """The documents of every memory, bound to one embedding model. `path` is a file (WAL mode) or
    ":memory:"; `scrub_erased` makes an erase leave no bytes behind (merge, checkpoint)."""

    def __init__(self, path: str | Path, *, model_id: str, dimensions: int, scrub_erased: bool = True) -> None:
        self._scrub = scrub_erased
        self._on_disk = str(path) != ":memory:"
        self.db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA secure_delete = ON")
        if self._on_disk:
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
        try:
            self.db.executescript(_SCHEMA)
            self._bind_model(model_id, dimensions)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def _bind_model(self, model_id: str, dimensions: int) -> None:
        stored = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        given = {"model_id": model_id, "dimensions": str(dimensions), "schema": SCHEMA_VERSION}
        if not stored:
            self.db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", list(given.items()))
            return
        if stored.get("model_id") != model_id or stored.get("dimensions") != str(dimensions):
            raise EmbeddingModelMismatch(
                f"{stored.get('model_id')} ({stored.get('dimensions')} dimensions)",
                f"{model_id} ({dimensions} dimensions)",
            )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def scope(self, tenant: str, memory_id: str, create: bool = False) -> int | None:
        """The scope of one memory of one tenant (created, with its FTS table, when asked)."""
        row = self.db.execute(
            "SELECT id FROM scopes WHERE tenant = ? AND memory_id = ?", (tenant, memory_id)
        ).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        scope = int(
            self.db.execute("INSERT INTO scopes (tenant, memory_id) VALUES (?, ?)", (tenant, memory_id)).lastrowid or 0
        )
        self.db.execute(
            f"CREATE VIRTUAL TABLE {fts_table(scope)} USING fts5(text, content='docs', content_rowid='id', "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        return scope

    # -- writes (inside `transaction`) ---------------------------------------------------------

    def upsert(self, doc: SearchDocument, vector: bytes | None) -> tuple[int, int] | None:
        """Insert or replace one document: (scope, document id), or None for a late open image of a
        closed version (a closed version never reopens)."""
        scope = self.scope(doc.tenant, doc.memory_id, create=True)
        assert scope is not None
        fts = fts_table(scope)
        row = self.db.execute(
            "SELECT id, text, invalidated_at FROM docs WHERE scope = ? AND record_id = ?", (scope, doc.record_id)
        ).fetchone()
        if row is not None and row[2] is not None and doc.invalidated_at is None:
            return None
        values = (
            doc.chain_id,
            doc.type,
            doc.status,
            json.dumps(dict(doc.attributes), separators=(",", ":")),
            instant(doc.valid_from),
            instant(doc.valid_to),
            instant(doc.written_at),
            instant(doc.invalidated_at),
            doc.text,
            vector,
        )
        if row is None:
            doc_id = int(
                self.db.execute(
                    "INSERT INTO docs (chain_id, type, status, attributes, valid_from, valid_to, written_at, "
                    "invalidated_at, text, embedding, scope, record_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (*values, scope, doc.record_id),
                ).lastrowid
                or 0
            )
        else:
            doc_id = int(row[0])
            self.db.execute(
                "UPDATE docs SET chain_id=?, type=?, status=?, attributes=?, valid_from=?, valid_to=?, "
                "written_at=?, invalidated_at=?, text=?, embedding=? WHERE id = ?",
                (*values, doc_id),
            )
            self.db.execute("DELETE FROM attrs WHERE doc = ?", (doc_id,))
            if row[1] != doc.text:
                self.db.execute(f"INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', ?, ?)", (doc_id, row[1]))
        if row is None or row[1] != doc.text:
            self.db.execute(f"INSERT INTO {fts}(rowid, text) VALUES (?, ?)", (doc_id, doc.text))
        self.db.executemany(
            "INSERT INTO attrs (doc, scope, path, kind, v) VALUES (?, ?, ?, ?, ?)",
            [
                (doc_id, scope, path_key(parts), kind, sql_value(kind, value))
                for parts, kind, value in attribute_leaves(doc.attributes)
            ],
        )
        return scope, doc_id

    def delete(self, scope: int, record_ids: Sequence[str]) -> list[int]:
        """Remove these documents of one memory for good; the ids of the documents removed."""
        fts = fts_table(scope)
        removed: list[int] = []
        with self.transaction():
            for record_id in record_ids:
                row = self.db.execute(
                    "SELECT id, text FROM docs WHERE scope = ? AND record_id = ?", (scope, record_id)
                ).fetchone()
                if row is None:
                    continue
                self.db.execute(f"INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', ?, ?)", row)
                self.db.execute("DELETE FROM attrs WHERE doc = ?", (row[0],))
                self.db.execute("DELETE FROM docs WHERE id = ?", (row[0],))
                removed.append(int(row[0]))
            if removed and self._scrub:
                # Merge the memory's FTS segments: a delete only adds a tombstone until then.
                self.db.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
        if removed:
            self._checkpoint()
        return removed

    def delete_memory(self, scope: int) -> None:
        with self.transaction():
            self.db.execute(f"DROP TABLE {fts_table(scope)}")
            self.db.execute("DELETE FROM attrs WHERE scope = ?", (scope,))
            self.db.execute("DELETE FROM docs WHERE scope = ?", (scope,))
            self.db.execute("DELETE FROM scopes WHERE id = ?", (scope,))
        self._checkpoint()

    def _checkpoint(self) -> None:
        if self._on_disk and self._scrub:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- reads ---------------------------------------------------------------------------------

    def get(self, tenant: str, memory_id: str, record_id: str) -> SearchDocument | None:
        row = self.db.execute(
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

    def vector_rows(self, scope: int) -> list[tuple[Any, ...]]:
        """Every document of one memory that has a vector: (id, record id, chain id, status,
        embedding, written_at, type), by id."""
        return self.db.execute(
            "SELECT id, record_id, chain_id, status, embedding, written_at, type FROM docs "
            "WHERE scope = ? AND embedding IS NOT NULL ORDER BY id",
            (scope,),
        ).fetchall()

    def log_rows(self, scope: int, types: Sequence[str]) -> list[tuple[Any, ...]]:
        """Every document of these types in one memory, in write order (written_at, then record id):
        (id, record id, chain id, status, written_at, type)."""
        marks = ",".join("?" * len(types))
        return self.db.execute(
            f"SELECT id, record_id, chain_id, status, written_at, type FROM docs WHERE scope = ? "
            f"AND type IN ({marks}) ORDER BY written_at, record_id",
            (scope, *types),
        ).fetchall()
