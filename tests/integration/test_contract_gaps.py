"""Issue 36, "Smaller contract gaps", each over real HTTP (and the official MCP SDK's client for the tools):

- get carries where the reader can go from the record's memory, as list and recall do (§6.1);
- recall's `why` names the request's signals: a query's own words serve the query (§6.3);
- `memory_query` names its language and the schema a statement queries (§6.5);
- a named query's tool carries its params' typed `enum` and `default` (§6.4, §9.1);
- naming a session's memory kept by a provider outside the server is answered with the notice that
  attaching one gives (§9.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client as McpClient

from tests.integration.conftest import Client, ClientFactory
from tests.integration.test_mcp import answer, attach, content, with_mcp
from tests.integration.test_mcp_session_memory import with_session
from uhp_memories.adapters.opensearch.free_query import FIELDS, LANGUAGE
from uhp_memories.domain.recall.model import SearchUnavailable
from uhp_memories.local.moto_env import LocalAws


def _summary(memory: dict[str, Any], records: int, children: int) -> dict[str, Any]:
    return {"id": memory["id"], "name": memory["name"], "description": memory["description"],
            "records": {"count": records}, "children": {"count": children}}


# -- §6.1: get names the memory's parent and readable children ---------------------------------------


@pytest.mark.slow
def test_get_answers_the_memory_s_parent_and_the_children_the_caller_may_read(
    alice: Client, bob: Client, make_client: ClientFactory
) -> None:
    company = alice.create_memory("Company", description="Everything we know")
    acme = alice.create_memory("Acme", description="One customer", parent_id=company["id"])
    renewals = alice.create_memory("Renewals", description="Acme's renewals", parent_id=acme["id"])
    secret = alice.create_memory("Board", description="Not for everyone", parent_id=acme["id"], restricted=True)
    alice.remember(company["id"], "We sell widgets.")
    record = alice.remember(acme["id"], "Acme renews in March.")
    path = f"/v1/memories/{acme['id']}/records/{record['id']}"

    got = alice.get(path)
    assert got.status_code == 200, got.text
    read = got.json()
    assert {k: v for k, v in read.items() if k not in ("parent", "children")} == record  # the record, unchanged
    assert read["parent"] == _summary(company, records=1, children=1)
    assert sorted(c["id"] for c in read["children"]) == sorted([renewals["id"], secret["id"]])
    assert _summary(renewals, records=0, children=0) in read["children"]
    listing = alice.get(f"/v1/memories/{acme['id']}/records").json()
    assert (read["parent"], read["children"]) == (listing["parent"], listing["children"])  # one rule

    # A root has no parent: the field is absent, not null.
    top = alice.remember(company["id"], "Widgets are blue.")
    at_root = alice.get(f"/v1/memories/{company['id']}/records/{top['id']}").json()
    assert "parent" not in at_root
    assert [c["id"] for c in at_root["children"]] == [acme["id"]]

    # A reader of the branch only: no parent it may not read (absent, as on a root), and only the
    # children it may read (the restricted one is left out).
    alice.grant(acme["id"], bob.principal, "read")
    as_bob = bob.get(path).json()
    assert "parent" not in as_bob
    assert [c["id"] for c in as_bob["children"]] == [renewals["id"]]

    # memory_get answers the same over MCP.
    attach(alice, "gaps_get", {"memory_id": acme["id"], "access": "read"})
    harness = make_client("harness:gaps_get")

    async def work(mcp: McpClient) -> dict[str, Any]:
        return answer(await mcp.call_tool("memory_get", {"memory_id": acme["id"], "record_id": record["id"]}))

    over_mcp = with_mcp(harness, work)
    assert content(over_mcp["record"], over_mcp["fence"]) == "Acme renews in March."
    assert "parent" not in over_mcp
    assert [(c["id"], c["records"], c["children"]) for c in over_mcp["children"]] == [(renewals["id"], 0, 0)]


# -- §6.3: `why` names the request's signals -------------------------------------------------------------


def _recall(client: Client, memory_id: str, **body: Any) -> dict[str, Any]:
    answered = client.post(f"/v1/memories/{memory_id}/recall", body)
    assert answered.status_code == 200, answered.text
    return dict(answered.json())


def test_why_never_names_text_when_the_request_sent_only_a_query(
    alice: Client, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = alice.create_memory("Orders")["id"]
    alice.remember(memory, "Order 7731 was delivered to the Leeds warehouse on Friday.")
    alice.remember(memory, "The buyer prefers green tea.")
    question = "Was order 7731 delivered to Leeds?"

    asked = _recall(alice, memory, query=question)
    assert asked["results"], asked
    assert all(r["why"] == ["query"] for r in asked["results"])  # its words found it: still the query
    with_words = _recall(alice, memory, query=question, text="Leeds warehouse")
    assert with_words["results"][0]["why"] == ["query", "text"]  # text was sent: it is named
    with_fields = _recall(alice, memory, query=question, types=["fact"])
    assert with_fields["results"][0]["why"] == ["query", "filters"]

    # Without the query's meaning (the embedder down) its words alone serve it: `why` says query.
    engine = local_aws.container.recall_engine()  # type: ignore[union-attr]

    def down(texts: Any) -> Any:
        raise SearchUnavailable("Bedrock did not embed: ThrottlingException")

    monkeypatch.setattr(engine.embedder, "embed", down)
    degraded = _recall(alice, memory, query=question)
    assert degraded["degraded"] == ["query:embedder_unavailable"]
    assert degraded["results"]
    assert all(r["why"] == ["query"] for r in degraded["results"])


# -- §6.5: memory_query names its language and schema --------------------------------------------------


@pytest.mark.slow
def test_memory_query_names_its_language_and_the_fields_a_statement_queries(
    alice: Client, make_client: ClientFactory, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a stage with OpenSearch offers it (no node here: the tool is listed, not run)."""
    container = local_aws.container
    assert container is not None
    monkeypatch.setattr(container.queries, "free_languages_configured", lambda: (LANGUAGE,))
    team = alice.create_memory("Team")
    attach(alice, "gaps_free", {"memory_id": team["id"], "access": "read"})
    harness = make_client("harness:gaps_free")

    async def work(mcp: McpClient) -> Any:
        return next(t for t in (await mcp.list_tools()).tools if t.name == "memory_query")

    tool = with_mcp(harness, work)
    assert tool.description is not None
    assert LANGUAGE in tool.description
    for field in FIELDS:
        assert field in tool.description, field
    assert tool.input_schema["properties"]["language"]["enum"] == [LANGUAGE]
    assert set(tool.input_schema["required"]) == {"memory_id", "language", "statement"}


# -- §6.4, §9.1: a named query's tool carries typed enum and default ---------------------------------


@pytest.mark.slow
def test_a_named_query_tool_carries_its_params_typed_enum_and_default(
    alice: Client, make_client: ClientFactory
) -> None:
    deals = alice.create_memory("Deals")
    alice.remember(deals["id"], "Acme is open.", attributes={"stage": "open"})
    alice.remember(deals["id"], "Globex is won.", attributes={"stage": "won"})
    defined = alice.put(f"/v1/memories/{deals['id']}/queries/deals_in", {
        "description": "Deals at one stage",
        "params": {"type": "object", "properties": {
            "stage": {"type": "string", "enum": ["open", "won"], "default": "open", "description": "The stage"},
            "top": {"type": "integer", "default": 5},
            "odd": {"type": "string", "enum": ["a", 1]},  # not all of its type: told, fenced, not carried
        }},
        "body": {"filters": {"field": "attributes.stage", "op": "eq", "value": "{{stage}}"}, "limit": "{{top}}"},
    })
    assert defined.status_code == 200, defined.text
    attach(alice, "gaps_query", {"memory_id": deals["id"], "access": "read"})
    harness = make_client("harness:gaps_query")

    async def work(mcp: McpClient) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        listed = {t.name: t for t in (await mcp.list_tools()).tools}
        by_default = answer(await mcp.call_tool("memory_run_query_deals_in", {}))
        won = answer(await mcp.call_tool("memory_run_query_deals_in", {"stage": "won"}))
        return listed["memory_run_query_deals_in"], by_default, won

    tool, by_default, won = with_mcp(harness, work)
    stage = tool.input_schema["properties"]["stage"]
    assert (stage["type"], stage["enum"], stage["default"]) == ("string", ["open", "won"], "open")
    assert "The stage" in stage["description"]  # what its definer wrote stays fenced
    assert tool.input_schema["properties"]["top"] == {"type": "integer", "default": 5}
    odd = tool.input_schema["properties"]["odd"]
    assert "enum" not in odd
    assert '["a",1]' in odd["description"]
    assert [content(r, by_default["fence"]) for r in by_default["results"]] == ["Acme is open."]
    assert [content(r, won["fence"]) for r in won["results"]] == ["Globex is won."]


# -- §9.1: a session's memory kept outside the server is told, as an attached one is ---------------


@pytest.mark.slow
def test_a_session_memory_kept_by_an_outside_provider_is_answered_with_the_notice(
    alice: Client, make_client: ClientFactory, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0 as a stage that sends it every turn connects it (Platform, or OSS deriving with a model): this
    session's stage keeps mem0 in process without a model, so it is made to say so here."""
    container = local_aws.container
    assert container is not None
    monkeypatch.setattr(container.ports.providers, "is_outside", lambda provider: provider == "mem0")
    team = alice.create_memory("Team")
    kept = alice.create_memory("Kept by mem0", provider="mem0")
    native = alice.create_memory("Native")
    attach(alice, "gaps_out", {"memory_id": team["id"], "access": "write", "default": True})
    for memory in (kept, native):
        alice.grant(memory["id"], "harness:gaps_out", "read")
    harness = make_client("harness:gaps_out")

    def told(notices: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return [(n["code"], n["memory_id"], n["provider"]) for n in notices]

    outside = [("outside_provider", kept["id"], "mem0")]
    # Attaching it is told (the rule this follows).
    alice.claim("gaps_out_attached")
    attached = alice.put("/v1/harnesses/gaps_out_attached/memories",
                         {"memories": [{"memory_id": kept["id"], "access": "read"}]})
    assert told(attached.json()["notices"]) == outside

    # prime's ?memory= and a turn's memory, by the harness and by its owner.
    for caller in (harness, alice):
        primed = caller.get("/v1/harnesses/gaps_out/prime", memory=kept["id"])
        assert primed.status_code == 200, primed.text
        assert told(primed.json()["notices"]) == outside
        assert "every turn of harness gaps_out" in primed.json()["notices"][0]["message"]
    turn = harness.post("/v1/harnesses/gaps_out/turns", {"asked": "hi", "answered": "hello", "memory": kept["id"]})
    assert turn.status_code == 201, turn.text
    assert told(turn.json()["notices"]) == outside
    # A native session memory, or none, is told nothing.
    assert alice.get("/v1/harnesses/gaps_out/prime", memory=native["id"]).json()["notices"] == []
    assert alice.get("/v1/harnesses/gaps_out/prime").json()["notices"] == []
    plain = harness.post("/v1/harnesses/gaps_out/turns", {"asked": "hi", "answered": "hello"})
    assert plain.json()["notices"] == []

    # x-uhp-memory over MCP: where the session starts (memory_list) and its prime.
    async def work(mcp: McpClient) -> tuple[dict[str, Any], dict[str, Any]]:
        listed = answer(await mcp.call_tool("memory_list", {}))
        prompt = await mcp.get_prompt("memory_prime")
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        return listed, json.loads(text)

    listed, primed_over_mcp = with_session(harness, kept["id"], work)
    assert told(listed["notices"]) == outside
    assert told(primed_over_mcp["notices"]) == outside

    async def plain_list(mcp: McpClient) -> dict[str, Any]:
        return answer(await mcp.call_tool("memory_list", {}))

    assert "notices" not in with_session(harness, native["id"], plain_list)
