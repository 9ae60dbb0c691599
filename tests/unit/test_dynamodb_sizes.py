"""DynamoDB's size limits, enforced before AWS (adapters/dynamodb/sizes.py, table.py): the size
arithmetic against known sizes, and moto's DynamoDB (which enforces none of them) seeing nothing of a
refused write. Over HTTP: tests/integration/test_observe.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from uhp_memories.adapters.dynamodb import sizes
from uhp_memories.adapters.dynamodb.items import to_dynamo
from uhp_memories.adapters.dynamodb.schema import MAIN_TABLE
from uhp_memories.adapters.dynamodb.table import DynamoTable, WriteTooLarge, check_item
from uhp_memories.api.errors import status_of

REGION = "eu-north-1"
MAIN = "sizes-main"


def test_strings_count_name_and_utf8_bytes() -> None:
    assert sizes.item_size({"id": {"S": "abc"}}) == 2 + 3
    assert sizes.item_size({"é": {"S": "日本"}}) == 2 + 6


def test_an_item_of_strings_and_a_number() -> None:
    # By AWS's rules: the names (62 bytes), the strings (70) and 2099 (two digit pairs, plus 1: 3).
    item = {
        "itemType": {"S": "SLOT"}, "id": {"S": "abc1231"}, "hostName": {"S": "Harry Mason"},
        "timeSlot": {"S": "February 23, 1999"}, "slotStatus": {"S": "OPEN"},
        "createdAt": {"S": "February 1, 1999"}, "updatedAt": {"S": "February 1, 1999"},
        "expiresAt": {"N": "2099"},
    }
    assert sizes.item_size(item) == 141


@pytest.mark.parametrize(
    ("number", "size"),
    [("0", 1), ("7", 2), ("12", 2), ("123", 3), ("1200", 2), ("0.0012", 2), ("-123.45", 4), ("1E+5", 2),
     ("9" * 38, 20)],
)
def test_numbers_are_a_byte_per_two_significant_digits_plus_one(number: str, size: int) -> None:
    assert sizes.number_size(number) == size


def test_binary_booleans_nulls_lists_maps_and_sets() -> None:
    assert sizes.value_size({"B": b"\x00" * 10}) == 10  # raw bytes, not their base64
    assert sizes.value_size({"BOOL": True}) == 1
    assert sizes.value_size({"NULL": True}) == 1
    assert sizes.value_size({"L": []}) == 3
    assert sizes.value_size({"M": {}}) == 3
    assert sizes.value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert sizes.value_size({"M": {"k": {"S": "v"}, "n": {"M": {}}}}) == 3 + (1 + 1 + 1) + (1 + 1 + 3)
    assert sizes.value_size({"SS": ["a", "bc"]}) == 3
    # What boto3's serializer sends is measured as it is sent.
    assert sizes.item_size(to_dynamo({"a": "xy", "b": 12, "c": [1, "z"], "d": {"e": False}})) == (
        (1 + 2) + (1 + 2) + (1 + 3 + 1 + 2 + 1 + 1) + (1 + 3 + 1 + 1 + 1)
    )


def test_operations_count_what_the_request_carries() -> None:
    put = {"Put": {"Item": {"PK": {"S": "p"}, "SK": {"S": "s"}, "v": {"S": "x" * 10}}}}
    update = {"Update": {"Key": {"PK": {"S": "p"}, "SK": {"S": "s"}}, "UpdateExpression": "SET n = :n",
                         "ExpressionAttributeValues": {":n": {"N": "5"}}}}
    check = {"ConditionCheck": {"Key": {"PK": {"S": "p"}, "SK": {"S": "s"}}, "ConditionExpression": "x"}}
    assert sizes.operation_size(put) == 3 + 3 + 11
    assert sizes.operation_size(update) == 6 + 2
    assert sizes.transaction_size([put, update, check]) == 17 + 8 + 6


@pytest.fixture
def table() -> Iterator[tuple[DynamoTable, Any]]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(**MAIN_TABLE.create_table_kwargs(MAIN, with_stream=False))
        try:
            yield DynamoTable(client, MAIN), client
        finally:
            client.delete_table(TableName=MAIN)


def item(n: int, payload_bytes: int) -> dict[str, Any]:
    return {"PK": "T#t#M#m", "SK": f"R#{n:04}", "body": "x" * payload_bytes}


def stored(client: Any) -> int:
    pages = client.get_paginator("scan").paginate(TableName=MAIN, Select="COUNT")
    return sum(page["Count"] for page in pages)


def test_an_item_over_400_kb_is_refused_before_dynamodb(table: tuple[DynamoTable, Any]) -> None:
    dynamo, client = table
    overhead = sizes.item_size(to_dynamo(item(0, 0)))
    check_item(to_dynamo(item(1, sizes.ITEM_MAX_BYTES - overhead)))  # 400 KB exactly: DynamoDB takes it
    dynamo.put(item(1, 300 * 1024))  # (moto refuses items over 405,000 bytes, a little under AWS's limit)
    with pytest.raises(WriteTooLarge) as refused:
        dynamo.put(item(2, sizes.ITEM_MAX_BYTES - overhead + 1))
    with pytest.raises(WriteTooLarge):
        dynamo.transact([dynamo.put_op(item(3, 10)), dynamo.put_op(item(4, sizes.ITEM_MAX_BYTES))])
    with pytest.raises(WriteTooLarge):
        dynamo.put_many([item(5, 10), item(6, sizes.ITEM_MAX_BYTES)])
    assert stored(client) == 1  # moto would have kept every one of them
    assert status_of(refused.value.code) == 413
    assert refused.value.code == "request_too_large"
    assert "409600" in refused.value.message


def test_a_transaction_over_4_mb_or_100_items_is_refused_before_dynamodb(table: tuple[DynamoTable, Any]) -> None:
    dynamo, client = table
    eleven = [dynamo.put_op(item(n, 390 * 1024)) for n in range(11)]  # 4.19 MB together, each under 400 KB
    assert sizes.transaction_size(eleven) > sizes.TRANSACTION_MAX_BYTES
    with pytest.raises(WriteTooLarge, match="4194304"):
        dynamo.transact(eleven)
    with pytest.raises(WriteTooLarge, match="at most 100"):
        dynamo.transact([dynamo.put_op(item(n, 1)) for n in range(101)])
    assert stored(client) == 0
    dynamo.transact(eleven[:10])  # 3.8 MB: DynamoDB takes it
    dynamo.transact([dynamo.put_op(item(100 + n, 1)) for n in range(100)])
    assert stored(client) == 110
