"""What every service shares: the repositories, the clock and the id generator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from uhp_memories.domain.access.check import AccessView, HarnessReach, Pace
from uhp_memories.domain.models import Attachment, Caller
from uhp_memories.domain.ports import Clock, IdGenerator, MemoryRepository, RecordRepository
from uhp_memories.domain.providers.ports import NATIVE_ONLY, Providers


class AttachedLists(Protocol):
    """Harnesses' lists as the access rule reads them (domain/harnesses.AttachmentRepository)."""

    def get(self, tenant: str, harness_id: str) -> Sequence[Attachment] | None:
        ...


@dataclass(frozen=True)
class Ports:
    memories: MemoryRepository
    records: RecordRepository
    clock: Clock
    ids: IdGenerator
    # Where a harness's list is read to narrow its privileges (HarnessReach). Every composition sets it;
    # without it a harness holds what its grants give.
    attachments: AttachedLists | None = None
    # The providers this deployment is connected to (§10); a memory's records are kept by the one it
    # names, and every service asks here which, after the access check (domain/providers.py).
    providers: Providers = NATIVE_ONLY
    # Holds a not-found answer of a named memory to the usual time of a check (domain/access.py, Pace);
    # None (the fakes): never held.
    pace: Pace | None = None

    def access(self, caller: Caller) -> AccessView:
        """One caller's view for one request: each memory it touches is read once, with its grants;
        a harness's privileges narrowed by its list (HarnessReach)."""
        harness = caller.harness_id
        lists = self.attachments
        reach = None
        if harness is not None and lists is not None:
            def reach() -> HarnessReach:
                return HarnessReach.of(caller, lists.get(caller.tenant, harness))
        return self._view(caller, reach)

    def granted(self, caller: Caller) -> AccessView:
        """What the caller's grants alone give it, not narrowed by a list: what attaching must grant."""
        return self._view(caller, None)

    def _view(self, caller: Caller, reach: Callable[[], HarnessReach] | None) -> AccessView:
        tenant = caller.tenant
        return AccessView(
            caller,
            lambda memory_id: self.memories.get_with_grants(tenant, memory_id),
            lambda: self.memories.grants_of(tenant, caller.principal_ids),
            reach,
            load_many=lambda memory_ids, width: self.memories.get_many_with_grants(tenant, memory_ids, width),
            pace=self.pace,
        )
