"""The Powertools idempotency table holds whole responses, record content included: erase purges
every kept response that names an erased record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class DynamoCachedResponses:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def purge_mentioning(self, needles: Sequence[str]) -> int:
        """Delete every kept response whose stored data contains one of `needles` (record ids and
        file ids). The table is small by construction: items expire after the idempotency window."""
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
