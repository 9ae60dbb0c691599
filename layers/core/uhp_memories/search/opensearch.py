"""The recall index on Amazon OpenSearch: k-NN + BM25 + bool filters in one index.

The index mapping and its creation are this module's (`index_body`, `OpenSearchIndex.ensure_index`);
the module-level functions build every request body, so unit tests pin them without a cluster.

Isolation is `enforced_filter` (§10.3). Every search body is a bool query whose `filter` list starts
with the tenant and memory id terms (`isolation_filter`); a request's own filters are translated to
further clauses that can only narrow it, and the k-NN clause carries the same filter list inside
itself, so the nearest neighbours are found among the memory's admitted documents only (efficient
filtering, Lucene HNSW), before the top-k cut. A document fetched by id is checked against the
tenant and memory id in its source before it is returned.

Recall is one msearch for the two signals; relative fusion then reads, in at most two more, the
episode log around its best candidates (`neighbours_body`, sorted by written_at and record id) and
the query's exact similarity to the documents the words or the log found (`similarity_body`, a
script score), so both adapters fuse the same signals (search/ports.py: Fusion).

Attributes are kept in `_source` as they are (not indexed: no mapping grows with tenants' keys) and
flattened into two keyword fields for filtering: `attr_paths` (one entry per reachable path, for
`exists`) and `attr_values` (path + kind + value, numbers as order-preserving hex), so equality and
ranges keep the typing rules of domain/filters.py: a number never equals a string, a bool never a
number.

No numpy here: this module is imported by deployed handlers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from uhp_memories.domain.timefmt import parse_instant
from uhp_memories.search.errors import EmbeddingModelMismatch, SearchUnavailable
from uhp_memories.search.fusion import (
    Ranked,
    candidate_depth,
    fuse,
    query_terms,
    relative_factors,
    relative_scores,
)
from uhp_memories.search.ports import Fusion, Hit, SearchDocument, SearchRequest
from uhp_memories.search.predicates import (
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

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
MATCH_ALL: dict[str, Any] = {"match_all": {}}
MATCH_NONE: dict[str, Any] = {"match_none": {}}
SEARCH_SOURCE = ["record_id", "chain_id", "type", "written_at", "memory_id"]
# The query's cosine similarity to a stored vector, plus one (a script score must not be negative).
# Painless's k-NN function: its meaning has not changed across OpenSearch versions, unlike knn_score's.
SIMILARITY_SCRIPT = "1.0 + cosineSimilarity(params.query_value, doc[params.field])"
# Relative fusion reads the episode log around this many of its best candidates (3 x the limit, at
# least 30): each costs two small sorted searches, all of them sent in one msearch.
CONTEXT_CANDIDATES_MIN = 30
_OPEN, _CLOSED = 1, 2  # external document versions: a closed version never reopens


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
    knn = {"embedding": {"vector": [float(x) for x in vector], "k": depth, "filter": {"bool": {"filter": clauses}}}}
    return {
        "size": depth,
        "_source": SEARCH_SOURCE,
        "query": {"bool": {"filter": filter_clauses(request), "must": [{"knn": knn}]}},
    }


def bm25_body(request: SearchRequest, terms: Sequence[str], depth: int) -> dict[str, Any]:
    return {
        "size": depth,
        "_source": SEARCH_SOURCE,
        "query": {
            "bool": {
                "filter": filter_clauses(request),
                "must": [{"match": {"text": {"query": " ".join(terms), "operator": "or"}}}],
            }
        },
        "sort": [{"_score": "desc"}, {"record_id": "asc"}],
    }


def recency_body(request: SearchRequest, limit: int) -> dict[str, Any]:
    return {
        "size": limit,
        "_source": SEARCH_SOURCE,
        "query": {"bool": {"filter": filter_clauses(request)}},
        "sort": [{"written_at": "desc"}, {"record_id": "desc"}],
    }


def neighbours_body(request: SearchRequest, fusion: Fusion, doc: dict[str, Any], before: bool) -> dict[str, Any]:
    """The episodes the request admits that were logged just before (or after) one document, nearest
    first, as far as twice the context window: the log is written_at, then record id (ids grow in
    the order they were made, so the episodes of one observe call keep their order)."""
    op, order = ("lt", "desc") if before else ("gt", "asc")
    at, record_id = doc["written_at"], doc["record_id"]
    beside = {
        "bool": {
            "should": [
                {"range": {"written_at": {op: at}}},
                {"bool": {"filter": [{"term": {"written_at": at}}, {"range": {"record_id": {op: record_id}}}]}},
            ],
            "minimum_should_match": 1,
        }
    }
    clauses = [*filter_clauses(request), {"terms": {"type": list(fusion.context_types)}}, beside]
    return {
        "size": 2 * fusion.context_window,
        "_source": SEARCH_SOURCE,
        "query": {"bool": {"filter": clauses}},
        "sort": [{"written_at": order}, {"record_id": order}],
    }


def similarity_body(request: SearchRequest, vector: Sequence[float], record_ids: Sequence[str]) -> dict[str, Any]:
    """The query's similarity to each of these documents of the memory (exact, by script score)."""
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


# -- the adapter -------------------------------------------------------------------------------


class OpenSearchIndex:
    """A SearchIndex on one OpenSearch index, through an injected `opensearchpy.OpenSearch` client.

    `refresh` is passed on writes: "wait_for" (default) makes a write visible to the next search
    (read-your-writes) at the cost of waiting for the next refresh; False leaves it to the index's
    refresh interval. The index is created, or its recorded model checked, on first use."""

    def __init__(
        self,
        client: Any,
        index_name: str,
        *,
        model_id: str,
        dimensions: int,
        fusion: Fusion | None = None,
        refresh: bool | str = "wait_for",
        shards: int = 1,
        replicas: int = 1,
    ) -> None:
        self._client = client
        self._name = index_name
        self._model_id = model_id
        self._dimensions = dimensions
        self._fusion = fusion or Fusion()
        self._refresh = refresh
        self._shards = shards
        self._replicas = replicas
        self._ready = False
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def index_name(self) -> str:
        return self._name

    @property
    def client(self) -> Any:
        return self._client

    def ensure_index(self) -> None:
        """Create the index if it is missing; refuse one recorded with another embedding model."""
        with self._lock:
            if self._ready:
                return
            body = index_body(self._model_id, self._dimensions, shards=self._shards, replicas=self._replicas)
            with _unavailable():
                if not self._client.indices.exists(index=self._name):
                    try:
                        self._client.indices.create(index=self._name, body=body)
                    except Exception as error:  # a concurrent creator may have won the race
                        if "resource_already_exists_exception" not in str(error):
                            raise
                mapping = self._client.indices.get_mapping(index=self._name)
            meta = next(iter(mapping.values()))["mappings"].get("_meta", {}).get("uhp", {})
            if (meta.get("model_id"), meta.get("dimensions")) != (self._model_id, self._dimensions):
                raise EmbeddingModelMismatch(
                    f"{meta.get('model_id')} ({meta.get('dimensions')} dimensions)",
                    f"{self._model_id} ({self._dimensions} dimensions)",
                )
            self._ready = True

    # -- writes ------------------------------------------------------------------------------

    def index(self, docs: Sequence[SearchDocument]) -> None:
        if not docs:
            return
        for doc in docs:
            if doc.embedding is not None:
                _check_vector(doc.embedding, self._dimensions, self._model_id)
        self.ensure_index()
        with _unavailable():
            answer = self._client.bulk(body=bulk_index_actions(self._name, docs), refresh=self._refresh)
        _raise_bulk_errors(answer, tolerated=("version_conflict_engine_exception",))

    def delete(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        if not record_ids:
            return
        self.ensure_index()
        with _unavailable():
            answer = self._client.bulk(
                body=bulk_delete_actions(self._name, tenant, memory_id, record_ids), refresh=self._refresh
            )
        _raise_bulk_errors(answer, tolerated=("not_found",))

    def delete_memory(self, tenant: str, memory_id: str) -> None:
        self.ensure_index()
        with _unavailable():
            self._client.delete_by_query(
                index=self._name, body=delete_memory_body(tenant, memory_id), refresh=True, conflicts="proceed"
            )

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, memory_id: str, record_id: str) -> SearchDocument | None:
        self.ensure_index()
        with _unavailable():
            found = self._client.get(index=self._name, id=doc_id(tenant, memory_id, record_id), ignore=[404])
        source = found.get("_source") if found and found.get("found") else None
        if not source or source.get("tenant") != tenant or source.get("memory_id") != memory_id:
            return None
        if source.get("record_id") != record_id:
            return None
        return SearchDocument(
            tenant=source["tenant"],
            memory_id=source["memory_id"],
            record_id=source["record_id"],
            chain_id=source["chain_id"],
            type=source["type"],
            status=source["status"],
            attributes=source.get("attributes") or {},
            valid_from=source.get("valid_from"),
            valid_to=source.get("valid_to"),
            written_at=source["written_at"],
            invalidated_at=source.get("invalidated_at"),
            text=source.get("text", ""),
            embedding=source.get("embedding"),
        )

    def search(self, request: SearchRequest) -> list[Hit]:
        fusion = request.fusion or self._fusion
        if request.vector is not None:
            _check_vector(request.vector, self._dimensions, self._model_id)
        self.ensure_index()
        depth = candidate_depth(request, fusion)
        legs: dict[str, list[Ranked]] = {}
        bodies: dict[str, dict[str, Any]] = {}
        if request.vector is not None and fusion.query_weight > 0:
            bodies["query"] = knn_body(request, request.vector, depth)
        if request.text is not None and fusion.text_weight > 0:
            terms = query_terms(request.text)
            legs["text"] = []  # asked for, even when no word is left to match
            if terms:
                bodies["text"] = bm25_body(request, terms, depth)
        if request.vector is None and request.text is None:
            bodies["recency"] = recency_body(request, request.limit)
        if bodies:
            payload: list[dict[str, Any]] = []
            for body in bodies.values():
                payload.extend(({"index": self._name}, body))
            with _unavailable():
                answer = self._client.msearch(body=payload)
            found: dict[str, dict[str, Any]] = {}
            for name, hits in zip(bodies, self._responses(answer, list(bodies)), strict=True):
                legs[name] = _ranked(name, hits, fusion)
                kept = {item.record_id for item in legs[name]}
                sources = (hit["_source"] for hit in hits)
                found.update((source["record_id"], source) for source in sources if source["record_id"] in kept)
            if fusion.method == "relative" and legs and "recency" not in legs:
                return fuse(request, fusion, legs, self._completed(request, fusion, legs, found))
        return fuse(request, fusion, legs)

    def _completed(
        self, request: SearchRequest, fusion: Fusion, legs: dict[str, list[Ranked]], found: dict[str, dict[str, Any]]
    ) -> dict[str, float] | None:
        """The context step, which refines a ranking the two signals already made: if the cluster
        refuses or drops it, the recall is answered with the signals' fusion alone, and logged."""
        try:
            return self._complete(request, fusion, legs, found)
        except SearchUnavailable as error:
            logger.warning("recall context step failed; fused the signals alone", extra={"reason": str(error)})
            return None

    def _complete(
        self, request: SearchRequest, fusion: Fusion, legs: dict[str, list[Ranked]], found: dict[str, dict[str, Any]]
    ) -> dict[str, float] | None:
        """What relative fusion reads beyond the two cuts, as the embedded engine does: the episodes
        logged around the best candidates (their context, and candidates of their own), and the
        similarity of every document the words or the log found. Two more round trips at most."""
        factors = relative_factors(fusion, legs)
        logs = self._logs_around(request, fusion, _best_first(legs, factors), found) if fusion.uses_context else []
        # Like the words' finds, the episodes within the window of a candidate join the query signal
        # (the ones further out only weigh their neighbours' context).
        window = fusion.context_window
        joining = {item.record_id for item in legs.get("text", ())}
        joining.update(rid for log, at in logs for rid in log[max(0, at - window) : at + window + 1])
        similarity: dict[str, float] = {}
        if request.vector is not None and "query" in legs:
            similarity = self._similarities(request, fusion, legs, found, joining)
        if not logs:
            return None
        words = {item.record_id: item.score for item in legs.get("text", ())}
        own = {
            rid: factors.get("query", 0.0) * max(similarity.get(rid, 0.0), 0.0)
            + factors.get("text", 0.0) * max(words.get(rid, 0.0), 0.0)
            for rid in found
        }
        return context_of(logs, own, window)

    def _logs_around(
        self, request: SearchRequest, fusion: Fusion, best_first: list[str], found: dict[str, dict[str, Any]]
    ) -> list[tuple[list[str], int]]:
        """For the best candidates that are episodes: the stretch of the log around each (as far as
        twice the window on either side), and where in it the candidate is. Adds what it finds to
        `found`."""
        reach = max(CONTEXT_CANDIDATES_MIN, 3 * request.limit)
        centres = [rid for rid in best_first if found[rid].get("type") in fusion.context_types][:reach]
        if not centres:
            return []
        payload: list[dict[str, Any]] = []
        for rid in centres:
            # The log is each memory's own: read around a document inside its memory only.
            own_memory = replace(request, memory_id=found[rid].get("memory_id") or request.memory_id, also=())
            for before in (True, False):
                payload.extend(({"index": self._name}, neighbours_body(own_memory, fusion, found[rid], before)))
        with _unavailable():
            answer = self._client.msearch(body=payload)
        sides = self._responses(answer, ["context"] * (2 * len(centres)))
        logs = []
        for i, rid in enumerate(centres):
            earlier = [hit["_source"] for hit in reversed(sides[2 * i])]
            later = [hit["_source"] for hit in sides[2 * i + 1]]
            for source in earlier + later:
                found.setdefault(source["record_id"], source)
            stretch = [src["record_id"] for src in earlier] + [rid] + [src["record_id"] for src in later]
            logs.append((stretch, len(earlier)))
        return logs

    def _similarities(
        self,
        request: SearchRequest,
        fusion: Fusion,
        legs: dict[str, list[Ranked]],
        found: dict[str, dict[str, Any]],
        joining: set[str],
    ) -> dict[str, float]:
        """The query's similarity to every document found: the k-NN cut's own scores, and one exact
        script-score search for the rest; those of them in `joining` join the query signal."""
        assert request.vector is not None
        similarity = {item.record_id: item.score for item in legs["query"]}
        missing = sorted(rid for rid in found if rid not in similarity)
        if not missing:
            return similarity
        body = similarity_body(request, request.vector, missing)
        with _unavailable():
            answer = self._client.msearch(body=[{"index": self._name}, body])
        for hit in self._responses(answer, ["similarity"])[0]:
            close = float(hit["_score"]) - 1.0
            if fusion.min_similarity is None or close > fusion.min_similarity:
                similarity[hit["_source"]["record_id"]] = close
        joined = [rid for rid in missing if rid in similarity and rid in joining]
        extra = [
            Ranked(rid, found[rid]["chain_id"], similarity[rid], found[rid].get("memory_id", "")) for rid in joined
        ]
        legs["query"] = legs["query"] + extra
        return similarity

    def _responses(self, answer: dict[str, Any], names: Sequence[str]) -> list[list[dict[str, Any]]]:
        """The hits of each search of an msearch, in order; a failed one fails the recall (retry)."""
        out = []
        for name, response in zip(names, answer["responses"], strict=True):
            if "error" in response:
                raise SearchUnavailable(f"the {name} search failed: {_reason(response['error'])}")
            out.append(response["hits"]["hits"])
        return out


def _best_first(legs: dict[str, list[Ranked]], factors: dict[str, float]) -> list[str]:
    """The candidates by their own relative score, best first."""
    own = relative_scores(legs, factors)
    return sorted(own, key=lambda rid: (-own[rid], rid))


def context_of(logs: Sequence[tuple[Sequence[str], int]], own: dict[str, float], window: int) -> dict[str, float]:
    """Each document within `window` of a stretch's candidate, mapped to the best own score among the
    documents within `window` of it (itself left out), where that is above 0."""
    context: dict[str, float] = {}
    for log, centre in logs:
        scores = [own.get(rid, 0.0) for rid in log]
        for at in range(max(0, centre - window), min(len(log), centre + window + 1)):
            around = scores[max(0, at - window) : at] + scores[at + 1 : at + window + 1]
            best = max(around, default=0.0)
            if best > 0:
                context[log[at]] = max(context.get(log[at], 0.0), best)
    return context


def _ranked(name: str, hits: list[dict[str, Any]], fusion: Fusion) -> list[Ranked]:
    ranked = []
    for hit in hits:
        source = hit["_source"]
        score = float(hit.get("_score") or 0.0)
        if name == "query":
            score = 2.0 * score - 1.0  # Lucene's cosine score is (1 + cos) / 2
            if fusion.min_similarity is not None and score <= fusion.min_similarity:
                continue
        ranked.append(Ranked(source["record_id"], source["chain_id"], score, source.get("memory_id", "")))
    if name != "recency":
        ranked.sort(key=lambda item: (-item.score, item.record_id))
    return ranked


def _check_vector(vector: Sequence[float], dimensions: int, model_id: str) -> None:
    if len(vector) != dimensions:
        raise EmbeddingModelMismatch(f"{model_id} ({dimensions} dimensions)", f"a vector of {len(vector)}")


def _raise_bulk_errors(answer: dict[str, Any], tolerated: tuple[str, ...]) -> None:
    if not answer.get("errors"):
        return
    for item in answer.get("items", []):
        result = next(iter(item.values()))
        error = result.get("error")
        if error is None:
            continue
        if isinstance(error, dict) and error.get("type") in tolerated:
            continue
        raise SearchUnavailable(f"indexing failed: {_reason(error)}")


def _reason(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('type')}: {error.get('reason')}"
    return str(error)


@contextmanager
def _unavailable() -> Iterator[None]:
    """Transport failures, 5xx and 429 become SearchUnavailable; request errors stay what they are."""
    try:
        yield
    except Exception as error:
        status = getattr(error, "status_code", None)
        transport = type(error).__name__ in ("ConnectionError", "ConnectionTimeout", "SSLError")
        if transport or (isinstance(status, int) and status >= 500) or status == 429:
            logger.warning("opensearch unavailable", extra={"error_type": type(error).__name__})
            raise SearchUnavailable(f"OpenSearch did not answer: {type(error).__name__}") from error
        raise


def connect(
    url: str,
    *,
    region: str | None = None,
    service: str = "es",
    credentials: Any = None,
    timeout: float = 10.0,
) -> Any:
    """An OpenSearch client for `url`; with `region`, requests are signed with SigV4 for `service`
    ("es" for a domain, "aoss" for serverless) using the default AWS credentials."""
    from opensearchpy import OpenSearch, Urllib3AWSV4SignerAuth

    auth = None
    if region:
        if credentials is None:
            import boto3

            credentials = boto3.Session().get_credentials()
        auth = Urllib3AWSV4SignerAuth(credentials, region, service)
    return OpenSearch(
        hosts=[url],
        http_auth=auth,
        use_ssl=url.startswith("https://"),
        verify_certs=url.startswith("https://"),
        timeout=timeout,
        max_retries=2,
        retry_on_timeout=True,
        http_compress=True,
    )
