"""In-memory fakes for prime: the contracts of DynamoPinRepository and DynamoPlacementRepository."""

from __future__ import annotations

from collections.abc import Sequence

from tests.fakes.tree import InMemoryMemoryRepository
from uhp_memories.domain.agents.model import Pin, Placement
from uhp_memories.domain.errors import TreeChanged

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


class InMemoryPlacementRepository:
    """What each prime placed, by tenant, harness and prime id (DynamoDB's TTL removal is not modelled:
    an expired placement stays, as it may for days in DynamoDB)."""

    def __init__(self) -> None:
        self.placements: dict[tuple[str, str, str], Placement] = {}

    def record(self, tenant: str, placement: Placement) -> None:
        self.placements[(tenant, placement.harness_id, placement.prime_id)] = placement

    def get(self, tenant: str, harness_id: str, prime_id: str) -> Placement | None:
        return self.placements.get((tenant, harness_id, prime_id))
