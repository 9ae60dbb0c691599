"""The DynamoDB stream feeds the recall index end to end: records written through the services into a
table on moto (with its stream, as deployed), the stream read as Lambda reads it, handed to the indexer
function, and the index searched. The writes' own indexing after commit is off here, so whatever the
index holds came through the stream: the backstop catches up inserts, revisions (the old version closed)
and erases (the documents gone). Local mode has no stream (docs/decisions.md), so this is the one place
the path runs whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

import functions.indexer.handler as indexer
from uhp_memories import bootstrap
from uhp_memories.adapters.dynamodb.schema import MAIN_TABLE
from uhp_memories.domain.model import Caller
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import SearchRequest
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.local.embedded import EmbeddedSearchIndex
from uhp_memories.local.hashing import HashingEmbedder
from uhp_memories.settings import Settings

pytestmark = pytest.mark.slow

ALICE = Caller(tenant="acme", principal="user:alice")
TABLE = "uhp-memories-stream-test"


@pytest.fixture
def stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "x")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**MAIN_TABLE.create_table_kwargs(TABLE, with_stream=True))
        stream = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        settings = Settings(table_name=TABLE)
        embedder = HashingEmbedder(64)
        engine = RecallEngine(EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=64), embedder)
        # The writer's own indexing after commit is off: only the stream can bring the index in step.
        writer = bootstrap.build(settings, dynamodb, None, recall_engine=lambda: None)
        before = bootstrap.install(bootstrap.build(settings, dynamodb, None, recall_engine=lambda: engine))
        yield {"writer": writer, "engine": engine, "stream": stream, "position": {}}
        bootstrap.install(before)


def deliver(stage: dict[str, Any]) -> dict[str, Any]:
    """What the stream holds since the last delivery, handed to the indexer as Lambda's event source
    hands it (one batch per shard); the indexer's answer."""
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    records = []
    for shard in streams.describe_stream(StreamArn=stage["stream"])["StreamDescription"]["Shards"]:
        shard_id = shard["ShardId"]
        after = stage["position"].get(shard_id)
        kwargs: dict[str, Any] = {"StreamArn": stage["stream"], "ShardId": shard_id}
        kwargs.update({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after} if after
                      else {"ShardIteratorType": "TRIM_HORIZON"})
        iterator = streams.get_shard_iterator(**kwargs)["ShardIterator"]
        for record in streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]:
            records.append({**record, "eventSourceARN": stage["stream"]})
            stage["position"][shard_id] = record["dynamodb"]["SequenceNumber"]
    answer = indexer.lambda_handler({"Records": records}, None)
    assert records, "the stream carried nothing"
    return answer


def found(stage: dict[str, Any], memory_id: str, text: str, include: str = "active") -> list[str]:
    request = SearchRequest(tenant="acme", memory_id=memory_id, text=text, include=include)
    return [hit.record_id for hit in rank(stage["engine"].index, request)]


def test_the_stream_brings_the_index_in_step_with_writes_revisions_and_erases(stage: dict[str, Any]) -> None:
    writer = stage["writer"]
    memory_id = writer.memories.create(ALICE, name="accounts").memory.id
    first = writer.records.remember(ALICE, memory_id, RecordInput("fact", "Acme renews in March", {})).record
    other = writer.records.remember(ALICE, memory_id, RecordInput("fact", "Globex prefers email", {})).record
    assert found(stage, memory_id, "acme") == []  # nothing indexed at commit

    assert deliver(stage) == {"batchItemFailures": []}
    assert found(stage, memory_id, "acme") == [first.id]
    assert found(stage, memory_id, "globex") == [other.id]

    revised = writer.records.revise(ALICE, memory_id, first.id, {"content": "Acme renews in April"}).record
    deliver(stage)
    assert found(stage, memory_id, "acme") == [revised.id]  # the old version closed, the new one open
    assert set(found(stage, memory_id, "acme", include="all")) == {first.id, revised.id}

    # Erase's step that deletes the items, without its step that clears the index: the REMOVEs do it.
    targets = writer.removal.resolve_erase_targets("acme", memory_id, [other.id], None)
    writer.removal.erase_records("acme", targets)
    deliver(stage)
    assert found(stage, memory_id, "globex", include="all") == []  # REMOVE took its document away
    assert found(stage, memory_id, "acme") == [revised.id]
