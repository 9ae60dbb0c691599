"""Harness attachments on DynamoDB: one item per harness, written with its grants in one transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.items import grant_item
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, DynamoTable
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.harnesses import Attachment, AttachmentsChanged
from uhp_memories.domain.models import Grant

ATTACHMENTS_SK = "ATTACHMENTS"


class DynamoAttachmentRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def get(self, tenant: str, harness_id: str) -> list[Attachment] | None:
        item = self._table.get(keys.harness_pk(tenant, harness_id), ATTACHMENTS_SK)
        if item is None:
            return None
        return [Attachment(**entry) for entry in json.loads(item["entries"])]

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        as_read: Sequence[Attachment] | None,
    ) -> None:
        # Compare-and-swap on the entries as stored: they are written by this one function, so the list
        # as read serializes to the very string the item holds.
        if as_read is None:
            condition, values = "attribute_not_exists(PK)", None
        else:
            condition, values = "entries = :as_read", {":as_read": {"S": _entries_json(as_read)}}
        put = self._table.put_op(
            {
                "PK": keys.harness_pk(tenant, harness_id),
                "SK": ATTACHMENTS_SK,
                "entity": "attachments",
                "tenant": tenant,
                "harness_id": harness_id,
                "entries": _entries_json(attachments),
            },
            condition,
        )
        if values:
            put["Put"]["ExpressionAttributeValues"] = values
        operations = [put]
        for grant in grants:
            operations.append(self._table.put_op(grant_item(grant), "attribute_not_exists(PK)"))
            operations.append(
                self._table.check_op(
                    keys.memory_pk(tenant, grant.memory_id), keys.META_SK, LIVE_MEMORY, {":false": False}
                )
            )
        try:
            self._table.transact(operations)
        except ConditionFailed:
            if self.get(tenant, harness_id) != (None if as_read is None else list(as_read)):
                raise AttachmentsChanged(harness_id) from None
            raise TreeChanged(grants[0].memory_id if grants else harness_id) from None


def _entries_json(attachments: Sequence[Attachment]) -> str:
    return json.dumps([{"memory_id": a.memory_id, "access": a.access, "default": a.default} for a in attachments])
