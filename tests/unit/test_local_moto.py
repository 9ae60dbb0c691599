"""Local mode's faster moto DynamoDB (uhp_memories.local.moto_env.MOTO_DYNAMODB_SPEEDUPS, one patch
module each under uhp_memories.local.patches) answers exactly as moto does: queries on the table and
on its indexes, through puts, updates that move an item between index partitions, deletes, and
transactions that fail and roll back."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest

TABLE = "speed"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "test")
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    import boto3
    from moto import mock_aws

    from uhp_memories.local.moto_env import MOTO_DYNAMODB_SPEEDUPS
    from uhp_memories.local.patches import install_all, uninstall_all

    with mock_aws():
        install_all(MOTO_DYNAMODB_SPEEDUPS)
        client = boto3.client("dynamodb", region_name="eu-west-1")
        client.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK", "G", "GS")],
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by_g",
                    "KeySchema": [
                        {"AttributeName": "G", "KeyType": "HASH"},
                        {"AttributeName": "GS", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        try:
            yield client
        finally:
            # Another suite's moto session may still run in this process: leave no table behind,
            # and moto as it was (or as that session patched it).
            client.delete_table(TableName=TABLE)
            uninstall_all(MOTO_DYNAMODB_SPEEDUPS)


def every_item(client: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": TABLE}
    while True:
        page = client.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def query_all(client: Any, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while True:
        page = client.query(TableName=TABLE, **kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


SORT_KEY_CONDITIONS = [
    ("SK BETWEEN :a AND :b", {":a": "k1", ":b": "k4"}, lambda sk: "k1" <= sk <= "k4"),
    ("begins_with(SK, :a)", {":a": "k1"}, lambda sk: sk.startswith("k1")),
    ("SK = :a", {":a": "k3"}, lambda sk: sk == "k3"),
    ("SK < :a", {":a": "k2"}, lambda sk: sk < "k2"),
    ("SK <= :a", {":a": "k2"}, lambda sk: sk <= "k2"),
    ("SK > :a", {":a": "k7"}, lambda sk: sk > "k7"),
    ("SK >= :a", {":a": "k7"}, lambda sk: sk >= "k7"),
]


def check_queries(client: Any) -> None:
    items = every_item(client)
    for pk in ("p0", "p1", "p2", "p9"):
        got = query_all(client, KeyConditionExpression="PK = :v", ExpressionAttributeValues={":v": {"S": pk}}, Limit=3)
        want = sorted((i for i in items if i["PK"]["S"] == pk), key=lambda i: i["SK"]["S"])
        assert got == want
        # Sort key conditions, read from the partition's sort keys kept in order.
        for condition, values, keep in SORT_KEY_CONDITIONS:
            for forward in (True, False):
                got = query_all(
                    client, KeyConditionExpression=f"PK = :v AND {condition}", ScanIndexForward=forward, Limit=2,
                    ExpressionAttributeValues={":v": {"S": pk}, **{k: {"S": v} for k, v in values.items()}},
                )
                assert got == [i for i in (want if forward else want[::-1]) if keep(i["SK"]["S"])]
    for g in ("g0", "g1", "g2", "g9"):
        for forward in (True, False):
            got = query_all(
                client, IndexName="by_g", KeyConditionExpression="G = :v AND GS > :lo",
                ExpressionAttributeValues={":v": {"S": g}, ":lo": {"S": "s1"}}, ScanIndexForward=forward, Limit=4,
            )
            want = sorted(
                (i for i in items if i.get("G", {}).get("S") == g and "GS" in i and i["GS"]["S"] > "s1"),
                key=lambda i: (i["GS"]["S"], i["PK"]["S"], i["SK"]["S"]),
                reverse=not forward,
            )
            assert got == want


@pytest.mark.slow
def test_queries_answer_as_a_full_scan_through_writes_updates_deletes_and_failed_transactions(dynamodb: Any) -> None:
    client = dynamodb
    pick = random.Random(5)

    def key() -> dict[str, Any]:
        return {"PK": {"S": f"p{pick.randrange(3)}"}, "SK": {"S": f"k{pick.randrange(12)}"}}

    def put_op() -> dict[str, Any]:
        item = {**key(), "v": {"N": str(pick.randrange(100))}}
        if pick.random() < 0.8:
            item["G"] = {"S": f"g{pick.randrange(3)}"}
            item["GS"] = {"S": f"s{pick.randrange(4)}"}
        return {"Put": {"TableName": TABLE, "Item": item}}

    for step in range(300):
        action = pick.random()
        if action < 0.4:
            client.put_item(TableName=TABLE, Item=put_op()["Put"]["Item"])
        elif action < 0.6:
            client.update_item(
                TableName=TABLE, Key=key(), UpdateExpression="SET G = :g, GS = :s",
                ExpressionAttributeValues={":g": {"S": f"g{pick.randrange(3)}"}, ":s": {"S": f"s{pick.randrange(4)}"}},
            )
        elif action < 0.7:
            client.update_item(TableName=TABLE, Key=key(), UpdateExpression="REMOVE G, GS")
        elif action < 0.8:
            client.delete_item(TableName=TABLE, Key=key())
        else:
            operations = [put_op(), {"Update": {"TableName": TABLE, "Key": key(), "UpdateExpression": "SET G = :g",
                                                "ExpressionAttributeValues": {":g": {"S": "g2"}}}}]
            failing = pick.random() < 0.5
            if failing:  # a condition that cannot hold: nothing of the transaction may stay
                operations.append({"ConditionCheck": {"TableName": TABLE, "Key": {"PK": {"S": "p9"}, "SK": {"S": "x"}},
                                                      "ConditionExpression": "attribute_exists(PK)"}})
            keys = {(o.get("Put", {}).get("Item") or o.get("Update", {}).get("Key"))["SK"]["S"] for o in operations[:2]}
            same_item = len(keys) < 2 and operations[0]["Put"]["Item"]["PK"] == operations[1]["Update"]["Key"]["PK"]
            if same_item:
                continue
            before = every_item(client)
            if failing:
                with pytest.raises(client.exceptions.TransactionCanceledException):
                    client.transact_write_items(TransactItems=operations)
                after = every_item(client)
                assert sorted(map(repr, after)) == sorted(map(repr, before))
            else:
                client.transact_write_items(TransactItems=operations)
        if step % 10 == 0:
            check_queries(client)
    check_queries(client)


def test_item_reads_answer_the_json_moto_would_have_serialized(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.responses import DynamoResult

    fast = DynamoResult.execute_result
    compared: list[str] = []

    def both(self: Any, context: Any) -> Any:
        answer = fast(self, context)
        if context.operation_model.name in ("GetItem", "BatchGetItem", "Query"):
            status, _, body = fast.original(self, context)  # type: ignore[attr-defined]
            assert answer[0] == status
            assert json.loads(answer[2]) == json.loads(body)
            compared.append(context.operation_model.name)
        return answer

    monkeypatch.setattr(DynamoResult, "execute_result", both)
    client = dynamodb
    item = {
        "PK": {"S": "p0"}, "SK": {"S": "k0"}, "G": {"S": "g0"}, "GS": {"S": "s0"},
        "bytes": {"B": b"\x00\xff\x10"}, "n": {"N": "1.50"}, "flag": {"BOOL": False}, "none": {"NULL": True},
        "m": {"M": {"l": {"L": [{"S": "é ✓ \u0007"}, {"NS": ["1", "2"]}, {"BS": [b"a", b"b"]}, {"SS": ["x"]}]}}},
    }
    client.put_item(TableName=TABLE, Item=item)
    key = {"PK": item["PK"], "SK": item["SK"]}
    assert client.get_item(TableName=TABLE, Key=key)["Item"] == item
    assert "Item" not in client.get_item(TableName=TABLE, Key={"PK": {"S": "p0"}, "SK": {"S": "none"}})
    batch = client.batch_get_item(RequestItems={TABLE: {"Keys": [key, {"PK": {"S": "x"}, "SK": {"S": "y"}}]}})
    assert batch["Responses"][TABLE] == [item]
    assert not batch["UnprocessedKeys"]
    on_index = client.query(
        TableName=TABLE, IndexName="by_g", KeyConditionExpression="G = :g", ExpressionAttributeValues={":g": item["G"]}
    )
    assert on_index["Items"] == [item]
    assert sorted(set(compared)) == ["BatchGetItem", "GetItem", "Query"]


@pytest.mark.slow
def test_batch_reads_answer_as_moto_does_up_to_the_16_mb_limit(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each item is sized once, not twice: the same items answered, the same keys left unprocessed
    past 16 MB."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.responses import DynamoHandler

    client = dynamodb
    keys = []
    for n in range(45):  # 45 items of ~390 KB: more than one answer's 16 MB
        key = {"PK": {"S": f"big{n:02d}"}, "SK": {"S": "k"}}
        client.put_item(TableName=TABLE, Item={**key, "blob": {"S": chr(97 + n % 26) * 390_000}})
        keys.append(key)
    sized: list[int] = []
    size = Item.size
    monkeypatch.setattr(Item, "size", lambda item: sized.append(id(item)) or size(item))
    fast = client.batch_get_item(RequestItems={TABLE: {"Keys": keys}})
    assert len(sized) == len(set(sized))  # never the same item twice
    monkeypatch.setattr(DynamoHandler, "batch_get_item", DynamoHandler.batch_get_item.__wrapped__)
    slow = client.batch_get_item(RequestItems={TABLE: {"Keys": keys}})
    assert fast["Responses"] == slow["Responses"]
    assert fast["UnprocessedKeys"] == slow["UnprocessedKeys"]
    assert 0 < len(fast["Responses"][TABLE]) < len(keys)


def test_new_items_are_refused_past_the_item_limit_as_moto_refuses_them(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new item is sized once, not once per attribute: the same items stored, the same refused
    (ValidationException, past 405,000 bytes), by a put and by a transaction alike."""
    from botocore.exceptions import ClientError
    from moto.dynamodb.models.dynamo_type import Item, LimitedSizeDict

    client = dynamodb
    checks: list[str] = []
    check = LimitedSizeDict.__setitem__
    monkeypatch.setattr(LimitedSizeDict, "__setitem__", lambda d, k, v: checks.append(k) or check(d, k, v))

    def outcomes() -> list[str]:
        seen = []
        for n, spread in enumerate((1, 4, 40)):
            for total in (404_000, 406_000):  # the attributes' own bytes; names and keys add a few
                item = {"PK": {"S": f"p{n}-{total}"}, "SK": {"S": "k"}}
                item |= {f"a{i:02d}": {"S": "x" * (total // spread)} for i in range(spread)}
                for write in ("put", "transaction"):
                    item["SK"] = {"S": write}
                    try:
                        if write == "put":
                            client.put_item(TableName=TABLE, Item=item)
                        else:
                            client.transact_write_items(TransactItems=[{"Put": {"TableName": TABLE, "Item": item}}])
                        seen.append("stored")
                    except ClientError as error:
                        seen.append(error.response["Error"]["Code"] + ": " + error.response["Error"]["Message"])
        return seen

    fast = outcomes()
    assert not checks  # no per-attribute walk for a new item
    for item in every_item(client):
        client.delete_item(TableName=TABLE, Key={"PK": item["PK"], "SK": item["SK"]})
    monkeypatch.setattr(Item, "__init__", Item.__init__.__wrapped__)  # type: ignore[attr-defined]
    assert outcomes() == fast
    assert checks  # moto's own walk ran
    assert "stored" in fast  # some stored
    assert len(set(fast)) > 1  # and some refused


def test_each_response_class_is_listed_once_and_as_moto_lists_it(dynamodb: Any) -> None:
    import moto.core.responses as responses
    from moto.dynamodb.responses import DynamoHandler

    listed = responses.method_names_from_class(DynamoHandler)
    assert listed == responses.method_names_from_class.__wrapped__(DynamoHandler)  # type: ignore[attr-defined]
    assert {"batch_get_item", "query"} <= set(listed)
    assert responses.method_names_from_class(DynamoHandler) is listed  # kept, not listed again
    assert dynamodb.describe_table(TableName=TABLE)["Table"]["TableName"] == TABLE  # and calls still dispatch
