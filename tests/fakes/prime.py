"""In-memory fake of a memory's pins for prime: the contract of DynamoPinRepository."""

from __future__ import annotations

from collections.abc import Sequence

from tests.fakes.tree import InMemoryMemoryRepository
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.prime import Pin

PRIME = "prime"


class InMemoryPinRepository:
    """Kept under the memory, so the memory's purge removes them (as in DynamoDB)."""

    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories

    def get(self, tenant: str, memory_id: str) -> list[Pin]:
        return list(self.memories.kept_under(tenant, memory_id, PRIME).get("pins", []))

    def replace(self, tenant: str, memory_id: str, pins: Sequence[Pin]) -> None:
        with self.memories.lock:
            if not self.memories.live(tenant, memory_id):
                raise TreeChanged(memory_id)
            self.memories.keep(tenant, memory_id, PRIME, "pins", tuple(pins))
