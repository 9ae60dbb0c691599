"""Which tools a caller holds (§9.1): free queries only where offered, a tool per named query, no erase."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from uhp_memories.domain.models import Caller
from uhp_memories.domain.queries import NamedQuery
from uhp_memories.mcp import tools

USER = Caller(tenant="t", principal="user:alice")
PARAMS = {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]}


def _query(memory_id: str, name: str = "deals_for") -> NamedQuery:
    return NamedQuery("t", memory_id, name, "Deals of one account", PARAMS, "read", "uhp-recall", {}, "user:alice", 0)


def _container(free: tuple[str, ...], queries: dict[str, list[NamedQuery]]) -> Any:
    views = [SimpleNamespace(memory=SimpleNamespace(id=m)) for m in queries]
    return SimpleNamespace(
        queries=SimpleNamespace(free_languages_configured=lambda: free, list=lambda caller, mid: queries[mid]),
        memories=SimpleNamespace(list=lambda caller: SimpleNamespace(items=views)),
        types=SimpleNamespace(list=lambda caller: []),
        harnesses=SimpleNamespace(starting=lambda caller, harness_id: []),
    )


def test_free_queries_are_a_tool_only_where_the_provider_offers_them() -> None:
    without = {t.name for t in tools.offered(_container((), {}), USER)}
    with_free = {t.name for t in tools.offered(_container(("opensearch-dsl",), {}), USER)}
    assert "memory_query" not in without
    assert with_free - without == {"memory_query"}
    assert not any("erase" in name for name in with_free)  # erase is a person's act (§13)


def test_a_named_query_listed_by_two_memories_is_one_tool_that_asks_which() -> None:
    offered = tools.offered(_container((), {"m1": [_query("m1")], "m2": [_query("m2")]}), USER)
    tool = next(t for t in offered if t.name == "memory_run_query_deals_for")
    assert tool.input_schema["properties"]["memory_id"]["enum"] == ["m1", "m2"]
    assert tool.input_schema["required"] == ["memory_id", "account"]
    assert not tool.writes
