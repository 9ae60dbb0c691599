"""The OpenSearch adapter without a cluster: the bodies it builds, pinned, and the isolation filter
that no request can remove or widen."""

from __future__ import annotations

import gzip
import http.server
import json
import math
import subprocess
import sys
import threading
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uhp_memories.adapters.opensearch import (
    OpenSearchIndex,
    bm25_body,
    bulk_delete_actions,
    bulk_index_actions,
    delete_memory_body,
    doc_id,
    document_source,
    filter_clauses,
    index_body,
    knn_body,
    neighbours_body,
    recency_body,
    similarity_body,
    word_count_bodies,
    word_weights,
)
from uhp_memories.adapters.opensearch import index as opensearch_index
from uhp_memories.adapters.predicates import sortable_number
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.filters import parse_filter
from uhp_memories.domain.recall.model import (
    Candidate,
    CandidateQuery,
    EmbeddingModelMismatch,
    Fusion,
    SearchDocument,
    SearchRequest,
    SearchUnavailable,
)
from uhp_memories.domain.recall.ranking import rank

TENANT, MEMORY, OTHER_MEMORY = "acme", "hmem_" + "a" * 32, "hmem_" + "b" * 32
ISOLATION = [{"term": {"tenant": TENANT}}, {"term": {"memory_id": MEMORY}}]
ACTIVE = {"term": {"status": "active"}}
CENTRE = Candidate("hrec_" + "c" * 32, "hrec_" + "c" * 32, MEMORY, "episode", "2026-01-01T00:00:00.000Z")
SOURCE = ["record_id", "chain_id", "type", "written_at", "memory_id"]
SIMILARITY = {  # Painless's k-NN cosine similarity, plus one (a script score is never negative)
    "source": "1.0 + cosineSimilarity(params.query_value, doc[params.field])",
    "params": {"field": "embedding", "query_value": [0.6, 0.8]},
}


def request(**fields: Any) -> SearchRequest:
    fields.setdefault("tenant", TENANT)
    fields.setdefault("memory_id", MEMORY)
    if "filters" in fields:
        fields["filters"] = parse_filter(fields["filters"])
    return SearchRequest(**fields)


def document(**fields: Any) -> SearchDocument:
    base: dict[str, Any] = {
        "tenant": TENANT,
        "memory_id": MEMORY,
        "record_id": "hrec_1",
        "chain_id": "hrec_1",
        "type": "fact",
        "status": "active",
        "attributes": {},
        "valid_from": None,
        "valid_to": None,
        "written_at": "2026-10-01T17:02:11.000Z",
        "invalidated_at": None,
        "text": "Acme renews",
        "embedding": None,
    }
    base.update(fields)
    return SearchDocument(**base)


# -- the index and its documents ---------------------------------------------------------------


def test_the_index_body_maps_every_field_and_records_the_model() -> None:
    body = index_body("amazon.titan-embed-text-v2:0", 1024)
    assert body["settings"] == {"index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 1}}
    mappings = body["mappings"]
    assert mappings["dynamic"] == "strict"
    assert mappings["_meta"] == {"uhp": {"model_id": "amazon.titan-embed-text-v2:0", "dimensions": 1024, "schema": "1"}}
    props = mappings["properties"]
    assert {name for name, spec in props.items() if spec["type"] == "keyword"} == {
        "tenant",
        "memory_id",
        "record_id",
        "chain_id",
        "type",
        "status",
        "attr_paths",
        "attr_values",
    }
    assert {name for name, spec in props.items() if spec["type"] == "date"} == {
        "valid_from",
        "valid_to",
        "written_at",
        "invalidated_at",
    }
    assert props["text"] == {"type": "text", "analyzer": "english"}
    assert props["attributes"] == {"type": "object", "enabled": False}
    assert props["embedding"] == {
        "type": "knn_vector",
        "dimension": 1024,
        "method": {
            "name": "hnsw",
            "engine": "lucene",
            "space_type": "cosinesimil",
            "parameters": {"m": 16, "ef_construction": 128},
        },
    }


def test_a_document_flattens_its_attributes_into_typed_keyword_entries() -> None:
    attributes = {
        "account": "acme",
        "n": 2,
        "ok": True,
        "none": None,
        "tags": ["a"],
        "o": {"x": 1.5},
        "dot.ted": 1,
        "": 2,
    }
    source = document_source(document(attributes=attributes, embedding=[0.5, 0.5], valid_from="2026-01-01T00:00:00Z"))
    assert source["attributes"] == attributes
    assert sorted(source["attr_paths"]) == sorted(
        ['["account"]', '["n"]', '["ok"]', '["none"]', '["tags"]', '["o"]', '["o","x"]']
    )
    assert sorted(source["attr_values"]) == sorted(
        [
            '["account"]sacme',
            '["n"]n' + sortable_number(2),
            '["ok"]b1',
            '["none"]z',
            '["o","x"]n' + sortable_number(1.5),
        ]
    )
    assert source["valid_from"] == "2026-01-01T00:00:00.000Z"
    assert source["embedding"] == [0.5, 0.5]
    assert "embedding" not in document_source(document())


def test_bulk_actions_use_composite_ids_and_external_versions_so_a_close_is_never_undone() -> None:
    actions = bulk_index_actions(
        "recall", [document(), document(record_id="hrec_2", invalidated_at="2026-10-02T00:00:00Z")]
    )
    assert actions[0] == {
        "index": {"_index": "recall", "_id": f"{TENANT}/{MEMORY}/hrec_1", "version": 1, "version_type": "external_gte"}
    }
    assert actions[2]["index"]["version"] == 2
    assert bulk_delete_actions("recall", TENANT, MEMORY, ["hrec_1"]) == [
        {"delete": {"_index": "recall", "_id": doc_id(TENANT, MEMORY, "hrec_1")}}
    ]
    assert delete_memory_body(TENANT, MEMORY) == {"query": {"bool": {"filter": ISOLATION}}}


# -- query bodies, pinned ----------------------------------------------------------------------


def test_the_knn_body_filters_inside_the_knn_clause_and_around_it() -> None:
    body = knn_body(request(types=("fact",)), [0.6, 0.8], depth=50)
    expected_filter = [*ISOLATION, ACTIVE, {"terms": {"type": ["fact"]}}]
    assert body == {
        "size": 50,
        "_source": ["record_id", "chain_id", "type", "written_at", "memory_id"],
        "query": {
            "bool": {
                "filter": expected_filter,
                "must": [
                    {
                        "knn": {
                            "embedding": {
                                "vector": [0.6, 0.8],
                                "k": 50,
                                "filter": {"bool": {"filter": expected_filter}},
                                "method_parameters": {"ef_search": 200},  # the graph searched 4x as wide
                            }
                        }
                    }
                ],
            }
        },
    }


def test_the_bm25_body_matches_the_words_inside_the_same_filter_each_weighed() -> None:
    body = bm25_body(request(), ["acme", "renewal"], depth=100, weights={"acme": 0.25})
    assert body == {
        "size": 100,
        "_source": ["record_id", "chain_id", "type", "written_at", "memory_id"],
        "query": {
            "bool": {
                "filter": [*ISOLATION, ACTIVE],
                "must": [{"bool": {"should": [{"match": {"text": {"query": "acme", "boost": 0.25}}},
                                              {"match": {"text": {"query": "renewal", "boost": 1.0}}}],
                                   "minimum_should_match": 1}}],
            }
        },
        "sort": [{"_score": "desc"}, {"record_id": "asc"}],
    }


def test_a_word_weighs_by_its_rarity_in_the_memory_as_the_embedded_engine_counts_it() -> None:
    """Lucene's idf counts the whole index, FTS5's the memory: the weight turns one into the other."""
    bodies = word_count_bodies(request(also=(OTHER_MEMORY,)), ["acme", "renewal"])
    scope = [{"term": {"tenant": TENANT}}, {"terms": {"memory_id": [MEMORY, OTHER_MEMORY]}}]
    text, acme, renewal = {"exists": {"field": "text"}}, {"match": {"text": "acme"}}, {"match": {"text": "renewal"}}
    assert [b["query"]["bool"]["filter"] for b in bodies] == [
        [*scope, text], [text], [*scope, acme], [acme], [*scope, renewal], [renewal]]
    assert all(b["size"] == 0 and b["track_total_hits"] is True for b in bodies)
    # 10 documents in the memories, 1,000 in the index; "acme" in 9 and 9 (common in the memory),
    # "renewal" in 1 and 100 (rare in the memory, less so in the index); "absent" nowhere.
    weights = word_weights(["acme", "renewal", "absent"], [10, 1000, 9, 9, 1, 100, 0, 0])
    lucene = {"acme": math.log(1 + 991.5 / 9.5), "renewal": math.log(1 + 900.5 / 100.5)}
    assert weights["acme"] == pytest.approx(1e-6 / lucene["acme"])  # FTS5's floor: a word in most documents
    assert weights["renewal"] == pytest.approx(math.log(9.5 / 1.5) / lucene["renewal"])
    assert "absent" not in weights


def test_the_recency_body_sorts_newest_first() -> None:
    assert recency_body(request(include="all"), 8) == {
        "size": 8,
        "_source": ["record_id", "chain_id", "type", "written_at", "memory_id"],
        "query": {"bool": {"filter": ISOLATION}},
        "sort": [{"written_at": "desc"}, {"record_id": "desc"}],
    }


def test_as_of_active_keeps_the_versions_open_at_that_instant() -> None:
    clauses = filter_clauses(request(as_of="2026-10-01T00:00:00Z"))
    instant = "2026-10-01T00:00:00.000Z"
    assert clauses == [
        *ISOLATION,
        {"range": {"written_at": {"lte": instant}}},
        {
            "bool": {
                "should": [
                    {"bool": {"must_not": [{"exists": {"field": "invalidated_at"}}]}},
                    {"range": {"invalidated_at": {"gt": instant}}},
                ],
                "minimum_should_match": 1,
            }
        },
    ]
    assert filter_clauses(request(as_of=instant, include="all")) == [
        *ISOLATION,
        {"range": {"written_at": {"lte": instant}}},
    ]


@pytest.mark.parametrize(
    ("raw", "clause"),
    [
        ({"field": "attributes.account", "op": "eq", "value": "acme"}, {"term": {"attr_values": '["account"]sacme'}}),
        (
            {"field": "attributes.n", "op": "gt", "value": 2},
            {"range": {"attr_values": {"gt": '["n"]n' + sortable_number(2), "lt": '["n"]o'}}},
        ),
        (
            {"field": "attributes.a.b", "op": "lte", "value": "m"},
            {"range": {"attr_values": {"gte": '["a","b"]s', "lte": '["a","b"]sm'}}},
        ),
        ({"field": "attributes.x", "op": "exists", "value": True}, {"term": {"attr_paths": '["x"]'}}),
        (
            {"field": "attributes.x", "op": "ne", "value": None},
            {"bool": {"must_not": [{"term": {"attr_values": '["x"]z'}}]}},
        ),
        ({"field": "attributes.x", "op": "gt", "value": True}, {"match_none": {}}),
        ({"field": "type", "op": "in", "value": ["fact", 3]}, {"term": {"type": "fact"}}),
        ({"field": "type", "op": "exists", "value": False}, {"match_none": {}}),
        (
            {"field": "time.valid_to", "op": "eq", "value": None},
            {"bool": {"must_not": [{"exists": {"field": "valid_to"}}]}},
        ),
        (
            {"field": "time.valid_from", "op": "gte", "value": "2026-01-01T00:00:00Z"},
            {"range": {"valid_from": {"gte": "2026-01-01T00:00:00.000Z"}}},
        ),
        (
            {
                "or": [
                    {"field": "type", "value": "fact"},
                    {"not": {"field": "attributes.k", "op": "exists", "value": True}},
                ]
            },
            {
                "bool": {
                    "should": [{"term": {"type": "fact"}}, {"bool": {"must_not": [{"term": {"attr_paths": '["k"]'}}]}}],
                    "minimum_should_match": 1,
                }
            },
        ),
    ],
)
def test_field_filters_translate_to_typed_clauses(raw: dict[str, Any], clause: dict[str, Any]) -> None:
    assert filter_clauses(request(filters=raw, include="all")) == [*ISOLATION, clause]


def test_a_filter_that_matches_everything_adds_no_clause() -> None:
    everything = {"field": "type", "op": "exists", "value": True}
    assert filter_clauses(request(filters=everything)) == [*ISOLATION, ACTIVE]


# -- isolation cannot be removed ---------------------------------------------------------------

FIELD_NAMES = st.sampled_from(
    ["type", "attributes.tenant", "attributes.memory_id", "attributes.x.y", "time.written_at", "time.invalidated_at"]
)
VALUES = st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.none(), st.just("globex"), st.just("*"))


def raw_filters() -> st.SearchStrategy[Any]:
    def leaf(field: str, op: str, value: Any, flag: bool) -> dict[str, Any]:
        if field.startswith("time."):
            value = "2026-10-01T00:00:00Z"
        if op == "exists":
            return {"field": field, "op": op, "value": flag}
        if op in ("in", "nin"):
            return {"field": field, "op": op, "value": [value]}
        return {"field": field, "op": op, "value": value}

    leaves = st.builds(
        leaf, FIELD_NAMES, st.sampled_from(["eq", "ne", "lt", "gte", "in", "nin", "exists"]), VALUES, st.booleans()
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(lambda p: {"or": p}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda p: {"and": p}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda p: {"not": p}, inner),
        ),
        max_leaves=8,
    )


def fields_used(node: Any) -> list[str]:
    """Every field a clause anywhere in this body reads."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("term", "terms", "range") and isinstance(value, dict):
                found.extend(value)
            elif key == "exists":
                found.append(value["field"])
            found.extend(fields_used(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(fields_used(item))
    return found


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    raw=raw_filters(),
    types=st.lists(st.sampled_from(["fact", "note", "*"]), max_size=2),
    include=st.sampled_from(["active", "all"]),
    as_of=st.sampled_from([None, "2026-10-01T00:00:00Z"]),
)
def test_no_request_can_remove_or_widen_the_isolation_filter(
    raw: Any, types: list[str], include: str, as_of: str | None
) -> None:
    req = request(filters=raw, types=tuple(types), include=include, as_of=as_of)
    around = [neighbours_body(req, ("episode",), 4, CENTRE, before) for before in (True, False)]
    for body in (knn_body(req, [1.0, 0.0], 10), bm25_body(req, ["acme"], 10), recency_body(req, 10), *around):
        outer = body["query"]["bool"]
        assert outer["filter"][:2] == ISOLATION
        assert set(outer) <= {"filter", "must"}  # no should/must_not at the top that could widen it
        for clause in outer.get("must", []):
            if "knn" in clause:
                assert clause["knn"]["embedding"]["filter"]["bool"]["filter"][:2] == ISOLATION
        # tenant and memory_id are read by the isolation clauses and nowhere else
        used = fields_used(body)
        assert used.count("tenant") == used.count("memory_id") == (2 if "knn" in str(body) else 1)


def test_the_log_around_a_candidate_is_read_in_write_order_inside_the_same_filter() -> None:
    req = request(filters={"field": "attributes.speaker", "op": "eq", "value": "bob"})
    centre = CENTRE
    before = neighbours_body(req, ("episode",), 4, centre, before=True)
    assert before["size"] == 4  # the reach ranking asks for (twice the context window)
    assert before["sort"] == [{"written_at": "desc"}, {"record_id": "desc"}]
    clauses = before["query"]["bool"]["filter"]
    # The request's own filter (the memory, active versions, speaker bob), written out.
    assert clauses[:-2] == [*ISOLATION, ACTIVE, {"term": {"attr_values": '["speaker"]sbob'}}]
    assert clauses[-2] == {"terms": {"type": ["episode"]}}
    assert clauses[-1] == {
        "bool": {
            "should": [
                {"range": {"written_at": {"lt": centre.written_at}}},
                {
                    "bool": {
                        "filter": [
                            {"term": {"written_at": centre.written_at}},
                            {"range": {"record_id": {"lt": centre.record_id}}},
                        ]
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }
    after = neighbours_body(req, ("episode",), 4, centre, before=False)
    assert after["sort"] == [{"written_at": "asc"}, {"record_id": "asc"}]
    later = after["query"]["bool"]["filter"][-1]["bool"]["should"]
    assert later[0] == {"range": {"written_at": {"gt": centre.written_at}}}
    assert later[1]["bool"]["filter"][1] == {"range": {"record_id": {"gt": centre.record_id}}}
    # The query vector is never sent with the log's searches: one similarity search scores them all.
    assert neighbours_body(replace(req, vector=[0.6, 0.8]), ("episode",), 4, centre, before=False) == after


def test_the_similarity_of_other_documents_is_scored_exactly_inside_the_memory() -> None:
    body = similarity_body(request(), [0.6, 0.8], ["hrec_1", "hrec_2"])
    assert body == {
        "size": 2,
        "_source": ["record_id"],
        "query": {
            "script_score": {
                "query": {
                    "bool": {
                        "filter": [
                            *ISOLATION,
                            {"terms": {"record_id": ["hrec_1", "hrec_2"]}},
                            {"exists": {"field": "embedding"}},
                        ]
                    }
                },
                "script": SIMILARITY,
            }
        },
    }


def test_a_filter_cannot_name_the_tenant_or_the_memory_fields() -> None:
    for field in ("tenant", "memory_id", "status", "attr_values", "_id"):
        with pytest.raises(MemoryInvalid):
            parse_filter({"field": field, "op": "eq", "value": "globex"})
    clauses = filter_clauses(request(filters={"field": "attributes.tenant", "op": "eq", "value": "globex"}))
    assert clauses == [*ISOLATION, ACTIVE, {"term": {"attr_values": '["tenant"]sglobex'}}]


@pytest.mark.slow
@given(st.lists(st.one_of(st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False)), min_size=2))
def test_numbers_encode_in_their_order(numbers: list[float]) -> None:
    by_value = sorted(numbers)
    by_code = sorted(numbers, key=sortable_number)
    assert [float(x) for x in by_value] == [float(x) for x in by_code]
    assert sortable_number(0.0) == sortable_number(-0.0) == sortable_number(0)


# -- the adapter over a recording client -------------------------------------------------------


class RecordingClient:
    """Answers from canned responses and records every call."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.indices = self

    def _answer(self, name: str, **kwargs: Any) -> Any:
        self.calls.append((name, kwargs))
        answer = self.answers.get(name)
        if isinstance(answer, Exception):
            raise answer
        return answer() if callable(answer) else answer

    def exists(self, **kwargs: Any) -> Any:
        return self._answer("exists", **kwargs)

    def create(self, **kwargs: Any) -> Any:
        return self._answer("create", **kwargs)

    def get_mapping(self, **kwargs: Any) -> Any:
        return self._answer("get_mapping", **kwargs)

    def get(self, **kwargs: Any) -> Any:
        return self._answer("get", **kwargs)

    def msearch(self, **kwargs: Any) -> Any:
        return self._answer("msearch", **kwargs)

    def bulk(self, **kwargs: Any) -> Any:
        return self._answer("bulk", **kwargs)


def mapping(model_id: str = "m", dimensions: int = 2) -> dict[str, Any]:
    return {"recall": {"mappings": index_body(model_id, dimensions)["mappings"]}}


def test_the_index_is_created_once_and_its_model_checked() -> None:
    client = RecordingClient(exists=False, create={"acknowledged": True}, get_mapping=mapping())
    index = OpenSearchIndex(client, "recall", model_id="m", dimensions=2)
    index.ensure_index()
    index.ensure_index()
    assert [name for name, _ in client.calls] == ["exists", "create", "get_mapping"]
    assert client.calls[1][1]["body"] == index_body("m", 2)
    other = OpenSearchIndex(
        RecordingClient(exists=True, get_mapping=mapping("m", 3)), "recall", model_id="m", dimensions=2
    )
    with pytest.raises(EmbeddingModelMismatch):
        other.ensure_index()


def test_a_read_of_an_index_not_made_yet_finds_nothing_and_never_creates_it() -> None:
    """A new stage's first recall comes before its first write: read-only functions may not create the
    index (least privilege), and a missing index holds nothing to find."""
    client = RecordingClient(exists=False)
    index = OpenSearchIndex(client, "recall", model_id="m", dimensions=2)
    request = SearchRequest(TENANT, MEMORY, vector=[1.0, 0.0], text="acme")
    asked = CandidateQuery(by_meaning=True, terms=("acme",), depth=10, newest=5)
    assert index.candidates(request, asked) == {}
    assert index.mentioned(request, ["acme"]) == frozenset()
    assert [name for name, _ in client.calls] == ["exists", "exists"]


def test_a_document_fetched_by_id_is_checked_against_tenant_and_memory() -> None:
    foreign = {"found": True, "_source": {**document_source(document(tenant="globex")), "record_id": "hrec_1"}}
    client = RecordingClient(exists=True, get_mapping=mapping(), get=foreign)
    index = OpenSearchIndex(client, "recall", model_id="m", dimensions=2)
    assert index.get(TENANT, MEMORY, "hrec_1") is None  # even if the store answered with another's document
    client.answers["get"] = {"found": True, "_source": document_source(document(memory_id="hmem_" + "b" * 32))}
    assert index.get(TENANT, MEMORY, "hrec_1") is None
    client.answers["get"] = {"found": True, "_source": document_source(document())}
    found = index.get(TENANT, MEMORY, "hrec_1")
    assert found is not None and found.text == "Acme renews"  # noqa: PT018
    assert client.calls[-1] == ("get", {"index": "recall", "id": doc_id(TENANT, MEMORY, "hrec_1"), "ignore": [404]})


def source(record_id: str, type: str = "fact", at: str = "2026-01-01T00:00:00.000Z") -> dict[str, Any]:
    """A hit's `_source` as a search of the adapter asks for it (SEARCH_SOURCE)."""
    return {"record_id": record_id, "chain_id": record_id, "type": type, "written_at": at, "memory_id": MEMORY}


def test_one_msearch_carries_both_signals_and_ranking_fuses_them() -> None:
    knn_hits = [
        {"_score": 0.9, "_source": source("r1")},
        {"_score": 0.7, "_source": source("r2")},
        {"_score": 0.4, "_source": source("r3")},
    ]  # cos < 0: dropped
    bm25_hits = [{"_score": 3.0, "_source": source("r2")}]
    signals = {"responses": [{"hits": {"hits": knn_hits}}, {"hits": {"hits": bm25_hits}}]}
    answers = iter([counted(10, 100, 2, 3), signals])
    client = RecordingClient(exists=True, get_mapping=mapping(), msearch=lambda: next(answers))
    index = OpenSearchIndex(client, "recall", model_id="m", dimensions=2)
    hits = rank(index, request(vector=[1.0, 0.0], text="renewal", limit=5), Fusion(candidates=20))
    # The word's counts, then both signals; no episode, nothing found outside the cut.
    counts, (_, call) = [c for c in client.calls if c[0] == "msearch"]
    assert len(counts[1]["body"]) == 2 * 4  # the memory's and the index's documents, and the word's
    payload = call["body"]
    assert payload[0] == payload[2] == {"index": "recall"}
    # The bodies as sent, written out (not rebuilt by the builders that made them).
    assert payload[1] == {
        "size": 20,
        "_source": SOURCE,
        "query": {"bool": {
            "filter": [*ISOLATION, ACTIVE],
            "must": [{"knn": {"embedding": {
                "vector": [1.0, 0.0], "k": 20, "filter": {"bool": {"filter": [*ISOLATION, ACTIVE]}},
                "method_parameters": {"ef_search": 80}}}}],
        }},
    }
    assert payload[3] == {
        "size": 20,
        "_source": SOURCE,
        "query": {"bool": {"filter": [*ISOLATION, ACTIVE], "must": [{"bool": {
            # log(8.5 / 2.5) / log(1 + 97.5 / 3.5): its rarity in the memory, not in the index
            "should": [{"match": {"text": {"query": "renewal", "boost": 0.363964}}}], "minimum_should_match": 1}}]}},
        "sort": [{"_score": "desc"}, {"record_id": "asc"}],
    }
    assert [h.record_id for h in hits] == ["r2", "r1"]
    assert hits[0].why == ("query", "text")
    assert hits[0].signals == {"query": pytest.approx(0.4), "text": 3.0}


def counted(*totals: int) -> dict[str, Any]:
    """The answer of word_count_bodies' searches: how many documents each matched."""
    return {"responses": [{"hits": {"total": {"value": n, "relation": "eq"}, "hits": []}} for n in totals]}


def logged(source: dict[str, Any]) -> dict[str, Any]:
    """A hit of log_body's search: doc values, a list of one value each, no source."""
    return {"_score": None, "fields": {name: [value] for name, value in source.items()}}


@pytest.mark.parametrize("log", ["whole", "around each centre"])
def test_the_log_then_one_similarity_search_complete_the_signals_and_refused_they_fall_back(
    log: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory's log read whole in one search (its ids and times from doc values, in write order
    inside the memory's filter), or, longer than WHOLE_LOG_MAX, around each centre (two sorted searches
    each); then one similarity search."""
    episode, after, fact = source("r1", "episode"), source("r2", "episode"), source("r3")
    around: list[dict[str, Any]] = []
    if log != "whole":
        monkeypatch.setattr(opensearch_index, "WHOLE_LOG_MAX", 1)
        around = [{"responses": [{"hits": {"hits": []}}, {"hits": {"hits": [{"_source": after}]}}]}]
    answers = iter([
        counted(3, 3, 2, 2),
        {"responses": [
            {"hits": {"hits": [{"_score": 0.9, "_source": episode}]}},
            {"hits": {"hits": [{"_score": 2.0, "_source": episode}, {"_score": 1.0, "_source": fact}]}},
        ]},
        {"responses": [{"hits": {"hits": [logged(episode), logged(after)]}}]},
        *around,
        {"responses": [{"hits": {"hits": [
            {"_score": 1.8, "_source": {"record_id": "r1"}},
            {"_score": 1.5, "_source": {"record_id": "r2"}},
            {"_score": 1.4, "_source": {"record_id": "r3"}},
        ]}}]},
    ])
    client = RecordingClient(exists=True, get_mapping=mapping(), msearch=lambda: next(answers))
    index = OpenSearchIndex(client, "recall", model_id="m", dimensions=2)
    asked = request(vector=[1.0, 0.0], text="renewal", limit=5)
    hits = rank(index, asked)
    calls = [c[1]["body"] for c in client.calls if c[0] == "msearch"][1:]  # after the word's counts
    # The signals; the memory's log; (around r1: before, after); one similarity search.
    assert len(calls) == (3 if log == "whole" else 4)
    assert calls[1][1] == {
        "size": opensearch_index.WHOLE_LOG_MAX + 1,
        "_source": False,
        "docvalue_fields": ["record_id", "chain_id", "type", "memory_id",
                            {"field": "written_at", "format": "strict_date_optional_time"}],
        "query": {"bool": {"filter": [*ISOLATION, ACTIVE, {"terms": {"type": ["episode"]}}]}},
        "sort": [{"written_at": "asc"}, {"record_id": "asc"}],
    }
    if log != "whole":  # the log around r1, read in write order inside the memory's filter: two before, two after
        at = episode["written_at"]
        for body, order, side in ((calls[2][1], "desc", "lt"), (calls[2][3], "asc", "gt")):
            assert body["size"] == 4
            assert body["sort"] == [{"written_at": order}, {"record_id": order}]
            clauses = body["query"]["bool"]["filter"]
            assert clauses[:3] == [*ISOLATION, ACTIVE]
            assert clauses[-2] == {"terms": {"type": ["episode"]}}
            assert clauses[-1]["bool"]["should"][0] == {"range": {"written_at": {side: at}}}
            assert clauses[-1]["bool"]["should"][1]["bool"]["filter"] == [
                {"term": {"written_at": at}}, {"range": {"record_id": {side: "r1"}}}]
    # The log's entries and what the words found outside the vector cut (r3), in one search.
    assert calls[-1][1] == {
        "size": 3,
        "_source": ["record_id"],
        "query": {"script_score": {
            "query": {"bool": {"filter": [*ISOLATION, {"terms": {"record_id": ["r1", "r2", "r3"]}},
                                          {"exists": {"field": "embedding"}}]}},
            "script": {**SIMILARITY, "params": {"field": "embedding", "query_value": [1.0, 0.0]}},
        }},
    }
    by_id = {h.record_id: h for h in hits}
    # r2 joins with its own similarity (0.5, a share 0.625 of the best) and is lifted by r1 beside it.
    assert by_id["r2"].signals == {"query": pytest.approx(0.5)}
    assert "context" in by_id["r2"].why
    assert by_id["r3"].signals == {"query": pytest.approx(0.4), "text": 1.0}

    refused = iter([
        counted(3, 3, 2, 2),
        {"responses": [{"hits": {"hits": [{"_score": 0.9, "_source": episode}]}}, {"hits": {"hits": []}}]},
        {"responses": [{"error": {"type": "search_phase_execution_exception"}}]},
    ])
    client = RecordingClient(exists=True, get_mapping=mapping(), msearch=lambda: next(refused))
    hits = rank(OpenSearchIndex(client, "recall", model_id="m", dimensions=2), asked)
    assert [h.record_id for h in hits] == ["r1"]


def test_failures_of_the_cluster_are_unavailable() -> None:
    class ConnectionError(Exception):
        pass

    client = RecordingClient(exists=True, get_mapping=mapping(), msearch=ConnectionError("down"))
    index = OpenSearchIndex(client, "recall", model_id="m", dimensions=2)
    with pytest.raises(SearchUnavailable):
        rank(index, request(text="x"))
    client.answers["msearch"] = {"responses": [{"error": {"type": "search_phase_execution_exception"}}]}
    with pytest.raises(SearchUnavailable):
        rank(index, request(text="x"))
    client.answers["bulk"] = {"errors": True, "items": [{"index": {"error": {"type": "mapper_parsing_exception"}}}]}
    with pytest.raises(SearchUnavailable):
        index.index([document()])
    client.answers["bulk"] = {
        "errors": True,
        "items": [{"index": {"error": {"type": "version_conflict_engine_exception"}}}],
    }
    index.index([document()])  # a late image of a closed version: ignored


@pytest.mark.slow
def test_ports_ranking_opensearch_and_bedrock_import_without_numpy_or_onnxruntime() -> None:
    script = (
        "import sys\n"
        "sys.modules['numpy'] = None\n"
        "sys.modules['onnxruntime'] = None\n"
        "sys.modules['tokenizers'] = None\n"
        "import uhp_memories.domain.recall.engine, uhp_memories.domain.recall.ports, uhp_memories.adapters.opensearch\n"
        "import uhp_memories.domain.recall.ranking, uhp_memories.domain.recall.fusion\n"
        "import uhp_memories.adapters.opensearch.index\n"
        "import uhp_memories.adapters.bedrock.embedder, uhp_memories.local.hashing\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


# -- through opensearch-py, over HTTP on the loopback ------------------------------------------


class CannedOpenSearch(http.server.BaseHTTPRequestHandler):
    """Answers the calls the adapter makes with canned bodies, and records each request."""

    seen: list[tuple[str, str, Any]] = []

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        text = raw.decode()
        body = (
            [json.loads(line) for line in text.splitlines() if line]
            if "\n" in text.strip()
            else (json.loads(text) if text else None)
        )
        self.seen.append((self.command, self.path, body))
        path = self.path.split("?")[0]
        status, answer = 200, {}
        if self.command == "HEAD":
            status = 404
        elif self.command == "GET" and path == "/recall/_mapping":
            answer = mapping("m", 2)
        elif path == "/_bulk":
            answer = {"errors": False, "items": []}
        elif path == "/_msearch":
            answer = {
                "responses": [{"hits": {"hits": [{"_score": 1.0, "_source": source("r1")}]}}]
            }
        elif self.command == "GET" and path.startswith("/recall/_doc/"):
            status, answer = 404, {"found": False}
        elif path.endswith("/_delete_by_query"):
            answer = {"deleted": 0}
        else:
            answer = {"acknowledged": True}
        payload = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _reply

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_the_adapter_speaks_to_a_cluster_through_opensearch_py() -> None:
    from uhp_memories.adapters.opensearch import connect

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CannedOpenSearch)
    CannedOpenSearch.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = connect(f"http://127.0.0.1:{server.server_address[1]}", timeout=5)
        index = OpenSearchIndex(client, "recall", model_id="m", dimensions=2)
        index.index([document(embedding=[0.6, 0.8])])
        hits = rank(index, request(vector=[1.0, 0.0], limit=3))
        assert index.get(TENANT, MEMORY, "hrec_1") is None
        index.delete(TENANT, MEMORY, ["hrec_1"])
        index.delete_memory(TENANT, MEMORY)
    finally:
        server.shutdown()
        server.server_close()
    assert [h.record_id for h in hits] == ["r1"]
    calls = [(method, path.split("?")[0]) for method, path, _ in CannedOpenSearch.seen]
    assert calls == [
        ("HEAD", "/recall"),
        ("PUT", "/recall"),
        ("GET", "/recall/_mapping"),
        ("POST", "/_bulk"),
        ("POST", "/_msearch"),
        ("GET", f"/recall/_doc/{quote(doc_id(TENANT, MEMORY, 'hrec_1'), safe='')}"),
        ("POST", "/_bulk"),
        ("POST", "/recall/_delete_by_query"),
    ]
    created, bulk = CannedOpenSearch.seen[1][2], CannedOpenSearch.seen[3]
    assert created == index_body("m", 2)
    assert "refresh=wait_for" in bulk[1]
    assert bulk[2] == bulk_index_actions("recall", [document(embedding=[0.6, 0.8])])
