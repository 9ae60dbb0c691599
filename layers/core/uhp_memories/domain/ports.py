"""Ports: what the domain needs from the outside world. Adapters implement them (DynamoDB, in-memory)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from uhp_memories.domain.files.paths import PathCondition
from uhp_memories.domain.models import Grant, Memory, RecordVersion, Snapshot


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch, from the server's clock."""
        ...


class IdGenerator(Protocol):
    def new(self, prefix: str) -> str:
        """A new id: `prefix` + 32 hex characters."""
        ...


class MemoryRepository(Protocol):
    """The memory tree and its grants. Every method is scoped to one tenant by its first argument."""

    def get(self, tenant: str, memory_id: str) -> Memory | None:
        """A memory, including one being deleted (callers check `deleting`)."""
        ...

    def get_with_grants(self, tenant: str, memory_id: str) -> tuple[Memory | None, list[Grant]]:
        """The memory (None if it does not exist) and every grant on it, in one strongly consistent read."""
        ...

    def get_many_with_grants(
        self, tenant: str, memory_ids: Sequence[str], width: int
    ) -> dict[str, tuple[Memory, list[Grant]]]:
        """The memories found among these ids, each with every grant on it, by id: one strongly
        consistent batch read of at least `width` items however few ids are asked for (padded with
        items that exist and are read alike), so what it costs does not say how many ids were asked
        for, nor how many exist (domain/access.py, CHAIN_READ_WIDTH)."""
        ...

    def children(self, tenant: str, parent_id: str) -> list[Memory]:
        """The direct children of a memory, oldest first."""
        ...

    def create(self, memory: Memory, creator_grant: Grant) -> None:
        """Create a memory and its creator's implicit grant in one transaction.

        Raises TreeChanged when the parent is missing or being deleted."""
        ...

    def update(
        self,
        memory: Memory,
        expected_parent_id: str | None,
        parent_chain: Sequence[Memory],
        below: Sequence[Memory] = (),
    ) -> None:
        """Replace a memory's client fields (and, on a move, its `ancestors`).

        `parent_chain` is the new parent and its ancestors as read; the write fails with TreeChanged
        if the memory's parent is no longer `expected_parent_id` or any node of the chain moved, so two
        concurrent moves can never build a cycle. `below`: on a move, every memory below it with its
        new `ancestors`, written in the same transaction, each on the condition that its parent is
        still the one it was read with (TreeChanged otherwise)."""
        ...

    def grants_of(self, tenant: str, principal_ids: Sequence[str]) -> list[Grant]:
        """Every grant held by any of these principals in the tenant."""
        ...

    def grants_on(self, tenant: str, memory_id: str) -> list[Grant]:
        ...

    def put_grant(self, grant: Grant) -> None:
        """Raises TreeChanged when the memory is missing or being deleted."""
        ...

    def delete_grant(self, tenant: str, memory_id: str, grant_id: str) -> bool:
        ...

    def mark_deleting(self, tenant: str, memory_ids: Sequence[str]) -> None:
        """Hide memories at once; the purge that follows may take longer."""
        ...

    def purge(self, tenant: str, memory_id: str) -> None:
        """Remove a memory item and everything kept under it (grants, markers; its records too, though
        the record repository purges those first, with what they index elsewhere)."""
        ...


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
        records finds every one (domain/removal.py).

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


class ApiKeyRecord(Protocol):
    tenant: str
    principal: str
    groups: tuple[str, ...]
    key_id: str


class KeyRepository(Protocol):
    """API keys, stored by the SHA-256 of the key; the key itself is never stored."""

    def find(self, key_hash: str) -> ApiKeyRecord | None:
        ...

    def put(self, key_hash: str, key_id: str, tenant: str, principal: str, groups: Sequence[str]) -> None:
        ...
