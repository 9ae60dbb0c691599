"""The memory tree and grants on DynamoDB."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.items import grant_from, grant_item, memory_from, memory_item
from uhp_memories.adapters.dynamodb.schema import CHILDREN_INDEX, PRINCIPAL_INDEX
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, DynamoTable
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.models import Grant, Memory


class DynamoMemoryRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def get(self, tenant: str, memory_id: str) -> Memory | None:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.META_SK)
        return memory_from(item) if item and item.get("tenant") == tenant else None

    def get_with_grants(self, tenant: str, memory_id: str) -> tuple[Memory | None, list[Grant]]:
        """One query of the memory's partition: its grants (G#...) sort just before its META item, and
        no other kind of item sorts between them (keys.py); anything else is left out all the same."""
        items = self._table.query(
            "PK = :pk AND SK BETWEEN :grants AND :meta",
            {":pk": keys.memory_pk(tenant, memory_id), ":grants": keys.GRANT_SK_PREFIX, ":meta": keys.META_SK},
        )
        memory: Memory | None = None
        grants: list[Grant] = []
        for item in items:
            if item.get("tenant") != tenant:
                continue
            if item["SK"] == keys.META_SK:
                memory = memory_from(item)
            elif item["SK"].startswith(keys.GRANT_SK_PREFIX):
                grants.append(grant_from(item))
        if memory is None:
            return None, []  # grants left by a memory purged halfway grant nothing
        return memory, _oldest_first(grants)

    def children(self, tenant: str, parent_id: str) -> list[Memory]:
        items = self._table.query(
            "GSI1PK = :pk", {":pk": keys.children_pk(tenant, parent_id)}, index=CHILDREN_INDEX.name
        )
        return [memory_from(item) for item in items if item.get("tenant") == tenant]

    def create(self, memory: Memory, creator_grant: Grant) -> None:
        operations = [
            self._table.put_op(memory_item(memory), "attribute_not_exists(PK)"),
            self._table.put_op(grant_item(creator_grant), "attribute_not_exists(PK)"),
        ]
        if memory.parent_id is not None:
            operations.append(self._live_check(memory.tenant, memory.parent_id))
        try:
            self._table.transact(operations)
        except ConditionFailed:
            raise TreeChanged(memory.parent_id) from None

    def update(self, memory: Memory, expected_parent_id: str | None, parent_chain: Sequence[Memory]) -> None:
        values: dict[str, object] = {
            ":name": memory.name,
            ":description": memory.description,
            ":restricted": memory.restricted,
            ":updated": memory.updated_at,
            ":gsi1pk": keys.children_pk(memory.tenant, memory.parent_id),
            ":false": False,
        }
        assignments = "SET #name = :name, description = :description, restricted = :restricted, "
        assignments += "updated_at = :updated, GSI1PK = :gsi1pk"
        if memory.described_by is not None:
            assignments += ", described_by = :described_by"
            values[":described_by"] = memory.described_by
        if memory.parent_id is None:
            assignments += " REMOVE parent_id"
        else:
            assignments = assignments.replace("SET ", "SET parent_id = :parent, ")
            values[":parent"] = memory.parent_id
        condition = LIVE_MEMORY + " AND " + self._parent_is(expected_parent_id, ":expected", values)
        operations = [
            self._table.update_op(
                keys.memory_pk(memory.tenant, memory.id),
                keys.META_SK,
                assignments,
                condition=condition,
                values=values,
                names={"#name": "name"},
            )
        ]
        # Every node above the new parent must still sit where it was read: two concurrent moves
        # can then never close a cycle, since one of them fails here.
        for index, node in enumerate(parent_chain):
            node_values: dict[str, object] = {":false": False}
            node_condition = LIVE_MEMORY + " AND " + self._parent_is(node.parent_id, f":p{index}", node_values)
            operations.append(
                self._table.check_op(keys.memory_pk(node.tenant, node.id), keys.META_SK, node_condition, node_values)
            )
        try:
            self._table.transact(operations)
        except ConditionFailed:
            raise TreeChanged(memory.id) from None

    @staticmethod
    def _parent_is(parent_id: str | None, placeholder: str, values: dict[str, object]) -> str:
        if parent_id is None:
            return "attribute_not_exists(parent_id)"
        values[placeholder] = parent_id
        return f"parent_id = {placeholder}"

    def _live_check(self, tenant: str, memory_id: str) -> dict:
        return self._table.check_op(keys.memory_pk(tenant, memory_id), keys.META_SK, LIVE_MEMORY, {":false": False})

    def grants_of(self, tenant: str, principal_ids: Sequence[str]) -> list[Grant]:
        found: list[Grant] = []
        for principal in dict.fromkeys(principal_ids):
            items = self._table.query(
                "GSI2PK = :pk", {":pk": keys.principal_pk(tenant, principal)}, index=PRINCIPAL_INDEX.name
            )
            found.extend(grant_from(item) for item in items if item.get("tenant") == tenant)
        return found

    def grants_on(self, tenant: str, memory_id: str) -> list[Grant]:
        items = self._table.query(
            "PK = :pk AND begins_with(SK, :g)", {":pk": keys.memory_pk(tenant, memory_id), ":g": keys.GRANT_SK_PREFIX}
        )
        return _oldest_first(grant_from(item) for item in items)

    def put_grant(self, grant: Grant) -> None:
        try:
            self._table.transact(
                [
                    self._table.put_op(grant_item(grant), "attribute_not_exists(PK)"),
                    self._live_check(grant.tenant, grant.memory_id),
                ]
            )
        except ConditionFailed:
            raise TreeChanged(grant.memory_id) from None

    def delete_grant(self, tenant: str, memory_id: str, grant_id: str) -> bool:
        try:
            self._table.delete(keys.memory_pk(tenant, memory_id), keys.grant_sk(grant_id), "attribute_exists(PK)")
        except ConditionFailed:
            return False
        return True

    def mark_deleting(self, tenant: str, memory_ids: Sequence[str]) -> None:
        ids = list(memory_ids)
        for start in range(0, len(ids), 100):
            operations = [
                self._table.update_op(
                    keys.memory_pk(tenant, memory_id),
                    keys.META_SK,
                    "SET deleting = :true",
                    condition="attribute_exists(PK)",
                    values={":true": True},
                )
                for memory_id in ids[start : start + 100]
            ]
            try:
                self._table.transact(operations)
            except ConditionFailed:
                # A node already purged by an earlier attempt: mark the rest one by one.
                for op in operations:
                    try:
                        self._table.transact([op])
                    except ConditionFailed:
                        continue

    def purge(self, tenant: str, memory_id: str) -> None:
        pk = keys.memory_pk(tenant, memory_id)
        items = self._table.query("PK = :pk", {":pk": pk})
        # The META item goes last, so a purge cut short leaves a hidden node to finish, not orphans.
        self._table.delete_many([(item["PK"], item["SK"]) for item in items if item["SK"] != keys.META_SK])
        self._table.delete(pk, keys.META_SK)


def _oldest_first(grants: Iterable[Grant]) -> list[Grant]:
    """Grants in the order they were made (the id breaks ties), as MemoryRepository lists them."""
    return sorted(grants, key=lambda g: (g.created_at, g.id))
