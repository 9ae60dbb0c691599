"""What the memory tree needs from the outside: its repository and the index a delete clears."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.memories.model import Memory


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
        for, nor how many exist (domain/access/model.py, CHAIN_READ_WIDTH)."""
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
        was_restricted: bool | None = None,
    ) -> None:
        """Replace a memory's client fields (and, on a move, its `ancestors`).

        `parent_chain` is the new parent and its ancestors as read; the write fails with TreeChanged
        if the memory's parent is no longer `expected_parent_id` or any node of the chain moved, so two
        concurrent moves can never build a cycle. `below`: on a move, every memory below it with its
        new `ancestors`, written in the same transaction, each on the condition that its parent is
        still the one it was read with (TreeChanged otherwise). A move fails with MemoryBusy while a
        run (a consolidation, an erase) holds the memory or one below it: decided by the write itself,
        against runs that start at the same time (JobRepository.start, RunRepository.start).
        `was_restricted`: the memory's `restricted` as the caller read it (None: not known), so a rename
        is written without reading what a restrict or a move changes in its parents' count of it."""
        ...

    def grants_of(self, tenant: str, principal_ids: Sequence[str]) -> list[Grant]:
        """Every grant held by any of these principals in the tenant."""
        ...

    def grants_on(self, tenant: str, memory_id: str) -> list[Grant]:
        ...

    def count_records(self, tenant: str, memory_id: str, *, added: int = 0, exactly: int | None = None) -> None:
        """Keep `records.count` (§2) for a memory another provider keeps, whose writes pass the record
        repository's own counter: `added` (negative: gone) to it, or set it to `exactly`. Nothing when the
        memory is gone or being deleted meanwhile."""
        ...

    def put_grant(self, grant: Grant) -> None:
        """Raises TreeChanged when the memory is missing or being deleted."""
        ...

    def delete_grant(self, tenant: str, memory_id: str, grant_id: str) -> bool:
        ...

    def mark_deleting(self, tenant: str, memory_ids: Sequence[str]) -> None:
        """Hide memories at once (root first); the purge that follows may take longer. MemoryBusy,
        hiding none of them, while a run holds one: decided by the write itself, as a move's is."""
        ...

    def purge(self, tenant: str, memory_id: str) -> None:
        """Remove a memory item and everything kept under it (grants, markers; its records too, though
        the record repository purges those first, with what they index elsewhere)."""
        ...


class MemoryIndex(Protocol):
    """The recall index as a subtree delete sees it (uhp_memories.search.RecallEngine)."""

    def drop_memory(self, tenant: str, memory_id: str) -> None:
        ...
