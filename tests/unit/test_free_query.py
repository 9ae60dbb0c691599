"""§6.5 on OpenSearch: a statement runs inside the memory's filter, and statements that try to
escape it are refused before anything reaches the cluster."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.search.free_query import FreeQueries, confine

TENANT, MEMORY = "acme", "hmem_" + "1" * 32

HOSTILE = [
    {"script": {"script": {"source": "true"}}},
    {"script_score": {"query": {"match_all": {}}, "script": {"source": "1"}}},
    {"function_score": {"query": {"match_all": {}}}},
    {"terms": {"record_id": {"index": "uhp-recall-v1", "id": "x", "path": "record_id"}}},
    {"more_like_this": {"like": [{"_id": "x"}]}},
    {"percolate": {"field": "q", "document": {}}},
    {"has_child": {"type": "x", "query": {"match_all": {}}}},
    {"nested": {"path": "x", "query": {"match_all": {}}}},
    {"query_string": {"query": "tenant:globex"}},
    {"simple_query_string": {"query": "x"}},
    {"wildcard": {"text": "*"}},
    {"regexp": {"text": ".*"}},
    {"ids": {"values": ["x"]}},
    {"knn": {"embedding": {"vector": [0.1], "k": 1}}},
    {"term": {"tenant": "globex"}},
    {"term": {"memory_id": "hmem_other"}},
    {"term": {"status": "forgotten"}},
    {"match": {"attributes": "x"}},
    {"bool": {"should": [{"match_all": {}}], "_name": "x"}},
    {"bool": {"filter": [{"term": {"memory_id": "hmem_other"}}]}},
    {"match": {"text": "x"}, "term": {"type": "fact"}},
    {"constant_score": {"filter": {"script": {"script": "1"}}}},
    {"dis_max": {"queries": [{"term": {"tenant": "globex"}}]}},
    {"multi_match": {"query": "x", "fields": ["text", "tenant"]}},
    {"multi_match": {"query": "x"}},
    {"range": {"written_at": {"gte": {"script": "x"}}}},
    "match_all",
    [{"match_all": {}}],
]


@pytest.mark.parametrize("statement", HOSTILE)
def test_a_statement_that_could_reach_beyond_the_memory_is_refused(statement: Any) -> None:
    with pytest.raises(MemoryInvalid):
        confine(statement, TENANT, MEMORY, 10)


def test_nesting_and_size_are_bounded() -> None:
    clause: dict[str, Any] = {"match": {"text": "x"}}
    for _ in range(20):
        clause = {"bool": {"must": [clause]}}
    with pytest.raises(MemoryInvalid):
        confine(clause, TENANT, MEMORY, 10)
    with pytest.raises(MemoryInvalid):
        confine({"terms": {"type": ["x" * 100] * 500}}, TENANT, MEMORY, 10)


ALLOWED = st.recursive(
    st.sampled_from([
        {"match": {"text": "renewal"}},
        {"match_phrase": {"text": {"query": "annual discount", "slop": 1}}},
        {"term": {"type": "fact"}},
        {"terms": {"type": ["fact", "note"]}},
        {"range": {"written_at": {"gte": "2026-01-01T00:00:00Z"}}},
        {"exists": {"field": "valid_to"}},
        {"prefix": {"record_id": "hrec_"}},
        {"match_all": {}},
        {"multi_match": {"query": "acme", "fields": ["text^2", "type"]}},
    ]),
    lambda inner: st.one_of(
        st.builds(lambda items: {"bool": {"must": items}}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda items: {"bool": {"should": items, "minimum_should_match": 1}},
                  st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda item: {"bool": {"must_not": [item]}}, inner),
        st.builds(lambda item: {"constant_score": {"filter": item}}, inner),
        st.builds(lambda items: {"dis_max": {"queries": items}}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None)
@given(ALLOWED)
def test_every_allowed_statement_runs_inside_the_memory_filter(statement: dict[str, Any]) -> None:
    body = confine(statement, TENANT, MEMORY, 7)
    query = body["query"]["bool"]
    assert query["filter"][:2] == [{"term": {"tenant": TENANT}}, {"term": {"memory_id": MEMORY}}]
    assert {"term": {"status": "active"}} in query["filter"]
    assert query["must"] == [statement]
    assert set(query) == {"filter", "must"}
    assert set(body) == {"size", "timeout", "_source", "track_total_hits", "query"}
    assert body["size"] == 7
    assert body["_source"] == ["record_id", "chain_id"]


class RecordingClient:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []

    def search(self, index: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append({"index": index, "body": body})
        return self.answer


def test_free_queries_send_the_confined_body_and_return_ids_and_bounds() -> None:
    client = RecordingClient({"timed_out": True, "hits": {"hits": [{"_source": {"record_id": "hrec_a"}}]}})
    ids, bounds = FreeQueries(client, "uhp-recall-v1").free_query(
        TENANT, MEMORY, "opensearch-dsl", {"match": {"text": "renewal"}}, 5
    )
    assert ids == ["hrec_a"]
    assert bounds == ["time:bounded_at_2s"]
    assert client.calls[0]["index"] == "uhp-recall-v1"
    assert client.calls[0]["body"]["query"]["bool"]["filter"][1] == {"term": {"memory_id": MEMORY}}
    with pytest.raises(MemoryInvalid):
        FreeQueries(client, "i").free_query(TENANT, MEMORY, "cypher", {"match_all": {}}, 5)
    assert len(client.calls) == 1
