"""What consolidation needs from the outside: runs, schedules, the timer, neighbours."""

from __future__ import annotations

from typing import Protocol

from uhp_memories.domain.consolidation.model import (
    Run,
    Schedule,
)
from uhp_memories.domain.records.model import RecordVersion


class RunRepository(Protocol):
    def start(self, run: Run) -> None:
        """Write the run and hold the memory, in one transaction."""
        ...

    def save(self, run: Run, release: bool) -> None:
        """Replace the run; with `release`, also stop holding the memory, in one transaction."""
        ...

    def get(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        ...

    def list(self, tenant: str, memory_id: str) -> list[Run]:
        ...


class Neighbours(Protocol):
    """What a pass asks the search index instead of reading the memory (domain/recall/neighbours.py)."""

    def similar(self, record: RecordVersion, limit: int) -> list[tuple[str, float]]:
        """Current records of the record's memory and type most like it: (record_id, cosine similarity)."""
        ...

    def same_subject(self, record: RecordVersion, key: str, limit: int) -> list[str]:
        """Current records of the record's memory and type whose attributes.key is `key`."""
        ...

    def expired(self, tenant: str, memory_id: str, now: str, limit: int) -> list[str]:
        """Current records of the memory whose valid_to is before `now`."""
        ...


class ScheduleRepository(Protocol):
    """The schedule item under its memory."""

    def get(self, tenant: str, memory_id: str) -> Schedule | None:
        ...

    def put(self, schedule: Schedule) -> None:
        """Write or replace the memory's schedule. Raises TreeChanged when the memory is missing or
        being deleted."""
        ...

    def delete(self, tenant: str, memory_id: str) -> None:
        """Remove it; absent is fine."""
        ...


class Timer(Protocol):
    """What fires a memory's schedule (EventBridge Scheduler; the local ticker)."""

    def set(self, tenant: str, memory_id: str, every_minutes: int) -> None:
        """Fire every `every_minutes` from now on, replacing any timer of the memory."""
        ...

    def clear(self, tenant: str, memory_id: str) -> None:
        """Stop firing; absent is fine."""
        ...
