"""Records (§4, §5): one service over the three verbs, as the API and the other features use it.

Reads (records/reads.py), writes (records/writes.py, through the one writer, records/writer.py) and
snapshots (records/snapshots.py) are kept apart; this class wires them and answers for all three.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Sequence
from typing import Any

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.model import Caller, Page
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records.model import (
    NO_TERMS,
    RecordInput,
    RecordPage,
    RecordRead,
    RecordVersion,
    RecordView,
    Snapshot,
    WriteTerms,
)
from uhp_memories.domain.records.ports import FileAttachments, MemoryNeighbours, PathLookup, TypeCatalog, VersionIndex
from uhp_memories.domain.records.reads import RecordReads
from uhp_memories.domain.records.snapshots import SnapshotService
from uhp_memories.domain.records.writer import RecordWriter
from uhp_memories.domain.records.writes import RecordWrites


class RecordService:
    """A memory's records: remember, observe, revise, forget; get, list, history; snapshots."""

    def __init__(
        self,
        ports: Ports,
        memories: MemoryNeighbours,
        files: FileAttachments | None = None,
        index: Callable[[], VersionIndex | None] | None = None,
        paths: PathLookup | None = None,
        types: TypeCatalog | None = None,
    ) -> None:
        self.snapshots = SnapshotService(ports)
        self.reads = RecordReads(ports, memories, self.snapshots, paths)
        self.writes = RecordWrites(ports, self.reads, RecordWriter(ports.records, index), files, types)

    def remember(
        self, caller: Caller, memory_id: str, given: RecordInput, terms: WriteTerms = NO_TERMS
    ) -> RecordView:
        """Write a new record's first version (§5)."""
        return self.writes.remember(caller, memory_id, given, terms)

    def observe(self, caller: Caller, memory_id: str, episodes: list[RecordInput]) -> list[RecordView]:
        """Append raw episodes (§5.1)."""
        return self.writes.observe(caller, memory_id, episodes)

    def revise(
        self,
        caller: Caller,
        memory_id: str,
        record_id: str,
        changes: dict[str, Any],
        terms: WriteTerms = NO_TERMS,
        *,
        sent: Collection[str] | None = None,
    ) -> RecordView:
        """Append a new version of a record, closing the one it replaces (§5)."""
        return self.writes.revise(caller, memory_id, record_id, changes, terms, sent=sent)

    def forget(self, caller: Caller, memory_id: str, record_id: str, terms: WriteTerms = NO_TERMS) -> RecordView:
        """Close a record's current version: it leaves every read that does not ask for history (§5.2)."""
        return self.writes.forget(caller, memory_id, record_id, terms)

    def get(
        self, caller: Caller, memory_id: str, record_id: str, as_of: str | None = None, include: str = "active"
    ) -> RecordRead:
        """The version a record id names, as the caller sees it (§4), with its memory's parent and children
        (§6.1)."""
        return self.reads.get(caller, memory_id, record_id, as_of, include)

    def list(
        self,
        caller: Caller,
        memory_id: str,
        *,
        types: list[str] | None = None,
        filters: Any = None,
        include: str = "active",
        as_of: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        path: str | None = None,
        under: str | None = None,
    ) -> RecordPage:
        """A page of a memory's records, newest first, with its parent and children (§6.1)."""
        return self.reads.list(
            caller, memory_id, types=types, filters=filters, include=include, as_of=as_of, limit=limit,
            cursor=cursor, path=path, under=under,
        )

    def history(
        self, caller: Caller, memory_id: str, record_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page:
        """Every version of a record, oldest first (§5)."""
        return self.reads.history(caller, memory_id, record_id, limit, cursor)

    def create_snapshot(self, caller: Caller, memory_id: str, name: str, message: str = "") -> Snapshot:
        """Name this instant of a memory, for `as_of` (§5)."""
        return self.snapshots.create_snapshot(caller, memory_id, name, message)

    def list_snapshots(
        self, caller: Caller, memory_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page:
        """A memory's snapshots, oldest first."""
        return self.snapshots.list_snapshots(caller, memory_id, limit, cursor)

    def resolve_as_of(self, caller: Caller, memory_id: str, as_of: str) -> str:
        """An RFC 3339 time, or the name of one of this memory's snapshots, as a canonical instant."""
        return self.snapshots.resolve_as_of(caller, memory_id, as_of)

    def find_view(self, caller: Caller, memory_id: str, record_id: str) -> RecordView | None:
        """A version of this memory as the caller sees it (read needed), or None when it is gone."""
        return self.reads.find_view(caller, memory_id, record_id)

    def view(self, access: AccessView, record: RecordVersion) -> RecordView:
        """A version as this reader sees it (references resolved with its privileges)."""
        return self.reads.view(access, record)

    def views(self, caller: Caller, memory_id: str, versions: Sequence[RecordVersion]) -> builtins.list[RecordView]:
        """Versions of a memory as a reader of it sees them (read needed), a forgotten record's left out."""
        return self.reads.views(caller, memory_id, versions)
