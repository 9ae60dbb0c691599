"""A free query (§6.5) end to end: the service, the confining wrapper and an index holding the records
of several memories and tenants (the OpenSearch stand-in, and a real OpenSearch 2.19 node).
The statement cannot reach past its memory, and a hit the index should never have given (another
memory's record, a superseded version) is still not answered: every hit is read back from the source
of truth, inside the memory in the path."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from tests.contract.opensearch_fake import opensearch_client
from tests.unit.conftest import World, caller, make_world
from uhp_memories.adapters.opensearch import OpenSearchIndex, free_query
from uhp_memories.adapters.opensearch.free_query import FreeQueries
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.queries.service import QueryService
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.service import RecallService
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.records.service import RecordService
from uhp_memories.local.hashing import HashingEmbedder

pytestmark = pytest.mark.slow

ALICE, MALLORY = caller("user:alice"), caller("user:mallory")
OTHER_TENANT = caller("user:alice", tenant="globex")
BACKENDS = ["opensearch-fake", "opensearch"]


class LeakingIndex(FreeQueries):
    """An index that answers ids it was not asked for, as a broken or compromised filter would."""

    def __init__(self, inner: FreeQueries, extra: list[str]) -> None:
        self._inner, self._extra = inner, extra

    def free_query(self, tenant: str, memory_id: str, language: str, statement: Any, limit: int) -> Any:
        ids, bounds = self._inner.free_query(tenant, memory_id, language, statement, limit)
        return [*self._extra, *ids], bounds


def build(backend: str, leak: list[str] | None = None) -> tuple[World, QueryService, dict[str, str]]:
    client = opensearch_client(backend)
    name = "uhp-free-query-test-" + secrets.token_hex(4)
    client.indices.delete(index=name, ignore=[404])
    index = OpenSearchIndex(client, name, model_id="uhp.hashing-bow-v1-64", dimensions=64, refresh=True, replicas=0)
    index.ensure_index()
    engine = RecallEngine(index, HashingEmbedder(64))
    world = make_world()
    world.records = RecordService(world.ports, world.memories, index=lambda: engine)
    free: Any = FreeQueries(client, name)
    service = QueryService(world.ports, _NoNamedQueries(), RecallService.__new__(RecallService), world.memories,
                           world.records, lambda: LeakingIndex(free, leak) if leak is not None else free,
                           ("opensearch-dsl",))
    mine = world.memories.create(ALICE, name="mine").memory.id
    theirs = world.memories.create(MALLORY, name="theirs").memory.id
    elsewhere = world.memories.create(OTHER_TENANT, name="other tenant").memory.id

    def remember(who: Any, memory_id: str, text: str) -> str:
        return world.records.remember(who, memory_id, RecordInput(type="fact", content=text, attributes={})).record.id

    ids = {
        "mine": remember(ALICE, mine, "Acme renews in March"),
        "theirs": remember(MALLORY, theirs, "Acme renews in March, the secret price is 40k"),
        "elsewhere": remember(OTHER_TENANT, elsewhere, "Acme renews in March at globex"),
        "old": remember(ALICE, mine, "Acme renews in April"),
        "memory": mine, "their_memory": theirs,
    }
    ids["new"] = world.records.revise(ALICE, mine, ids["old"], {"content": "Acme renews in May"}).record.id
    return world, service, ids


class _NoNamedQueries:
    def list(self, tenant: str, memory_id: str) -> list[Any]:
        return []


def answered(service: QueryService, statement: dict[str, Any], memory_id: str) -> list[str]:
    answer = service.free(ALICE, memory_id, "opensearch-dsl", statement, None, 10)
    return [r.record.record.id for r in answer.results]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_free_query_answers_only_current_records_of_the_memory_in_the_path(backend: str) -> None:
    _, service, ids = build(backend)
    for statement in ({"match": {"text": "acme renews"}}, {"match_all": {}}, {"prefix": {"text": "acm"}},
                      {"bool": {"should": [{"match_all": {}}, {"term": {"record_id": ids["theirs"]}}]}}):
        assert sorted(answered(service, statement, ids["memory"])) == sorted([ids["mine"], ids["new"]]), statement


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_that_returns_another_memorys_id_does_not_get_it_answered(backend: str) -> None:
    """The index is made to answer ids of another principal's memory, of another tenant and of a
    superseded version: the service reads every hit back inside the memory in the path, and answers
    none of them."""
    leaked: list[str] = []
    _, service, ids = build(backend, leak=leaked)
    leaked.extend([ids["theirs"], ids["elsewhere"], ids["old"]])
    got = answered(service, {"match": {"text": "acme"}}, ids["memory"])
    assert got  # the memory's own records still come back
    assert not {ids["theirs"], ids["elsewhere"], ids["old"]} & set(got)
    assert set(got) == {ids["mine"], ids["new"]}


# Every kind of clause the allowlist lets through (adapters/opensearch/free_query.py), run by the engine: what each
# answers among the memory's two current records ("March" and "May"; "April" was revised away).
CLAUSES: list[tuple[dict[str, Any], set[str]]] = [
    ({"match": {"text": {"query": "acme march", "operator": "and"}}}, {"mine"}),
    ({"match_phrase": {"text": {"query": "acme renews", "slop": 1}}}, {"mine", "new"}),
    ({"match_phrase_prefix": {"text": {"query": "acme ren", "max_expansions": 10}}}, {"mine", "new"}),
    ({"multi_match": {"query": "march", "fields": ["text^2", "type"]}}, {"mine"}),
    ({"multi_match": {"query": "acme renews", "fields": ["text"], "type": "phrase", "slop": 2}}, {"mine", "new"}),
    ({"dis_max": {"queries": [{"match": {"text": "march"}}, {"match": {"text": "may"}}], "tie_breaker": 0.3}},
     {"mine", "new"}),
    ({"constant_score": {"filter": {"term": {"type": "fact"}}, "boost": 2}}, {"mine", "new"}),
    ({"term": {"text": "march"}}, {"mine"}),
    ({"terms": {"type": ["fact", "note"]}}, {"mine", "new"}),
    ({"prefix": {"type": "fac"}}, {"mine", "new"}),
    ({"prefix": {"type": "FAC"}}, set()),  # a keyword's prefix keeps its case
    ({"range": {"written_at": {"gte": "2000-01-01T00:00:00Z"}}}, {"mine", "new"}),
    ({"exists": {"field": "valid_to"}}, set()),
    ({"bool": {"must_not": [{"match": {"text": "march"}}], "should": [{"match_all": {}}]}}, {"new"}),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_kind_of_allowed_clause_runs_on_the_engine(backend: str) -> None:
    _, service, ids = build(backend)
    for statement, expected in CLAUSES:
        assert set(answered(service, statement, ids["memory"])) == {ids[name] for name in expected}, statement


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_statement_the_engine_refuses_is_the_callers_to_change(backend: str) -> None:
    """The allowlist checks a clause's shape; the engine reads its values. A time it cannot read, or a
    phrase prefix on a keyword, is its 400, answered as invalid (422) naming only the error's type."""
    _, service, ids = build(backend)
    for statement in ({"range": {"written_at": {"gte": "yesterday"}}},
                      {"multi_match": {"query": "fa", "fields": ["type"], "type": "phrase_prefix"}}):
        with pytest.raises(MemoryInvalid, match=r"refused the statement \(search_phase_execution_exception\)"):
            service.free(ALICE, ids["memory"], "opensearch-dsl", statement, None, 10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_search_stopped_at_its_document_bound_says_so(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """terminate_after bites: the engine stops once it has collected that many matches and says so, and
    the answer's `degraded` names the bound. (Whether it says so when it had exactly that many depends
    on the segments it had left to enter: not asked here.)"""
    _, service, ids = build(backend)
    for bound, found, bounded in ((1, 1, True), (100, 2, False)):
        monkeypatch.setattr(free_query, "TERMINATE_AFTER", bound)
        answer = service.free(ALICE, ids["memory"], "opensearch-dsl", {"match": {"text": "acme"}}, None, 10)
        assert len(answer.results) == found, bound
        assert answer.degraded == ([f"documents:bounded_at_{bound}_per_shard"] if bounded else []), bound
