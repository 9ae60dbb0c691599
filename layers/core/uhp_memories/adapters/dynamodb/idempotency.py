"""Idempotency-Key on DynamoDB: the kept answers (Powertools' idempotency table, whole responses,
record content included: erase purges every kept answer that names an erased record), and the write
key, which makes the write itself happen at most once per key.

Powertools keeps a request "in progress" while it runs and its answer once it is done. Neither says
whether the request *wrote*: an in-progress mark expires (with the Lambda's time, 29 s), and an
answer may never be kept (the process killed after the commit, an answer too large to keep). A retry
then ran the write again. So the write carries its key: while an idempotent request runs, the first
transaction it commits through `DynamoTable` also puts a marker item under the key (condition: none
there yet), holding what the transaction wrote (ids only, never content). A retry finds the marker
before it runs and is answered from it, and two attempts at once cannot both commit: the second's
transaction fails on the marker, whole."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from uhp_memories.domain.errors import DomainError

# -- kept answers ---------------------------------------------------------------------------------


class DynamoCachedResponses:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def purge_mentioning(self, needles: Sequence[str]) -> int:
        """Delete every kept response whose stored data names one of `needles` (record ids and file
        ids), in the clear or among a packed answer's ids, with the parts of an answer kept in parts;
        answers how many. The table is small by construction: items expire after the idempotency
        window. A write marker (`WriteKey`) that names an erased id stays, without the id: a retry
        after an erase must not write the erased record again, and nothing of it may remain."""
        wanted = [n for n in dict.fromkeys(needles) if n]
        if not wanted:
            return 0
        purged = 0
        paginator = self._client.get_paginator("scan")
        for page in paginator.paginate(TableName=self._table, ProjectionExpression="id, #d, written",
                                       ExpressionAttributeNames={"#d": "data"}):
            for item in page.get("Items", []):
                data = item.get("data", {}).get("S", "")
                if any(needle in data for needle in wanted):
                    for part in range(1, parts_of(data) + 1):
                        part_key = {"id": {"S": part_id(item["id"]["S"], part)}}
                        self._client.delete_item(TableName=self._table, Key=part_key)
                    self._client.delete_item(TableName=self._table, Key={"id": item["id"]})
                    purged += 1
                written = [v.get("S", "") for v in item.get("written", {}).get("L", [])]
                if set(written) & set(wanted):
                    kept = [{"S": i} for i in written if i not in wanted]
                    with contextlib.suppress(self._client.exceptions.ConditionalCheckFailedException):
                        self._client.update_item(
                            TableName=self._table, Key={"id": item["id"]}, UpdateExpression="SET written = :kept",
                            ConditionExpression="attribute_exists(id)",
                            ExpressionAttributeValues={":kept": {"L": kept}},
                        )
        return purged


# Ids a kept answer may name; they stay readable beside the packed answer, so erase finds them.
MENTIONED_ID = re.compile(r"\b(?:hrec|hmem|hgrt|hsnp|hjob|file)_[0-9a-f]{32}\b")
PACKED = "z1:"
# A packed answer longer than this is kept in parts, each an item of its own: a DynamoDB item holds
# 400 KB, and 50 episodes of 100 KB answer 5 MB (a Lambda answers at most 6 MB, so at most 20 parts).
IN_PARTS = "z2:"
PART_CHARS = 300_000


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


def part_id(idempotency_key: str, part: int) -> str:
    return f"{idempotency_key}#part{part}"


def parts_of(stored: str) -> int:
    """How many parts a kept answer was split into (0: kept whole): `z2:<ids>:<parts>`."""
    if not stored.startswith(IN_PARTS):
        return 0
    return int(stored.rsplit(":", 1)[1])


class PackedDynamoDBPersistenceLayer(DynamoDBPersistenceLayer):
    """Powertools' DynamoDB idempotency store, keeping answers packed (see `pack`), and in parts when
    packed they still pass an item's size: `z2:<ids>:<parts>` in the record, the packed text in items
    `<key>#part1..n` with the record's expiry. The parts are written before the record says they are
    there, so a record never names parts that are missing."""

    def _update_record(self, data_record: DataRecord) -> None:
        original = data_record.response_data
        if original:
            packed = pack(original)
            if len(packed) > PART_CHARS:
                packed = self._put_parts(data_record, packed)
            data_record.response_data = packed
        try:
            super()._update_record(data_record)
        finally:
            data_record.response_data = original

    def _put_parts(self, data_record: DataRecord, packed: str) -> str:
        mentioned = packed[len(PACKED):].split(":", 1)[0]
        chunks = [packed[start : start + PART_CHARS] for start in range(0, len(packed), PART_CHARS)]
        for number, chunk in enumerate(chunks, start=1):
            self.client.put_item(TableName=self.table_name, Item={
                "id": {"S": part_id(data_record.idempotency_key, number)},
                "expiration": {"N": str(data_record.expiry_timestamp)},
                "data": {"S": chunk},
            })
        return f"{IN_PARTS}{mentioned}:{len(chunks)}"

    def _item_to_data_record(self, item: dict[str, Any]) -> DataRecord:
        record = super()._item_to_data_record(item)
        stored = record.response_data
        if stored and stored.startswith(IN_PARTS):
            stored = self._read_parts(record.idempotency_key, parts_of(stored))
        record.response_data = unpack(stored)  # type: ignore[assignment]
        return record

    def _read_parts(self, idempotency_key: str, parts: int) -> str:
        chunks = []
        for number in range(1, parts + 1):
            found = self.client.get_item(TableName=self.table_name, Key={"id": {"S": part_id(idempotency_key, number)}},
                                         ConsistentRead=True).get("Item")
            if found is None:  # expired or purged under the record: nothing left to replay
                raise LookupError("a part of a kept answer is gone")
            chunks.append(found["data"]["S"])
        return "".join(chunks)


# -- the write key --------------------------------------------------------------------------------

MARKER_PREFIX = "write#"
# Ids a marker records as written: any of this server's ids (prefix + 32 hex), never other text.
WRITTEN_ID = re.compile(r"\b[a-z]{3,5}_[0-9a-f]{32}\b")
WRITTEN_IDS_KEPT = 100


class WriteKeyTaken(DomainError):
    """The write of an idempotent request whose key already committed a write: nothing was written
    again. Raised by `DynamoTable` when a transaction's marker finds another there (two attempts at
    once), and answered (409) for a retry that finds the marker before it runs."""

    code = "idempotency_key_committed"

    def __init__(self, written_ids: Sequence[str]) -> None:
        super().__init__(
            "a request with this Idempotency-Key was already written, and its answer was not kept (the server "
            "stopped or failed before keeping it, or another attempt with this key wrote first); nothing was "
            "written again. written_ids names what it wrote.",
            written_ids=list(written_ids),
        )


@dataclass
class WriteKey:
    """One idempotent request's claim on its write, in the idempotency table. `committed` once a
    transaction carrying its marker committed: later writes of the same request go without it."""

    table: str
    id: str
    payload: str
    expires_at: int
    committed: bool = field(default=False)

    @classmethod
    def of(cls, table: str, scope: Sequence[Any], body: str | None, seconds: int) -> WriteKey:
        """The key for a request's scope (tenant, principal, method, path, key: the kept answer's own)
        and body; the marker lives as long as a kept answer."""
        scoped = hashlib.sha256(json.dumps(list(scope), separators=(",", ":")).encode()).hexdigest()
        payload = hashlib.sha256((body or "").encode()).hexdigest()
        return cls(table, MARKER_PREFIX + scoped, payload, int(time.time()) + seconds)

    def marker_op(self, operations: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The Put of the marker, to go in the write's own transaction: only where none is."""
        return {"Put": {
            "TableName": self.table,
            "Item": {
                "id": {"S": self.id},
                "expiration": {"N": str(self.expires_at)},
                "payload": {"S": self.payload},
                "written_at": {"N": str(time.time_ns() // 1_000_000)},
                "written": {"L": [{"S": i} for i in written_ids(operations)[:WRITTEN_IDS_KEPT]]},
            },
            "ConditionExpression": "attribute_not_exists(id)",
        }}

    def find(self, client: Any) -> Marker | None:
        """The marker a committed attempt left under this key (a strongly consistent read)."""
        item = client.get_item(TableName=self.table, Key={"id": {"S": self.id}}, ConsistentRead=True).get("Item")
        if item is None or int(item.get("expiration", {}).get("N", "0")) < int(time.time()):
            return None  # none, or one past its time that TTL has not removed yet
        return Marker(payload=item["payload"]["S"], written=[v["S"] for v in item.get("written", {}).get("L", [])])

    def taken(self, client: Any) -> WriteKeyTaken:
        found = self.find(client)
        return WriteKeyTaken(found.written if found else [])


@dataclass(frozen=True)
class Marker:
    payload: str  # the body's SHA-256: the same key with another body is another request
    written: list[str]


def written_ids(operations: Sequence[dict[str, Any]]) -> list[str]:
    """The ids a transaction writes: of each item it puts, updates or deletes, the ids its id, sort
    key and partition key name (a record's, its memory's), in the transaction's order. Ids only,
    never other text: a sort key may hold a file's path."""
    found: dict[str, None] = {}
    for operation in operations:
        for kind in ("Put", "Update", "Delete"):
            body = operation.get(kind)
            if body is None:
                continue
            attributes = body.get("Item") or body.get("Key") or {}
            for name in ("id", "SK", "PK"):
                value = attributes.get(name, {}).get("S")
                if value:
                    found.update(dict.fromkeys(WRITTEN_ID.findall(value)))
    return list(found)


_CURRENT: ContextVar[WriteKey | None] = ContextVar("uhp_memories_write_key", default=None)


def pending() -> WriteKey | None:
    """The key the running request's next write must carry (None: not idempotent, or already written)."""
    key = _CURRENT.get()
    return key if key is not None and not key.committed else None


def pending_tag() -> str | None:
    """The running request's write named for a store outside DynamoDB (mem0) to mark what it adds with,
    while no marker is committed: the same for every attempt of one request (its key and its body), so
    a retry finds what an attempt that died before its marker added there. A digest, never the key."""
    key = pending()
    if key is None:
        return None
    return hashlib.sha256(f"{key.id}:{key.payload}".encode()).hexdigest()[:32]


@contextmanager
def writing_under(key: WriteKey) -> Iterator[WriteKey]:
    """Run a request with its write key: its first committed transaction claims it."""
    token = _CURRENT.set(key)
    try:
        yield key
    finally:
        _CURRENT.reset(token)
