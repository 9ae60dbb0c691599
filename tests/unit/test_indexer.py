"""The DynamoDB Streams indexer (functions/indexer/handler.py): synthetic stream events of the main
table against the embedded engine with a hashing embedder, installed as the handler's container."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import count
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.indexer import handler
from tests.fakes.titan import FakeTitan
from tests.lambda_env import run_like_lambda
from uhp_memories import bootstrap
from uhp_memories.adapters.bedrock.embedder import TitanEmbedder, client_config
from uhp_memories.adapters.dynamodb.items import derived_items, grant_item, memory_item, record_item, to_dynamo
from uhp_memories.adapters.dynamodb.schema import MAIN_TABLE
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import SearchRequest
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.records.model import RecordInput, RecordVersion
from uhp_memories.local.embedded import EmbeddedSearchIndex
from uhp_memories.local.hashing import HashingEmbedder
from uhp_memories.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
TENANT = "acme"
MEMORY = "hmem_" + "a" * 32
OTHER_MEMORY = "hmem_" + "b" * 32
SECRET = "the vault code is 7741"  # content that must never reach a log line


class CountingEmbedder(HashingEmbedder):
    """Counts the texts it embeds; refuses the texts it is told to."""

    def __init__(self, dimensions: int = 64) -> None:
        super().__init__(dimensions)
        self.embedded: list[str] = []
        self.refused: set[str] = set()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        for text in texts:
            if text in self.refused:
                raise RuntimeError("the model refused")
        self.embedded += list(texts)
        return super().embed(texts)


class SpyEngine(RecallEngine):
    """The real engine, recording each call the indexer makes."""

    def __init__(self, index: EmbeddedSearchIndex, embedder: CountingEmbedder) -> None:
        super().__init__(index, embedder)
        self.calls: list[tuple[str, Any]] = []
        self.failing_erase = False

    def index_versions(self, versions: Sequence[RecordVersion], *, reuse_all: bool = False) -> None:
        self.calls.append(("index", ([v.id for v in versions], reuse_all)))
        super().index_versions(versions, reuse_all=reuse_all)

    def erase(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        self.calls.append(("erase", (tenant, memory_id, list(record_ids))))
        if self.failing_erase:
            raise RuntimeError("the domain is busy")
        super().erase(tenant, memory_id, record_ids)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def engine(embedder: CountingEmbedder) -> Iterator[SpyEngine]:
    index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    engine = SpyEngine(index, embedder)
    before = bootstrap.install(bootstrap.build(Settings(), None, None, recall_engine=lambda: engine))
    yield engine
    bootstrap.install(before)
    index.close()


# -- synthetic stream records ----------------------------------------------------------------

_ids = count(1)
_sequence = count(100)


def version(content: Any = "Acme renews in March.", memory_id: str = MEMORY, **changes: Any) -> RecordVersion:
    n = next(_ids)
    base = RecordVersion(
        tenant=TENANT,
        memory_id=memory_id,
        id=f"hrec_{n:032x}",
        chain_id=f"hrec_{n:032x}",
        version=1,
        type="fact",
        content=content,
        attributes={"account": "acme"},
        status="active",
        supersedes=None,
        superseded_by=None,
        valid_from=None,
        valid_to=None,
        written_at=f"2026-10-01T17:02:{n % 60:02d}.000Z",
        invalidated_at=None,
        written_by={"principal": "user:alice"},
    )
    return base.evolve(**changes)


def closed(record: RecordVersion, status: str = "forgotten") -> RecordVersion:
    return record.evolve(status=status, invalidated_at="2026-10-02T00:00:00.000Z")


def stream_record(
    event: str, new: dict[str, Any] | None = None, old: dict[str, Any] | None = None, *, sequence: bool = True
) -> dict[str, Any]:
    item = new or old or {}
    data: dict[str, Any] = {
        "ApproximateCreationDateTime": 1790000000,
        "Keys": to_dynamo({"PK": item.get("PK"), "SK": item.get("SK")}),
        "SizeBytes": 512,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if sequence:
        data["SequenceNumber"] = f"{next(_sequence):021d}"
    if new is not None:
        data["NewImage"] = to_dynamo(new)
    if old is not None:
        data["OldImage"] = to_dynamo(old)
    return {
        "eventID": f"event-{next(_sequence)}",
        "eventName": event,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "eu-west-1",
        "dynamodb": data,
        "eventSourceARN": "arn:aws:dynamodb:eu-west-1:111111111111:table/main/stream/2026-10-01T00:00:00.000",
    }


def inserted(record: RecordVersion) -> dict[str, Any]:
    return stream_record("INSERT", new=record_item(record))


def modified(before: RecordVersion, after: RecordVersion) -> dict[str, Any]:
    return stream_record("MODIFY", new=record_item(after), old=record_item(before))


def removed(record: RecordVersion) -> dict[str, Any]:
    return stream_record("REMOVE", old=record_item(record))


def run(*records: dict[str, Any]) -> list[str]:
    """The handler on one batch; the sequence numbers it reports as failed."""
    answer = handler.lambda_handler({"Records": list(records)}, None)
    assert set(answer) == {"batchItemFailures"}
    return [failure["itemIdentifier"] for failure in answer["batchItemFailures"]]


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every log record in full: message, arguments and extra fields."""
    return " ".join(repr(vars(record)) for record in caplog.records)


def seq(record: dict[str, Any]) -> str:
    return record["dynamodb"]["SequenceNumber"]


def found(engine: RecallEngine, text: str, include: str = "active", memory_id: str = MEMORY) -> list[str]:
    hits = rank(engine.index, SearchRequest(tenant=TENANT, memory_id=memory_id, text=text, include=include))
    return [hit.record_id for hit in hits]


# -- INSERT and MODIFY -----------------------------------------------------------------------


def test_inserted_records_are_indexed_in_one_call_per_batch(engine: SpyEngine) -> None:
    first, second = version("Acme renews in March."), version("Globex churned in May.", memory_id=OTHER_MEMORY)

    assert run(inserted(first), inserted(second)) == []

    assert found(engine, "renews") == [first.id]
    assert found(engine, "churned", memory_id=OTHER_MEMORY) == [second.id]
    assert engine.calls == [("index", ([first.id, second.id], True))]


def test_a_version_indexed_after_its_commit_is_not_embedded_again(
    engine: SpyEngine, embedder: CountingEmbedder
) -> None:
    record = version("Acme renews in March.")
    engine.index_versions([record])  # what RecordService did after the commit
    embedder.embedded.clear()

    assert run(inserted(record)) == []

    assert embedder.embedded == []
    assert found(engine, "renews") == [record.id]


def test_a_modify_closes_the_version_and_keeps_its_vector(engine: SpyEngine, embedder: CountingEmbedder) -> None:
    record = version("Acme renews in March.")
    run(inserted(record))
    embedder.embedded.clear()

    assert run(modified(record, closed(record))) == []

    assert found(engine, "renews") == []
    assert found(engine, "renews", include="all") == [record.id]
    assert engine.index.get(TENANT, MEMORY, record.id).status == "forgotten"
    assert embedder.embedded == []


def test_a_revision_indexes_the_new_version_and_closes_the_old_one(engine: SpyEngine) -> None:
    old = version("Acme renews in March.")
    new = version("Acme renews in April.", chain_id=old.chain_id, version=2, supersedes=old.id)
    run(inserted(old))

    # One transaction: the new version's INSERT, the old one's MODIFY.
    assert run(inserted(new), modified(old, closed(old, "superseded").evolve(superseded_by=new.id))) == []

    assert found(engine, "renews") == [new.id]
    assert sorted(found(engine, "renews", include="all")) == sorted([old.id, new.id])


def test_a_replayed_open_image_never_reopens_a_closed_version(engine: SpyEngine) -> None:
    record = version()
    run(inserted(record), modified(record, closed(record)))

    assert run(inserted(record)) == []  # the stream replayed from its start (TRIM_HORIZON)

    assert engine.index.get(TENANT, MEMORY, record.id).status == "forgotten"


def test_file_and_empty_contents_are_indexed_without_failing(engine: SpyEngine) -> None:
    file_record = version({"file": {"id": "file_" + "c" * 32, "name": "contract.pdf", "bytes": 10, "version": "v1"}})
    empty = version("   ")

    assert run(inserted(file_record), inserted(empty)) == []

    assert found(engine, "contract") == [file_record.id]
    assert engine.index.get(TENANT, MEMORY, empty.id) is not None


# -- REMOVE ----------------------------------------------------------------------------------


def test_a_removed_record_leaves_the_index(engine: SpyEngine) -> None:
    kept, erased = version("Acme renews in March."), version("Acme renews with a discount.")
    run(inserted(kept), inserted(erased))

    assert run(removed(erased)) == []

    assert engine.index.get(TENANT, MEMORY, erased.id) is None
    assert found(engine, "renews", include="all") == [kept.id]
    assert engine.calls[-1] == ("erase", (TENANT, MEMORY, [erased.id]))


def test_removals_are_grouped_by_memory(engine: SpyEngine) -> None:
    a, b, c = version(), version(), version(memory_id=OTHER_MEMORY)
    run(inserted(a), inserted(b), inserted(c))
    engine.calls.clear()

    assert run(removed(a), removed(c), removed(b)) == []

    assert engine.calls == [
        ("erase", (TENANT, MEMORY, [a.id, b.id])),
        ("erase", (TENANT, OTHER_MEMORY, [c.id])),
    ]


def test_a_late_insert_undone_by_the_removal_that_follows_it(engine: SpyEngine) -> None:
    """Erase removes documents before it deletes the items: a lagging INSERT put back in the same
    batch as the item's REMOVE ends removed, and is not embedded for nothing."""
    record = version(SECRET)

    assert run(inserted(record), modified(record, closed(record)), removed(closed(record))) == []

    assert engine.index.get(TENANT, MEMORY, record.id) is None
    assert [name for name, _ in engine.calls] == ["erase"]


def test_a_removal_without_an_old_image_is_known_by_its_keys(engine: SpyEngine) -> None:
    record = version()
    run(inserted(record))
    event = removed(record)
    del event["dynamodb"]["OldImage"]

    assert run(event) == []

    assert engine.index.get(TENANT, MEMORY, record.id) is None


# -- other items -----------------------------------------------------------------------------


def test_items_other_than_records_are_skipped(engine: SpyEngine) -> None:
    memory = Memory(
        tenant=TENANT, id=MEMORY, name="Sales", description="", parent_id=None, restricted=False,
        provider="native", created_by="user:alice", created_at=1, updated_at=1,
    )
    grant = Grant(
        tenant=TENANT, id="hgrt_" + "d" * 32, memory_id=MEMORY, principal="user:bob", privileges=("read",),
        created_at=1, created_by="user:alice",
    )
    derived = derived_items(version(references=({"rel": "derived_from", "record_id": "hrec_" + "e" * 32,
                                                  "memory_id": MEMORY},)))[0]

    assert run(
        stream_record("INSERT", new=memory_item(memory)),
        stream_record("MODIFY", new=memory_item(memory), old=memory_item(memory)),
        stream_record("INSERT", new=grant_item(grant)),
        stream_record("REMOVE", old=grant_item(grant)),
        stream_record("INSERT", new=derived),
        stream_record("REMOVE", old=derived),
    ) == []

    assert engine.calls == []


def test_an_empty_batch_does_nothing(engine: SpyEngine) -> None:
    assert run() == []
    assert engine.calls == []


# -- failures --------------------------------------------------------------------------------


def test_an_unreadable_record_item_is_reported_and_the_rest_indexed(engine: SpyEngine) -> None:
    good = version("Acme renews in March.")
    broken = inserted(version())
    del broken["dynamodb"]["NewImage"]["body"]
    no_image = inserted(version())
    del no_image["dynamodb"]["NewImage"]

    assert run(inserted(good), broken, no_image) == [seq(broken), seq(no_image)]

    assert found(engine, "renews") == [good.id]


def test_a_version_the_engine_refuses_is_reported_alone(
    engine: SpyEngine, embedder: CountingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    good, bad, later = version("Acme renews in March."), version(SECRET), version("Acme pays by wire.")
    embedder.refused.add(SECRET)
    events = [inserted(good), inserted(bad), inserted(later)]

    assert run(*events) == [seq(events[1])]

    assert found(engine, "renews") == [good.id]
    assert found(engine, "wire") == [later.id]
    assert engine.index.get(TENANT, MEMORY, bad.id) is None
    assert "indexing failed" in caplog.text
    assert SECRET not in logged(caplog)


@pytest.mark.slow
def test_a_record_titan_refuses_is_indexed_by_its_words_and_stalls_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Titan (a fake that enforces its limits, over HTTP) refuses one text of a batch: the batch
    reports no failure, so the shard moves on, and every record is found by its words."""
    refused_text = "Initech invoice " + "\ufdfa" * 2_500  # normalization makes it far too many tokens
    with FakeTitan() as titan:
        embedder = TitanEmbedder(titan.client(client_config()), dimensions=256)
        index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
        engine = RecallEngine(index, embedder)
        before = bootstrap.install(bootstrap.build(Settings(), None, None, recall_engine=lambda: engine))
        try:
            good, refused, later = version("Initech renews in March."), version(refused_text), version("Initech pays.")

            assert run(inserted(good), inserted(refused), inserted(later)) == []
            assert run(inserted(refused)) == []  # a replay: asked again, refused again, no failure
        finally:
            bootstrap.install(before)

    assert sorted(found(engine, "initech")) == sorted([good.id, refused.id, later.id])
    assert [index.get(TENANT, MEMORY, r.id).embedding is None for r in (good, refused, later)] == [  # type: ignore[union-attr]
        False, True, False,
    ]
    assert "indexed by its words only" in caplog.text
    assert refused_text not in logged(caplog)
    index.close()


def test_every_change_of_a_failed_item_is_reported(engine: SpyEngine, embedder: CountingEmbedder) -> None:
    record = version(SECRET)
    embedder.refused.add(SECRET)
    events = [inserted(record), modified(record, closed(record))]

    assert run(*events) == [seq(events[0]), seq(events[1])]


def test_a_failed_removal_is_reported(engine: SpyEngine, caplog: pytest.LogCaptureFixture) -> None:
    indexed, erased = version("Acme renews in March."), version(SECRET)
    engine.failing_erase = True
    events = [inserted(indexed), removed(erased)]

    assert run(*events) == [seq(events[1])]

    assert found(engine, "renews") == [indexed.id]
    assert "removing from the index failed" in caplog.text
    assert SECRET not in logged(caplog)


def test_a_failure_without_a_sequence_number_fails_the_whole_batch(engine: SpyEngine) -> None:
    broken = stream_record("INSERT", new={**record_item(version()), "body": "{not json"}, sequence=False)

    with pytest.raises(handler.UnidentifiedFailure):
        handler.lambda_handler({"Records": [broken]}, None)


def test_without_a_search_index_the_batch_is_skipped() -> None:
    before = bootstrap.install(bootstrap.build(Settings(), None, None, recall_engine=lambda: None))
    try:
        assert run(inserted(version())) == []
    finally:
        bootstrap.install(before)


@pytest.mark.slow
def test_the_handler_stays_light_for_lambda() -> None:
    """The deployed indexer imports neither numpy nor onnxruntime nor anything dev-only, and only the
    engine's AWS adapters when it builds the engine."""
    heavy = ("moto", "numpy", "onnxruntime", "onnx", "tokenizers", "pytest", "hypothesis", "requests")
    probe = (
        "import sys\n"
        "import functions.indexer.handler\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})))\n"
    )
    answer = run_like_lambda(["-c", probe])

    assert answer.stdout.strip() == ""


def test_a_stream_record_as_lambda_delivers_it_reads(engine: SpyEngine) -> None:
    """The shape Lambda delivers: DynamoDB JSON, numbers as strings."""
    record = version("Acme renews in March.")
    event = json.loads(json.dumps(inserted(record)))

    assert run(event) == []
    assert found(engine, "renews") == [record.id]


# -- a real stream ---------------------------------------------------------------------------


def stream_of(dynamodb_streams: Any, stream_arn: str) -> list[dict[str, Any]]:
    records = []
    for shard in dynamodb_streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = dynamodb_streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += dynamodb_streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    return records


@pytest.mark.slow
def test_the_stream_of_real_writes_brings_an_index_in_step(engine: SpyEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes through the services on moto, whose indexing after the commit failed (no engine), then
    an erase: the table's stream, in batches, leaves the index holding exactly what DynamoDB holds."""
    for name, value in (("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t"), ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    alice = Caller(tenant=TENANT, principal="user:alice")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        stream_arn = dynamodb.create_table(**MAIN_TABLE.create_table_kwargs("main"))["TableDescription"][
            "LatestStreamArn"
        ]
        writer = bootstrap.build(Settings(table_name="main"), dynamodb, None, recall_engine=lambda: None)
        memory = writer.memories.create(alice, name="Sales").memory.id
        kept = writer.records.remember(alice, memory, RecordInput("fact", "Acme renews in March.", {}))
        revised = writer.records.revise(alice, memory, kept.record.id, {"content": "Acme renews in April."})
        gone = writer.records.remember(alice, memory, RecordInput("fact", "Globex pays late.", {}))
        writer.records.forget(alice, memory, gone.record.id)
        erased = writer.records.remember(alice, memory, RecordInput("fact", SECRET, {}))
        episodes = writer.records.observe(
            alice, memory, [RecordInput("episode", f"Ticket {n}: the printer jams.", {}) for n in range(3)]
        )
        writer.ports.records.erase_chain(TENANT, memory, erased.record.chain_id)
        records = stream_of(boto3.client("dynamodbstreams", region_name=REGION), stream_arn)
        held = [writer.ports.records.get(TENANT, memory, r.record.id) for r in (kept, revised, gone, *episodes)]

    assert {r["eventName"] for r in records} == {"INSERT", "MODIFY", "REMOVE"}
    for start in range(0, len(records), 4):
        assert run(*records[start : start + 4]) == []

    assert engine.index.get(TENANT, memory, erased.record.id) is None
    for version in held:
        doc = engine.index.get(TENANT, memory, version.id)
        assert (doc.status, doc.invalidated_at is None, doc.text) == (
            version.status,
            version.invalidated_at is None,
            version.content,
        )
    assert found(engine, "renews", memory_id=memory) == [revised.record.id]
    assert found(engine, "printer", memory_id=memory) != []
