"""Contract tests: one suite per port, run against every adapter (in-memory fakes, DynamoDB on moto)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from uhp_memories.adapters.inmemory import InMemoryMemoryRepository, InMemoryRecordRepository
from uhp_memories.ports import MemoryRepository, RecordRepository


@dataclass
class Repositories:
    kind: str
    memories: MemoryRepository
    records: RecordRepository


@pytest.fixture(params=["inmemory", "dynamodb"])
def repos(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Repositories]:
    if request.param == "inmemory":
        memories = InMemoryMemoryRepository()
        yield Repositories("inmemory", memories, InMemoryRecordRepository(memories))
        return

    # Credentials and region before any boto3 client exists, so nothing can reach real AWS.
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_SECURITY_TOKEN", "testing"),
        ("AWS_SESSION_TOKEN", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)
    import boto3
    from moto import mock_aws

    from uhp_memories.adapters.dynamodb import records as dynamo_records
    from uhp_memories.adapters.dynamodb.memories import DynamoMemoryRepository
    from uhp_memories.adapters.dynamodb.records import DynamoRecordRepository
    from uhp_memories.adapters.dynamodb.schema import MAIN_TABLE
    from uhp_memories.adapters.dynamodb.table import DynamoTable

    # Tiny query pages, so every scan here crosses DynamoDB page boundaries (LastEvaluatedKey).
    monkeypatch.setattr(dynamo_records, "SCAN_PAGE", 2)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        # A table of its own: another suite's moto session may still be running in this process.
        name = "contract-" + uuid.uuid4().hex[:12]
        client.create_table(**MAIN_TABLE.create_table_kwargs(name))
        table = DynamoTable(client, name)
        yield Repositories("dynamodb", DynamoMemoryRepository(table), DynamoRecordRepository(table))
