"""Contract tests: one suite per port, run against every adapter (the in-memory fakes of tests/fakes,
DynamoDB, S3 on moto). Each fixture here is parametrized over the adapters of one port or of the ports
that share one table; a suite's tests take the fixture and so run once per adapter."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import pytest

from tests.fakes import (
    InMemoryAttachmentRepository,
    InMemoryCachedResponses,
    InMemoryFileRepository,
    InMemoryJobRepository,
    InMemoryKeyRepository,
    InMemoryMemoryRepository,
    InMemoryObjectStore,
    InMemoryPathRepository,
    InMemoryPinRepository,
    InMemoryPlacementRepository,
    InMemoryQueryRepository,
    InMemoryRecordRepository,
    InMemoryRunRepository,
    InMemoryScheduleRepository,
    InMemoryTypeRepository,
)
from uhp_memories.domain.access.ports import KeyRepository
from uhp_memories.domain.agents.ports import AttachmentRepository, PinRepository, PlacementRepository
from uhp_memories.domain.consolidation.ports import RunRepository, ScheduleRepository
from uhp_memories.domain.files.ports import FileRepository, ObjectStore, PathRepository
from uhp_memories.domain.jobs import JobRepository
from uhp_memories.domain.memories.ports import MemoryRepository
from uhp_memories.domain.queries.ports import QueryRepository
from uhp_memories.domain.records.ports import RecordRepository
from uhp_memories.domain.removal.ports import CachedResponses
from uhp_memories.domain.types.ports import TypeRepository

REGION = "us-east-1"


class PathStore(PathRepository, Protocol):
    """The path items and change journal (domain/files/tree.py's PathRepository), with what erase and a
    refused write use: who holds a set of paths, clearing the journal, freeing a chain's paths."""

    def holders(self, tenant: str, memory_id: str, paths: Sequence[str]) -> dict[str, str]:
        ...

    def clear_journal(self, tenant: str, memory_id: str) -> None:
        ...

    def release(self, tenant: str, memory_id: str, chain_id: str, paths: Sequence[str]) -> None:
        ...


@dataclass
class Repositories:
    """The repositories of the main table, built over one store, as the composition root builds them."""

    kind: str
    memories: MemoryRepository
    records: RecordRepository
    attachments: AttachmentRepository
    queries: QueryRepository
    files: FileRepository
    jobs: JobRepository
    runs: RunRepository
    paths: PathStore  # reads what `records` writes of a memory's files
    pins: PinRepository
    placements: PlacementRepository
    types: TypeRepository
    schedules: ScheduleRepository


@contextmanager
def moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Credentials and region before any boto3 client exists, so nothing can reach real AWS.
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_SECURITY_TOKEN", "testing"),
        ("AWS_SESSION_TOKEN", "testing"),
        ("AWS_DEFAULT_REGION", REGION),
    ):
        monkeypatch.setenv(name, value)
    from moto import mock_aws

    with mock_aws():
        yield


def unique_name(purpose: str) -> str:
    # A table or bucket of its own: another suite's moto session may still be running in this process.
    return f"contract-{purpose}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["inmemory", "dynamodb"])
def repos(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Repositories]:
    if request.param == "inmemory":
        memories = InMemoryMemoryRepository()
        yield Repositories(
            "inmemory",
            memories,
            InMemoryRecordRepository(memories),
            InMemoryAttachmentRepository(memories),
            InMemoryQueryRepository(memories),
            InMemoryFileRepository(),
            InMemoryJobRepository(memories),
            InMemoryRunRepository(memories),
            InMemoryPathRepository(memories),
            InMemoryPinRepository(memories),
            InMemoryPlacementRepository(),
            InMemoryTypeRepository(),
            InMemoryScheduleRepository(memories),
        )
        return

    with moto(monkeypatch):
        import boto3

        from uhp_memories.adapters.dynamodb import records as dynamo_records
        from uhp_memories.adapters.dynamodb.files import DynamoFileRepository
        from uhp_memories.adapters.dynamodb.harnesses import DynamoAttachmentRepository
        from uhp_memories.adapters.dynamodb.jobs import DynamoJobRepository
        from uhp_memories.adapters.dynamodb.memories import DynamoMemoryRepository
        from uhp_memories.adapters.dynamodb.paths import DynamoPathRepository
        from uhp_memories.adapters.dynamodb.prime import DynamoPinRepository, DynamoPlacementRepository
        from uhp_memories.adapters.dynamodb.queries import DynamoQueryRepository
        from uhp_memories.adapters.dynamodb.records import DynamoRecordRepository
        from uhp_memories.adapters.dynamodb.runs import DynamoRunRepository
        from uhp_memories.adapters.dynamodb.schedules import DynamoScheduleRepository
        from uhp_memories.adapters.dynamodb.schema import MAIN_TABLE
        from uhp_memories.adapters.dynamodb.table import DynamoTable
        from uhp_memories.adapters.dynamodb.types import DynamoTypeRepository

        # Tiny query pages, so every scan here crosses DynamoDB page boundaries (LastEvaluatedKey).
        monkeypatch.setattr(dynamo_records, "SCAN_PAGE", 2)
        client = boto3.client("dynamodb", region_name=REGION)
        name = unique_name("main")
        client.create_table(**MAIN_TABLE.create_table_kwargs(name))
        table = DynamoTable(client, name)
        yield Repositories(
            "dynamodb",
            DynamoMemoryRepository(table),
            DynamoRecordRepository(table),
            DynamoAttachmentRepository(table),
            DynamoQueryRepository(table),
            DynamoFileRepository(table),
            DynamoJobRepository(table),
            DynamoRunRepository(table),
            DynamoPathRepository(table),
            DynamoPinRepository(table),
            DynamoPlacementRepository(table),
            DynamoTypeRepository(table),
            DynamoScheduleRepository(table),
        )


@pytest.fixture(params=["inmemory", "dynamodb"])
def keys(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyRepository]:
    if request.param == "inmemory":
        yield InMemoryKeyRepository()
        return
    with moto(monkeypatch):
        import boto3

        from uhp_memories.adapters.dynamodb.apikeys import DynamoKeyRepository
        from uhp_memories.adapters.dynamodb.schema import KEYS_TABLE

        client = boto3.client("dynamodb", region_name=REGION)
        name = unique_name("keys")
        client.create_table(**KEYS_TABLE.create_table_kwargs(name))
        yield DynamoKeyRepository(client, name)


@pytest.fixture(params=["inmemory", "s3"])
def objects(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[ObjectStore]:
    if request.param == "inmemory":
        yield InMemoryObjectStore()
        return
    with moto(monkeypatch):
        import boto3
        from botocore.config import Config

        from uhp_memories.adapters.s3 import S3ObjectStore

        client = boto3.client("s3", region_name=REGION, config=Config(signature_version="s3v4"))
        bucket = unique_name("files")
        client.create_bucket(Bucket=bucket)
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        yield S3ObjectStore(client, bucket)


@dataclass
class KeptResponses:
    """The kept idempotent responses, and how a test plants one (as a request answered would)."""

    responses: CachedResponses
    keep: Callable[[str, str, str], None]  # (tenant, key, data)
    count: Callable[[], int]


@pytest.fixture(params=["inmemory", "dynamodb"])
def kept(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeptResponses]:
    if request.param == "inmemory":
        fake = InMemoryCachedResponses()
        yield KeptResponses(fake, fake.keep, lambda: len(fake.responses))
        return
    with moto(monkeypatch):
        import boto3
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

        from uhp_memories.adapters.dynamodb.idempotency import (
            MENTION_PREFIX,
            DynamoCachedResponses,
            PackedDynamoDBPersistenceLayer,
        )
        from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE

        client = boto3.client("dynamodb", region_name=REGION)
        name = unique_name("idempotency")
        client.create_table(**IDEMPOTENCY_TABLE.create_table_kwargs(name))
        store = PackedDynamoDBPersistenceLayer(table_name=name, boto3_client=client)
        store.configure(IdempotencyConfig(event_key_jmespath="key", expires_after_seconds=3600), "contract")

        def keep(tenant: str, key: str, data: str) -> None:
            # As Powertools' persistence layer keeps a request's answer once it completed (the server's own
            # store: packed, with the pointers erase finds it by).
            store.save_success({"key": key, "requestContext": {"authorizer": {"tenant": tenant}}}, json.loads(data)
                               if data.startswith("{") else {"body": data})

        def count() -> int:  # the kept answers, not the pointers beside them
            return int(client.scan(TableName=name, Select="COUNT", FilterExpression="NOT begins_with(id, :m)",
                                   ExpressionAttributeValues={":m": {"S": MENTION_PREFIX}})["Count"])

        yield KeptResponses(DynamoCachedResponses(client, name), keep, count)
