"""A thin wrapper over one DynamoDB table: typed queries, paging and transactions."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from uhp_memories.adapters.dynamodb import idempotency
from uhp_memories.adapters.dynamodb.items import from_dynamo, to_dynamo

TRANSACTION_MAX_ITEMS = 100
BATCH_GET_MAX_KEYS = 100
BATCH_GET_ATTEMPTS = 5


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
        marker alone right after it commits (a crash between the two writes again, as without a key)."""
        if len(operations) > TRANSACTION_MAX_ITEMS:
            raise ValueError("a transaction holds at most 100 items")
        key = idempotency.pending()
        marked = key is not None and len(operations) < TRANSACTION_MAX_ITEMS
        items = [*operations, key.marker_op(operations)] if key is not None and marked else list(operations)
        try:
            self.client.transact_write_items(TransactItems=items)
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
        put: dict[str, Any] = {"TableName": self.name, "Item": to_dynamo(item)}
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
            self.client.delete_item(**kwargs)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise ConditionFailed(str(error)) from None
            raise

    def put(self, item: Mapping[str, Any], condition: str | None = None) -> None:
        if idempotency.pending() is not None:  # an idempotent request's write carries its marker
            self.transact([self.put_op(item, condition)])
            return
        kwargs: dict[str, Any] = {"TableName": self.name, "Item": to_dynamo(item)}
        if condition:
            kwargs["ConditionExpression"] = condition
        try:
            self.client.put_item(**kwargs)
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
            self.client.update_item(**kwargs)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise ConditionFailed(str(error)) from None
            raise

    def put_many(self, items: Sequence[Mapping[str, Any]]) -> None:
        """Put items with BatchWriteItem, 25 a call, unconditionally and outside any idempotent
        request's marker: for items whose every write is the same (memories' padding items)."""
        for start in range(0, len(items), 25):
            pending: dict[str, Any] = {
                self.name: [{"PutRequest": {"Item": to_dynamo(item)}} for item in items[start : start + 25]]
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
