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

from uhp_memories.adapters.dynamodb.schema import MENTIONS_INDEX
from uhp_memories.domain.errors import DomainError

# -- kept answers ---------------------------------------------------------------------------------


class DynamoCachedResponses:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def purge_mentioning(self, tenant: str, needles: Sequence[str]) -> int:
        """Delete every kept response of `tenant` that names one of `needles` (record ids and file
        ids), with the parts of an answer kept in parts; answers how many. Found through the pointers
        left beside each kept answer and write marker (`mentions`): one Query of the mentions index per
        erased id, never a Scan, so the reads grow with what was erased and what names it, never with
        the table. A write marker (`WriteKey`) that names an erased id stays, without the id: a retry
        after an erase must not write the erased record again, and nothing of it may remain. The
        pointers naming an erased id go last, so a step that fails halfway finds them again."""
        wanted = [n for n in dict.fromkeys(needles) if n]
        if not wanted:
            return 0
        found: dict[str, int] = {}  # what the pointers lead to -> its parts
        pointers: list[str] = []
        for needle in wanted:
            for item in self._pointers(mentioned_key(tenant, needle)):
                pointers.append(item["id"]["S"])
                target = item["points_to"]["S"]
                found[target] = max(found.get(target, 0), int(item.get("parts", {}).get("N", "0")))
        purged = 0
        for target, parts in found.items():
            if target.startswith(MARKER_PREFIX):
                self._strip(target, set(wanted))
            elif self._delete_answer(target, parts):
                purged += 1
        delete_items(self._client, self._table, pointers)
        return purged

    def _pointers(self, mentioned: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self._table, "IndexName": MENTIONS_INDEX.name,
            "KeyConditionExpression": "#m = :m", "ExpressionAttributeNames": {"#m": MENTIONS_INDEX.partition_key},
            "ExpressionAttributeValues": {":m": {"S": mentioned}},
        }
        while True:
            page = self._client.query(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _delete_answer(self, answer_id: str, parts: int) -> bool:
        for part in range(1, parts + 1):
            self._client.delete_item(TableName=self._table, Key={"id": {"S": part_id(answer_id, part)}})
        try:
            self._client.delete_item(TableName=self._table, Key={"id": {"S": answer_id}},
                                     ConditionExpression="attribute_exists(id)")
        except self._client.exceptions.ConditionalCheckFailedException:
            return False  # expired, or purged by an earlier attempt of this step
        return True

    def _strip(self, marker_id: str, wanted: set[str]) -> None:
        """Take the erased ids out of a marker's `written`, on the condition that it is as read (two
        erases at once must not put back what the other took out)."""
        for _ in range(CONFLICT_ATTEMPTS):
            item = self._client.get_item(TableName=self._table, Key={"id": {"S": marker_id}}, ConsistentRead=True,
                                         ProjectionExpression="written").get("Item")
            was = item.get("written", {}).get("L", []) if item else []
            kept = [v for v in was if v.get("S", "") not in wanted]
            if item is None or len(kept) == len(was):
                return
            try:
                self._client.update_item(
                    TableName=self._table, Key={"id": {"S": marker_id}}, UpdateExpression="SET written = :kept",
                    ConditionExpression="written = :was",
                    ExpressionAttributeValues={":kept": {"L": kept}, ":was": {"L": was}},
                )
                return
            except self._client.exceptions.ConditionalCheckFailedException:
                continue
        raise RuntimeError("a write marker kept changing while erase took an id out of it; try again")


# -- pointers: what erase finds kept answers and markers by ------------------------------------------

# The ids erase is asked to take out of kept answers and markers (records' versions, uploaded files):
# each gets a pointer item, `mention#<digest of what names it>#<id>`, whose `mentioned` (tenant and
# id) is the mentions index's key and whose `points_to` is the kept answer's or the marker's id.
ERASABLE_ID = re.compile(r"\b(?:hrec|file)_[0-9a-f]{32}\b")
MENTION_PREFIX = "mention#"
# A kept answer naming more erasable ids than this is not kept (a retry is answered from the write
# marker): keeping it would cost a pointer each, 25 a BatchWriteItem call. Observe's 50 episodes,
# each with its references, stay well under it.
MENTIONS_KEPT_MAX = 500
BATCH_WRITE_MAX = 25
CONFLICT_ATTEMPTS = 8


def mentioned_key(tenant: str, mentioned_id: str) -> str:
    """The mentions index's key: the tenant first, so one tenant's erase never reaches another's."""
    return f"{tenant}#{mentioned_id}"


def mention_items(tenant: str, points_to: str, ids: Sequence[str], expiration: int,
                  parts: int = 0) -> list[dict[str, Any]]:
    """The pointer items (wire form) for what `points_to` names, one an id, living as long as it does;
    a kept answer's say how many parts it was kept in, so erase deletes them without reading it."""
    digest = hashlib.sha256(points_to.encode()).hexdigest()[:32]
    items = []
    for mentioned in dict.fromkeys(ids):
        item: dict[str, Any] = {
            "id": {"S": f"{MENTION_PREFIX}{digest}#{mentioned}"},
            "mentioned": {"S": mentioned_key(tenant, mentioned)},
            "points_to": {"S": points_to},
            "expiration": {"N": str(expiration)},
        }
        if parts:
            item["parts"] = {"N": str(parts)}
        items.append(item)
    return items


def put_items(client: Any, table: str, items: Sequence[dict[str, Any]]) -> None:
    """Put items with BatchWriteItem, 25 a call, unprocessed ones sent again."""
    _batch_write(client, table, [{"PutRequest": {"Item": item}} for item in items])


def delete_items(client: Any, table: str, ids: Sequence[str]) -> None:
    _batch_write(client, table, [{"DeleteRequest": {"Key": {"id": {"S": i}}}} for i in dict.fromkeys(ids)])


def _batch_write(client: Any, table: str, requests: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(requests), BATCH_WRITE_MAX):
        pending: dict[str, Any] = {table: list(requests[start : start + BATCH_WRITE_MAX])}
        for attempt in range(CONFLICT_ATTEMPTS):
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
            time.sleep(0.01 * 2**attempt)
        else:
            raise RuntimeError("DynamoDB left items of a batch write unprocessed; try again")


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


# The tenant whose answer the store is keeping (set by `save_success`, read by `_update_record`).
_KEEPING_FOR: ContextVar[str] = ContextVar("uhp_memories_keeping_for", default="")


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
    there, so a record never names parts that are missing; the pointers to the record (one per
    erasable id it names, the tenant's: `mention_items`) go before both, so erase finds every kept
    answer by the ids it names."""

    def save_success(self, data: dict[str, Any], result: dict[Any, Any]) -> None:
        # The tenant the request ran for (the API Gateway event's authorizer context), whose erase the
        # pointers answer to.
        authorizer = ((data or {}).get("requestContext") or {}).get("authorizer") or {}
        token = _KEEPING_FOR.set(str(authorizer.get("tenant") or ""))
        try:
            super().save_success(data, result)
        finally:
            _KEEPING_FOR.reset(token)

    def _update_record(self, data_record: DataRecord) -> None:
        original = data_record.response_data
        if original:
            packed = pack(original)
            chunks = [packed[start : start + PART_CHARS] for start in range(0, len(packed), PART_CHARS)]
            chunks = chunks if len(packed) > PART_CHARS else []
            self._put_mentions(data_record, ERASABLE_ID.findall(original), len(chunks))
            if chunks:
                packed = self._put_parts(data_record, packed, chunks)
            data_record.response_data = packed
        try:
            super()._update_record(data_record)
        finally:
            data_record.response_data = original

    def _put_mentions(self, data_record: DataRecord, ids: Sequence[str], parts: int) -> None:
        ids = list(dict.fromkeys(ids))
        if len(ids) > MENTIONS_KEPT_MAX:
            raise ValueError(f"an answer naming {len(ids)} erasable ids is not kept (at most {MENTIONS_KEPT_MAX})")
        put_items(self.client, self.table_name, mention_items(
            _KEEPING_FOR.get(), data_record.idempotency_key, ids,
            data_record.expiry_timestamp or self._get_expiry_timestamp(), parts))

    def _put_parts(self, data_record: DataRecord, packed: str, chunks: Sequence[str]) -> str:
        mentioned = packed[len(PACKED):].split(":", 1)[0]
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
    tenant: str = ""  # whose erase may take an id out of the marker (`mention_items`)

    @classmethod
    def of(cls, table: str, scope: Sequence[Any], body: str | None, seconds: int) -> WriteKey:
        """The key for a request's scope (tenant, principal, method, path, key: the kept answer's own)
        and body; the marker lives as long as a kept answer."""
        scoped = hashlib.sha256(json.dumps(list(scope), separators=(",", ":")).encode()).hexdigest()
        payload = hashlib.sha256((body or "").encode()).hexdigest()
        tenant = str(scope[0] or "") if scope else ""
        return cls(table, MARKER_PREFIX + scoped, payload, int(time.time()) + seconds, tenant=tenant)

    def mention_items(self, operations: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The pointers to the marker, one per erasable id it keeps (at most WRITTEN_IDS_KEPT): with
        them erase finds the marker to take an erased id out of (`DynamoCachedResponses`)."""
        kept = written_ids(operations)[:WRITTEN_IDS_KEPT]
        erasable = [i for i in kept if ERASABLE_ID.fullmatch(i)]
        return mention_items(self.tenant, self.id, erasable, self.expires_at)

    def mention_op(self, item: dict[str, Any]) -> dict[str, Any]:
        """A pointer's Put in the write's own transaction (no condition: every attempt puts the same)."""
        return {"Put": {"TableName": self.table, "Item": item}}

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
