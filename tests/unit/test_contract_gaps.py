"""Issue 36's smaller contract gaps, at the units that decide them (the HTTP and MCP checks are in
tests/integration/test_contract_gaps.py): `why` in the request's own signals, the free-query guide that
memory_query is described with, and the named-query tool's typed enum and default."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.test_mcp_tools import offering_container
from uhp_memories.adapters.opensearch import free_query
from uhp_memories.domain.model import Caller
from uhp_memories.domain.queries.model import NamedQuery
from uhp_memories.domain.recall.model import RecallInput
from uhp_memories.mcp import tools

USER = Caller(tenant="t", principal="user:alice")


@pytest.mark.parametrize(("request_fields", "why", "named"), [
    ({"query": "q"}, ("query", "text"), ("query",)),  # the query's words found it: the query did
    ({"query": "q"}, ("text",), ("query",)),  # its words alone (the embedder down, or outside the cut)
    ({"query": "q"}, ("text", "filters"), ("query", "filters")),
    ({"query": "q", "text": "t"}, ("query", "text"), ("query", "text")),  # text sent: named
    ({"text": "t"}, ("text",), ("text",)),
    ({"filters": {}}, ("filters",), ("filters",)),
    ({"query": "q"}, ("query", "context"), ("query", "context")),
])
def test_why_names_only_the_signals_the_request_sent(
    request_fields: dict[str, Any], why: tuple[str, ...], named: tuple[str, ...]
) -> None:
    assert RecallInput(**request_fields).named(why) == named


def test_the_free_query_guide_names_the_language_every_field_and_clause_and_its_example_runs() -> None:
    guide = free_query.guide()
    assert free_query.LANGUAGE in guide
    assert all(field in guide for field in free_query.FIELDS)
    assert all(clause in guide for clause in free_query.CLAUSES)
    example = guide.split("E.g. ", 1)[1].rstrip(".")
    free_query.confine(json.loads(example), "t", "m", 10)  # the example is a statement the allowlist admits


def test_memory_query_is_offered_with_its_languages_guide_and_those_languages_alone() -> None:
    offered = tools.offered(offering_container((free_query.LANGUAGE,), {}), USER)
    [tool] = [t for t in offered if t.name == "memory_query"]
    assert free_query.guide() in tool.description
    assert tool.input_schema["properties"]["language"]["enum"] == [free_query.LANGUAGE]
    assert "enum" not in tools.BY_NAME["memory_query"].input_schema["properties"]["language"]  # the static one


def test_a_named_query_tool_carries_enum_and_default_of_the_param_s_type_only() -> None:
    params = {"type": "object", "required": [], "properties": {
        "stage": {"type": "string", "enum": ["open", "won"], "default": "open"},
        "top": {"type": "integer", "default": 5},
        "flag": {"type": "boolean", "default": "yes"},  # not a boolean: told as data, not carried
        "rate": {"type": "number", "enum": [1, True]},  # a boolean is no number
    }}
    query = NamedQuery("t", "m1", "deals_in", "Deals", params, "read", "uhp-recall", {}, "user:alice", 0)
    [tool] = [t for t in tools.offered(offering_container((), {"m1": [query]}), USER) if t.name.endswith("deals_in")]
    properties = tool.input_schema["properties"]
    assert properties["stage"] == {"type": "string", "enum": ["open", "won"], "default": "open"}
    assert properties["top"] == {"type": "integer", "default": 5}
    assert set(properties["flag"]) == {"type", "description"}
    assert 'default "yes"' in properties["flag"]["description"]
    assert set(properties["rate"]) == {"type", "description"}
    assert "one of [1,true]" in properties["rate"]["description"]
