"""A memory's consolidation schedule on DynamoDB: one item under the memory (its purge removes it)."""

from __future__ import annotations

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, DynamoTable
from uhp_memories.domain.consolidation.model import Schedule
from uhp_memories.domain.errors import TreeChanged


class DynamoScheduleRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def get(self, tenant: str, memory_id: str) -> Schedule | None:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.SCHEDULE_SK)
        if item is None or item.get("tenant") != tenant:
            return None
        budget = item.get("budget_limit")
        return Schedule(
            tenant=str(item["tenant"]),
            memory_id=str(item["memory_id"]),
            every_minutes=int(item["every_minutes"]),
            budget_limit=int(budget) if budget is not None else None,
            set_by=str(item["set_by"]),
            set_at=int(item["set_at"]),
        )

    def put(self, schedule: Schedule) -> None:
        pk = keys.memory_pk(schedule.tenant, schedule.memory_id)
        item = {
            "PK": pk,
            "SK": keys.SCHEDULE_SK,
            "entity": "schedule",
            "tenant": schedule.tenant,
            "memory_id": schedule.memory_id,
            "every_minutes": schedule.every_minutes,
            "set_by": schedule.set_by,
            "set_at": schedule.set_at,
        }
        if schedule.budget_limit is not None:
            item["budget_limit"] = schedule.budget_limit
        try:
            self._table.transact(
                [self._table.put_op(item), self._table.check_op(pk, keys.META_SK, LIVE_MEMORY, {":false": False})]
            )
        except ConditionFailed:
            raise TreeChanged(schedule.memory_id) from None

    def delete(self, tenant: str, memory_id: str) -> None:
        self._table.delete(keys.memory_pk(tenant, memory_id), keys.SCHEDULE_SK)
