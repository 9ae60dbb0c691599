"""API keys on DynamoDB, stored by SHA-256: the table never holds a usable key.

The one place a keys-table item is written and read: the authorizer finds keys here, and the admin
CLI (deployed stages) and local mode (moto) add them here, with one key-id scheme (`new_key_id`).
An item: {key_hash, key_id, tenant, principal, groups, created_at, api_key_id, revoked, revoked_at}.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from uhp_memories.adapters.dynamodb.items import from_dynamo, to_dynamo


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


def new_key_id() -> str:
    """A key's public name (listings, logs, `keys revoke`, principal `key:<id>`): random, so it says
    nothing about the key."""
    return "key_" + secrets.token_hex(12)


class KeyExists(Exception):
    """The keys table holds this key already (under its hash); nothing was written."""


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    tenant: str
    principal: str
    groups: tuple[str, ...] = ()
    created_at: str = ""  # RFC 3339, when the admin CLI made it ("" for local keys)
    api_key_id: str = ""  # the API Gateway key that carries it on a deployed stage
    revoked: bool = False
    revoked_at: str = ""


def api_key_item(key_hash: str, key: ApiKey) -> dict[str, Any]:
    return {
        "key_hash": key_hash,
        "key_id": key.key_id,
        "tenant": key.tenant,
        "principal": key.principal,
        "groups": list(key.groups),
        "created_at": key.created_at or None,
        "api_key_id": key.api_key_id or None,
        "revoked": key.revoked or None,
        "revoked_at": key.revoked_at or None,
    }


def api_key_from(item: Mapping[str, Any]) -> ApiKey:
    return ApiKey(
        key_id=str(item["key_id"]),
        tenant=str(item["tenant"]),
        principal=str(item["principal"]),
        groups=tuple(item.get("groups") or ()),
        created_at=str(item.get("created_at", "")),
        api_key_id=str(item.get("api_key_id", "")),
        revoked=bool(item.get("revoked", False)),
        revoked_at=str(item.get("revoked_at", "")),
    )


class DynamoKeyRepository:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def find(self, key_hash: str) -> ApiKey | None:
        """The key with this hash; None when there is none or it is revoked."""
        answer = self._client.get_item(TableName=self._table, Key=to_dynamo({"key_hash": key_hash}))
        if "Item" not in answer:
            return None
        key = api_key_from(from_dynamo(answer["Item"]))
        return None if key.revoked else key

    def put(
        self,
        key_hash: str,
        key_id: str,
        tenant: str,
        principal: str,
        groups: Sequence[str],
        *,
        created_at: str = "",
        api_key_id: str = "",
    ) -> None:
        """Add a key; fails with KeyExists when its hash is in the table already, so a key is never
        pointed at another tenant or principal by writing it again."""
        item = api_key_item(key_hash, ApiKey(key_id, tenant, principal, tuple(groups), created_at, api_key_id))
        try:
            self._client.put_item(
                TableName=self._table, Item=to_dynamo(item), ConditionExpression="attribute_not_exists(key_hash)"
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise KeyExists(f"key {key_id}: the keys table holds this key already") from None
            raise

    def scan(self, tenant: str | None = None) -> Iterator[tuple[str, ApiKey]]:
        """Every key (of one tenant), with its hash, revoked ones too: an operator's scan of a small table."""
        scan: dict[str, Any] = {"TableName": self._table}
        if tenant is not None:
            scan |= {"FilterExpression": "tenant = :t", "ExpressionAttributeValues": to_dynamo({":t": tenant})}
        yield from self._scan(scan)

    def with_id(self, key_id: str) -> list[tuple[str, ApiKey]]:
        """The keys named `key_id`, with their hashes (one, unless an id was ever reused)."""
        return list(
            self._scan(
                {
                    "TableName": self._table,
                    "FilterExpression": "key_id = :k",
                    "ExpressionAttributeValues": to_dynamo({":k": key_id}),
                }
            )
        )

    def revoke(self, key_hash: str, at: str) -> None:
        """Mark the key revoked (`find` no longer answers it); a second revoke keeps the first time. An
        unknown key changes nothing (conditional: an UpdateItem of an absent key would create a stub
        item, without the fields `find` reads, holding the hash against a later put)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_dynamo({"key_hash": key_hash}),
                UpdateExpression="SET revoked = :true, revoked_at = if_not_exists(revoked_at, :now)",
                ConditionExpression="attribute_exists(key_hash)",
                ExpressionAttributeValues=to_dynamo({":true": True, ":now": at}),
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            return

    def _scan(self, request: dict[str, Any]) -> Iterator[tuple[str, ApiKey]]:
        for page in self._client.get_paginator("scan").paginate(**request):
            for raw in page.get("Items", []):
                item = from_dynamo(raw)
                yield str(item["key_hash"]), api_key_from(item)
