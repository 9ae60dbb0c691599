"""In-memory fakes for consolidation schedules: the schedule item (DynamoScheduleRepository's contract)
and the timer that fires it (EventBridge Scheduler's, as adapters/scheduler.py uses it)."""

from __future__ import annotations

from tests.fakes.tree import InMemoryMemoryRepository
from uhp_memories.domain.consolidation.model import Schedule
from uhp_memories.domain.errors import TreeChanged

SCHEDULE = "schedule"


class InMemoryScheduleRepository:
    """Kept under the memory, so the memory's purge removes it (as in DynamoDB)."""

    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories

    def get(self, tenant: str, memory_id: str) -> Schedule | None:
        return self.memories.kept_under(tenant, memory_id, SCHEDULE).get("consolidation")

    def put(self, schedule: Schedule) -> None:
        with self.memories.lock:
            if not self.memories.live(schedule.tenant, schedule.memory_id):
                raise TreeChanged(schedule.memory_id)
            self.memories.keep(schedule.tenant, schedule.memory_id, SCHEDULE, "consolidation", schedule)

    def delete(self, tenant: str, memory_id: str) -> None:
        with self.memories.lock:
            self.memories.drop(tenant, memory_id, SCHEDULE, "consolidation")


class InMemoryTimer:
    """The timers set, by (tenant, memory): every how many minutes each fires."""

    def __init__(self) -> None:
        self.timers: dict[tuple[str, str], int] = {}

    def set(self, tenant: str, memory_id: str, every_minutes: int) -> None:
        self.timers[(tenant, memory_id)] = every_minutes

    def clear(self, tenant: str, memory_id: str) -> None:
        self.timers.pop((tenant, memory_id), None)
