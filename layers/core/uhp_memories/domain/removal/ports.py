"""What erase needs from the outside beyond the repositories: kept answers, the index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from uhp_memories.domain.model import Caller


class CachedResponses(Protocol):
    def purge_mentioning(self, tenant: str, needles: Sequence[str]) -> int:
        """Remove the tenant's kept answers that name one of `needles` (and the ids from its write
        markers), found by the ids, never by reading every kept answer; how many answers went."""
        ...


class SearchEraser(Protocol):
    """The recall index as erase sees it (uhp_memories.search.RecallEngine)."""

    def erase(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        ...


class MemoryRemoval(Protocol):
    """The memory tree as a memory delete hides and purges it (uhp_memories.domain.memories.service.MemoryService)."""

    def hide(self, caller: Caller, memory_id: str) -> list[str]:
        """Check the caller may delete, then hide the memory and every descendant; returns the hidden ids."""
        ...

    def purge_hidden(self, tenant: str, memory_id: str) -> list[str]:
        """Remove a hidden subtree for good, leaves first; returns the ids removed."""
        ...
