"""The write key at the table adapter (adapters/dynamodb/idempotency.py, table.py), on moto's DynamoDB:
the first transaction of a keyed request carries the marker, a single put or delete becomes one, a
transaction already at DynamoDB's 100 items puts its marker right after, and one whose marker is
taken fails whole. Over HTTP: tests/integration/test_idempotency.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from uhp_memories.adapters.dynamodb.idempotency import (
    MENTION_PREFIX,
    DynamoCachedResponses,
    WriteKey,
    WriteKeyTaken,
    writing_under,
)
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, MAIN_TABLE
from uhp_memories.adapters.dynamodb.table import ConditionFailed, DynamoTable

# Tables of their own (names and a region no local stage uses): in `make test`'s one process, moto's
# backends may already hold the integration suite's stage, which a nested mock shares.
REGION = "eu-north-1"
MAIN = "write-key-main"
IDEM = "write-key-idempotency"


@pytest.fixture
def tables() -> Iterator[tuple[DynamoTable, Any]]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(**MAIN_TABLE.create_table_kwargs(MAIN, with_stream=False))
        client.create_table(**IDEMPOTENCY_TABLE.create_table_kwargs(IDEM, with_stream=False))
        try:
            yield DynamoTable(client, MAIN), client
        finally:
            client.delete_table(TableName=MAIN)
            client.delete_table(TableName=IDEM)


def key(body: str = "{}") -> WriteKey:
    return WriteKey.of(IDEM, ["t", "user:a", "POST", "/v1/x", "k1"], body, 3600)


def items(client: Any, table: str) -> list[dict[str, Any]]:
    """The table's items; of the idempotency table's, the markers (the pointers: `pointers`)."""
    found = client.scan(TableName=table)["Items"]
    return [i for i in found if not i["id"]["S"].startswith(MENTION_PREFIX)] if table == IDEM else found


def pointers(client: Any) -> list[dict[str, Any]]:
    return [i for i in client.scan(TableName=IDEM)["Items"] if i["id"]["S"].startswith(MENTION_PREFIX)]


def item(n: int) -> dict[str, Any]:
    return {"PK": "T#t#M#hmem_" + "0" * 32, "SK": f"R#hrec_{n:032x}", "id": f"hrec_{n:032x}"}


def test_the_first_transaction_carries_the_marker_and_the_next_goes_without(tables: tuple[DynamoTable, Any]) -> None:
    table, client = tables
    with writing_under(key()) as write:
        table.transact([table.put_op(item(1))])
        assert write.committed
        table.put(item(2))  # a later write of the same request: no marker, no transaction
    (marker,) = items(client, IDEM)
    assert [v["S"] for v in marker["written"]["L"]] == ["hrec_" + "0" * 31 + "1", "hmem_" + "0" * 32]
    assert len(items(client, MAIN)) == 2


def test_a_second_attempt_fails_whole_on_the_marker(tables: tuple[DynamoTable, Any]) -> None:
    table, client = tables
    with writing_under(key()):
        table.put(item(1), "attribute_not_exists(PK)")
    with writing_under(key()), pytest.raises(WriteKeyTaken) as taken:
        table.transact([table.put_op(item(2)), table.put_op(item(3))])
    assert taken.value.details["written_ids"][0] == "hrec_" + "0" * 31 + "1"
    with writing_under(key()), pytest.raises(WriteKeyTaken):
        table.delete(item(1)["PK"], item(1)["SK"])
    assert len(items(client, MAIN)) == 1


def test_a_condition_of_the_write_itself_is_still_its_own(tables: tuple[DynamoTable, Any]) -> None:
    table, client = tables
    table.put(item(1))
    with writing_under(key()) as write, pytest.raises(ConditionFailed) as failed:
        table.transact([table.put_op(item(2)), table.put_op(item(1), "attribute_not_exists(PK)")])
    assert failed.value.failed == frozenset({1})
    assert not write.committed
    assert items(client, IDEM) == []


@pytest.mark.slow
def test_a_transaction_of_100_items_puts_its_marker_after(tables: tuple[DynamoTable, Any]) -> None:
    table, client = tables
    with writing_under(key()) as write:
        table.transact([table.put_op(item(n)) for n in range(100)])
        assert write.committed
    assert len(items(client, MAIN)) == 100
    (marker,) = items(client, IDEM)
    assert len(marker["written"]["L"]) == 100  # at most 100 ids are kept


def test_the_marker_carries_a_pointer_per_record_id_erase_takes_out(tables: tuple[DynamoTable, Any]) -> None:
    """The marker's pointers ride in its transaction (one call), one per erasable id, scoped to the
    tenant; erase finds the marker by them, takes the id out and leaves the marker."""
    table, client = tables
    sent: list[str] = []
    client.meta.events.register("before-call.dynamodb", lambda model, **_: sent.append(model.name))
    with writing_under(key()):
        table.transact([table.put_op(item(1)), table.put_op(item(2))])
    assert sent == ["TransactWriteItems"]
    assert sorted(p["mentioned"]["S"] for p in pointers(client)) == [f"t#hrec_{n:032x}" for n in (1, 2)]
    assert DynamoCachedResponses(client, IDEM).purge_mentioning("other", [f"hrec_{1:032x}"]) == 0
    assert len(pointers(client)) == 2  # another tenant's erase reaches nothing
    sent.clear()
    assert DynamoCachedResponses(client, IDEM).purge_mentioning("t", [f"hrec_{1:032x}"]) == 0  # no answer went
    assert sent == ["Query", "GetItem", "UpdateItem", "BatchWriteItem"]  # found by the id, never a Scan
    (marker,) = items(client, IDEM)
    assert [v["S"] for v in marker["written"]["L"]] == ["hmem_" + "0" * 32, f"hrec_{2:032x}"]
    assert [p["mentioned"]["S"] for p in pointers(client)] == [f"t#hrec_{2:032x}"]
