"""The Powertools idempotency table holds whole responses, record content included: erase purges
every kept response that names an erased record."""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord


class DynamoCachedResponses:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def purge_mentioning(self, needles: Sequence[str]) -> int:
        """Delete every kept response whose stored data names one of `needles` (record ids and file
        ids), in the clear or among a packed answer's ids. The table is small by construction: items
        expire after the idempotency window."""
        wanted = [n for n in dict.fromkeys(needles) if n]
        if not wanted:
            return 0
        purged = 0
        paginator = self._client.get_paginator("scan")
        for page in paginator.paginate(TableName=self._table, ProjectionExpression="id, #d",
                                       ExpressionAttributeNames={"#d": "data"}):
            for item in page.get("Items", []):
                data = item.get("data", {}).get("S", "")
                if any(needle in data for needle in wanted):
                    self._client.delete_item(TableName=self._table, Key={"id": item["id"]})
                    purged += 1
        return purged


# Ids a kept answer may name; they stay readable beside the packed answer, so erase finds them.
MENTIONED_ID = re.compile(r"\b(?:hrec|hmem|hgrt|hsnp|hjob|file)_[0-9a-f]{32}\b")
PACKED = "z1:"


def pack(response_data: str) -> str:
    """A kept answer as `z1:<ids>:<zlib, base64>`. Record content escaped twice (once in the answer's
    body, once in the kept JSON) can grow past a DynamoDB item's 400 KB; compressed, it fits."""
    mentioned = ",".join(sorted(set(MENTIONED_ID.findall(response_data))))
    return PACKED + mentioned + ":" + base64.b64encode(zlib.compress(response_data.encode(), 6)).decode()


def unpack(stored: str | None) -> str | None:
    if not stored or not stored.startswith(PACKED):
        return stored
    packed = stored.rsplit(":", 1)[1]
    return zlib.decompress(base64.b64decode(packed)).decode()


class PackedDynamoDBPersistenceLayer(DynamoDBPersistenceLayer):
    """Powertools' DynamoDB idempotency store, keeping answers packed (see `pack`)."""

    def _update_record(self, data_record: DataRecord) -> None:
        original = data_record.response_data
        data_record.response_data = pack(original) if original else original
        try:
            super()._update_record(data_record)
        finally:
            data_record.response_data = original

    def _item_to_data_record(self, item: dict[str, Any]) -> DataRecord:
        record = super()._item_to_data_record(item)
        record.response_data = unpack(record.response_data)  # type: ignore[assignment]
        return record
