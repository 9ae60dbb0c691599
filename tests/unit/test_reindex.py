"""`uhp-memories reindex` (uhp_memories.admin.reindex): rebuild a recall index from DynamoDB on moto,
into the embedded engine with a hashing embedder, and through the command against a stand-in for
OpenSearch."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.contract.opensearch_fake import FakeOpenSearch
from tests.fakes.titan import FakeTitan
from uhp_memories import bootstrap
from uhp_memories.adapters.bedrock.embedder import TitanEmbedder, client_config
from uhp_memories.adapters.dynamodb.schema import MAIN_TABLE
from uhp_memories.adapters.opensearch import OpenSearchIndex
from uhp_memories.admin import reindex
from uhp_memories.admin.reindex import OpenSearchTarget, record_pages, resolve
from uhp_memories.admin.target import TargetError
from uhp_memories.domain.model import Caller
from uhp_memories.domain.recall.engine import RecallEngine, document_for, text_of
from uhp_memories.domain.recall.model import SearchRequest, SearchUnavailable
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.records.model import RecordInput, RecordVersion
from uhp_memories.local.cli import main
from uhp_memories.local.embedded import EmbeddedSearchIndex
from uhp_memories.local.hashing import HashingEmbedder
from uhp_memories.settings import Settings

REGION = "eu-west-1"
ALICE = Caller(tenant="acme", principal="user:alice")
EMBEDDER = HashingEmbedder(64)


class EmbeddedTarget:
    """An embedded index in a file: dropping it deletes the file."""

    def __init__(self, path: Path, embedder: HashingEmbedder = EMBEDDER) -> None:
        self.path = path
        self.embedder = embedder
        self.opened: list[EmbeddedSearchIndex] = []
        self.drops = 0

    @property
    def description(self) -> str:
        return f"embedded index {self.path.name}"

    def drop(self) -> None:
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self.drops += 1

    def engine(self) -> RecallEngine:
        index = EmbeddedSearchIndex(self.path, model_id=self.embedder.model_id, dimensions=self.embedder.dimensions)
        self.opened.append(index)
        return RecallEngine(index, self.embedder)

    def close(self) -> None:
        for index in self.opened:
            index.close()
        self.opened.clear()


@dataclass
class Stage:
    dynamodb: Any
    table: str
    container: bootstrap.Container
    in_step: RecallEngine  # the index RecordService kept in step after each commit
    versions: list[str]  # every version id written

    def memory(self, name: str = "Sales") -> str:
        return self.container.memories.create(ALICE, name=name).memory.id


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_SESSION_TOKEN", "testing"),
        ("AWS_DEFAULT_REGION", REGION),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


@pytest.fixture
def stage(aws: None) -> Iterator[Stage]:
    """A main table on moto holding memories, grants and record versions (remembered, observed,
    revised, forgotten), written by the services with an index kept in step."""
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    table = "uhp-memories-" + secrets.token_hex(4)
    dynamodb.create_table(**MAIN_TABLE.create_table_kwargs(table, with_stream=False))
    in_step = RecallEngine(
        EmbeddedSearchIndex(":memory:", model_id=EMBEDDER.model_id, dimensions=EMBEDDER.dimensions), EMBEDDER
    )
    container = bootstrap.build(
        Settings(table_name=table, region=REGION), dynamodb, s3, recall_engine=lambda: in_step
    )
    stage = Stage(dynamodb, table, container, in_step, [])
    records = container.records
    sales, support = stage.memory("Sales"), stage.memory("Support")
    container.grants.create(ALICE, sales, "user:bob", ["read"])
    kept = records.remember(ALICE, sales, RecordInput("fact", "Acme renews in March.", {"account": "acme"}))
    revised = records.revise(ALICE, sales, kept.record.id, {"content": "Acme renews in April."})
    gone = records.remember(ALICE, sales, RecordInput("fact", "Globex pays late.", {}))
    forgotten = records.forget(ALICE, sales, gone.record.id)
    episodes = records.observe(
        ALICE, support, [RecordInput("episode", f"Ticket {n}: the printer jams.", {"n": n}) for n in range(5)]
    )
    stage.versions = [kept.record.id, revised.record.id, forgotten.record.id] + [e.record.id for e in episodes]
    yield stage
    in_step.index.close()


def documents(index: Any, versions: Sequence[RecordVersion]) -> dict[str, Any]:
    """Each version's document; vectors rounded (indexes keep float32, and may normalize again)."""
    found = {v.id: index.get(v.tenant, v.memory_id, v.id) for v in versions}
    return {
        id_: doc if doc is None or doc.embedding is None
        else replace(doc, embedding=tuple(round(float(x), 5) for x in doc.embedding))
        for id_, doc in found.items()
    }


def all_versions(stage: Stage) -> list[RecordVersion]:
    return [v for page in record_pages(stage.dynamodb, stage.table) for v in page.versions]


# -- the rebuild -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_rebuilt_index_holds_what_the_index_kept_in_step_holds(stage: Stage, tmp_path: Path) -> None:
    target = EmbeddedTarget(tmp_path / "recall.db")

    report = reindex.reindex(stage.dynamodb, stage.table, target)

    versions = all_versions(stage)
    assert sorted(v.id for v in versions) == sorted(stage.versions)
    rebuilt = documents(target.opened[-1], versions)
    assert rebuilt == documents(stage.in_step.index, versions)
    assert all(doc is not None for doc in rebuilt.values())
    assert report.indexed_versions == len(stage.versions) == 8
    assert (report.dropped, report.unreadable, report.retries) == (False, [], 0)
    target.close()


@pytest.mark.slow
def test_the_rebuilt_index_answers_recall_with_history(stage: Stage, tmp_path: Path) -> None:
    target = EmbeddedTarget(tmp_path / "recall.db")
    reindex.reindex(stage.dynamodb, stage.table, target)
    index = target.opened[-1]
    sales = next(v.memory_id for v in all_versions(stage) if text_of(v).startswith("Acme"))

    def found(include: str) -> list[str]:
        hits = rank(index, SearchRequest(tenant="acme", memory_id=sales, text="Acme renews", include=include))
        return sorted(text_of(v) for v in all_versions(stage) if v.id in {h.record_id for h in hits})

    assert found("active") == ["Acme renews in April."]
    assert found("all") == ["Acme renews in April.", "Acme renews in March."]
    target.close()


@pytest.mark.slow
def test_the_table_is_read_in_pages_and_only_record_items_are_indexed(stage: Stage, tmp_path: Path) -> None:
    target = EmbeddedTarget(tmp_path / "recall.db")
    seen: list[int] = []

    report = reindex.reindex(
        stage.dynamodb, stage.table, target, page_size=3, progress=lambda r: seen.append(r.indexed_versions)
    )

    items = stage.dynamodb.scan(TableName=stage.table)["Count"]
    assert items > len(stage.versions)  # memories, grants, counters... are in the table too
    assert report.scanned_items == items
    assert report.pages == len(seen) >= items // 3
    assert seen == sorted(seen)
    assert seen[-1] == report.indexed_versions == len(stage.versions)
    target.close()


@pytest.mark.slow
def test_a_plain_reindex_keeps_documents_and_from_scratch_drops_what_dynamodb_does_not_hold(
    stage: Stage, tmp_path: Path
) -> None:
    target = EmbeddedTarget(tmp_path / "recall.db")
    stale = next(iter(all_versions(stage))).evolve(id="hrec_" + "f" * 32, content="a record erased long ago")
    target.engine().index.index([document_for(stale, text_of(stale), EMBEDDER.embed([text_of(stale)])[0])])
    target.close()

    reindex.reindex(stage.dynamodb, stage.table, target)
    assert target.opened[-1].get(stale.tenant, stale.memory_id, stale.id) is not None
    target.close()

    report = reindex.reindex(stage.dynamodb, stage.table, target, from_scratch=True)

    index = target.opened[-1]
    assert (report.dropped, target.drops) == (True, 1)
    assert index.get(stale.tenant, stale.memory_id, stale.id) is None
    assert all(doc is not None for doc in documents(index, all_versions(stage)).values())
    target.close()


@pytest.mark.slow
def test_from_scratch_rebuilds_an_index_of_another_embedding_model(stage: Stage, tmp_path: Path) -> None:
    EmbeddedTarget(tmp_path / "recall.db", HashingEmbedder(32)).engine()  # an index of another model
    target = EmbeddedTarget(tmp_path / "recall.db")

    with pytest.raises(reindex.EmbeddingModelMismatch):
        reindex.reindex(stage.dynamodb, stage.table, target)
    report = reindex.reindex(stage.dynamodb, stage.table, target, from_scratch=True)

    assert report.indexed_versions == len(stage.versions)
    target.close()


@pytest.mark.slow
def test_an_unavailable_index_is_waited_out(stage: Stage, tmp_path: Path) -> None:
    target = EmbeddedTarget(tmp_path / "recall.db")
    engine = target.engine()
    failures = iter([True, True])

    class Flaky:
        def index_versions(self, versions: Sequence[RecordVersion], *, reuse_all: bool = False) -> None:
            if next(failures, False):
                raise SearchUnavailable("OpenSearch did not answer: ConnectionTimeout")
            engine.index_versions(versions, reuse_all=reuse_all)

    class FlakyTarget(EmbeddedTarget):
        def engine(self) -> Any:
            return Flaky()

    slept: list[float] = []
    report = reindex.reindex(stage.dynamodb, stage.table, FlakyTarget(tmp_path / "x.db"), sleep=slept.append)

    assert report.retries == 2
    assert slept == [2.0, 4.0]
    assert all(doc is not None for doc in documents(engine.index, all_versions(stage)).values())

    failures = iter([True] * 10)
    with pytest.raises(SearchUnavailable):
        reindex.reindex(stage.dynamodb, stage.table, FlakyTarget(tmp_path / "x.db"), sleep=slept.append)
    target.close()


@pytest.mark.slow
def test_a_version_erased_while_it_was_indexed_leaves_the_index_again(stage: Stage, tmp_path: Path) -> None:
    """An erase that deletes the items between the scan and the index write: the write must not put
    erased content back."""
    target = EmbeddedTarget(tmp_path / "recall.db")
    engine = target.engine()
    victim = next(v for v in all_versions(stage) if text_of(v) == "Globex pays late.")

    class ErasedMeanwhile:
        def index_versions(self, versions: Sequence[RecordVersion], *, reuse_all: bool = False) -> None:
            engine.index_versions(versions, reuse_all=reuse_all)
            if any(v.id == victim.id for v in versions):  # the erase workflow runs now
                engine.erase(victim.tenant, victim.memory_id, [victim.id])
                stage.container.ports.records.erase_chain(victim.tenant, victim.memory_id, victim.chain_id)
                engine.index_versions([victim])  # ... and this batch's write lands after it

        def erase(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
            engine.erase(tenant, memory_id, record_ids)

    class Racing(EmbeddedTarget):
        def engine(self) -> Any:
            return ErasedMeanwhile()

    report = reindex.reindex(stage.dynamodb, stage.table, Racing(tmp_path / "x.db"))

    assert engine.index.get(victim.tenant, victim.memory_id, victim.id) is None
    assert (report.vanished_versions, report.indexed_versions) == (1, len(stage.versions) - 1)
    target.close()


@pytest.mark.slow
def test_an_unreadable_record_item_is_named_by_its_keys_never_its_content(stage: Stage, tmp_path: Path) -> None:
    stage.dynamodb.put_item(
        TableName=stage.table,
        Item={
            "PK": {"S": "T#acme#M#hmem_" + "0" * 32},
            "SK": {"S": "R#hrec_" + "0" * 32},
            "entity": {"S": "record"},
            "content_text": {"S": "a secret of the broken item"},
        },
    )
    target = EmbeddedTarget(tmp_path / "recall.db")

    report = reindex.reindex(stage.dynamodb, stage.table, target)

    assert report.unreadable == [{"PK": "T#acme#M#hmem_" + "0" * 32, "SK": "R#hrec_" + "0" * 32}]
    assert report.indexed_versions == len(stage.versions)
    target.close()


# -- where to read and write -------------------------------------------------------------------


STACK = {
    "MainTableName": "uhp-memories-prod-DataMainTable",
    "SearchEndpoint": "https://search-uhp.eu-west-1.es.amazonaws.com",
    "SearchIndexName": "uhp-recall-v1",
    "SearchIndexReplicas": "1",
    "EmbeddingModelId": "amazon.titan-embed-text-v2:0",
    "EmbeddingDimensions": "512",
    "RestApiId": "abc123",
}
NO_OPTIONS: dict[str, Any] = {
    "table": None,
    "search_endpoint": None,
    "index_name": None,
    "replicas": None,
    "embedding_model_id": None,
    "embedding_dimensions": None,
}


def test_the_stack_names_the_table_the_index_and_the_model() -> None:
    where = resolve(STACK, NO_OPTIONS)

    assert where.table == "uhp-memories-prod-DataMainTable"
    assert where.search_endpoint == "https://search-uhp.eu-west-1.es.amazonaws.com"
    assert (where.index_name, where.replicas) == ("uhp-recall-v1", 1)
    assert (where.embedding_model_id, where.embedding_dimensions) == ("amazon.titan-embed-text-v2:0", 512)


def test_options_override_the_stack_and_a_bare_host_is_https() -> None:
    where = resolve(STACK, {**NO_OPTIONS, "index_name": "uhp-recall-v2", "search_endpoint": "search-x.es.aws.com/"})

    assert where.index_name == "uhp-recall-v2"
    assert where.search_endpoint == "https://search-x.es.aws.com"


def test_without_a_stack_the_table_and_the_endpoint_are_needed() -> None:
    with pytest.raises(TargetError, match="--table and --search-endpoint"):
        resolve({}, NO_OPTIONS)
    with pytest.raises(TargetError, match="--search-endpoint"):
        resolve({"MainTableName": "t"}, NO_OPTIONS)  # a stack without a search domain

    where = resolve({}, {**NO_OPTIONS, "table": "t", "search_endpoint": "https://localhost:9200"})
    assert (where.index_name, where.embedding_dimensions) == (Settings().search_index, Settings().embedding_dimensions)


# -- the command -------------------------------------------------------------------------------


class FakeCloudFormation:
    def __init__(self, outputs: dict[str, str]) -> None:
        self.outputs = outputs

    def describe_stacks(self, StackName: str) -> dict[str, Any]:  # boto3's parameter name
        if StackName != "uhp-memories-prod":
            raise RuntimeError(f"Stack with id {StackName} does not exist")
        return {"Stacks": [{"Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()]}]}


@pytest.fixture
def opensearch(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The command's AWS index, on a stand-in for OpenSearch with the hashing embedder; records the
    settings the command built it from."""
    seen: dict[str, Any] = {"client": FakeOpenSearch()}

    def fake_target(settings: Settings, session: Any) -> OpenSearchTarget:
        seen["settings"] = settings
        return OpenSearchTarget(settings, search_client=seen["client"], embedder=EMBEDDER)

    monkeypatch.setattr(reindex, "aws_target", fake_target)
    return seen


def command(stage: Stage, *extra: str) -> list[str]:
    return [
        "reindex",
        "--table",
        stage.table,
        "--search-endpoint",
        "https://search-uhp.eu-west-1.es.amazonaws.com",
        "--region",
        REGION,
        *extra,
    ]


@pytest.mark.slow
def test_the_command_rebuilds_the_index_of_a_stage(
    stage: Stage, opensearch: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(command(stage, "--index-name", "uhp-recall-v2", "--embedding-dimensions", "512")) == 0

    settings = opensearch["settings"]
    assert (settings.table_name, settings.region) == (stage.table, REGION)
    assert (settings.search_index, settings.embedding_dimensions) == ("uhp-recall-v2", 512)
    index = OpenSearchIndex(opensearch["client"], "uhp-recall-v2", model_id=EMBEDDER.model_id, dimensions=64)
    assert documents(index, all_versions(stage)) == documents(stage.in_step.index, all_versions(stage))
    out = capsys.readouterr().out
    assert f"indexed {len(stage.versions)} record versions of {stage.table}" in out


@pytest.mark.slow
def test_the_command_reads_the_stage_from_its_stack(
    stage: Stage, opensearch: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = boto3.Session(region_name=REGION)

    class Session:
        region_name = REGION

        def client(self, name: str, **kwargs: Any) -> Any:
            if name == "cloudformation":
                return FakeCloudFormation({**STACK, "MainTableName": stage.table})
            return real.client(name, **kwargs)

    monkeypatch.setattr(reindex, "_session", lambda args: Session())

    assert main(["reindex", "--stack", "uhp-memories-prod", "--json"]) == 0

    report = json.loads(capsys.readouterr().out)
    assert (report["table"], report["indexed_versions"]) == (stage.table, len(stage.versions))
    assert opensearch["settings"].search_endpoint == STACK["SearchEndpoint"]
    assert opensearch["settings"].embedding_dimensions == 512
    # The --json report is read by programs: its fields are a contract, written out here by hand.
    assert set(report) == {
        "table",
        "index",
        "dropped",
        "pages",
        "scanned_items",
        "indexed_versions",
        "vanished_versions",
        "retries",
        "unreadable",
        "seconds",
    }
    assert report["index"] == "OpenSearch index uhp-recall-v1 (uhp.hashing-bow-v1-64, 64 dimensions)"
    assert (report["dropped"], report["vanished_versions"], report["retries"]) == (False, 0, 0)
    assert report["unreadable"] == []
    assert report["pages"] >= 1
    assert report["scanned_items"] >= len(stage.versions)
    assert isinstance(report["seconds"], float)

    assert main(["reindex", "--stack", "uhp-memories-other"]) == 2
    assert "cannot read stack 'uhp-memories-other'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_from_scratch_drops_and_recreates_the_index(
    stage: Stage, opensearch: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    client = opensearch["client"]
    old = OpenSearchIndex(client, "uhp-recall-v1", model_id=EMBEDDER.model_id, dimensions=64)
    stale = all_versions(stage)[0].evolve(id="hrec_" + "f" * 32)
    old.index([document_for(stale, "a record erased long ago", EMBEDDER.embed(["a record erased long ago"])[0])])

    assert main(command(stage, "--from-scratch")) == 0

    index = OpenSearchIndex(client, "uhp-recall-v1", model_id=EMBEDDER.model_id, dimensions=64)
    assert index.get(stale.tenant, stale.memory_id, stale.id) is None
    assert all(doc is not None for doc in documents(index, all_versions(stage)).values())
    assert client.indices.get_mapping(index="uhp-recall-v1")["uhp-recall-v1"]["mappings"]["_meta"]["uhp"][
        "model_id"
    ] == EMBEDDER.model_id
    captured = capsys.readouterr()
    assert "dropping OpenSearch index uhp-recall-v1" in captured.err
    assert "index dropped first" in captured.out


@pytest.mark.slow
def test_a_record_titan_refuses_is_indexed_by_its_words_and_the_reindex_completes(stage: Stage) -> None:
    """The stage's OpenSearch index (over the fake cluster) filled by Titan (a fake that enforces its
    limits, over HTTP): the one text it refuses is indexed without a vector, found by its words."""
    sales = next(v.memory_id for v in all_versions(stage) if text_of(v).startswith("Acme"))
    refused_text = "Initech invoice " + "\ufdfa" * 2_500  # normalization makes it far too many tokens
    refused = stage.container.records.remember(ALICE, sales, RecordInput("fact", refused_text, {})).record
    with FakeTitan() as titan:
        embedder = TitanEmbedder(titan.client(client_config()), dimensions=256)
        target = OpenSearchTarget(Settings(table_name=stage.table, region=REGION), search_client=FakeOpenSearch(),
                                  embedder=embedder)

        report = reindex.reindex(stage.dynamodb, stage.table, target)

        assert len(titan.requests) == len(stage.versions) + 1  # every text asked once, the refused one too
    index = target.engine().index
    assert (report.indexed_versions, report.retries) == (len(stage.versions) + 1, 0)
    stored = documents(index, all_versions(stage))
    assert [id_ for id_, doc in stored.items() if doc is None or doc.embedding is None] == [refused.id]
    hits = rank(index, SearchRequest(tenant="acme", memory_id=sales, text="initech invoice"))
    assert [hit.record_id for hit in hits] == [refused.id]


@pytest.mark.slow
def test_the_command_refuses_an_index_of_another_model_with_a_hint(
    stage: Stage, opensearch: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    OpenSearchIndex(opensearch["client"], "uhp-recall-v1", model_id="amazon.titan-embed-text-v2:0", dimensions=1024)\
        .ensure_index()

    assert main(command(stage)) == 2

    assert "--from-scratch" in capsys.readouterr().err


def test_the_command_needs_a_stage(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reindex", "--table", "t"]) == 2

    assert "name the stage" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_exits_1_when_record_items_do_not_read(
    stage: Stage, opensearch: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    stage.dynamodb.put_item(
        TableName=stage.table,
        Item={"PK": {"S": "T#acme#M#hmem_" + "0" * 32}, "SK": {"S": "R#x"}, "entity": {"S": "record"}},
    )

    assert main(command(stage)) == 1

    assert "unreadable record item: PK=T#acme#M#hmem_" in capsys.readouterr().err
