"""Free queries (§6.5) on OpenSearch: a caller's query DSL, confined to one memory.

Freedom over the statement is not freedom over the reach. The statement is checked against an
allowlist of clause types and fields (no scripts, no terms lookup, no more_like_this, no percolate,
no joins, no query_string that could name any field), then placed inside a bool query whose
`filter` holds the tenant, the memory and "current active version": a bool filter is a conjunction,
so nothing inside `must` can undo it. Only ids come back (`_source` is fixed), and every hit is read
back from DynamoDB by the service. Time and size are bounded, and a bound that bit is reported.

No numpy here: deployed handlers import this module.
"""

from __future__ import annotations

import json
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.search.errors import SearchUnavailable
from uhp_memories.search.opensearch import isolation_filter

LANGUAGE = "opensearch-dsl"
MAX_STATEMENT_BYTES = 16 * 1024
MAX_DEPTH = 12
TIMEOUT = "2s"
# Fields a statement may name: the searchable text and the record's own fields. Not the tenant,
# the memory or the status (the wrapper decides those), nor the vector.
FIELDS = frozenset({"text", "type", "record_id", "chain_id", "valid_from", "valid_to", "written_at"})
TEXT_OPTIONS = frozenset({"query", "operator", "minimum_should_match", "fuzziness", "boost", "slop", "analyzer"})


def confine(statement: Any, tenant: str, memory_id: str, limit: int) -> dict[str, Any]:
    """The search body that runs `statement` inside one memory's current active versions only."""
    if not isinstance(statement, dict):
        raise MemoryInvalid("an opensearch-dsl statement is one query clause, an object")
    if len(json.dumps(statement)) > MAX_STATEMENT_BYTES:
        raise MemoryInvalid(f"a statement is at most {MAX_STATEMENT_BYTES} bytes")
    check_clause(statement, 0)
    return {
        "size": limit,
        "timeout": TIMEOUT,
        "_source": ["record_id", "chain_id"],
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [
                    *isolation_filter(tenant, memory_id),
                    {"term": {"status": "active"}},
                    {"bool": {"must_not": [{"exists": {"field": "invalidated_at"}}]}},
                ],
                "must": [statement],
            }
        },
    }


def check_clause(clause: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise MemoryInvalid(f"a statement nests at most {MAX_DEPTH} clauses deep")
    if not isinstance(clause, dict) or len(clause) != 1:
        raise MemoryInvalid("each clause is an object with exactly one clause type")
    kind, body = next(iter(clause.items()))
    checker = CLAUSES.get(kind)
    if checker is None:
        raise MemoryInvalid(f"clause type '{kind}' is not allowed in a free query; allowed: {sorted(CLAUSES)}")
    checker(body, depth)


def _field(name: Any) -> str:
    if not isinstance(name, str) or name not in FIELDS:
        raise MemoryInvalid(f"field {name!r} is not queryable; fields: {sorted(FIELDS)}")
    return name


def _scalar(value: Any) -> None:
    if isinstance(value, (dict, list)):
        raise MemoryInvalid("a clause value is a string, a number or a boolean")


def _bool(body: Any, depth: int) -> None:
    if not isinstance(body, dict):
        raise MemoryInvalid("bool takes an object")
    for key, value in body.items():
        if key in ("must", "should", "filter", "must_not"):
            for item in value if isinstance(value, list) else [value]:
                check_clause(item, depth + 1)
        elif key in ("minimum_should_match", "boost"):
            _scalar(value)
        else:
            raise MemoryInvalid(f"bool does not take '{key}'")


def _text_match(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or len(body) != 1:
        raise MemoryInvalid("a match clause names one field")
    name, value = next(iter(body.items()))
    _field(name)
    if isinstance(value, dict):
        unknown = set(value) - TEXT_OPTIONS
        if unknown or "query" not in value:
            raise MemoryInvalid(f"match options are {sorted(TEXT_OPTIONS)}, with query")
        for option in value.values():
            _scalar(option)
    else:
        _scalar(value)


def _multi_match(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or "query" not in body:
        raise MemoryInvalid("multi_match takes query and fields")
    for key, value in body.items():
        if key == "fields":
            if not isinstance(value, list) or not value:
                raise MemoryInvalid("multi_match fields is a list")
            for name in value:
                _field(str(name).split("^", 1)[0])
        elif key in TEXT_OPTIONS or key in ("type", "tie_breaker"):
            _scalar(value)
        else:
            raise MemoryInvalid(f"multi_match does not take '{key}'")
    if "fields" not in body:
        raise MemoryInvalid("multi_match must name its fields")


def _term(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or len(body) != 1:
        raise MemoryInvalid("a term clause names one field")
    name, value = next(iter(body.items()))
    _field(name)
    if isinstance(value, dict):
        if set(value) - {"value", "boost", "case_insensitive"} or "value" not in value:
            raise MemoryInvalid("term takes value (and boost, case_insensitive)")
        for option in value.values():
            _scalar(option)
    else:
        _scalar(value)


def _terms(body: Any, depth: int) -> None:
    # A terms *lookup* ({"index", "id", "path"}) would read another document: values must be a list.
    if not isinstance(body, dict):
        raise MemoryInvalid("terms takes an object")
    fields = [k for k in body if k != "boost"]
    if len(fields) != 1:
        raise MemoryInvalid("a terms clause names one field")
    values = body[fields[0]]
    _field(fields[0])
    if not isinstance(values, list) or len(values) > 1000:
        raise MemoryInvalid("terms takes a list of at most 1000 values (no lookup)")
    for value in values:
        _scalar(value)


def _range(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or len(body) != 1:
        raise MemoryInvalid("a range clause names one field")
    name, bounds = next(iter(body.items()))
    _field(name)
    if not isinstance(bounds, dict) or set(bounds) - {"gt", "gte", "lt", "lte", "format", "boost"}:
        raise MemoryInvalid("range takes gt, gte, lt, lte, format, boost")
    for option in bounds.values():
        _scalar(option)


def _exists(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or set(body) != {"field"}:
        raise MemoryInvalid("exists takes field")
    _field(body["field"])


def _prefix(body: Any, depth: int) -> None:
    _term(body, depth)


def _empty(body: Any, depth: int) -> None:
    if body not in ({}, None) and not (isinstance(body, dict) and set(body) <= {"boost"}):
        raise MemoryInvalid("match_all and match_none take no options but boost")


def _constant_score(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or "filter" not in body or set(body) - {"filter", "boost"}:
        raise MemoryInvalid("constant_score takes filter (and boost)")
    check_clause(body["filter"], depth + 1)


def _dis_max(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or not isinstance(body.get("queries"), list) or set(body) - {
        "queries", "tie_breaker", "boost"
    }:
        raise MemoryInvalid("dis_max takes queries (and tie_breaker, boost)")
    for item in body["queries"]:
        check_clause(item, depth + 1)


CLAUSES = {
    "bool": _bool,
    "match": _text_match,
    "match_phrase": _text_match,
    "match_phrase_prefix": _text_match,
    "multi_match": _multi_match,
    "term": _term,
    "terms": _terms,
    "range": _range,
    "exists": _exists,
    "prefix": _prefix,
    "match_all": _empty,
    "match_none": _empty,
    "constant_score": _constant_score,
    "dis_max": _dis_max,
}


class FreeQueries:
    """Runs confined statements against the recall index (the same client and index name)."""

    free_query_languages = (LANGUAGE,)

    def __init__(self, client: Any, index_name: str) -> None:
        self._client = client
        self._name = index_name

    def free_query(
        self, tenant: str, memory_id: str, language: str, statement: Any, limit: int
    ) -> tuple[list[str], list[str]]:
        if language != LANGUAGE:
            raise MemoryInvalid(f"this provider's free-query language is '{LANGUAGE}'")
        body = confine(statement, tenant, memory_id, limit)
        try:
            answer = self._client.search(index=self._name, body=body)
        except Exception as error:
            raise SearchUnavailable(f"the free query failed: {type(error).__name__}") from None
        hits = answer.get("hits", {}).get("hits", [])
        ids = [h["_source"]["record_id"] for h in hits if h.get("_source", {}).get("record_id")]
        bounds = [f"time:bounded_at_{TIMEOUT}"] if answer.get("timed_out") else []
        return ids, bounds
