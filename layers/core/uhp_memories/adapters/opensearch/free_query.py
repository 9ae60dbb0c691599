"""Free queries (§6.5) on OpenSearch: a caller's query DSL, confined to one memory.

Freedom over the statement is not freedom over the reach. The statement is checked against an
allowlist of clause types and fields (no scripts, no terms lookup, no more_like_this, no percolate,
no joins, no query_string that could name any field), then placed inside a bool query whose
`filter` holds the tenant, the memory and "current active version": a bool filter is a conjunction,
so nothing inside `must` can undo it. Only ids come back (`_source` is fixed), and every hit is read
back from DynamoDB by the service. Time and size are bounded, and a bound that bit is reported.

The index is shared by every tenant, and a filter confines which documents match, not which terms a
clause reads: a prefix, a fuzzy match, a case-insensitive term or a range over text walks the terms
of the whole index before the filter applies. Such clauses are refused or bounded here (a prefix of
at least PREFIX_MIN_CHARS on text or type, ranges on times only, no fuzziness, a phrase slop of at
most MAX_SLOP), every number a clause takes is a number, and the search stops after TERMINATE_AFTER
documents per shard and TIMEOUT, with one attempt (no retry: a statement that timed out times out
again) inside REQUEST_TIMEOUT_SECONDS, well within a Lambda's 28 s.

No numpy here: deployed handlers import this module.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from uhp_memories.adapters.opensearch import isolation_filter
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.recall.model import SearchUnavailable

LANGUAGE = "opensearch-dsl"
MAX_STATEMENT_BYTES = 16 * 1024
MAX_DEPTH = 12
TIMEOUT = "2s"
REQUEST_TIMEOUT_SECONDS = 5
TERMINATE_AFTER = 10_000  # documents per shard
PREFIX_MIN_CHARS = 3
MAX_SLOP = 3
MAX_EXPANSIONS = 50
# Fields a statement may name: the searchable text and the record's own fields. Not the tenant,
# the memory or the status (the wrapper decides those), nor the vector.
FIELDS = frozenset({"text", "type", "record_id", "chain_id", "valid_from", "valid_to", "written_at"})
TIME_FIELDS = frozenset({"valid_from", "valid_to", "written_at"})
# Prefixes on these only: an id prefix ("hrec_") matches every record of every tenant's index terms.
PREFIX_FIELDS = frozenset({"text", "type"})
TEXT_OPTIONS = frozenset({"query", "operator", "minimum_should_match", "boost", "slop", "max_expansions"})
MULTI_MATCH_TYPES = frozenset({"best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix"})
# "2", "-1", "75%", "-25%": OpenSearch's simple forms of minimum_should_match.
MINIMUM_SHOULD_MATCH = re.compile(r"^-?\d{1,3}%?$")


def confine(statement: Any, tenant: str, memory_id: str, limit: int) -> dict[str, Any]:
    """The search body that runs `statement` inside one memory's current active versions only."""
    if not isinstance(statement, dict):
        raise MemoryInvalid("an opensearch-dsl statement is one query clause, an object")
    # Measured without recursion before anything recurses into it (json.dumps, check_clause).
    if nesting(statement) > 3 * MAX_DEPTH:
        raise MemoryInvalid(f"a statement nests at most {MAX_DEPTH} clauses deep")
    if len(json.dumps(statement)) > MAX_STATEMENT_BYTES:
        raise MemoryInvalid(f"a statement is at most {MAX_STATEMENT_BYTES} bytes")
    check_clause(statement, 0)
    return {
        "size": limit,
        "timeout": TIMEOUT,
        "terminate_after": TERMINATE_AFTER,
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


def nesting(value: Any) -> int:
    """How deeply objects and lists nest in `value`, counted with a stack, never by recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


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


def _number(name: str, value: Any, low: float = 0.0, high: float = 1_000.0) -> None:
    """`boost`, `tie_breaker`: a JSON number in [low, high] (not a string, an object or a boolean,
    which the cluster's parser would meet first)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise MemoryInvalid(f"{name} is a number from {low:g} to {high:g}")


def _minimum_should_match(value: Any) -> None:
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, str) and MINIMUM_SHOULD_MATCH.match(value))
    ):
        raise MemoryInvalid('minimum_should_match is an integer or a string such as "2" or "75%"')


def _text_option(name: str, value: Any, phrase: bool) -> None:
    """One option of a full-text clause, checked for its type and its bound."""
    if name == "query":
        if not isinstance(value, str):
            raise MemoryInvalid("a full-text query is a string")
    elif name == "operator":
        if not isinstance(value, str) or value.lower() not in ("and", "or"):
            raise MemoryInvalid("operator is and or or")
    elif name == "minimum_should_match":
        _minimum_should_match(value)
    elif name == "boost":
        _number("boost", value)
    elif name == "slop":
        if not phrase:
            raise MemoryInvalid("slop is a phrase's option")
        _integer("slop", value, 0, MAX_SLOP)
    elif name == "max_expansions":
        _integer("max_expansions", value, 1, MAX_EXPANSIONS)


def _integer(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryInvalid(f"{name} is an integer from {low} to {high}")


def _bool(body: Any, depth: int) -> None:
    if not isinstance(body, dict):
        raise MemoryInvalid("bool takes an object")
    for key, value in body.items():
        if key in ("must", "should", "filter", "must_not"):
            for item in value if isinstance(value, list) else [value]:
                check_clause(item, depth + 1)
        elif key == "minimum_should_match":
            _minimum_should_match(value)
        elif key == "boost":
            _number("boost", value)
        else:
            raise MemoryInvalid(f"bool does not take '{key}'")


def _text_match(body: Any, depth: int, phrase: bool = False) -> None:
    """match, match_phrase, match_phrase_prefix. No fuzziness (a fuzzy term walks the terms of the
    whole shared index), no analyzer (the index's own is the one its terms were made with)."""
    if not isinstance(body, dict) or len(body) != 1:
        raise MemoryInvalid("a match clause names one field")
    name, value = next(iter(body.items()))
    _field(name)
    if isinstance(value, dict):
        unknown = set(value) - TEXT_OPTIONS
        if unknown or "query" not in value:
            raise MemoryInvalid(f"match options are {sorted(TEXT_OPTIONS)}, with query (no fuzziness, no analyzer)")
        for option, setting in value.items():
            _text_option(option, setting, phrase)
    else:
        _scalar(value)


def _phrase_match(body: Any, depth: int) -> None:
    _text_match(body, depth, phrase=True)


def _multi_match(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or "query" not in body:
        raise MemoryInvalid("multi_match takes query and fields")
    for key, value in body.items():
        if key == "fields":
            if not isinstance(value, list) or not value:
                raise MemoryInvalid("multi_match fields is a list")
            for name in value:
                _field(str(name).split("^", 1)[0])
        elif key == "type":
            if value not in MULTI_MATCH_TYPES:
                raise MemoryInvalid(f"multi_match type is one of {sorted(MULTI_MATCH_TYPES)}")
        elif key == "tie_breaker":
            _number("tie_breaker", value, 0.0, 1.0)
        elif key in TEXT_OPTIONS:
            _text_option(key, value, phrase=str(body.get("type", "")).startswith("phrase"))
        else:
            raise MemoryInvalid(f"multi_match does not take '{key}' (no fuzziness, no analyzer)")
    if "fields" not in body:
        raise MemoryInvalid("multi_match must name its fields")


def _term_value(kind: str, body: Any) -> tuple[str, Any]:
    """(field, value) of a term or prefix clause. No case_insensitive: it matches by walking every
    term of the field in the shared index."""
    if not isinstance(body, dict) or len(body) != 1:
        raise MemoryInvalid(f"a {kind} clause names one field")
    name, value = next(iter(body.items()))
    _field(name)
    if isinstance(value, dict):
        if set(value) - {"value", "boost"} or "value" not in value:
            raise MemoryInvalid(f"{kind} takes value (and boost; no case_insensitive)")
        if "boost" in value:
            _number("boost", value["boost"])
        value = value["value"]
    _scalar(value)
    return name, value


def _term(body: Any, depth: int) -> None:
    _term_value("term", body)


def _terms(body: Any, depth: int) -> None:
    # A terms *lookup* ({"index", "id", "path"}) would read another document: values must be a list.
    if not isinstance(body, dict):
        raise MemoryInvalid("terms takes an object")
    fields = [k for k in body if k != "boost"]
    if len(fields) != 1:
        raise MemoryInvalid("a terms clause names one field")
    if "boost" in body:
        _number("boost", body["boost"])
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
    # A range over text or an id walks the terms of the whole shared index; times are numbers.
    if name not in TIME_FIELDS:
        raise MemoryInvalid(f"range is on a time: {sorted(TIME_FIELDS)}")
    if not isinstance(bounds, dict) or not bounds or set(bounds) - {"gt", "gte", "lt", "lte", "boost"}:
        raise MemoryInvalid("range takes gt, gte, lt, lte (RFC 3339 times) and boost")
    for option, value in bounds.items():
        if option == "boost":
            _number("boost", value)
        elif not isinstance(value, str):
            raise MemoryInvalid("a range bound is an RFC 3339 time, as a string")


def _exists(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or set(body) != {"field"}:
        raise MemoryInvalid("exists takes field")
    _field(body["field"])


def _prefix(body: Any, depth: int) -> None:
    name, value = _term_value("prefix", body)
    if name not in PREFIX_FIELDS or not isinstance(value, str) or len(value) < PREFIX_MIN_CHARS:
        raise MemoryInvalid(
            f"prefix is on {sorted(PREFIX_FIELDS)}, at least {PREFIX_MIN_CHARS} characters: a shorter one "
            "walks the terms of every memory's records"
        )


def _empty(body: Any, depth: int) -> None:
    if body not in ({}, None) and not (isinstance(body, dict) and set(body) <= {"boost"}):
        raise MemoryInvalid("match_all and match_none take no options but boost")
    if isinstance(body, dict) and "boost" in body:
        _number("boost", body["boost"])


def _constant_score(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or "filter" not in body or set(body) - {"filter", "boost"}:
        raise MemoryInvalid("constant_score takes filter (and boost)")
    if "boost" in body:
        _number("boost", body["boost"])
    check_clause(body["filter"], depth + 1)


def _dis_max(body: Any, depth: int) -> None:
    if not isinstance(body, dict) or not isinstance(body.get("queries"), list) or set(body) - {
        "queries", "tie_breaker", "boost"
    }:
        raise MemoryInvalid("dis_max takes queries (and tie_breaker, boost)")
    if "tie_breaker" in body:
        _number("tie_breaker", body["tie_breaker"], 0.0, 1.0)
    if "boost" in body:
        _number("boost", body["boost"])
    for item in body["queries"]:
        check_clause(item, depth + 1)


CLAUSES = {
    "bool": _bool,
    "match": _text_match,
    "match_phrase": _phrase_match,
    "match_phrase_prefix": _phrase_match,
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


# What each queryable field holds, for the guide an agent is given (FIELDS names them all).
FIELD_MEANINGS = {
    "text": "the record's searchable text (English analyzer)",
    "type": "its record type (keyword)",
    "record_id": "its version's id (keyword)",
    "chain_id": "the id its versions share (keyword)",
    "valid_from": "when it became true in the world (date)",
    "valid_to": "when it stopped being true (date)",
    "written_at": "when it was written (date)",
}


def guide() -> str:
    """The language and the schema a statement queries (§6.5: the memory_query tool's description names
    both), from the allowlist this module checks, so the two cannot disagree."""
    fields = "; ".join(f"{name}: {FIELD_MEANINGS[name]}" for name in sorted(FIELDS))
    return (
        f"Language {LANGUAGE}: one OpenSearch query clause as a JSON object, run over the memory's current "
        f"records. Clauses: {', '.join(CLAUSES)}. Fields: {fields}. range on {', '.join(sorted(TIME_FIELDS))} "
        f"only (RFC 3339 bounds); prefix on {' or '.join(sorted(PREFIX_FIELDS))}, at least {PREFIX_MIN_CHARS} "
        "characters; no fuzziness, scripts or lookups. "
        'E.g. {"bool": {"must": [{"match": {"text": "renewal"}}], "filter": [{"term": {"type": "fact"}}]}}.'
    )


class FreeQueries:
    """Runs confined statements against the recall index (the same connections and index name), one
    attempt each, reporting every bound that bit."""

    free_query_languages = (LANGUAGE,)

    def __init__(self, client: Any, index_name: str) -> None:
        self._client = _without_retries(client)
        self._name = index_name

    def free_query(
        self, tenant: str, memory_id: str, language: str, statement: Any, limit: int
    ) -> tuple[list[str], list[str]]:
        if language != LANGUAGE:
            raise MemoryInvalid(f"this provider's free-query language is '{LANGUAGE}'")
        body = confine(statement, tenant, memory_id, limit)
        try:
            answer = self._client.search(index=self._name, body=body, request_timeout=REQUEST_TIMEOUT_SECONDS)
        except Exception as error:
            raise _refusal_or_unavailable(error) from None
        hits = answer.get("hits", {}).get("hits", [])
        ids = [h["_source"]["record_id"] for h in hits if h.get("_source", {}).get("record_id")]
        return ids, bounds_applied(answer)


def bounds_applied(answer: dict[str, Any]) -> list[str]:
    """What `degraded` says of a search's answer: a timeout, a search stopped after TERMINATE_AFTER
    documents, shards that failed (their documents are missing from the answer)."""
    bounds = []
    if answer.get("timed_out"):
        bounds.append(f"time:bounded_at_{TIMEOUT}")
    if answer.get("terminated_early"):
        bounds.append(f"documents:bounded_at_{TERMINATE_AFTER}_per_shard")
    shards = answer.get("_shards") or {}
    failed = shards.get("failed") or 0
    if isinstance(failed, int) and failed > 0:
        bounds.append(f"shards:{failed}_of_{shards.get('total', '?')}_failed")
    return bounds


def _refusal_or_unavailable(error: Exception) -> Exception:
    """A statement the cluster refuses (HTTP 400: it would not parse or run it) is the caller's to
    change: 422 naming only the cluster's error type, never the statement (it may hold content).
    Anything else (timeouts, 5xx, throttling, no connection) is the provider not answering: 503."""
    status = getattr(error, "status_code", None)
    if status == 400:
        kind = getattr(error, "error", None)
        named = f" ({kind})" if isinstance(kind, str) and re.fullmatch(r"[a-z_]{1,80}", kind) else ""
        return MemoryInvalid(f"the search cluster refused the statement{named}")
    return SearchUnavailable(f"the free query failed: {type(error).__name__}")


def _without_retries(client: Any) -> Any:
    """The client over the same connections, answering after one attempt: the shared client retries a
    timed-out request (two attempts for recall, each within the time left), which a statement bounded at
    TIMEOUT never needs, and which would outlast the Lambda."""
    transport = getattr(client, "transport", None)
    if transport is None or not hasattr(transport, "max_retries"):
        return client  # a stand-in (tests): nothing to retry
    own = copy.copy(client)
    own.transport = copy.copy(transport)
    own.transport.max_retries = 0
    own.transport.retry_on_timeout = False
    return own
