"""The composition root: builds the services once per process from settings and injected clients.

A deployed Lambda builds its container on first use from the environment; local mode and tests
install their own (over moto) with `install`, so no state hides in import-time singletons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uhp_memories.adapters.dynamodb.apikeys import DynamoKeyRepository
from uhp_memories.adapters.dynamodb.files import DynamoFileRepository
from uhp_memories.adapters.dynamodb.harnesses import DynamoAttachmentRepository
from uhp_memories.adapters.dynamodb.memories import DynamoMemoryRepository
from uhp_memories.adapters.dynamodb.records import DynamoRecordRepository
from uhp_memories.adapters.dynamodb.table import DynamoTable
from uhp_memories.adapters.s3 import S3ObjectStore
from uhp_memories.adapters.system import RandomIds, SystemClock
from uhp_memories.domain.context import Ports
from uhp_memories.domain.files import FileService
from uhp_memories.domain.grants import GrantService
from uhp_memories.domain.harnesses import HarnessService
from uhp_memories.domain.memories import MemoryService
from uhp_memories.domain.records import RecordService
from uhp_memories.settings import Settings


@dataclass
class Container:
    settings: Settings
    dynamodb: Any
    ports: Ports
    memories: MemoryService
    grants: GrantService
    records: RecordService
    harnesses: HarnessService
    files: FileService
    keys: DynamoKeyRepository


def build(settings: Settings, dynamodb_client: Any, s3_client: Any, s3_presign_client: Any | None = None) -> Container:
    table = DynamoTable(dynamodb_client, settings.table_name)
    objects = S3ObjectStore(s3_client, settings.files_bucket, s3_presign_client)
    ports = Ports(
        memories=DynamoMemoryRepository(table),
        records=DynamoRecordRepository(table),
        clock=SystemClock(),
        ids=RandomIds(),
    )
    files = FileService(ports, objects, DynamoFileRepository(table))
    return Container(
        settings=settings,
        dynamodb=dynamodb_client,
        ports=ports,
        memories=MemoryService(ports, objects),
        grants=GrantService(ports),
        records=RecordService(ports, files),
        harnesses=HarnessService(ports, DynamoAttachmentRepository(table)),
        files=files,
        keys=DynamoKeyRepository(dynamodb_client, settings.keys_table_name),
    )


_container: Container | None = None


def install(container: Container | None) -> None:
    """Use this container for every handler in the process (local mode, tests); None resets."""
    global _container
    _container = container


def container() -> Container:
    global _container
    if _container is None:
        import boto3  # deferred: a cold start pays for the clients only when a request needs them
        from botocore.config import Config

        settings = Settings.from_env()
        _container = build(
            settings,
            boto3.client("dynamodb", region_name=settings.region),
            boto3.client("s3", region_name=settings.region, config=Config(signature_version="s3v4")),
        )
    return _container
