"""A thin wrapper over one DynamoDB table: typed queries, paging and transactions."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from uhp_memories.adapters.dynamodb import idempotency, sizes
from uhp_memories.adapters.dynamodb.items import SCHEMA, SCHEMA_VERSION, from_dynamo, to_dynamo
from uhp_memories.adapters.dynamodb.sizes import ITEM_MAX_BYTES, TRANSACTION_MAX_BYTES, TRANSACTION_MAX_ITEMS
from uhp_memories.domain.errors import RequestTooLarge

BATCH_GET_MAX_KEYS = 100
BATCH_GET_ATTEMPTS = 5
# A write that lost a race with a transaction on one of its items wrote nothing, and is sent again after
# a pause drawn at random up to a ceiling that doubles each time (full jitter: racing writers spread
# out instead of meeting again), up to this many sends in all; the last conflict is then raised
# (Contended: 503 memory_unavailable, safe to retry). About 0.5 s of pauses at most.
CONFLICT_ATTEMPTS = 8
CONFLICT_PAUSE_S = 0.005
CONFLICT_PAUSE_MAX_S = 0.2


class ConditionFailed(Exception):
    """A conditional write (or one condition of a transaction) failed; nothing was written.
    `failed` holds the positions of a transaction's operations whose condition failed (empty when
    the answer did not say)."""

    def __init__(self, message: str, failed: frozenset[int] = frozenset()) -> None:
        super().__init__(message)
        self.failed = failed


class Contended(Exception):
    """A transaction lost a race with another one on the same item; nothing was written, and the
    same transaction may be sent again."""


class WriteTooLarge(RequestTooLarge):
    """A write DynamoDB would refuse for its size (an item over 400 KB, a transaction over 4 MB or
    100 items), refused before it is sent: nothing was written. A RequestTooLarge, so the API answers
    413 request_too_large (docs/decisions.md, "AWS limits enforced locally")."""


def check_item(item: Mapping[str, Any]) -> None:
    """Refuse an item (in wire form) DynamoDB would refuse for its size."""
    _check_item_size(sizes.item_size(item))


def _check_item_size(size: int) -> None:
    if size > ITEM_MAX_BYTES:
        raise WriteTooLarge(f"the write is refused: one of its items would be {size} bytes, and DynamoDB "
                            f"holds at most {ITEM_MAX_BYTES} bytes an item")


def check_transaction(operations: Sequence[Mapping[str, Any]]) -> int:
    """Refuse a transaction DynamoDB would refuse for its size: more than 100 operations, an item over
    400 KB, or items over 4 MB together (sizes.operation_size says what each operation counts). Answers
    its size, each operation sized once (a put's item is its operation's size)."""
    if len(operations) > TRANSACTION_MAX_ITEMS:
        raise WriteTooLarge(f"the write is refused: it would be {len(operations)} items in one transaction, "
                            f"and DynamoDB takes at most {TRANSACTION_MAX_ITEMS}")
    total = 0
    for operation in operations:
        size = sizes.operation_size(operation)
        if "Put" in operation:
            _check_item_size(size)
        total += size
    if total > TRANSACTION_MAX_BYTES:
        raise WriteTooLarge(f"the write is refused: its items would be {total} bytes in one transaction, "
                            f"and DynamoDB takes at most {TRANSACTION_MAX_BYTES}")
    return total


def stamped(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item as this release writes it: with its shape's version (items.py SCHEMA_VERSION)."""
    return {**item, SCHEMA: SCHEMA_VERSION}


def lost_a_race(error: ClientError) -> bool:
    """DynamoDB refused the write because another transaction held one of its items, and for nothing
    else: a condition that failed is an answer, never retried."""
    code = error.response["Error"]["Code"]
    if code == "TransactionConflictException":  # a single write meeting a transaction in flight
        return True
    codes = {r.get("Code") for r in error.response.get("CancellationReasons", [])}
    return code == "TransactionCanceledException" and "TransactionConflict" in codes and (
        "ConditionalCheckFailed" not in codes)


def retrying_conflicts[T](send: Callable[[], T]) -> T:
    """`send` (one write to DynamoDB), sent again while it loses races (`lost_a_race`), CONFLICT_ATTEMPTS
    times at most. The SDK's own retries do not cover these: a cancelled transaction is an answer to it.
    Every transaction goes through here, so none answers 503 for a race it could have won by waiting
    (racing observes into one memory did, from their shared memory item)."""
    for attempt in range(CONFLICT_ATTEMPTS):
        try:
            return send()
        except ClientError as error:
            if attempt + 1 == CONFLICT_ATTEMPTS or not lost_a_race(error):
                raise
        time.sleep(random.uniform(0, min(CONFLICT_PAUSE_MAX_S, CONFLICT_PAUSE_S * 2**attempt)))  # noqa: S311
    raise AssertionError("unreachable: the last attempt returns or raises")


class DynamoTable:
    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.name = table_name

    def get(self, pk: str, sk: str, consistent: bool = True) -> dict[str, Any] | None:
        answer = self.client.get_item(
            TableName=self.name, Key=to_dynamo({"PK": pk, "SK": sk}), ConsistentRead=consistent
        )
        item = answer.get("Item")
        return from_dynamo(item) if item else None

    def get_many(self, keys: Sequence[tuple[str, str]], consistent: bool = True) -> list[dict[str, Any]]:
        """The items found under these keys, in no particular order: BatchGetItem, 100 keys a call,
        unprocessed keys asked again."""
        found: list[dict[str, Any]] = []
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), BATCH_GET_MAX_KEYS):
            pending: dict[str, Any] = {
                self.name: {
                    "Keys": [to_dynamo({"PK": pk, "SK": sk}) for pk, sk in unique[start : start + BATCH_GET_MAX_KEYS]],
                    "ConsistentRead": consistent,
                }
            }
            for attempt in range(BATCH_GET_ATTEMPTS):
                answer = self.client.batch_get_item(RequestItems=pending)
                found.extend(from_dynamo(item) for item in answer.get("Responses", {}).get(self.name, []))
                pending = answer.get("UnprocessedKeys") or {}
                if not pending:
                    break
                time.sleep(0.01 * 2**attempt)
            else:
                raise RuntimeError("DynamoDB left keys of a batch read unprocessed; try again")
        return found

    def query(
        self,
        key_condition: str,
        values: Mapping[str, Any],
        *,
        index: str | None = None,
        forward: bool = True,
        start_key: Mapping[str, Any] | None = None,
        page_size: int | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every item matching, page by page, read lazily."""
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": to_dynamo(values),
            "ScanIndexForward": forward,
        }
        if index:
            kwargs["IndexName"] = index
        else:
            kwargs["ConsistentRead"] = True
        if names:
            kwargs["ExpressionAttributeNames"] = dict(names)
        if page_size:
            kwargs["Limit"] = page_size
        if start_key:
            kwargs["ExclusiveStartKey"] = to_dynamo(start_key)
        while True:
            answer = self.client.query(**kwargs)
            for item in answer.get("Items", []):
                yield from_dynamo(item)
            last = answer.get("LastEvaluatedKey")
            if not last:
                return
            kwargs["ExclusiveStartKey"] = last

    def transact(self, operations: Sequence[dict[str, Any]]) -> None:
        """Run write operations as one transaction; ConditionFailed if any condition fails.

        In an idempotent request (adapters/dynamodb/idempotency.py), the first transaction that
        commits also puts the request's write marker, on the condition that none is there: a retry of
        a request that wrote cannot write again, and a transaction whose marker is taken raises
        WriteKeyTaken (nothing written). A transaction already holding DynamoDB's 100 items puts its
        marker alone right after it commits (a crash between the two writes again, as without a key).
        The marker's pointers (one per record or file id it names, for erase) go in the transaction
        when they fit, else in a BatchWriteItem before it.

        A transaction DynamoDB would refuse for its size is refused before it is sent (WriteTooLarge),
        marker included; one the marker alone would push over 4 MB puts it after, as one of 100 items."""
        size = check_transaction(operations)
        key = idempotency.pending()
        marked, items = False, list(operations)
        if key is not None:
            mentions = key.mention_items(operations)
            marker = key.marker_op(operations)
            pointers = [key.mention_op(mention) for mention in mentions]
            with_marker = size + sizes.operation_size(marker)
            # The marker's pointers (erase finds the marker by them) ride in the transaction when it
            # has room, else go just before it: a marker is never there without its pointers.
            inline = [*operations, *pointers, marker]
            if len(inline) <= TRANSACTION_MAX_ITEMS and (
                    with_marker + sizes.transaction_size(pointers) <= TRANSACTION_MAX_BYTES):
                marked, items, mentions = True, inline, []
            elif len(operations) < TRANSACTION_MAX_ITEMS and with_marker <= TRANSACTION_MAX_BYTES:
                marked, items = True, [*operations, marker]
            idempotency.put_items(self.client, key.table, mentions)
        try:
            retrying_conflicts(lambda: self.client.transact_write_items(TransactItems=items))
        except ClientError as error:
            if error.response["Error"]["Code"] == "TransactionCanceledException":
                reasons = error.response.get("CancellationReasons", [])
                codes = [r.get("Code") for r in reasons]
                if key is not None and marked and (codes[-1:] == ["ConditionalCheckFailed"] or not reasons):
                    if not reasons and key.find(self.client) is None:
                        raise ConditionFailed(str(error)) from None
                    raise key.taken(self.client) from None
                if "ConditionalCheckFailed" in codes or not reasons:
                    failed = frozenset(i for i, code in enumerate(codes) if code == "ConditionalCheckFailed")
                    raise ConditionFailed(str(error), failed) from None
                if "TransactionConflict" in codes:
                    raise Contended(str(error)) from None
            raise
        if key is not None:
            if not marked:
                self._mark_after(key, operations)
            key.committed = True

    def _mark_after(self, key: idempotency.WriteKey, operations: Sequence[dict[str, Any]]) -> None:
        try:
            self.client.transact_write_items(TransactItems=[key.marker_op(operations)])
        except ClientError as error:
            if error.response["Error"]["Code"] != "TransactionCanceledException":
                raise

    def put_op(
        self, item: Mapping[str, Any], condition: str | None = None, values: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        put: dict[str, Any] = {"TableName": self.name, "Item": to_dynamo(stamped(item))}
        if condition:
            put["ConditionExpression"] = condition
        if values:
            put["ExpressionAttributeValues"] = to_dynamo(values)
        return {"Put": put}

    def update_op(
        self,
        pk: str,
        sk: str,
        update: str,
        *,
        condition: str | None = None,
        values: Mapping[str, Any] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        op: dict[str, Any] = {
            "TableName": self.name,
            "Key": to_dynamo({"PK": pk, "SK": sk}),
            "UpdateExpression": update,
        }
        if condition:
            op["ConditionExpression"] = condition
        if values:
            op["ExpressionAttributeValues"] = to_dynamo(values)
        if names:
            op["ExpressionAttributeNames"] = dict(names)
        return {"Update": op}

    def delete_op(
        self, pk: str, sk: str, condition: str | None = None, values: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        op: dict[str, Any] = {"TableName": self.name, "Key": to_dynamo({"PK": pk, "SK": sk})}
        if condition:
            op["ConditionExpression"] = condition
        if values:
            op["ExpressionAttributeValues"] = to_dynamo(values)
        return {"Delete": op}

    def check_op(
        self, pk: str, sk: str, condition: str, values: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        op: dict[str, Any] = {
            "TableName": self.name,
            "Key": to_dynamo({"PK": pk, "SK": sk}),
            "ConditionExpression": condition,
        }
        if values:
            op["ExpressionAttributeValues"] = to_dynamo(values)
        return {"ConditionCheck": op}

    def delete(self, pk: str, sk: str, condition: str | None = None, values: Mapping[str, Any] | None = None) -> None:
        if idempotency.pending() is not None:  # an idempotent request's write carries its marker
            self.transact([self.delete_op(pk, sk, condition, values)])
            return
        kwargs: dict[str, Any] = {"TableName": self.name, "Key": to_dynamo({"PK": pk, "SK": sk})}
        if condition:
            kwargs["ConditionExpression"] = condition
        if values:
            kwargs["ExpressionAttributeValues"] = to_dynamo(values)
        try:
            retrying_conflicts(lambda: self.client.delete_item(**kwargs))
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise ConditionFailed(str(error)) from None
            raise

    def put(self, item: Mapping[str, Any], condition: str | None = None) -> None:
        if idempotency.pending() is not None:  # an idempotent request's write carries its marker
            self.transact([self.put_op(item, condition)])
            return
        kwargs: dict[str, Any] = {"TableName": self.name, "Item": to_dynamo(stamped(item))}
        check_item(kwargs["Item"])
        if condition:
            kwargs["ConditionExpression"] = condition
        try:
            retrying_conflicts(lambda: self.client.put_item(**kwargs))
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise ConditionFailed(str(error)) from None
            raise

    def update(self, pk: str, sk: str, update: str, *, condition: str | None = None,
               values: Mapping[str, Any] | None = None) -> None:
        if idempotency.pending() is not None:  # an idempotent request's write carries its marker
            self.transact([self.update_op(pk, sk, update, condition=condition, values=values)])
            return
        kwargs: dict[str, Any] = {"TableName": self.name, "Key": to_dynamo({"PK": pk, "SK": sk}),
                                  "UpdateExpression": update}
        if condition:
            kwargs["ConditionExpression"] = condition
        if values:
            kwargs["ExpressionAttributeValues"] = to_dynamo(values)
        try:
            retrying_conflicts(lambda: self.client.update_item(**kwargs))
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise ConditionFailed(str(error)) from None
            raise

    def put_many(self, items: Sequence[Mapping[str, Any]]) -> None:
        """Put items with BatchWriteItem, 25 a call, unconditionally and outside any idempotent
        request's marker: for items whose every write is the same (memories' padding items)."""
        wire = [to_dynamo(stamped(item)) for item in items]
        for each in wire:
            check_item(each)  # all before the first batch: none written when one is refused
        for start in range(0, len(wire), 25):
            pending: dict[str, Any] = {
                self.name: [{"PutRequest": {"Item": item}} for item in wire[start : start + 25]]
            }
            while pending:
                answer = self.client.batch_write_item(RequestItems=pending)
                pending = answer.get("UnprocessedItems") or {}

    def delete_many(self, keys: Sequence[tuple[str, str]]) -> None:
        for start in range(0, len(keys), 25):
            requests = [
                {"DeleteRequest": {"Key": to_dynamo({"PK": pk, "SK": sk})}} for pk, sk in keys[start : start + 25]
            ]
            pending: dict[str, Any] = {self.name: requests}
            while pending:
                answer = self.client.batch_write_item(RequestItems=pending)
                pending = answer.get("UnprocessedItems") or {}


# A memory that exists and is not being deleted: the condition every write under it carries.
LIVE_MEMORY = "attribute_exists(PK) AND deleting = :false"
