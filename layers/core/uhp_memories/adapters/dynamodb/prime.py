"""A memory's pins for prime (§9.1) on DynamoDB: one item under the memory (its purge removes it)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, DynamoTable
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.prime import Pin


class DynamoPinRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def get(self, tenant: str, memory_id: str) -> list[Pin]:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.PRIME_SK)
        if item is None or item.get("tenant") != tenant:
            return []
        return [Pin(**entry) for entry in json.loads(item["pins"])]

    def replace(self, tenant: str, memory_id: str, pins: Sequence[Pin]) -> None:
        item = {
            "PK": keys.memory_pk(tenant, memory_id),
            "SK": keys.PRIME_SK,
            "entity": "prime",
            "tenant": tenant,
            "memory_id": memory_id,
            "pins": json.dumps(
                [
                    {"chain_id": p.chain_id, "record_id": p.record_id, "pinned_by": p.pinned_by,
                     "pinned_at": p.pinned_at}
                    for p in pins
                ]
            ),
        }
        try:
            self._table.transact(
                [
                    self._table.put_op(item),
                    self._table.check_op(
                        keys.memory_pk(tenant, memory_id), keys.META_SK, LIVE_MEMORY, {":false": False}
                    ),
                ]
            )
        except ConditionFailed:
            raise TreeChanged(memory_id) from None
