"""Named queries on DynamoDB, under their memory (so a memory's purge removes them)."""

from __future__ import annotations

import json

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, DynamoTable
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.queries.model import NamedQuery


class DynamoQueryRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def put(self, query: NamedQuery) -> None:
        item = {
            "PK": keys.memory_pk(query.tenant, query.memory_id),
            "SK": keys.query_sk(query.name),
            "entity": "query",
            "tenant": query.tenant,
            "memory_id": query.memory_id,
            "name": query.name,
            "definition": json.dumps(
                {
                    "description": query.description,
                    "params": query.params,
                    "requires": query.requires,
                    "language": query.language,
                    "body": query.body,
                },
                ensure_ascii=False,
            ),
            "updated_by": query.updated_by,
            "updated_at": query.updated_at,
        }
        try:
            self._table.transact(
                [
                    self._table.put_op(item),
                    self._table.check_op(
                        keys.memory_pk(query.tenant, query.memory_id), keys.META_SK, LIVE_MEMORY, {":false": False}
                    ),
                ]
            )
        except ConditionFailed:
            raise TreeChanged(query.memory_id) from None

    def get(self, tenant: str, memory_id: str, name: str) -> NamedQuery | None:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.query_sk(name))
        return self._from(item) if item and item.get("tenant") == tenant else None

    def list(self, tenant: str, memory_id: str) -> list[NamedQuery]:
        items = self._table.query(
            "PK = :pk AND begins_with(SK, :q)", {":pk": keys.memory_pk(tenant, memory_id), ":q": keys.QUERY_SK_PREFIX}
        )
        return [self._from(item) for item in items]

    @staticmethod
    def _from(item: dict) -> NamedQuery:
        definition = json.loads(item["definition"])
        return NamedQuery(
            tenant=str(item["tenant"]),
            memory_id=str(item["memory_id"]),
            name=str(item["name"]),
            description=definition["description"],
            params=definition["params"],
            requires=definition["requires"],
            language=definition["language"],
            body=definition["body"],
            updated_by=str(item["updated_by"]),
            updated_at=int(item["updated_at"]),
        )
