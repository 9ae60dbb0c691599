"""`uhp-memories migrate`: bring a stage's main table (or a local data dir's) to the schema this release
writes, item by item, idempotent and resumable (a run stopped anywhere is finished by the next), with a dry
run that changes nothing.

Every item this release writes says its shape's version (`schema`, SCHEMA_VERSION: DynamoTable stamps each
put). Version 1 is an item without it. From 1 to 2:
- a memory item counts its children (items.py CHILDREN_OPEN and an entry per restricted child), so no read
  counts them again (docs/decisions.md, "Children counted, not read"). Its children are read (the children
  index, then each child's own item, strongly consistent) and counted as a reader would see them; the count
  is written on the condition that no child changed meanwhile: every change of a child of an item that keeps
  no count moves its CHILDREN_EPOCH (adapters/dynamodb/children.py), and the count is written only while the
  epoch is the one read before the children were. The children index is eventually consistent, so the epoch
  is read, the index is given CHILDREN_INDEX_SETTLE_S to catch up, then read.
- every other item is stamped: its shape did not change.
An item of a newer version than this release is left alone and counted in the report (a rollback)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.items import (
    CHILDREN_EPOCH,
    CHILDREN_OPEN,
    SCHEMA,
    SCHEMA_VERSION,
    from_dynamo,
    restricted_child,
    to_dynamo,
)
from uhp_memories.adapters.dynamodb.memories import DynamoMemoryRepository
from uhp_memories.adapters.dynamodb.schema import CHILDREN_INDEX
from uhp_memories.adapters.dynamodb.table import DynamoTable

CHILDREN_INDEX_SETTLE_S = 2.0  # a deployed GSI's lag, generously; 0 on moto, whose indexes are immediate
COUNT_ATTEMPTS = 5  # a memory whose children keep changing is counted again, then left for the next run


@dataclass
class MigrationReport:
    seen: int = 0
    stamped: int = 0  # items brought to SCHEMA_VERSION with their shape unchanged
    counted: int = 0  # memory items that now count their children
    newer: int = 0  # items of a version after this release's, left alone
    busy: list[str] | None = None  # memories whose children kept changing: run again

    def as_dict(self) -> dict[str, Any]:
        return {"seen": self.seen, "stamped": self.stamped, "counted": self.counted, "newer": self.newer,
                "busy": list(self.busy or []), "schema": SCHEMA_VERSION}


class Migration:
    def __init__(self, table: DynamoTable, *, settle_s: float = CHILDREN_INDEX_SETTLE_S,
                 progress: Callable[[MigrationReport], None] = lambda report: None) -> None:
        self._table = table
        self._settle_s = settle_s
        self._progress = progress

    def run(self, *, dry_run: bool = False) -> MigrationReport:
        """Every item of the table brought to SCHEMA_VERSION (with `dry_run`, what would be: nothing written)."""
        report = MigrationReport(busy=[])
        for item in self._items():
            report.seen += 1
            version = int(item.get(SCHEMA, 1))
            if version > SCHEMA_VERSION:
                report.newer += 1
            elif version < SCHEMA_VERSION:
                if _is_memory(item) and CHILDREN_OPEN not in item and not item.get("deleting"):
                    if dry_run or self._count_children(item):
                        report.counted += 1
                    else:
                        assert report.busy is not None
                        report.busy.append(str(item["id"]))
                else:
                    if not dry_run:
                        self._stamp(item)
                    report.stamped += 1
            if report.seen % 1000 == 0:
                self._progress(report)
        return report

    def _items(self) -> Iterator[dict[str, Any]]:
        """The table, page by page (an operator's command: the one place a Scan is right)."""
        kwargs: dict[str, Any] = {"TableName": self._table.name, "ConsistentRead": True}
        while True:
            page = self._table.client.scan(**kwargs)
            yield from (from_dynamo(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _stamp(self, item: dict[str, Any]) -> None:
        try:
            self._table.client.update_item(
                TableName=self._table.name, Key=_key(item), UpdateExpression="SET #schema = :version",
                ConditionExpression="attribute_exists(PK) AND (attribute_not_exists(#schema) OR #schema < :version)",
                ExpressionAttributeNames={"#schema": SCHEMA},
                ExpressionAttributeValues={":version": {"N": str(SCHEMA_VERSION)}},
            )
        except ClientError as error:  # gone meanwhile, or written anew by this release: nothing to do
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def _count_children(self, memory: dict[str, Any]) -> bool:
        """Count a memory's children onto its item; False when they kept changing while it counted."""
        tenant, memory_id = str(memory["tenant"]), str(memory["id"])
        pk = keys.memory_pk(tenant, memory_id)
        memories = DynamoMemoryRepository(self._table)
        for _ in range(COUNT_ATTEMPTS):
            current = self._table.get(pk, keys.META_SK)
            if current is None or CHILDREN_OPEN in current or current.get("deleting"):
                return True  # gone, counted by another run, or being deleted: nothing to count
            epoch = int(current.get(CHILDREN_EPOCH, 0))
            time.sleep(self._settle_s)
            listed = self._table.query("GSI1PK = :pk", {":pk": keys.children_pk(tenant, memory_id)},
                                       index=CHILDREN_INDEX.name)
            child_keys = [(keys.memory_pk(tenant, str(c["id"])), keys.META_SK) for c in listed
                          if c.get("tenant") == tenant]
            children = [c for c in self._table.get_many(child_keys) if c.get("tenant") == tenant
                        and c.get("parent_id") == memory_id and not c.get("deleting")]
            open_children = sum(1 for c in children if not c.get("restricted"))
            names = {"#open": CHILDREN_OPEN, "#epoch": CHILDREN_EPOCH, "#schema": SCHEMA}
            values: dict[str, Any] = {":open": open_children, ":version": SCHEMA_VERSION}
            sets = ["#open = :open", "#schema = :version"]
            for n, child in enumerate(c for c in children if c.get("restricted")):
                names[f"#rc{n}"] = restricted_child(str(child["id"]))
                values[f":rc{n}"] = " ".join(sorted({g.principal for g in memories.grants_of_item(tenant, child)}))
                sets.append(f"#rc{n} = :rc{n}")
            condition = "attribute_exists(PK) AND attribute_not_exists(#open) AND "
            if epoch:
                values[":epoch"] = epoch
                condition += "#epoch = :epoch"
            else:
                condition += "attribute_not_exists(#epoch)"
            try:
                self._table.client.update_item(
                    TableName=self._table.name, Key=_key(current), UpdateExpression="SET " + ", ".join(sets),
                    ConditionExpression=condition, ExpressionAttributeNames=names,
                    ExpressionAttributeValues=to_dynamo(values),
                )
                return True
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
        return False


def _is_memory(item: dict[str, Any]) -> bool:
    return item.get("entity") == "memory" and item.get("SK") == keys.META_SK


def _key(item: dict[str, Any]) -> dict[str, Any]:
    return {"PK": {"S": str(item["PK"])}, "SK": {"S": str(item["SK"])}}
