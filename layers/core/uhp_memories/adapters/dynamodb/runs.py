"""Consolidation runs on DynamoDB, under their memory, with the hold on the memory while they run
(adapters/dynamodb/holds.py)."""

from __future__ import annotations

import json
from typing import Any

from uhp_memories.adapters.dynamodb import holds, keys
from uhp_memories.adapters.dynamodb.table import ConditionFailed, DynamoTable
from uhp_memories.domain.consolidation.model import Change, Run
from uhp_memories.domain.errors import TreeChanged


class DynamoRunRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def _item(self, run: Run) -> dict[str, Any]:
        body = {k: v for k, v in run.__dict__.items() if k != "changes"}
        body["changes"] = [c.__dict__ for c in run.changes]
        return {
            "PK": keys.memory_pk(run.tenant, run.memory_id),
            "SK": keys.run_item_sk(run.id),
            "entity": "consolidation",
            "tenant": run.tenant,
            "run": json.dumps(body),
        }

    def start(self, run: Run) -> None:
        try:
            self._table.transact(
                [
                    self._table.put_op(self._item(run), "attribute_not_exists(PK)"),
                    holds.hold_op(self._table, run.tenant, run.memory_id, run.id),
                ]
            )
        except ConditionFailed:
            raise TreeChanged(run.memory_id) from None

    def save(self, run: Run, release: bool) -> None:
        operations = [self._table.put_op(self._item(run))]
        if release:
            operations.extend(holds.release_ops(self._table, run.tenant, run.memory_id, run.id))
        self._table.transact(operations)

    def get(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.run_item_sk(run_id))
        return self._from(item) if item and item.get("tenant") == tenant else None

    def list(self, tenant: str, memory_id: str) -> list[Run]:
        items = self._table.query(
            "PK = :pk AND begins_with(SK, :c)",
            {":pk": keys.memory_pk(tenant, memory_id), ":c": keys.CONSOLIDATION_SK_PREFIX},
        )
        return [self._from(item) for item in items]

    @staticmethod
    def _from(item: dict[str, Any]) -> Run:
        body = json.loads(item["run"])
        body["changes"] = tuple(Change(**c) for c in body["changes"])
        return Run(**body)
