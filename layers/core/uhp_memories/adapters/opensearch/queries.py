"""The request bodies of the OpenSearch recall index, built here so unit tests pin them without a
cluster: the index mapping, the documents and bulk actions, and every search the adapter sends.

Isolation is `enforced_filter` (§10.3). Every search body is a bool query whose `filter` list starts
with the tenant and memory id terms (`isolation_filter`); a request's own filters are translated to
further clauses that can only narrow it, and the k-NN clause carries the same filter list inside
itself, so the nearest neighbours are found among the memory's admitted documents only (efficient
filtering, Lucene HNSW), before the top-k cut.

Attributes are kept in `_source` as they are (not indexed: no mapping grows with tenants' keys) and
flattened into two keyword fields for filtering: `attr_paths` (one entry per reachable path, for
`exists`) and `attr_values` (path + kind + value, numbers as order-preserving hex), so equality and
ranges keep the typing rules of domain/filters.py: a number never equals a string, a bool never a
number.

No numpy here: this module is imported by deployed handlers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from uhp_memories.adapters.predicates import (
    BOOLEAN,
    NULL,
    NUMBER,
    STRING,
    All,
    Any_,
    Compare,
    Const,
    Equals,
    FieldRef,
    Not,
    Predicate,
    Present,
    attribute_leaves,
    lower,
    path_key,
    sortable_number,
)
from uhp_memories.domain.recall.model import Candidate, SearchDocument, SearchRequest
from uhp_memories.domain.timefmt import parse_instant

SCHEMA_VERSION = "1"
MATCH_ALL: dict[str, Any] = {"match_all": {}}
MATCH_NONE: dict[str, Any] = {"match_none": {}}
SEARCH_SOURCE = ["record_id", "chain_id", "type", "written_at", "memory_id"]
LOG_FIELDS = ["record_id", "chain_id", "type", "memory_id"]  # log_body's keyword doc values (and written_at)
# The query's cosine similarity to a stored vector, plus one (a script score must not be negative).
# Painless's k-NN function: its meaning has not changed across OpenSearch versions, unlike knn_score's.
# It throws on a document without the vector: similarity_body searches only documents that have one.
SIMILARITY_SCRIPT = "1.0 + cosineSimilarity(params.query_value, doc[params.field])"
_OPEN, _CLOSED = 1, 2  # external document versions: a closed version never reopens
# The HNSW graph is searched this many candidates wide per result asked. At Lucene's default (as wide as
# k) the real 2.19 node missed part of the exact top 100 in some LoCoMo questions (none in the top 10);
# four times as wide, none, at no cost measured on those memories (docs/performance.md,
# "What a real OpenSearch 2.19 refused or did differently from the stand-in", 2).
EF_SEARCH_PER_RESULT = 4


def similarity_of(hit: dict[str, Any]) -> float:
    """The cosine similarity a similarity_body search scored a hit with."""
    return float(hit["_score"]) - 1.0


# -- the index ---------------------------------------------------------------------------------


def index_body(
    model_id: str, dimensions: int, *, shards: int = 1, replicas: int = 1, m: int = 16, ef_construction: int = 128
) -> dict[str, Any]:
    """Settings and mappings of the recall index. The embedding model is recorded in `_meta`."""
    keyword = {"type": "keyword"}
    date = {"type": "date", "format": "strict_date_optional_time"}
    return {
        "settings": {
            "index": {"knn": True, "number_of_shards": shards, "number_of_replicas": replicas},
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {"uhp": {"model_id": model_id, "dimensions": dimensions, "schema": SCHEMA_VERSION}},
            "properties": {
                "tenant": keyword,
                "memory_id": keyword,
                "record_id": keyword,
                "chain_id": keyword,
                "type": keyword,
                "status": keyword,
                "valid_from": date,
                "valid_to": date,
                "written_at": date,
                "invalidated_at": date,
                "text": {"type": "text", "analyzer": "english"},
                "attributes": {"type": "object", "enabled": False},
                "attr_paths": keyword,
                "attr_values": keyword,
                "embedding": {
                    "type": "knn_vector",
                    "dimension": dimensions,
                    "method": {
                        "name": "hnsw",
                        "engine": "lucene",
                        "space_type": "cosinesimil",
                        "parameters": {"m": m, "ef_construction": ef_construction},
                    },
                },
            },
        },
    }


def doc_id(tenant: str, memory_id: str, record_id: str) -> str:
    """The document id: one version of one record of one memory of one tenant."""
    return f"{tenant}/{memory_id}/{record_id}"


def document_source(doc: SearchDocument) -> dict[str, Any]:
    paths: list[str] = []
    values: list[str] = []
    for parts, kind, value in attribute_leaves(doc.attributes):
        key = path_key(parts)
        paths.append(key)
        if kind in (STRING, NUMBER, BOOLEAN, NULL):
            values.append(_attr_term(key, kind, value))
    source: dict[str, Any] = {
        "tenant": doc.tenant,
        "memory_id": doc.memory_id,
        "record_id": doc.record_id,
        "chain_id": doc.chain_id,
        "type": doc.type,
        "status": doc.status,
        "valid_from": _instant(doc.valid_from),
        "valid_to": _instant(doc.valid_to),
        "written_at": _instant(doc.written_at),
        "invalidated_at": _instant(doc.invalidated_at),
        "text": doc.text,
        "attributes": dict(doc.attributes),
        "attr_paths": paths,
        "attr_values": values,
    }
    if doc.embedding is not None:
        source["embedding"] = [float(x) for x in doc.embedding]
    return source


def bulk_index_actions(index: str, docs: Sequence[SearchDocument]) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = []
    for doc in docs:
        actions.append(
            {
                "index": {
                    "_index": index,
                    "_id": doc_id(doc.tenant, doc.memory_id, doc.record_id),
                    "version": _OPEN if doc.invalidated_at is None else _CLOSED,
                    "version_type": "external_gte",
                }
            }
        )
        actions.append(document_source(doc))
    return actions


def bulk_delete_actions(index: str, tenant: str, memory_id: str, record_ids: Sequence[str]) -> list[dict[str, Any]]:
    return [{"delete": {"_index": index, "_id": doc_id(tenant, memory_id, rid)}} for rid in record_ids]


# -- queries -----------------------------------------------------------------------------------


def isolation_filter(tenant: str, memory_id: str, *more_memory_ids: str) -> list[dict[str, Any]]:
    """The clauses every read carries first. Nothing a request says can remove them. A search of
    several memories (a recall with depth) names them all, and nothing else."""
    if more_memory_ids:
        return [{"term": {"tenant": tenant}}, {"terms": {"memory_id": [memory_id, *more_memory_ids]}}]
    return [{"term": {"tenant": tenant}}, {"term": {"memory_id": memory_id}}]


def filter_clauses(request: SearchRequest) -> list[dict[str, Any]]:
    """Isolation first, then visibility (include, as_of), types, and the request's field filters."""
    clauses = isolation_filter(request.tenant, *request.memory_ids)
    if request.as_of is None:
        if request.include == "active":
            clauses.append({"term": {"status": "active"}})
    else:
        clauses.append({"range": {"written_at": {"lte": request.as_of}}})
        if request.include == "active":
            still_open = _not({"exists": {"field": "invalidated_at"}})
            clauses.append(_any([still_open, {"range": {"invalidated_at": {"gt": request.as_of}}}]))
    if request.types:
        clauses.append({"terms": {"type": list(request.types)}})
    predicate = lower(request.filters)
    if predicate != Const(True):
        clauses.append(predicate_query(predicate, request.as_of))
    return clauses


def knn_body(request: SearchRequest, vector: Sequence[float], depth: int) -> dict[str, Any]:
    clauses = filter_clauses(request)
    knn = {
        "embedding": {
            "vector": [float(x) for x in vector],
            "k": depth,
            "filter": {"bool": {"filter": clauses}},
            "method_parameters": {"ef_search": EF_SEARCH_PER_RESULT * depth},
        }
    }
    return {
        "size": depth,
        "_source": SEARCH_SOURCE,
        "query": {"bool": {"filter": filter_clauses(request), "must": [{"knn": knn}]}},
    }


def bm25_body(
    request: SearchRequest, terms: Sequence[str], depth: int, weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The best `depth` admitted documents by BM25, each word weighed by `weights` (word_weights)."""
    weights = weights or {}
    words = [{"match": {"text": {"query": t, "boost": round(weights.get(t, 1.0), 6)}}} for t in terms]
    return {
        "size": depth,
        "_source": SEARCH_SOURCE,
        "query": {
            "bool": {
                "filter": filter_clauses(request),
                "must": [{"bool": {"should": words, "minimum_should_match": 1}}],
            }
        },
        "sort": [{"_score": "desc"}, {"record_id": "asc"}],
    }


def word_count_bodies(request: SearchRequest, terms: Sequence[str]) -> list[dict[str, Any]]:
    """What word_weights reads, counted by size-0 searches: the documents with text in the request's
    memories and in the whole index, then, for each word, those holding it in the memories and in the
    index."""
    scope = isolation_filter(request.tenant, *request.memory_ids)

    def count(*clauses: dict[str, Any]) -> dict[str, Any]:
        return {"size": 0, "track_total_hits": True, "query": {"bool": {"filter": list(clauses)}}}

    with_text = {"exists": {"field": "text"}}
    bodies = [count(*scope, with_text), count(with_text)]
    for term in terms:
        bodies += [count(*scope, {"match": {"text": term}}), count({"match": {"text": term}})]
    return bodies


def word_weights(terms: Sequence[str], counts: Sequence[int]) -> dict[str, float]:
    """Each word's boost, from word_count_bodies' counts: Lucene weighs a word by its rarity in the
    whole index (every memory of every tenant: log(1 + (N - n + 0.5) / (n + 0.5))), the embedded engine
    by its rarity in the memory (FTS5: log((N - n + 0.5) / (n + 0.5)), at least 1e-6); the boost turns
    the first into the second, so a word that runs through one memory (a speaker's name in every turn
    of a conversation) weighs as little as it does there. On LoCoMo (six conversations in one index),
    without it, R@10 fell well short of the embedded engine's (measured: docs/performance.md,
    "What a real OpenSearch 2.19 refused or did differently from the stand-in", 4)."""
    memory_docs, index_docs = counts[0], counts[1]
    weights = {}
    for i, term in enumerate(terms):
        in_memory, in_index = counts[2 + 2 * i], counts[3 + 2 * i]
        if not in_index:
            continue  # no document holds it: nothing to weigh
        lucene = math.log(1 + (index_docs - in_index + 0.5) / (in_index + 0.5))
        fts5 = max(math.log((memory_docs - in_memory + 0.5) / (in_memory + 0.5)), 1e-6)
        weights[term] = fts5 / lucene
    return weights


def mention_body(request: SearchRequest, term: str) -> dict[str, Any]:
    """Whether any admitted document holds the word: the first one found is enough."""
    return {
        "size": 1,
        "terminate_after": 1,
        "_source": ["record_id"],
        "query": {"bool": {"filter": filter_clauses(request), "must": [{"match": {"text": {"query": term}}}]}},
    }


def recency_body(request: SearchRequest, limit: int) -> dict[str, Any]:
    return {
        "size": limit,
        "_source": SEARCH_SOURCE,
        "query": {"bool": {"filter": filter_clauses(request)}},
        "sort": [{"written_at": "desc"}, {"record_id": "desc"}],
    }


def neighbours_body(
    request: SearchRequest, types: Sequence[str], reach: int, doc: Candidate, before: bool
) -> dict[str, Any]:
    """The `reach` documents of `types` that the request admits, logged just before (or after) one
    document, nearest first: the log is written_at, then record id (ids grow in the order they were
    made, so the episodes of one observe call keep their order)."""
    op, order = ("lt", "desc") if before else ("gt", "asc")
    beside = {
        "bool": {
            "should": [
                {"range": {"written_at": {op: doc.written_at}}},
                {
                    "bool": {
                        "filter": [
                            {"term": {"written_at": doc.written_at}},
                            {"range": {"record_id": {op: doc.record_id}}},
                        ]
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }
    clauses = [*filter_clauses(request), {"terms": {"type": list(types)}}, beside]
    return {
        "size": reach,
        "_source": SEARCH_SOURCE,
        "query": {"bool": {"filter": clauses}},
        "sort": [{"written_at": order}, {"record_id": order}],
    }


def log_body(request: SearchRequest, types: Sequence[str], size: int) -> dict[str, Any]:
    """The first `size` documents of `types` that the request admits in one memory's log, oldest
    first (written_at, then record id, as neighbours_body orders them): their ids, type and time only,
    read from doc values, never from the source (which holds the vector)."""
    clauses = [*filter_clauses(request), {"terms": {"type": list(types)}}]
    return {
        "size": size,
        "_source": False,
        "docvalue_fields": [*LOG_FIELDS, {"field": "written_at", "format": "strict_date_optional_time"}],
        "query": {"bool": {"filter": clauses}},
        "sort": [{"written_at": "asc"}, {"record_id": "asc"}],
    }


def similarity_body(request: SearchRequest, vector: Sequence[float], record_ids: Sequence[str]) -> dict[str, Any]:
    """The query's similarity to each of these documents of the request's memories that has a vector
    (exact, by script score; similarity_of reads it)."""
    clauses = [
        *isolation_filter(request.tenant, *request.memory_ids),
        {"terms": {"record_id": list(record_ids)}},
        {"exists": {"field": "embedding"}},
    ]
    script = {"source": SIMILARITY_SCRIPT, "params": {"field": "embedding", "query_value": [float(x) for x in vector]}}
    return {
        "size": len(record_ids),
        "_source": ["record_id"],
        "query": {"script_score": {"query": {"bool": {"filter": clauses}}, "script": script}},
    }


def delete_memory_body(tenant: str, memory_id: str) -> dict[str, Any]:
    return {"query": {"bool": {"filter": isolation_filter(tenant, memory_id)}}}


def predicate_query(pred: Predicate, as_of: str | None) -> dict[str, Any]:
    """A lowered filter as query DSL, in filter context."""
    if isinstance(pred, Const):
        return MATCH_ALL if pred.value else MATCH_NONE
    if isinstance(pred, Not):
        return _not(predicate_query(pred.part, as_of))
    if isinstance(pred, All):
        return {"bool": {"filter": [predicate_query(p, as_of) for p in pred.parts]}}
    if isinstance(pred, Any_):
        return _any([predicate_query(p, as_of) for p in pred.parts])
    if pred.field.kind == "attr":
        return _attribute_query(pred)
    return _column_query(pred, as_of)


def _column_query(pred: Present | Equals | Compare, as_of: str | None) -> dict[str, Any]:
    name = _column(pred.field)
    closed_later = name == "invalidated_at" and as_of is not None
    if isinstance(pred, Present):
        # As of T, a close that came after T has not happened yet.
        return {"range": {name: {"lte": as_of}}} if closed_later else {"exists": {"field": name}}
    if isinstance(pred, Equals):
        if closed_later and as_of is not None and pred.value > as_of:
            return MATCH_NONE
        return {"term": {name: pred.value}}
    query = {"range": {name: {pred.op: pred.value}}}
    if closed_later:
        return {"bool": {"filter": [query, {"range": {name: {"lte": as_of}}}]}}
    return query


def _column(ref: FieldRef) -> str:
    if ref.kind == "type":
        return "type"
    if ref.name not in ("valid_from", "valid_to", "written_at", "invalidated_at"):
        raise ValueError(f"unknown time field {ref.name}")
    return ref.name


def _attribute_query(pred: Present | Equals | Compare) -> dict[str, Any]:
    key = pred.field.path_key
    if isinstance(pred, Present):
        return {"term": {"attr_paths": key}}
    if isinstance(pred, Equals):
        return {"term": {"attr_values": _attr_term(key, pred.kind, pred.value)}}
    low, high = key + pred.kind, key + chr(ord(pred.kind) + 1)  # every entry of this path and kind
    bound = _attr_term(key, pred.kind, pred.value)
    if pred.op in ("gt", "gte"):
        return {"range": {"attr_values": {pred.op: bound, "lt": high}}}
    return {"range": {"attr_values": {"gte": low, pred.op: bound}}}


def _attr_term(key: str, kind: str, value: Any) -> str:
    if kind == NUMBER:
        return key + kind + sortable_number(value)
    if kind == BOOLEAN:
        return key + kind + ("1" if value else "0")
    if kind == NULL:
        return key + kind
    return key + kind + str(value)


def _not(query: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"must_not": [query]}}


def _any(queries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"bool": {"should": queries, "minimum_should_match": 1}}


def _instant(value: str | None) -> str | None:
    return None if value is None else parse_instant(value)
