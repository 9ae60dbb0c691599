"""The composition root (uhp_memories.bootstrap) and the one place of each wire name: the recall
engine is put together by one function that the functions, local mode and the admin CLI call; stack
output names, DynamoDB sort-key prefixes and API-key items each have one module."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.contract.opensearch_fake import FakeOpenSearch
from uhp_memories import bootstrap, stage_outputs
from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.keys import RecordKey, parse_record_key
from uhp_memories.adapters.opensearch import OpenSearchIndex
from uhp_memories.admin import reindex
from uhp_memories.local.hashing import HashingEmbedder
from uhp_memories.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "layers" / "core" / "uhp_memories"
EMBEDDER = HashingEmbedder(16)


def sources(*roots: Path, skip: tuple[Path, ...] = ()) -> dict[Path, str]:
    return {
        path: path.read_text()
        for root in roots
        for path in sorted(root.rglob("*.py"))
        if not any(path.is_relative_to(s) for s in skip) and ".venv" not in path.parts
    }


# -- the recall engine: one function --------------------------------------------------------


def test_a_stage_without_a_search_domain_has_no_recall_engine() -> None:
    assert bootstrap.build_recall_engine(Settings()) is None


def test_the_aws_engine_opens_the_stage_index_with_its_settings() -> None:
    settings = Settings(search_endpoint="https://search.example", search_index="uhp-recall-v9", search_replicas=2)
    client = FakeOpenSearch()

    engine = bootstrap.build_recall_engine(settings, search_client=client, embedder=EMBEDDER)

    assert engine is not None
    assert isinstance(engine.index, OpenSearchIndex)
    assert (engine.index.index_name, engine.index.client, engine.embedder) == ("uhp-recall-v9", client, EMBEDDER)
    assert (engine.index.model_id, engine.index.dimensions) == (EMBEDDER.model_id, EMBEDDER.dimensions)


@pytest.mark.parametrize(("bulk_load", "refresh"), [(False, "wait_for"), (True, False)])
def test_a_bulk_load_leaves_writes_to_the_refresh_interval(bulk_load: bool, refresh: Any) -> None:
    client = FakeOpenSearch()
    asked: list[Any] = []
    bulk = client.bulk

    def recording_bulk(body: Any, **params: Any) -> Any:
        asked.append(params.get("refresh"))
        return bulk(body, **params)

    client.bulk = recording_bulk  # type: ignore[method-assign]
    engine = bootstrap.build_recall_engine(
        Settings(search_endpoint="https://search.example"), search_client=client, embedder=EMBEDDER,
        bulk_load=bulk_load,
    )
    assert engine is not None
    from tests.unit.test_indexer import version

    engine.index_versions([version("Acme renews in March.")])

    assert asked == [refresh]


def test_the_local_engine_is_the_embedded_index() -> None:
    from uhp_memories.local.embedded import EmbeddedSearchIndex

    engine = bootstrap.build_recall_engine(Settings(), local=True, embedder=EMBEDDER)

    assert engine is not None
    assert isinstance(engine.index, EmbeddedSearchIndex)
    assert engine.embedder is EMBEDDER


def test_a_process_that_builds_an_engine_hands_the_gil_over_every_millisecond() -> None:
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)  # CPython's default
        bootstrap.build_recall_engine(Settings(), local=True, embedder=EMBEDDER)
        assert sys.getswitchinterval() == pytest.approx(bootstrap.GIL_SWITCH_INTERVAL_S)
        sys.setswitchinterval(1e-4)  # a process that asked for less keeps it
        bootstrap.build_recall_engine(Settings(), local=True, embedder=EMBEDDER)
        assert sys.getswitchinterval() == pytest.approx(1e-4)
    finally:
        sys.setswitchinterval(before)


def test_the_search_package_sets_nothing_process_wide() -> None:
    search = Path(bootstrap.__file__).parent / "search"
    assert not [p for p in search.rglob("*.py") if "setswitchinterval" in p.read_text()]


def test_reindex_opens_the_index_through_the_composition_root(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[dict[str, Any]] = []
    build = bootstrap.build_recall_engine

    def spy(settings: Settings, **how: Any) -> Any:
        asked.append(how)
        return build(settings, **how)

    monkeypatch.setattr(reindex, "build_recall_engine", spy)
    client = FakeOpenSearch()
    target = reindex.OpenSearchTarget(
        Settings(search_endpoint="https://search.example"), search_client=client, embedder=EMBEDDER
    )
    target.drop()

    assert [how["bulk_load"] for how in asked] == [True, True]
    assert asked[1]["search_client"] is client  # opened again after the drop, on the same client
    assert target.description == f"OpenSearch index uhp-recall-v1 ({EMBEDDER.model_id}, 16 dimensions)"


# Where the engine and its adapters live (the domain's recall engine; OpenSearch and Titan; the embedded
# index and MiniLM), and the composition root.
SEARCH_ENGINE_AND_ADAPTERS = (
    CORE / "domain" / "recall", CORE / "adapters" / "opensearch", CORE / "adapters" / "bedrock",
    CORE / "local" / "embedded", CORE / "local" / "minilm.py", CORE / "bootstrap.py",
)


def test_only_the_composition_root_puts_a_recall_engine_together() -> None:
    """Outside search/ (the engine and its adapters) and bootstrap.py, nothing builds an index, an
    embedder or the engine: the functions, local mode and reindex ask bootstrap.build_recall_engine."""
    built = re.compile(r"\b(RecallEngine|OpenSearchIndex|EmbeddedSearchIndex|TitanEmbedder|MiniLmEmbedder)\(")
    found = {
        str(path.relative_to(ROOT)): sorted(set(built.findall(text)))
        for path, text in sources(CORE, ROOT / "functions", skip=SEARCH_ENGINE_AND_ADAPTERS).items()
        if built.search(text)
    }
    assert found == {}


# -- wire names: one module each ------------------------------------------------------------------


def test_stack_output_names_are_written_only_in_stage_outputs() -> None:
    names = [
        value for name, value in vars(stage_outputs).items() if name.isupper() and isinstance(value, str)
    ]
    literal = re.compile("|".join(rf"[\"']{re.escape(n)}[\"']" for n in names))
    found = [
        str(path.relative_to(ROOT))
        for path, text in sources(CORE, ROOT / "infra", ROOT / "functions", skip=(CORE / "stage_outputs.py",)).items()
        if literal.search(text)
    ]
    assert found == []
    assert set(stage_outputs.OUTPUTS).isdisjoint(stage_outputs.SEARCH_OUTPUTS)
    assert set(stage_outputs.ADMIN_REQUIRED) <= set(stage_outputs.OUTPUTS)


def test_dynamodb_key_prefixes_are_written_only_in_keys() -> None:
    prefix = re.compile(r"[\"'](?:[A-Z]{1,8}#|T#)")
    found = [
        str(path.relative_to(ROOT))
        for path, text in sources(CORE / "adapters", CORE / "admin", ROOT / "functions",
                                  skip=(CORE / "adapters" / "dynamodb" / "keys.py",)).items()
        if prefix.search(text)
    ]
    assert found == []


def test_api_key_items_are_written_and_read_only_by_the_keys_adapter() -> None:
    """The admin CLI and local mode add keys through it too (the table's key schema names the field)."""
    item_field = re.compile(r"[\"']key_hash[\"']")
    adapters = CORE / "adapters" / "dynamodb"
    everything = sources(CORE, ROOT / "functions", skip=(adapters / "apikeys.py", adapters / "schema.py"))
    found = [str(path.relative_to(ROOT)) for path, text in everything.items() if item_field.search(text)]
    assert found == []


@pytest.mark.parametrize(
    ("pk", "sk", "expected"),
    [
        (keys.memory_pk("acme", "hmem_1"), keys.record_sk("hrec_2"), RecordKey("acme", "hmem_1", "hrec_2")),
        (keys.memory_pk("a-b_c", "hmem_1"), keys.record_sk("hrec_2"), RecordKey("a-b_c", "hmem_1", "hrec_2")),
        (keys.memory_pk("acme", "hmem_1"), keys.META_SK, None),
        (keys.memory_pk("acme", "hmem_1"), keys.grant_sk("hgrt_1"), None),
        (keys.memory_pk("acme", "hmem_1"), keys.snapshot_sk("v1"), None),
        (keys.derived_pk("acme", "hrec_1"), keys.derived_sk("hrec_2"), None),
        (keys.timeline_pk("acme", "hmem_1"), keys.record_sk("hrec_2"), None),
        (keys.memory_pk("acme", "hmem_1"), keys.RECORD_SK_PREFIX, None),
        ("", "", None),
    ],
)
def test_record_keys_read_back_as_they_were_built(pk: str, sk: str, expected: RecordKey | None) -> None:
    assert parse_record_key(pk, sk) == expected
