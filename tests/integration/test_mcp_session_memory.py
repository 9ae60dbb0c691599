"""§9 `metadata.memory` over MCP: one more memory named for the session by the `x-uhp-memory` header.

The official SDK's own client, over real HTTP, against POST /mcp on the local gateway. The memory is
added to the harness's starting memories, is where an unaddressed `memory_remember` writes when the
harness may write it (else the default attachment stays), is read-only when the harness may only read
it, and one the harness holds nothing on (or a malformed id) is 404 `memory_not_found` before anything
runs, for every MCP request."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
import requests
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from tests.integration.conftest import Client, ClientFactory
from tests.integration.test_mcp import READ_TOOLS, WRITE_TOOLS, Session, answer, attach, content, with_mcp

pytestmark = pytest.mark.slow

HEADER = "x-uhp-memory"
ACCEPT = "application/json, text/event-stream"


def with_session(client: Client, memory_id: str, work: Session, mode: str = "auto") -> Any:
    """Run `work` with an SDK client connected to /mcp with this client's key and the session's memory."""

    async def main() -> Any:
        headers = {"x-api-key": client.key, HEADER: memory_id}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            transport = streamable_http_client(client.base_url + "/mcp", http_client=http)
            async with McpClient(transport, mode=mode) as mcp:  # type: ignore[arg-type]
                return await work(mcp)

    return asyncio.run(main())


def test_a_writable_session_memory_is_added_and_takes_unaddressed_writes(
    alice: Client, make_client: ClientFactory
) -> None:
    team = alice.create_memory("Team")
    shared = alice.create_memory("Shared inbox")
    person = alice.create_memory("Alice's", description="What the agent keeps about Alice.")
    attach(alice, "sess_rw", {"memory_id": team["id"], "access": "read"},
           {"memory_id": shared["id"], "access": "write", "default": True})
    alice.grant(person["id"], "harness:sess_rw", "read", "write")  # held, not attached
    harness = make_client("harness:sess_rw")

    async def work(mcp: McpClient) -> None:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
        started = answer(await mcp.call_tool("memory_list", {}))
        assert [(m["id"], m["attached"]) for m in started["memories"]] == [
            (team["id"], {"access": "read", "default": False}),
            (shared["id"], {"access": "write", "default": False}),
            (person["id"], {"access": "write", "default": True}),
        ]
        written = answer(await mcp.call_tool("memory_remember", {"type": "fact", "content": "Green tea."}))
        assert written["record"]["memory_id"] == person["id"]
        assert written["record"]["written_by"] == {"kind": "harness", "id": "sess_rw"}
        recalled = answer(await mcp.call_tool("memory_recall", {"memory_id": person["id"], "text": "tea"}))
        assert [content(r, recalled["fence"]) for r in recalled["results"]] == ["Green tea."]

    with_session(harness, person["id"], work)
    assert alice.get(f"/v1/memories/{shared['id']}/records").json()["data"] == []
    assert [r["content"] for r in alice.get(f"/v1/memories/{person['id']}/records").json()["data"]] == ["Green tea."]

    # Without the header, the same harness is back to its attachments and their default.
    async def without(mcp: McpClient) -> None:
        listed = answer(await mcp.call_tool("memory_list", {}))
        assert [m["id"] for m in listed["memories"]] == [team["id"], shared["id"]]
        written = answer(await mcp.call_tool("memory_remember", {"type": "fact", "content": "x"}))
        assert written["record"]["memory_id"] == shared["id"]

    with_mcp(harness, without)


def test_a_session_memory_the_harness_may_only_read_is_read_only(alice: Client, make_client: ClientFactory) -> None:
    mine = alice.create_memory("Alice's")
    person = alice.create_memory("Bob's profile")
    child = alice.create_memory("Bob's deals", parent_id=person["id"])
    alice.remember(child["id"], "Bob renews in March.")
    attach(alice, "sess_ro", {"memory_id": mine["id"], "access": "write", "default": True})
    alice.grant(person["id"], "harness:sess_ro", "read")
    harness = make_client("harness:sess_ro")

    async def work(mcp: McpClient) -> None:
        started = answer(await mcp.call_tool("memory_list", {}))
        assert [(m["id"], m["attached"]) for m in started["memories"]] == [
            (mine["id"], {"access": "write", "default": True}),
            (person["id"], {"access": "read", "default": False}),
        ]
        # Unaddressed writes stay with the default attachment; the session's memory is not written.
        written = answer(await mcp.call_tool("memory_remember", {"type": "fact", "content": "Noted."}))
        assert written["record"]["memory_id"] == mine["id"]
        refused = await mcp.call_tool("memory_remember", {"memory_id": person["id"], "type": "fact", "content": "x"})
        assert refused.is_error
        assert answer(refused)["error"]["code"] == "memory_forbidden"
        # It is a starting point like an attachment: the agent walks on to its children.
        recalled = answer(await mcp.call_tool("memory_recall", {"memory_id": person["id"], "text": "x"}))
        assert [c["id"] for c in recalled["children"]] == [child["id"]]
        walked = answer(await mcp.call_tool("memory_recall", {"memory_id": child["id"], "text": "March"}))
        assert [content(r, walked["fence"]) for r in walked["results"]] == ["Bob renews in March."]

    with_session(harness, person["id"], work)


def test_a_harness_with_nothing_attached_starts_from_the_session_memory(
    alice: Client, make_client: ClientFactory
) -> None:
    person = alice.create_memory("Alice's")
    alice.grant(person["id"], "harness:sess_only", "read")
    harness = make_client("harness:sess_only")

    async def work(mcp: McpClient) -> None:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS
        started = answer(await mcp.call_tool("memory_list", {}))
        assert [(m["id"], m["attached"]["access"]) for m in started["memories"]] == [(person["id"], "read")]

    with_session(harness, person["id"], work)
    with_session(harness, person["id"], work, mode="legacy")  # the initialize handshake carries it too


def test_a_session_memory_under_a_read_attachment_widens_nothing(alice: Client, make_client: ClientFactory) -> None:
    """Issue 36: the session's memory counts as an attachment of the access of the nearest attachment on
    its chain. Under a memory attached read it is read-only though the harness's grants would let it
    write: no write tools are offered when it would be the only place to write, and a remember into it is
    refused with the code the harness's own POST gets."""
    team = alice.create_memory("Team")
    deals = alice.create_memory("Deals", parent_id=team["id"])
    alice.grant(team["id"], "harness:sess_under", "read", "write")  # held: only the list narrows it
    alice.claim("sess_under")  # a list nobody has written yet is handed to its owner first
    attach(alice, "sess_under", {"memory_id": team["id"], "access": "read"})
    harness = make_client("harness:sess_under")
    fact = {"memory_id": deals["id"], "type": "fact", "content": "Acme renews in March."}
    over_rest = harness.post(f"/v1/memories/{deals['id']}/records", {"type": "fact", "content": "x"})
    assert (over_rest.status_code, over_rest.json()["error"]["code"]) == (403, "memory_forbidden")

    async def work(mcp: McpClient) -> None:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS
        started = answer(await mcp.call_tool("memory_list", {}))
        assert [(m["id"], m["attached"]) for m in started["memories"]] == [
            (team["id"], {"access": "read", "default": False}),
            (deals["id"], {"access": "read", "default": False}),
        ]
        for arguments in (fact, {"type": "fact", "content": "x"}):
            refused = await mcp.call_tool("memory_remember", arguments)
            assert refused.is_error
            assert answer(refused)["error"]["code"] == over_rest.json()["error"]["code"]

    with_session(harness, deals["id"], work)
    assert alice.get(f"/v1/memories/{deals['id']}/records").json()["data"] == []

    # With somewhere else to write, the write tools are offered, and the session's memory is still refused.
    inbox = alice.create_memory("Inbox")
    attach(alice, "sess_under", {"memory_id": team["id"], "access": "read"},
           {"memory_id": inbox["id"], "access": "write", "default": True})

    async def elsewhere(mcp: McpClient) -> None:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
        refused = await mcp.call_tool("memory_remember", fact)
        assert refused.is_error
        assert answer(refused)["error"]["code"] == "memory_forbidden"
        written = answer(await mcp.call_tool("memory_remember", {"type": "fact", "content": "Noted."}))
        assert written["record"]["memory_id"] == inbox["id"]

    with_session(harness, deals["id"], elsewhere)
    assert alice.get(f"/v1/memories/{deals['id']}/records").json()["data"] == []


def test_a_memory_attached_read_below_one_attached_write_is_read_only_over_mcp(
    alice: Client, make_client: ClientFactory
) -> None:
    """Issue 36: the nearest attachment decides, over MCP as over REST, and as the session's memory too."""
    team = alice.create_memory("Team")
    deals = alice.create_memory("Deals", parent_id=team["id"])
    alice.claim("sess_nested")  # a list nobody has written yet is handed to its owner first
    attach(alice, "sess_nested", {"memory_id": team["id"], "access": "write", "default": True},
           {"memory_id": deals["id"], "access": "read"})
    harness = make_client("harness:sess_nested")
    fact = {"memory_id": deals["id"], "type": "fact", "content": "x"}

    async def work(mcp: McpClient) -> None:
        refused = await mcp.call_tool("memory_remember", fact)
        assert refused.is_error
        assert answer(refused)["error"]["code"] == "memory_forbidden"
        written = answer(await mcp.call_tool("memory_remember", {"type": "fact", "content": "Noted."}))
        assert written["record"]["memory_id"] == team["id"]

    with_mcp(harness, work)
    with_session(harness, deals["id"], work)
    assert alice.get(f"/v1/memories/{deals['id']}/records").json()["data"] == []


@pytest.mark.parametrize("kind", ["unheld", "missing", "malformed"])
def test_a_session_memory_the_harness_holds_nothing_on_is_memory_not_found_before_anything_runs(
    alice: Client, bob: Client, make_client: ClientFactory, kind: str
) -> None:
    mine = alice.create_memory("Alice's")
    attach(alice, "sess_404", {"memory_id": mine["id"], "access": "write", "default": True})
    bobs = bob.create_memory("Bob's secret diary")
    named = {"unheld": bobs["id"], "missing": "hmem_" + "0" * 32, "malformed": "Bob's secret diary"}[kind]
    harness = make_client("harness:sess_404")

    requests_sent = (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "memory_remember", "arguments": {"type": "fact", "content": "ran"}}},
    )
    for body in requests_sent:
        refused = requests.post(harness.base_url + "/mcp", json=body, timeout=30, headers={
            "x-api-key": harness.key, "Accept": ACCEPT, "Content-Type": "application/json", HEADER: named})
        assert refused.status_code == 404, refused.text
        error = refused.json()["error"]
        assert error["code"] == "memory_not_found"
        assert "Bob" not in error["message"]
        assert "secret" not in error["message"]
    assert alice.get(f"/v1/memories/{mine['id']}/records").json()["data"] == []  # no tool ran

    async def work(mcp: McpClient) -> None:
        await mcp.list_tools()

    with pytest.raises(BaseExceptionGroup) as failed:  # the SDK's client cannot even connect
        with_session(harness, named, work)
    assert [str(e) for e in leaves(failed.value)] == ["Not Found"]  # its MCPError for an HTTP 404


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def test_a_person_s_key_is_offered_write_tools_only_where_it_may_write(
    alice: Client, make_client: ClientFactory
) -> None:
    """§9.1, write tools only where the key may write, for a person's key as for a harness's (issue 37):
    a key that may only read anywhere is offered the read tools; one write grant offers the write tools;
    a session memory it may only read offers the read tools, whatever it may write elsewhere."""
    team = alice.create_memory("Team")
    alice.grant(team["id"], "user:reader", "read")
    reader = make_client("user:reader")

    def names(mcp: McpClient) -> Any:
        async def listed() -> set[str]:
            return {t.name for t in (await mcp.list_tools()).tools}

        return listed()

    assert with_mcp(reader, names) == READ_TOOLS
    assert with_mcp(alice, names) == READ_TOOLS | WRITE_TOOLS  # the owner of Team may write there
    own = alice.create_memory("Reader's notes")
    alice.grant(own["id"], "user:reader", "read", "write")
    assert with_mcp(reader, names) == READ_TOOLS | WRITE_TOOLS
    assert with_session(reader, team["id"], names) == READ_TOOLS
    assert with_session(reader, own["id"], names) == READ_TOOLS | WRITE_TOOLS
