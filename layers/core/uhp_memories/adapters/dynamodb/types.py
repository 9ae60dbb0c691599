"""A tenant's extension types (§8) on DynamoDB, in the tenant's types partition: one item holds the
current version of each type (`TYPE#<name>`) and one item keeps each version (`TYPE#<name>#V#<n>`),
both written in one transaction, the current one conditioned on the version it replaces."""

from __future__ import annotations

import json
from typing import Any

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import ConditionFailed, DynamoTable
from uhp_memories.domain.types.model import TypeDefinition, TypeVersionTaken
from uhp_memories.domain.types.service import definition_json, parse_definition


class DynamoTypeRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def current(self, tenant: str, type_name: str) -> TypeDefinition | None:
        item = self._table.get(keys.types_pk(tenant), keys.type_sk(type_name))
        return _from(item) if item is not None and item.get("tenant") == tenant else None

    def list(self, tenant: str) -> list[TypeDefinition]:
        items = self._table.query(
            "PK = :pk AND begins_with(SK, :t)", {":pk": keys.types_pk(tenant), ":t": keys.TYPE_SK_PREFIX}
        )
        return [_from(i) for i in items if i.get("tenant") == tenant and keys.TYPE_VERSION_MARK not in i["SK"]]

    def put(self, tenant: str, definition: TypeDefinition) -> None:
        item = {
            "PK": keys.types_pk(tenant),
            "entity": "type",
            "tenant": tenant,
            "type": definition.type,
            "type_version": definition.version,
            "definition": json.dumps(definition_json(definition), ensure_ascii=False, separators=(",", ":")),
            "registered_by": definition.registered_by,
            "registered_at": definition.registered_at,
        }
        if definition.version == 1:
            condition, values = "attribute_not_exists(PK)", None
        else:
            condition, values = "type_version = :before", {":before": definition.version - 1}
        try:
            self._table.transact(
                [
                    self._table.put_op({**item, "SK": keys.type_sk(definition.type)}, condition, values),
                    self._table.put_op(
                        {**item, "SK": keys.type_version_sk(definition.type, definition.version)},
                        "attribute_not_exists(PK)",
                    ),
                ]
            )
        except ConditionFailed:
            raise TypeVersionTaken(definition.type) from None


def _from(item: dict[str, Any]) -> TypeDefinition:
    # Parsed as it was registered: what was valid then reads back as the same definition.
    parsed = parse_definition(str(item["type"]), json.loads(item["definition"]))
    return TypeDefinition(
        type=parsed.type,
        description=parsed.description,
        schema=parsed.schema,
        text=parsed.text,
        operations=parsed.operations,
        version=int(item["type_version"]),
        registered_by=item.get("registered_by"),
        registered_at=int(item["registered_at"]) if item.get("registered_at") is not None else None,
    )
