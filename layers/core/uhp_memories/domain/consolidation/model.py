"""Consolidation's values: runs, their changes, schedules, the consolidator's stamp."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from uhp_memories.domain.errors import (
    DomainError,
)
from uhp_memories.domain.records.model import RecordVersion

CONSOLIDATOR = {"kind": "consolidator", "id": "native"}


# A revert's versions carry the caller who reverted as writer and this key in their origin, naming the run
# they undo (a client's origin has only run_id, principal_id and tool_call_id: api/schemas.OriginIn).
REVERTS = "reverts_run_id"


def run_leaves_alone(record: RecordVersion) -> bool:
    """Whether a run leaves the record as it is: the consolidator's own conclusion, or a revert's
    restoration (a person undid a run; the next run must not redo it)."""
    return record.written_by == CONSOLIDATOR or bool((record.origin or {}).get(REVERTS))


DEFAULT_BUDGET = 250_000  # tokens


MAX_BUDGET = 10_000_000


class RunNotFound(DomainError):
    code = "memory_consolidation_not_found"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"consolidation run {run_id} not found")


@dataclass(frozen=True)
class Change:
    record_id: str  # the version the run wrote, superseded or forgot
    action: str  # created | superseded | forgotten
    chain_id: str


@dataclass(frozen=True)
class Run:
    tenant: str
    id: str
    memory_id: str
    status: str  # queued | running | completed | stopped | failed (a revert keeps it; reverted_by says so)
    trigger: str
    started_at: int  # epoch seconds (§9.2)
    budget_limit: int
    requested_by: str
    finished_at: int | None = None
    episodes_read: int = 0
    records_read: int = 0
    read_through: str | None = None
    read_position: str | None = None  # the last record read, exactly ("<written_at>#<id>"): where to resume
    tokens_read: int = 0
    model_input_tokens: int = 0  # what a model was sent, as it counted it
    model_output_tokens: int = 0
    budget_exhausted: bool = False
    changes: tuple[Change, ...] = ()
    reverted_by: str | None = None
    error: str = ""

    def evolve(self, **changes: Any) -> Run:
        return replace(self, **changes)

    @property
    def tokens_spent(self) -> int:
        return self.tokens_read + self.model_input_tokens + self.model_output_tokens


MIN_EVERY_MINUTES = 15  # more often than this, a run mostly finds nothing new and still costs a workflow


MAX_EVERY_MINUTES = 7 * 24 * 60


class ScheduleNotFound(DomainError):
    code = "memory_schedule_not_found"

    def __init__(self, memory_id: str) -> None:
        super().__init__(f"memory {memory_id} has no consolidation schedule")


@dataclass(frozen=True)
class Schedule:
    tenant: str
    memory_id: str
    every_minutes: int
    budget_limit: int | None  # tokens per run; None: the default budget
    set_by: str
    set_at: int  # epoch ms
