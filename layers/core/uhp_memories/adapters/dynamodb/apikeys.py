"""API keys on DynamoDB, stored by SHA-256: the table never holds a usable key."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from uhp_memories.adapters.dynamodb.items import from_dynamo, to_dynamo


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    tenant: str
    principal: str
    groups: tuple[str, ...]


class DynamoKeyRepository:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def find(self, key_hash: str) -> ApiKey | None:
        answer = self._client.get_item(TableName=self._table, Key=to_dynamo({"key_hash": key_hash}))
        if "Item" not in answer:
            return None
        item = from_dynamo(answer["Item"])
        if item.get("revoked"):
            return None
        return ApiKey(str(item["key_id"]), str(item["tenant"]), str(item["principal"]), tuple(item.get("groups", [])))

    def put(self, key_hash: str, key_id: str, tenant: str, principal: str, groups: Sequence[str]) -> None:
        self._client.put_item(
            TableName=self._table,
            Item=to_dynamo(
                {
                    "key_hash": key_hash,
                    "key_id": key_id,
                    "tenant": tenant,
                    "principal": principal,
                    "groups": list(groups),
                }
            ),
        )
