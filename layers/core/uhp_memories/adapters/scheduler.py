"""The Timer of domain/consolidation/schedules.py on EventBridge Scheduler: one schedule per memory, in the stage's
schedule group, that invokes the consolidation timer function (functions/consolidation_timer) with
the memory's tenant and id, through the role the stage gives Scheduler for that one function.

A schedule's name is a hash of the tenant and the memory (Scheduler's names allow 64 characters of
[0-9A-Za-z-_.]; a tenant's id may hold others, and nothing of it needs to show in a name). Each fires
within a flexible window of up to a quarter of its interval (at most 15 minutes), so memories set to
the same interval at the same moment do not all start their runs in the same second."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

NAME_PREFIX = "con-"
MAX_WINDOW_MINUTES = 15


def schedule_name(tenant: str, memory_id: str) -> str:
    return NAME_PREFIX + hashlib.sha256(f"{tenant}/{memory_id}".encode()).hexdigest()[:56]


def timer_input(tenant: str, memory_id: str) -> dict[str, str]:
    """What the timer function is invoked with (functions/consolidation_timer/handler.py reads it)."""
    return {"tenant": tenant, "memory_id": memory_id}


class EventBridgeTimer:
    """`client` builds the `scheduler` client on first use: only a function that sets or clears a
    schedule pays for it."""

    def __init__(self, client: Callable[[], Any], group: str, target_arn: str, role_arn: str) -> None:
        self._client_of = client
        self._group = group
        self._target_arn = target_arn
        self._role_arn = role_arn

    def set(self, tenant: str, memory_id: str, every_minutes: int) -> None:
        window = max(1, min(MAX_WINDOW_MINUTES, every_minutes // 4))
        request = {
            "Name": schedule_name(tenant, memory_id),
            "GroupName": self._group,
            "ScheduleExpression": f"rate({every_minutes} minutes)",
            "FlexibleTimeWindow": {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": window},
            "Target": {
                "Arn": self._target_arn,
                "RoleArn": self._role_arn,
                "Input": json.dumps(timer_input(tenant, memory_id)),
                # A missed firing is not worth a late run: the next tick reads what the missed one would have.
                "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 3},
            },
            "State": "ENABLED",
        }
        client = self._client_of()
        try:
            client.create_schedule(**request)
        except client.exceptions.ConflictException:
            client.update_schedule(**request)

    def clear(self, tenant: str, memory_id: str) -> None:
        client = self._client_of()
        try:
            client.delete_schedule(Name=schedule_name(tenant, memory_id), GroupName=self._group)
        except client.exceptions.ResourceNotFoundException:
            return
