"""The consolidation timer (a worker Lambda): what a memory's schedule invokes (EventBridge Scheduler in
AWS, the local server's ticker locally) with {"tenant", "memory_id"}. It starts a scheduled run
(domain/consolidation/schedules.py); it answers what it did, for Scheduler's and the ticker's logs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from uhp_memories import bootstrap


class TimerFired(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    tenant: str
    memory_id: str


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    fired = TimerFired.model_validate(event)
    run = bootstrap.container().schedules.fire(fired.tenant, fired.memory_id)
    return {"run_id": run.id if run is not None else None}
