"""Harness attachments on DynamoDB: one item per harness (its entries and owners), written with its grants
in one transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.items import grant_item
from uhp_memories.adapters.dynamodb.memories import GRANT_WRITE_ATTEMPTS, grants_copy_op, grants_in_partition
from uhp_memories.adapters.dynamodb.table import ConditionFailed, Contended, DynamoTable
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.agents.model import Attachment, AttachmentsChanged, HarnessList
from uhp_memories.domain.errors import TreeChanged

ATTACHMENTS_SK = "ATTACHMENTS"


class DynamoAttachmentRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def get(self, tenant: str, harness_id: str) -> list[Attachment] | None:
        found = self.get_list(tenant, harness_id)
        return found.entries if found is not None else None

    def get_list(self, tenant: str, harness_id: str) -> HarnessList | None:
        item = self._table.get(keys.harness_pk(tenant, harness_id), ATTACHMENTS_SK)
        if item is None:
            return None
        entries = [Attachment(**entry) for entry in json.loads(item["entries"])]
        owners = tuple(json.loads(item["owners"])) if "owners" in item else None
        return HarnessList(entries, owners)

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        owners: Sequence[str],
        as_read: HarnessList | None,
    ) -> None:
        # Compare-and-swap on the entries and owners as stored: they are written by this one function, so
        # the list as read serializes to the very strings the item holds.
        values: dict[str, Any] | None
        if as_read is None:
            condition, values = "attribute_not_exists(PK)", None
        else:
            condition, values = "entries = :as_read", {":as_read": {"S": _entries_json(as_read.entries)}}
            if as_read.owners is None:
                condition += " AND attribute_not_exists(owners)"
            else:
                condition += " AND owners = :owners_read"
                values[":owners_read"] = {"S": json.dumps(list(as_read.owners))}
        put = self._table.put_op(
            {
                "PK": keys.harness_pk(tenant, harness_id),
                "SK": ATTACHMENTS_SK,
                "entity": "attachments",
                "tenant": tenant,
                "harness_id": harness_id,
                "entries": _entries_json(attachments),
                "owners": json.dumps(list(owners)),
            },
            condition,
        )
        if values:
            put["Put"]["ExpressionAttributeValues"] = values
        by_memory: dict[str, list[Grant]] = {}
        for grant in grants:
            by_memory.setdefault(grant.memory_id, []).append(grant)
        for _ in range(GRANT_WRITE_ATTEMPTS):
            operations = [put]
            for memory_id, granted in by_memory.items():
                # Each memory's copy of its grants changes with its grant items (memories.py).
                meta, held = grants_in_partition(self._table, tenant, memory_id)
                if meta is None or meta.get("deleting"):
                    raise TreeChanged(memory_id)
                operations.extend(self._table.put_op(grant_item(g), "attribute_not_exists(PK)") for g in granted)
                operations.append(grants_copy_op(self._table, meta, [*held, *granted], live=True))
            try:
                self._table.transact(operations)
            except (ConditionFailed, Contended):
                if self.get_list(tenant, harness_id) != as_read:
                    raise AttachmentsChanged(harness_id) from None
                if not by_memory:
                    raise TreeChanged(harness_id) from None
                continue  # a memory went, or another grant change came between: read again
            return
        raise Contended(f"grants on the memories attached to harness {harness_id} kept changing; try again")


def _entries_json(attachments: Sequence[Attachment]) -> str:
    return json.dumps([{"memory_id": a.memory_id, "access": a.access, "default": a.default} for a in attachments])
