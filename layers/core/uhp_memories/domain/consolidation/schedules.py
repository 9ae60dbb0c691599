"""Consolidation on a schedule (§9.1 "on a schedule", §9.2 `trigger: schedule`): a memory's own
schedule, set by whoever may start its runs.

    PUT    /v1/memories/{id}/consolidation-schedule   {"every_minutes": 60, "budget": {"limit": n}}
    GET    /v1/memories/{id}/consolidation-schedule
    DELETE /v1/memories/{id}/consolidation-schedule

The schedule is an item under its memory (the record of what was asked, read when it fires) and a
timer that fires it: an EventBridge Scheduler schedule in AWS (adapters/scheduler.py), the local
server's own ticker locally (local/schedules.py). Each time it fires, a run starts with `trigger:
schedule` unless one is already running (that tick is skipped: runs resume after `read.through`, so
nothing is lost); a run with nothing new to read completes at once, having read nothing.

Setting, reading and clearing need write, as starting a run does. A timer whose memory or schedule is
gone clears itself the next time it fires: a deleted memory's schedule fires at most once more, and
starts nothing.
"""

from __future__ import annotations

import logging

from uhp_memories.domain.consolidation.model import (
    MAX_BUDGET,
    MAX_EVERY_MINUTES,
    MIN_EVERY_MINUTES,
    Run,
    Schedule,
    ScheduleNotFound,
)
from uhp_memories.domain.consolidation.ports import ScheduleRepository, Timer
from uhp_memories.domain.consolidation.service import ConsolidationService
from uhp_memories.domain.errors import MemoryInvalid, MemoryNotFound, MemoryUnsupported, TreeChanged
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports

logger = logging.getLogger(__name__)











class ScheduleService:
    """Sets, reads, clears and fires a memory's consolidation schedule.

    `timer` None: the deployment has no timer, and setting a schedule answers memory_unsupported."""

    def __init__(
        self, ports: Ports, schedules: ScheduleRepository, timer: Timer | None, consolidation: ConsolidationService
    ) -> None:
        self._ports = ports
        self._schedules = schedules
        self._timer = timer
        self._consolidation = consolidation

    def set(self, caller: Caller, memory_id: str, every_minutes: int, budget: int | None) -> Schedule:
        """Set (or replace) the memory's schedule and its timer; needs write."""
        self._ports.access(caller).require(memory_id, "write")
        timer = self._timer_or_unsupported()
        if not MIN_EVERY_MINUTES <= every_minutes <= MAX_EVERY_MINUTES:
            raise MemoryInvalid(f"every_minutes is {MIN_EVERY_MINUTES} to {MAX_EVERY_MINUTES}")
        if budget is not None and not 1 <= budget <= MAX_BUDGET:
            raise MemoryInvalid(f"budget.limit is 1 to {MAX_BUDGET} tokens")
        schedule = Schedule(caller.tenant, memory_id, every_minutes, budget, caller.principal,
                            self._ports.clock.now_ms())
        # The item first: a timer that fires before it is written finds no schedule and clears itself, so
        # a failure between the two leaves nothing that fires.
        try:
            self._schedules.put(schedule)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        timer.set(caller.tenant, memory_id, every_minutes)
        return schedule

    def _timer_or_unsupported(self) -> Timer:
        if self._timer is None:
            raise MemoryUnsupported("this deployment has no timer for consolidation schedules")
        return self._timer

    def get(self, caller: Caller, memory_id: str) -> Schedule:
        """The memory's schedule; needs write."""
        self._ports.access(caller).require(memory_id, "write")
        schedule = self._schedules.get(caller.tenant, memory_id)
        if schedule is None:
            raise ScheduleNotFound(memory_id)
        return schedule

    def clear(self, caller: Caller, memory_id: str) -> None:
        """Stop the memory's schedule: its timer, then the schedule itself; needs write."""
        self._ports.access(caller).require(memory_id, "write")
        if self._schedules.get(caller.tenant, memory_id) is None:
            raise ScheduleNotFound(memory_id)
        self._timer_or_unsupported().clear(caller.tenant, memory_id)  # first: a clear cut short keeps the item
        self._schedules.delete(caller.tenant, memory_id)

    def fire(self, tenant: str, memory_id: str) -> Run | None:
        """The timer fired: start a scheduled run (None when none started)."""
        schedule = self._schedules.get(tenant, memory_id)
        memory = self._ports.memories.get(tenant, memory_id)
        if schedule is None or memory is None or memory.deleting:
            self._timer_or_unsupported().clear(tenant, memory_id)
            logger.info("schedule of a memory without one cleared", extra={"memory_id": memory_id})
            return None
        return self._consolidation.start_scheduled(tenant, memory_id, schedule.budget_limit)
