"""What every service shares: the repositories, the clock and the id generator."""

from __future__ import annotations

from dataclasses import dataclass

from uhp_memories.domain.access import AccessView
from uhp_memories.domain.models import Caller
from uhp_memories.ports import Clock, IdGenerator, MemoryRepository, RecordRepository


@dataclass(frozen=True)
class Ports:
    memories: MemoryRepository
    records: RecordRepository
    clock: Clock
    ids: IdGenerator

    def access(self, caller: Caller) -> AccessView:
        """One caller's view for one request: each memory it touches is read once, with its grants."""
        tenant = caller.tenant
        return AccessView(
            caller,
            lambda memory_id: self.memories.get_with_grants(tenant, memory_id),
            lambda: self.memories.grants_of(tenant, caller.principal_ids),
        )
