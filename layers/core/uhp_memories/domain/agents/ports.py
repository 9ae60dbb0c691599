"""What harnesses, prime and turns need from the outside."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from uhp_memories.domain.access.model import AccessView, Grant
from uhp_memories.domain.agents.model import (
    Attachment,
    HarnessList,
    Pin,
    Placement,
)
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.observing.model import Observed
from uhp_memories.domain.records.model import RecordInput


class AttachmentRepository(Protocol):
    def get(self, tenant: str, harness_id: str) -> list[Attachment] | None:
        """The list's entries (None: no list), as the access rule reads them."""
        ...

    def get_list(self, tenant: str, harness_id: str) -> HarnessList | None:
        """The list with its owners (None: no list)."""
        ...

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        owners: Sequence[str],
        as_read: HarnessList | None,
    ) -> None:
        """Replace the list and its owners and write the grants it needs, in one transaction, only if the
        list is still `as_read` (None: no list yet), entries and owners alike: compare-and-swap, so two
        concurrent changes never lose one.

        Raises AttachmentsChanged when the list is no longer as read, TreeChanged when a memory to be
        granted on is missing or being deleted; either way nothing is written."""
        ...


class ProviderRegistry(Protocol):
    """Which providers a memory may live in, and which of them run outside this server (§9.1 last rule)."""

    def is_outside(self, provider: str) -> bool:
        ...


class PinRepository(Protocol):
    def get(self, tenant: str, memory_id: str) -> list[Pin]:
        """The memory's pins in their order; none when never set."""
        ...

    def replace(self, tenant: str, memory_id: str, pins: Sequence[Pin]) -> None:
        """Replace the list; TreeChanged when the memory is missing or being deleted (nothing written)."""
        ...


class PlacementRepository(Protocol):
    def record(self, tenant: str, placement: Placement) -> None:
        """Keep the placement until its `expires_at` (a TTL: removed some time after, not at it)."""
        ...

    def get(self, tenant: str, harness_id: str, prime_id: str) -> Placement | None:
        """The placement, None when unknown (an expired one not yet removed is answered)."""
        ...


class MemoryNeighbours(Protocol):
    """The memory tree as prime places a memory's header (uhp_memories.domain.memories.service.MemoryService)."""

    def neighbours(
        self, access: AccessView, memory: Memory, children: Sequence[Memory] | None = None
    ) -> tuple[MemorySummary | None, list[MemorySummary]]:
        """The parent and the direct children the caller may read."""
        ...


class TurnObserver(Protocol):
    """Observe as a turn's episodes go through it (uhp_memories.domain.observing.service.ObserveService)."""

    def observe(self, caller: Caller, memory_id: str, episodes: list[RecordInput]) -> Observed:
        """Write the episodes; where a deriver is configured, start the job that derives from them."""
        ...
