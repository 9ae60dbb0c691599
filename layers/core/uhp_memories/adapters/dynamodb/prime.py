"""Prime (§9.1) on DynamoDB: a memory's pins, one item under the memory (its purge removes it), and
what each prime placed, one item under the harness that expires by TTL (`expires_at`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, DynamoTable
from uhp_memories.domain.agents.model import Pin, PlacedMemory, Placement
from uhp_memories.domain.errors import TreeChanged


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


class DynamoPlacementRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def record(self, tenant: str, placement: Placement) -> None:
        self._table.put(
            {
                "PK": keys.harness_pk(tenant, placement.harness_id),
                "SK": keys.placement_sk(placement.prime_id),
                "entity": "placement",
                "tenant": tenant,
                "primed_by": placement.primed_by,
                "primed_at": placement.primed_at,
                "budget": placement.budget,
                "tokens": placement.tokens,
                "memories": json.dumps(
                    [{"memory_id": m.memory_id, "tokens": m.tokens, "record_ids": list(m.record_ids)}
                     for m in placement.memories]
                ),
                "expires_at": placement.expires_at,
            }
        )

    def get(self, tenant: str, harness_id: str, prime_id: str) -> Placement | None:
        item = self._table.get(keys.harness_pk(tenant, harness_id), keys.placement_sk(prime_id))
        if item is None or item.get("tenant") != tenant:
            return None
        return Placement(
            prime_id=prime_id,
            harness_id=harness_id,
            primed_by=item["primed_by"],
            primed_at=int(item["primed_at"]),
            budget=int(item["budget"]),
            tokens=int(item["tokens"]),
            expires_at=int(item["expires_at"]),
            memories=tuple(
                PlacedMemory(m["memory_id"], int(m["tokens"]), tuple(m["record_ids"]))
                for m in json.loads(item["memories"])
            ),
        )
