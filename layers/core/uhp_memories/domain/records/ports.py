"""What records need from the outside: the version store, the index, paths, types."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.files.model import PathCondition, PathEntry
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.records.model import (
    RecordVersion,
    Snapshot,
)
from uhp_memories.domain.types.model import TypedAttributes


class RecordRepository(Protocol):
    """Record versions, version chains and snapshots. Nothing here overwrites content."""

    def get(self, tenant: str, memory_id: str, record_id: str) -> RecordVersion | None:
        ...

    def get_many(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> dict[str, RecordVersion]:
        """The versions of one memory found among these ids, by id, read in as few calls as the store
        allows (recall reads back every hit it returns). Ids not found are left out."""
        ...

    def append_first(self, record: RecordVersion, conditions: Sequence[PathCondition] = ()) -> None:
        """Write the first version of a new record and count it on its memory, in one transaction.
        A record with a path claims it in the same transaction, with every condition of the read set
        checked there and the change journaled (docs/file-memory.md).

        Raises TreeChanged when the memory is missing or being deleted; PathConflict when the path is
        held or a condition no longer holds."""
        ...

    def append_many(self, records: Sequence[RecordVersion]) -> None:
        """Write the first versions of several new records of one memory, counted, in one transaction.

        Raises TreeChanged when the memory is missing or being deleted."""
        ...

    def append_derived(self, record: RecordVersion, sources: Sequence[str]) -> None:
        """Write the first version of a record derived from `sources` (record ids of its memory), counted,
        in one transaction that also checks every source is still there: once an erase has removed a
        source, nothing derived from it can be written any more, so the erase's last look for derived
        records finds every one (domain/removal/service.py).

        Raises AlreadyExists when the record is already written (a retried step), SourceGone when a
        source is gone, TreeChanged when the memory is missing or being deleted."""
        ...

    def append_revision(
        self, previous: RecordVersion, revision: RecordVersion, conditions: Sequence[PathCondition] = ()
    ) -> None:
        """Write `previous` in its closed form (status, superseded_by, invalidated_at) and `revision`,
        in one transaction, with the path item moved or revised along (as append_first).

        Raises StaleVersion when `previous` is no longer the current active version; PathConflict as
        append_first."""
        ...

    def reopen(self, forgotten: RecordVersion, revision: RecordVersion) -> None:
        """Make a forgotten record current again: write `forgotten` with `superseded_by` set and the
        new active `revision`, counting it, in one transaction. Raises StaleVersion when the
        forgotten version is no longer the chain's last."""
        ...

    def close(self, current: RecordVersion, closed: RecordVersion, conditions: Sequence[PathCondition] = ()) -> None:
        """Close the current version (forget), uncounting it and freeing its path, in one transaction.

        Raises StaleVersion when `current` is no longer the current active version; PathConflict
        when a condition no longer holds."""
        ...

    def chain(self, tenant: str, chain_id: str) -> list[RecordVersion]:
        """Every version of one record, oldest first."""
        ...

    def scan_active(self, tenant: str, memory_id: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        """Current active versions, newest first, each with its position (an opaque resume point)."""
        ...

    def scan_versions(
        self, tenant: str, memory_id: str, after: str | None, written_up_to: str | None
    ) -> Iterator[tuple[str, RecordVersion]]:
        """Every version, newest first, optionally only those written at or before an instant."""
        ...

    def active_after(self, tenant: str, memory_id: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        """Current active versions written after the position `after` ("<written_at>#<id>", None: from the
        start), oldest first, each with its position, read a page at a time as iterated."""
        ...

    def put_snapshot(self, snapshot: Snapshot) -> None:
        """Raises AlreadyExists when the memory already has a snapshot of that name, and TreeChanged
        when the memory is missing or being deleted."""
        ...

    def get_snapshot(self, tenant: str, memory_id: str, name: str) -> Snapshot | None:
        ...

    def list_snapshots(self, tenant: str, memory_id: str) -> list[Snapshot]:
        ...

    def purge_memory(self, tenant: str, memory_id: str) -> None:
        """Remove every record version and snapshot of a memory."""
        ...

    def derived_from(self, tenant: str, record_ids: Sequence[str]) -> list[tuple[str, str]]:
        """(memory_id, chain_id) of every record version with a `derived_from` reference to one of
        these record versions, in any memory of the tenant."""
        ...

    def erase_chain(self, tenant: str, memory_id: str, chain_id: str) -> list[str]:
        """Remove every version of one record for good, uncounting it if it was active; a file's path
        is freed and the memory's change journal cleared first. Idempotent: a second call finds
        nothing and returns []. Returns the version ids removed."""
        ...


class PathLookup(Protocol):
    """Which record holds a path now (uhp_memories.domain.files.tree.PathRepository)."""

    def at(self, tenant: str, memory_id: str, path: str) -> PathEntry | None:
        ...


class TypeCatalog(Protocol):
    """Extension types (uhp_memories.domain.types.service.TypeService): a version's attributes validated against
    its type, and its text projection."""

    def check(self, tenant: str, type_name: str, attributes: dict[str, Any], content: Any) -> TypedAttributes:
        ...


class VersionIndex(Protocol):
    """The recall index as writes see it (uhp_memories.search.RecallEngine)."""

    def embed_ahead(self, versions: Sequence[RecordVersion]) -> Any:
        """Start embedding these new versions' texts while the write commits; the handle goes to
        index_versions (`ahead`). Nothing is indexed before the commit."""
        ...

    def index_versions(self, versions: Sequence[RecordVersion], *, ahead: Any = None) -> None:
        ...


class MemoryNeighbours(Protocol):
    """The memory tree as a record listing sees it (uhp_memories.domain.memories.service.MemoryService)."""

    def neighbours(
        self, access: AccessView, memory: Memory, children: Sequence[Memory] | None = None
    ) -> tuple[MemorySummary | None, list[MemorySummary]]:
        """The parent and the direct children the caller may read."""
        ...


class FileAttachments(Protocol):
    """Uploaded files as a file record's write holds them (uhp_memories.domain.files.service.FileService)."""

    def attach(self, caller: Caller, reference: Any, memory_id: str, chain_id: str) -> dict[str, Any]:
        """Bind an uploaded file to a record chain; returns the content reference the record keeps."""
        ...

    def release_upload(self, caller: Caller, file_id: str, memory_id: str, record_id: str) -> None:
        """Remove an upload the record `record_id` now holds."""
        ...
