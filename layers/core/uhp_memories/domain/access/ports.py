"""What the access check reads: memories with their grants, harness lists, API keys, the timing guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from uhp_memories.domain.agents.model import Attachment


class AttachedLists(Protocol):
    """Harnesses' lists as the access rule reads them (domain/harnesses.AttachmentRepository)."""

    def get(self, tenant: str, harness_id: str) -> Sequence[Attachment] | None:
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


class CheckTiming(Protocol):
    """How long a check of a named memory usually takes (adapters/system.py, MeasuredCheckTiming)."""

    def now(self) -> float:
        """A monotonic clock, in seconds."""
        ...

    def decided(self, since: float) -> None:
        """A check that began at `since` has decided."""
        ...

    def hold(self, since: float) -> None:
        """Wait until a check that began at `since` has taken as long as checks usually take."""
        ...
