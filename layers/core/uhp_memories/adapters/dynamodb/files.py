"""File metadata on DynamoDB (the bytes are on S3)."""

from __future__ import annotations

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import DynamoTable
from uhp_memories.domain.files.model import StoredFile

FILE_SK = "FILE"


class DynamoFileRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def put(self, stored: StoredFile) -> None:
        self._table.put(
            {
                "PK": keys.file_pk(stored.tenant, stored.id),
                "SK": FILE_SK,
                "entity": "file",
                "tenant": stored.tenant,
                "id": stored.id,
                "name": stored.name,
                "media_type": stored.media_type,
                "bytes": stored.bytes,
                "status": stored.status,
                "created_by": stored.created_by,
                "created_at": stored.created_at,
            },
            "attribute_not_exists(PK)",
        )

    def get(self, tenant: str, file_id: str) -> StoredFile | None:
        item = self._table.get(keys.file_pk(tenant, file_id), FILE_SK)
        if item is None or item.get("tenant") != tenant:
            return None
        return StoredFile(
            tenant=str(item["tenant"]),
            id=str(item["id"]),
            name=str(item["name"]),
            media_type=str(item["media_type"]),
            bytes=int(item["bytes"]),
            status=str(item["status"]),
            created_by=str(item["created_by"]),
            created_at=int(item["created_at"]),
            memory_id=str(item["memory_id"]) if "memory_id" in item else None,
            record_id=str(item["record_id"]) if "record_id" in item else None,
        )

    def mark(self, tenant: str, file_id: str, status: str) -> None:
        # Conditional: an UpdateItem of an absent key creates it, and a stub (key and status only)
        # would hold the id against a later put. Marking a file that is not there changes nothing.
        try:
            self._table.client.update_item(
                TableName=self._table.name,
                Key={"PK": {"S": keys.file_pk(tenant, file_id)}, "SK": {"S": FILE_SK}},
                UpdateExpression="SET #s = :u",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":u": {"S": status}},
            )
        except self._table.client.exceptions.ConditionalCheckFailedException:
            return

    def hold(self, tenant: str, file_id: str, memory_id: str, record_id: str) -> None:
        try:  # conditional, as mark
            self._table.client.update_item(
                TableName=self._table.name,
                Key={"PK": {"S": keys.file_pk(tenant, file_id)}, "SK": {"S": FILE_SK}},
                UpdateExpression="SET #s = :a, memory_id = :m, record_id = :r",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":a": {"S": "attached"}, ":m": {"S": memory_id}, ":r": {"S": record_id}},
            )
        except self._table.client.exceptions.ConditionalCheckFailedException:
            return

    def delete(self, tenant: str, file_id: str) -> None:
        self._table.client.delete_item(
            TableName=self._table.name,
            Key={"PK": {"S": keys.file_pk(tenant, file_id)}, "SK": {"S": FILE_SK}},
        )
