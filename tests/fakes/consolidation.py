"""In-memory fake of consolidation runs: the contract of DynamoRunRepository."""

from __future__ import annotations

from tests.fakes.jobs import HOLD
from tests.fakes.tree import InMemoryMemoryRepository
from uhp_memories.domain.consolidation import Run
from uhp_memories.domain.errors import TreeChanged

RUN = "run"


class InMemoryRunRepository:
    """Runs kept under their memory, with the marker that holds it while they run."""

    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories

    def start(self, run: Run) -> None:
        with self.memories.lock:
            taken = run.id in self.memories.kept_under(run.tenant, run.memory_id, RUN)
            # One condition in DynamoDB's transaction, so one error for both failures.
            if taken or not self.memories.live(run.tenant, run.memory_id):
                raise TreeChanged(run.memory_id)
            self.memories.keep(run.tenant, run.memory_id, RUN, run.id, run)
            self.memories.keep(run.tenant, run.memory_id, HOLD, run.id, run.id)

    def save(self, run: Run, release: bool) -> None:
        with self.memories.lock:
            self.memories.keep(run.tenant, run.memory_id, RUN, run.id, run)
            if release:
                self.memories.drop(run.tenant, run.memory_id, HOLD, run.id)

    def get(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        return self.memories.kept_under(tenant, memory_id, RUN).get(run_id)

    def list(self, tenant: str, memory_id: str) -> list[Run]:
        """By run id, the order of their DynamoDB sort keys."""
        return list(self.memories.kept_under(tenant, memory_id, RUN).values())
