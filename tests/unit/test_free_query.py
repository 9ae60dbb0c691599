"""§6.5 on OpenSearch: a statement runs inside the memory's filter, and statements that try to
escape it are refused before anything reaches the cluster."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uhp_memories.adapters.opensearch.free_query import FreeQueries, confine
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.recall.model import SearchUnavailable

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
        {"prefix": {"text": "renew"}},
        {"match_phrase_prefix": {"text": {"query": "annual disc", "max_expansions": 10}}},
        {"multi_match": {"query": "acme", "fields": ["text"], "type": "phrase", "slop": 2, "tie_breaker": 0.3}},
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


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(ALLOWED)
def test_every_allowed_statement_runs_inside_the_memory_filter(statement: dict[str, Any]) -> None:
    body = confine(statement, TENANT, MEMORY, 7)
    query = body["query"]["bool"]
    assert query["filter"][:2] == [{"term": {"tenant": TENANT}}, {"term": {"memory_id": MEMORY}}]
    assert {"term": {"status": "active"}} in query["filter"]
    assert query["must"] == [statement]
    assert set(query) == {"filter", "must"}
    assert set(body) == {"size", "timeout", "terminate_after", "_source", "track_total_hits", "query"}
    assert body["timeout"] == "2s"
    assert body["terminate_after"] == 10_000
    assert body["size"] == 7
    assert body["_source"] == ["record_id", "chain_id"]


class RecordingClient:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []

    def search(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.calls.append({"index": index, "body": body, **params})
        return self.answer


def test_free_queries_send_the_confined_body_and_return_ids_and_bounds() -> None:
    client = RecordingClient({"timed_out": True, "hits": {"hits": [{"_source": {"record_id": "hrec_a"}}]}})
    ids, bounds = FreeQueries(client, "uhp-recall-v1").free_query(
        TENANT, MEMORY, "opensearch-dsl", {"match": {"text": "renewal"}}, 5
    )
    assert ids == ["hrec_a"]
    assert bounds == ["time:bounded_at_2s"]
    assert client.calls[0]["index"] == "uhp-recall-v1"
    assert client.calls[0]["request_timeout"] == 5
    assert client.calls[0]["body"]["query"]["bool"]["filter"][1] == {"term": {"memory_id": MEMORY}}
    with pytest.raises(MemoryInvalid):
        FreeQueries(client, "i").free_query(TENANT, MEMORY, "cypher", {"match_all": {}}, 5)
    assert len(client.calls) == 1


# Clauses whose cost is the whole shared index's terms (every tenant's), not the memory's documents:
# the isolation filter confines what matches, never which terms a clause walks.
WALKS_THE_SHARED_INDEX = [
    {"prefix": {"text": ""}},
    {"prefix": {"text": "re"}},
    {"prefix": {"text": {"value": "renewal", "case_insensitive": True}}},
    {"prefix": {"record_id": "hrec_"}},
    {"prefix": {"chain_id": "hrec_0123456789"}},
    {"term": {"type": {"value": "FACT", "case_insensitive": True}}},
    {"range": {"text": {"gte": "a"}}},
    {"range": {"record_id": {"gte": "hrec_"}}},
    {"range": {"type": {"gte": "a", "lte": "z"}}},
    {"match": {"text": {"query": "renewel", "fuzziness": "AUTO"}}},
    {"match": {"text": {"query": "renewel", "fuzziness": 2}}},
    {"multi_match": {"query": "renewel", "fields": ["text"], "fuzziness": "AUTO"}},
    {"match_phrase": {"text": {"query": "annual discount", "slop": 4}}},
    {"match_phrase": {"text": {"query": "annual discount", "slop": 1_000_000}}},
    {"match_phrase_prefix": {"text": {"query": "a", "max_expansions": 10_000}}},
    {"match": {"text": {"query": "x", "analyzer": "whitespace"}}},
]


@pytest.mark.parametrize("statement", WALKS_THE_SHARED_INDEX)
def test_a_clause_that_walks_the_terms_of_the_whole_shared_index_is_refused(statement: Any) -> None:
    with pytest.raises(MemoryInvalid):
        confine(statement, TENANT, MEMORY, 10)


WRONG_NUMBERS = [
    {"bool": {"must": [{"match_all": {}}], "boost": {"script": "x"}}},
    {"bool": {"must": [{"match_all": {}}], "boost": "2"}},
    {"bool": {"must": [{"match_all": {}}], "boost": True}},
    {"bool": {"must": [{"match_all": {}}], "boost": -1}},
    {"bool": {"should": [{"match_all": {}}], "minimum_should_match": {"x": 1}}},
    {"bool": {"should": [{"match_all": {}}], "minimum_should_match": "most"}},
    {"dis_max": {"queries": [{"match_all": {}}], "tie_breaker": {"x": 1}}},
    {"dis_max": {"queries": [{"match_all": {}}], "tie_breaker": 2}},
    {"dis_max": {"queries": [{"match_all": {}}], "tie_breaker": "0.5"}},
    {"multi_match": {"query": "x", "fields": ["text"], "tie_breaker": [0.1]}},
    {"multi_match": {"query": "x", "fields": ["text"], "type": "bool_prefix"}},
    {"match": {"text": {"query": "x", "boost": "high"}}},
    {"match": {"text": {"query": 5}}},
    {"match": {"text": {"query": "x", "operator": "xor"}}},
    {"match": {"text": {"query": "x", "slop": 1}}},
    {"term": {"type": {"value": "fact", "boost": []}}},
    {"terms": {"type": ["fact"], "boost": {"x": 1}}},
    {"match_all": {"boost": "1"}},
    {"constant_score": {"filter": {"match_all": {}}, "boost": None}},
    {"range": {"written_at": {"gte": 5}}},
    {"range": {"written_at": {}}},
]


@pytest.mark.parametrize("statement", WRONG_NUMBERS)
def test_boost_tie_breaker_and_every_option_are_checked_for_their_json_type(statement: Any) -> None:
    with pytest.raises(MemoryInvalid):
        confine(statement, TENANT, MEMORY, 10)


def test_the_depth_is_checked_before_anything_recurses_into_a_statement() -> None:
    """Nested far past Python's recursion limit: refused as too deep, never a RecursionError."""
    clause: dict[str, Any] = {"match_all": {}}
    for _ in range(5_000):
        clause = {"bool": {"must": [clause]}}
    with pytest.raises(MemoryInvalid, match="nests at most"):
        confine(clause, TENANT, MEMORY, 10)


class FailingClient:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def search(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        raise self.error


class ClusterError(Exception):
    def __init__(self, status_code: Any, error: str) -> None:
        super().__init__(f"{status_code} {error} the statement said: secret words")
        self.status_code, self.error = status_code, error


def test_a_statement_the_cluster_refuses_is_invalid_and_its_text_is_not_echoed() -> None:
    queries = FreeQueries(FailingClient(ClusterError(400, "search_phase_execution_exception")), "i")
    with pytest.raises(MemoryInvalid) as refused:
        queries.free_query(TENANT, MEMORY, "opensearch-dsl", {"match": {"text": "x"}}, 5)
    assert "search_phase_execution_exception" in refused.value.message
    assert "secret" not in refused.value.message


@pytest.mark.parametrize("error", [ClusterError(503, "unavailable"), ClusterError(429, "too_many"),
                                   ClusterError("N/A", "ConnectionTimeout"), TimeoutError("read")])
def test_a_cluster_that_does_not_answer_is_unavailable(error: Exception) -> None:
    with pytest.raises(SearchUnavailable):
        FreeQueries(FailingClient(error), "i").free_query(TENANT, MEMORY, "opensearch-dsl", {"match_all": {}}, 5)


def test_shard_failures_and_an_early_stop_are_reported_as_bounds() -> None:
    answer = {"timed_out": False, "terminated_early": True, "_shards": {"total": 5, "successful": 3, "failed": 2},
              "hits": {"hits": [{"_source": {"record_id": "hrec_a"}}]}}
    ids, bounds = FreeQueries(RecordingClient(answer), "i").free_query(
        TENANT, MEMORY, "opensearch-dsl", {"match_all": {}}, 5
    )
    assert ids == ["hrec_a"]
    assert bounds == ["documents:bounded_at_10000_per_shard", "shards:2_of_5_failed"]


def test_the_free_query_client_makes_one_attempt_within_the_lambda() -> None:
    """The recall client retries a timed-out request once (2 attempts, each within the time left); a free
    query's makes one attempt of at most 5 s, and the shared client keeps its own retries."""
    from uhp_memories.adapters.opensearch import connect

    shared = connect("http://127.0.0.1:9")
    queries = FreeQueries(shared, "i")
    own = queries._client
    assert (own.transport.max_retries, own.transport.retry_on_timeout) == (0, False)
    assert (shared.transport.max_retries, shared.transport.retry_on_timeout) == (1, True)
    started = time.monotonic()
    with pytest.raises(SearchUnavailable):  # nothing listens on port 9: refused at once, not retried
        queries.free_query(TENANT, MEMORY, "opensearch-dsl", {"match_all": {}}, 5)
    assert time.monotonic() - started < 5
