"""The journal of a persistent local server (`uhp-memories serve --data-dir DIR`): what moto holds,
kept in one SQLite file so it outlives the process.

It holds the current image of every DynamoDB item, every S3 object version (bytes, metadata and its
version id), and every workflow execution started and not yet ended. It is written by the journal
patches (uhp_memories.local.patches.moto_*_journal) inside the moto call that made the change, so a
write is on disk before its answer leaves moto, and so before any HTTP answer that depends on it.

WAL mode with synchronous=FULL: a commit survives the process being killed at any moment (and the
machine losing power). secure_delete, and a checkpoint that truncates the WAL after anything is
deleted, so an erased item or file version leaves no bytes behind in the journal either.

Not a cache of moto: moto is rebuilt from it at start (uhp_memories.local.data_dir)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    table_name TEXT NOT NULL, item_key TEXT NOT NULL, item TEXT NOT NULL, PRIMARY KEY (table_name, item_key));
CREATE TABLE IF NOT EXISTS object_versions (
    bucket TEXT NOT NULL, object_key TEXT NOT NULL, version_id TEXT NOT NULL, position INTEGER NOT NULL,
    delete_marker INTEGER NOT NULL, body BLOB, metadata TEXT NOT NULL, last_modified TEXT NOT NULL,
    PRIMARY KEY (bucket, object_key, version_id));
CREATE TABLE IF NOT EXISTS executions (
    execution_arn TEXT PRIMARY KEY, state_machine_arn TEXT NOT NULL, name TEXT NOT NULL, input TEXT NOT NULL);
"""


class JournalError(Exception):
    """The journal cannot be opened (another format, an unreadable file)."""


@dataclass(frozen=True)
class ItemChange:
    """One DynamoDB item as it is after a write: `item` None when the write deleted it."""

    table: str
    key: dict[str, Any]  # the key attributes, as DynamoDB's wire JSON
    item: dict[str, Any] | None  # every attribute, as DynamoDB's wire JSON


@dataclass(frozen=True)
class ObjectVersion:
    """One version of an S3 object (or a delete marker), as the bucket lists it, oldest first."""

    version_id: str
    delete_marker: bool
    body: bytes | None
    metadata: dict[str, str]
    last_modified: str  # ISO 8601


@dataclass(frozen=True)
class Execution:
    """A workflow execution started and not known to have ended."""

    execution_arn: str
    state_machine_arn: str
    name: str
    input: str


@dataclass
class _Write:
    deleted: bool = False


def _key_text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


class Journal:
    """One SQLite file; every method commits before it returns (one lock: callers come from the
    gateway's threads, moto's server threads and the workflows' threads)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.executescript(_SCHEMA)
            found = self._meta("format")
        except sqlite3.DatabaseError as error:
            raise JournalError(f"{path} is not a readable journal ({error})") from error
        if found is None:
            self._set_meta("format", FORMAT)
        elif found != FORMAT:
            raise JournalError(f"{path} is journal format {found}; this version reads format {FORMAT}")

    def close(self) -> None:
        self._db.close()

    # -- meta ----------------------------------------------------------------------------------

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def open_for_writing(self) -> bool:
        """Mark the journal in use; answers whether the previous server stopped cleanly (a first
        start counts as clean: there is nothing to catch up on)."""
        with self._lock:
            clean = self._meta("in_use") != "1"
            self._set_meta("in_use", "1")
            return clean

    def mark_clean_stop(self) -> None:
        with self._lock:
            self._set_meta("in_use", "0")

    # -- writes ---------------------------------------------------------------------------------

    def record_items(self, changes: Sequence[ItemChange]) -> None:
        if not changes:
            return
        with self._writing() as write:
            for change in changes:
                key = _key_text(change.key)
                if change.item is None:
                    write.deleted = True
                    self._db.execute("DELETE FROM items WHERE table_name = ? AND item_key = ?", (change.table, key))
                else:
                    self._db.execute(
                        "INSERT OR REPLACE INTO items (table_name, item_key, item) VALUES (?, ?, ?)",
                        (change.table, key, json.dumps(change.item, separators=(",", ":"))),
                    )

    def record_object(self, bucket: str, key: str, versions: Sequence[ObjectVersion]) -> None:
        """The versions an object has now, oldest first: new ones are added (bytes and all), gone
        ones removed; a kept version's bytes are never written again."""
        with self._writing() as write:
            known = {
                row[0]
                for row in self._db.execute(
                    "SELECT version_id FROM object_versions WHERE bucket = ? AND object_key = ?", (bucket, key)
                )
            }
            now = {v.version_id for v in versions}
            for gone in known - now:
                self._db.execute(
                    "DELETE FROM object_versions WHERE bucket = ? AND object_key = ? AND version_id = ?",
                    (bucket, key, gone),
                )
            for position, version in enumerate(versions):
                if version.version_id in known:
                    self._db.execute(
                        "UPDATE object_versions SET position = ? WHERE bucket = ? AND object_key = ? "
                        "AND version_id = ?",
                        (position, bucket, key, version.version_id),
                    )
                    continue
                self._db.execute(
                    "INSERT INTO object_versions (bucket, object_key, version_id, position, delete_marker, body, "
                    "metadata, last_modified) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (bucket, key, version.version_id, position, int(version.delete_marker), version.body,
                     json.dumps(version.metadata), version.last_modified),
                )
            write.deleted = bool(known - now)

    def execution_started(self, execution: Execution) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO executions (execution_arn, state_machine_arn, name, input) "
                "VALUES (?, ?, ?, ?)",
                (execution.execution_arn, execution.state_machine_arn, execution.name, execution.input),
            )

    def execution_ended(self, execution_arn: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM executions WHERE execution_arn = ?", (execution_arn,))

    @contextmanager
    def _writing(self) -> Iterator[_Write]:
        """One transaction, committed before it ends. After a delete, the WAL is folded into the
        database and truncated, so deleted bytes (zeroed in the database by secure_delete) do not
        stay behind in old WAL frames."""
        with self._lock:
            write = _Write()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield write
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            if write.deleted:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- reads (at start) ----------------------------------------------------------------------

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(table name, item) for every item, table by table."""
        for table, text in self._db.execute("SELECT table_name, item FROM items ORDER BY table_name"):
            yield str(table), json.loads(text)

    def count_items(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM items").fetchone()[0])

    def objects(self) -> Iterator[tuple[str, str, list[ObjectVersion]]]:
        """(bucket, key, versions oldest first) for every object."""
        current: tuple[str, str] | None = None
        versions: list[ObjectVersion] = []
        for bucket, key, version_id, marker, body, metadata, modified in self._db.execute(
            "SELECT bucket, object_key, version_id, delete_marker, body, metadata, last_modified "
            "FROM object_versions ORDER BY bucket, object_key, position"
        ):
            if current is not None and current != (bucket, key):
                yield *current, versions
                versions = []
            current = (bucket, key)
            versions.append(ObjectVersion(version_id, bool(marker), body, json.loads(metadata), modified))
        if current is not None:
            yield *current, versions

    def unfinished_executions(self) -> list[Execution]:
        return [
            Execution(*row)
            for row in self._db.execute(
                "SELECT execution_arn, state_machine_arn, name, input FROM executions ORDER BY rowid"
            )
        ]
