"""What every service is given: the repositories every feature reads, the clock, the ids, the providers, and
one caller's access view built over them. Each feature's own ports are in its `ports.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from uhp_memories.domain.access.model import AccessView, HarnessReach
from uhp_memories.domain.access.ports import AttachedLists, CheckTiming
from uhp_memories.domain.clock import Clock, IdGenerator
from uhp_memories.domain.memories.ports import MemoryRepository
from uhp_memories.domain.model import Caller
from uhp_memories.domain.providers.ports import NATIVE_ONLY, Providers
from uhp_memories.domain.records.ports import RecordRepository


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
    # names, and every service asks here which, after the access check (domain/providers/ports.py).
    providers: Providers = NATIVE_ONLY
    # Holds a not-found answer of a named memory to the usual time of a check (domain/access/model.py, CheckTiming);
    # None (the fakes): never held.
    check_timing: CheckTiming | None = None

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
            timing=self.check_timing,
        )
