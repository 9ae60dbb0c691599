"""A replay for every write (issue 36): each route of api/routes.py that may write (every POST, PUT,
PATCH and DELETE not marked `reads`) and each MCP tool whose call may write (functions/mcp/handler.py
WRITING_TOOLS) is sent with an Idempotency-Key, then again: the retry is answered the first answer
(the same status and the same body; the spec asks nothing more of a replay, and the server adds no
replay header), writes nothing (the tenant's items and what the route's reads show are unchanged),
and the same key with another request is refused, 422 `idempotency_key_reused` (over MCP, the tool's
error result with that code) (docs/decisions.md, "Idempotency"). Over MCP a retry is a new JSON-RPC
request with a new id: it is answered the replay under its own id, never refused as a reused key.

The cases are built from the route table and the tool list: a route or a tool that may write
without a builder here fails `test_every_write_route_has_a_replay_case` or
`test_every_mcp_write_tool_has_a_replay_case`, so none goes without its replay test."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
import requests
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from functions.mcp.handler import WRITING_TOOLS
from tests.integration.conftest import Client, ClientFactory, error_code
from tests.integration.test_idempotency import new_key, tenant_item_bodies
from uhp_memories.adapters.dynamodb.idempotency import PackedDynamoDBPersistenceLayer
from uhp_memories.api.routes import ROUTES, Route
from uhp_memories.domain.types.model import TENANT_ADMIN_GROUP
from uhp_memories.local import gateway as gateway_module
from uhp_memories.local.moto_env import LocalAws
from uhp_memories.mcp import tools
from uhp_memories.mcp.server import SESSION_MEMORY_HEADER

# Every write route, arranged and replayed: minutes, the slow lane's.
pytestmark = pytest.mark.slow

# The routes that may write, by operationId: every non-GET route that is not a read by POST.
WRITE_ROUTES: dict[str, Route] = {r.operation_id: r for r in ROUTES if r.method != "GET" and not r.reads}
MCP_ACCEPT = "application/json, text/event-stream"
BOUNDARY = "r3playb0undary"
OTHER_BODY = {"other": "body"}  # another body: refused for its key before any route reads it


@dataclass
class World:
    """Who a case arranges with: alice owns what it arranges and reads it back."""

    alice: Client
    make_client: ClientFactory

    def memory(self, name: str = "replayed") -> str:
        return str(self.alice.create_memory(name)["id"])

    def admin(self) -> Client:
        return self.make_client("user:root", groups=(TENANT_ADMIN_GROUP,))

    def own(self, harness_id: str) -> None:
        """Make alice the owner of a harness's list (a new list is its tenant administrators' to give)."""
        admin = self.admin()
        named = admin.put(f"/v1/harnesses/{harness_id}/owners", {"owners": ["user:alice"]})
        assert named.status_code == 200, named.text

    def harness(self, harness_id: str, memory_id: str) -> Client:
        """A harness whose default memory, attached with write, is `memory_id`."""
        self.own(harness_id)
        self.alice.attach(harness_id, memory_id)
        return self.make_client(f"harness:{harness_id}")


@dataclass(frozen=True)
class Write:
    """One write, as a client sends it and sends it again."""

    by: Client
    method: str
    path: str
    body: Any = None  # JSON; None: no body
    multipart: bytes | None = None  # a multipart/form-data body (boundary BOUNDARY) instead
    other: Any = field(default_factory=lambda: OTHER_BODY)  # another request under the same key
    looks: tuple[str, ...] = ()  # GETs (by alice) whose answers the replay must leave as they were
    headers: dict[str, str] = field(default_factory=dict)

    def send(self, key: str, *, other: bool = False) -> requests.Response:
        headers = {"Idempotency-Key": key, **self.headers}
        if self.multipart is not None:
            data = self.multipart.replace(b"first", b"other") if other else self.multipart
            return self.by.session.post(self.by.base_url + self.path, data=data, timeout=30, headers={
                "x-api-key": self.by.key, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}", **headers})
        return self.by.request(self.method, self.path, self.other if other else self.body, headers=headers)


Builder = Callable[[World], Write]
BUILDERS: dict[str, Builder] = {}


def builds(operation_id: str) -> Callable[[Builder], Builder]:
    def register(builder: Builder) -> Builder:
        assert operation_id not in BUILDERS, operation_id
        BUILDERS[operation_id] = builder
        return builder

    return register


def records_of(memory_id: str) -> str:
    return f"/v1/memories/{memory_id}/records?include=all"


def mcp_call(tool: str, arguments: dict[str, Any], request_id: Any = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, **params}}


# -- a builder per write route -----------------------------------------------------------------------


@builds("registerType")
def _register_type(w: World) -> Write:
    admin = w.admin()
    definition = {"schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
                  "text": "{title}. {content}",
                  "operations": [{"name": "rename", "requires": "write", "set": {"title": "renamed"}}]}
    return Write(admin, "PUT", "/v1/memories/types/x.replay.item", definition, looks=("/v1/memories/types",))


@builds("createMemory")
def _create_memory(w: World) -> Write:
    parent = w.memory("parent")
    return Write(w.alice, "POST", "/v1/memories", {"name": "once", "parent_id": parent},
                 looks=("/v1/memories", f"/v1/memories?parent={parent}"))


@builds("updateMemory")
def _update_memory(w: World) -> Write:
    memory = w.memory()
    return Write(w.alice, "PUT", f"/v1/memories/{memory}", {"name": "renamed", "description": "once"},
                 looks=(f"/v1/memories/{memory}",))


@builds("deleteMemory")
def _delete_memory(w: World) -> Write:
    memory = w.memory()
    w.alice.remember(memory)
    return Write(w.alice, "DELETE", f"/v1/memories/{memory}", looks=("/v1/memories", f"/v1/memories/{memory}"))


@builds("createGrant")
def _create_grant(w: World) -> Write:
    memory = w.memory()
    return Write(w.alice, "POST", f"/v1/memories/{memory}/grants", {"principal": "user:bob", "privileges": ["read"]},
                 looks=(f"/v1/memories/{memory}/grants",))


@builds("deleteGrant")
def _delete_grant(w: World) -> Write:
    memory = w.memory()
    grant = w.alice.grant(memory, "user:bob", "read")
    return Write(w.alice, "DELETE", f"/v1/memories/{memory}/grants/{grant['id']}",
                 looks=(f"/v1/memories/{memory}/grants",))


@builds("remember")
def _remember(w: World) -> Write:
    memory = w.memory()
    return Write(w.alice, "POST", f"/v1/memories/{memory}/records",
                 {"type": "fact", "content": "Acme renews in March", "attributes": {"account": "acme"}},
                 looks=(records_of(memory), f"/v1/memories/{memory}"))


@builds("revise")
def _revise(w: World) -> Write:
    memory = w.memory()
    record = w.alice.remember(memory, "v1")["id"]
    return Write(w.alice, "PATCH", f"/v1/memories/{memory}/records/{record}", {"content": "v2"},
                 looks=(records_of(memory), f"/v1/memories/{memory}/records/{record}/history"))


@builds("forget")
def _forget(w: World) -> Write:
    memory = w.memory()
    record = w.alice.remember(memory)["id"]
    return Write(w.alice, "DELETE", f"/v1/memories/{memory}/records/{record}",
                 looks=(records_of(memory), f"/v1/memories/{memory}/records/{record}/history"))


@builds("createSnapshot")
def _create_snapshot(w: World) -> Write:
    memory = w.memory()
    return Write(w.alice, "POST", f"/v1/memories/{memory}/snapshots", {"name": "s1", "message": "before"},
                 looks=(f"/v1/memories/{memory}/snapshots",))


@builds("defineQuery")
def _define_query(w: World) -> Write:
    memory = w.memory()
    query = {"description": "by text", "body": {"text": "{{words}}"},
             "params": {"type": "object", "properties": {"words": {"type": "string"}}}}
    return Write(w.alice, "PUT", f"/v1/memories/{memory}/queries/by_text", query,
                 looks=(f"/v1/memories/{memory}/queries",))


@builds("observe")
def _observe(w: World) -> Write:
    memory = w.memory()
    return Write(w.alice, "POST", f"/v1/memories/{memory}/observe",
                 {"episodes": [{"content": "asked about renewal"}, {"content": "answered March"}]},
                 looks=(records_of(memory),))


@builds("erase")
def _erase(w: World) -> Write:
    memory = w.memory()
    record = w.alice.remember(memory, "to erase")["id"]
    w.alice.remember(memory, "to keep")
    return Write(w.alice, "POST", f"/v1/memories/{memory}/erase", {"record_ids": [record]},
                 looks=(records_of(memory), f"/v1/memories/{memory}"))


@builds("uploadFile")
def _upload_file(w: World) -> Write:
    body = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
            f"Content-Type: text/plain\r\n\r\nthe first bytes\r\n--{BOUNDARY}--\r\n").encode()
    return Write(w.alice, "POST", "/v1/files", multipart=body)


@builds("runOperation")
def _run_operation(w: World) -> Write:
    memory = w.memory()
    task = w.alice.remember(memory, "", type="x.task", attributes={"title": "ship it"})["id"]
    return Write(w.alice, "POST", f"/v1/memories/{memory}/records/{task}/operations/complete", {},
                 looks=(records_of(memory), f"/v1/memories/{memory}/records/{task}/history"))


def _repeats(w: World) -> str:
    """A memory holding an exact repeat: a consolidation run forgets one."""
    memory = w.memory()
    w.alice.remember(memory, "Acme renews in March.")
    w.alice.remember(memory, "acme renews in march.")
    return memory


@builds("startConsolidation")
def _start_consolidation(w: World) -> Write:
    memory = _repeats(w)
    return Write(w.alice, "POST", f"/v1/memories/{memory}/consolidations", {"budget": {"limit": 10_000}},
                 looks=(records_of(memory), f"/v1/memories/{memory}/consolidations"))


@builds("revertConsolidation")
def _revert_consolidation(w: World) -> Write:
    memory = _repeats(w)
    run = w.alice.post(f"/v1/memories/{memory}/consolidations", {})
    assert run.status_code == 201, run.text
    runs = f"/v1/memories/{memory}/consolidations"
    return Write(w.alice, "POST", f"{runs}/{run.json()['id']}/revert",
                 looks=(records_of(memory), runs, f"{runs}/{run.json()['id']}"))


@builds("setConsolidationSchedule")
def _set_schedule(w: World) -> Write:
    memory = w.memory()
    path = f"/v1/memories/{memory}/consolidation-schedule"
    return Write(w.alice, "PUT", path, {"every_minutes": 60, "budget": {"limit": 10_000}}, looks=(path,))


@builds("deleteConsolidationSchedule")
def _delete_schedule(w: World) -> Write:
    memory = w.memory()
    path = f"/v1/memories/{memory}/consolidation-schedule"
    assert w.alice.put(path, {"every_minutes": 60}).status_code == 200
    return Write(w.alice, "DELETE", path, looks=(path,))


@builds("attachMemories")
def _attach_memories(w: World) -> Write:
    memory = w.memory()
    w.own("h_replay")
    entry = {"memory_id": memory, "access": "write", "default": True}
    return Write(w.alice, "PUT", "/v1/harnesses/h_replay/memories", {"memories": [entry]},
                 looks=("/v1/harnesses/h_replay/memories", f"/v1/memories/{memory}/grants"))


@builds("setHarnessOwners")
def _set_owners(w: World) -> Write:
    w.own("h_owned")
    w.alice.attach("h_owned", w.memory(), access="read")
    return Write(w.alice, "PUT", "/v1/harnesses/h_owned/owners", {"owners": ["user:alice", "group:ops"]},
                 looks=("/v1/harnesses/h_owned/owners",))


@builds("postTurn")
def _post_turn(w: World) -> Write:
    memory = w.memory()
    harness = w.harness("h_turns", memory)
    turn = {"asked": "When do we deploy?", "answered": "On Tuesdays.",
            "tools": [{"name": "memory_recall", "input": {"query": "deploy"}, "output": {"records": 1}}]}
    return Write(harness, "POST", "/v1/harnesses/h_turns/turns", turn, looks=(records_of(memory),))


@builds("setPrimePins")
def _set_prime_pins(w: World) -> Write:
    memory = w.memory()
    record = w.alice.remember(memory, "Deploys: Tuesdays.")["id"]
    return Write(w.alice, "PUT", f"/v1/memories/{memory}/prime", {"record_ids": [record]},
                 looks=(f"/v1/memories/{memory}/prime",))


@builds("mcp")
def _mcp(w: World) -> Write:
    memory = w.memory()
    harness = w.harness("h_mcp_route", memory)
    return Write(harness, "POST", "/mcp", mcp_call("memory_remember", {"type": "fact", "content": "via MCP"}),
                 other=mcp_call("memory_remember", {"type": "fact", "content": "something else"}),
                 looks=(records_of(memory),), headers={"Accept": MCP_ACCEPT})


# -- what a replay must be ---------------------------------------------------------------------------


def route_pattern(route: Route) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(route.path)))


def reads(client: Client, paths: tuple[str, ...]) -> list[tuple[int, Any]]:
    answers = [client.get(path) for path in paths]
    return [(a.status_code, a.json()) for a in answers]


def same_answer(first: requests.Response, again: requests.Response) -> None:
    """A replay: the first answer's status and body (byte for byte), and its content type."""
    assert again.status_code == first.status_code, again.text
    assert again.content == first.content, (first.text[:500], again.text[:500])
    assert again.headers.get("Content-Type") == first.headers.get("Content-Type")


def refused_as_reused(answer: requests.Response) -> None:
    """422 idempotency_key_reused; over MCP, as a tool's refusal: its error result, with that body."""
    if answer.request.path_url == "/mcp":
        assert answer.status_code == 200, answer.text
        assert tool_refusal(answer) == "idempotency_key_reused", answer.text
        return
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "idempotency_key_reused"


def tool_refusal(answer: requests.Response) -> str:
    """The code of the tool's error result a raw MCP answer carries."""
    result = answer.json()["result"]
    assert result["isError"] is True, answer.text
    return str(json.loads(result["content"][0]["text"])["error"]["code"])


@pytest.fixture
def world(alice: Client, make_client: ClientFactory) -> World:
    return World(alice, make_client)


def test_every_write_route_has_a_replay_case() -> None:
    """A route that may write and has no builder here fails this test: add its builder (and a route
    that only reads by POST is marked `reads` in api/routes.py instead)."""
    missing = sorted(set(WRITE_ROUTES) - set(BUILDERS))
    assert not missing, f"write routes without a replay case (add a @builds builder): {missing}"
    assert not set(BUILDERS) - set(WRITE_ROUTES), "a builder for a route that is gone, or that only reads"


@pytest.mark.parametrize("operation", sorted(WRITE_ROUTES))
def test_every_write_route_replays_its_first_answer_and_writes_nothing(
    operation: str, world: World, local_aws: LocalAws
) -> None:
    route = WRITE_ROUTES[operation]
    if operation not in BUILDERS:
        pytest.fail(f"{route.method} {route.path} ({operation}) may write and has no replay case")
    write = BUILDERS[operation](world)
    assert (write.method, route.multipart) == (route.method, write.multipart is not None)
    assert route_pattern(route).fullmatch(write.path.split("?")[0]), (write.path, route.path)
    key = new_key()
    first = write.send(key)
    assert first.status_code in (200, 201), first.text
    looked = reads(world.alice, write.looks)
    items = tenant_item_bodies(local_aws, world.alice.tenant)

    same_answer(first, write.send(key))
    assert tenant_item_bodies(local_aws, world.alice.tenant) == items, "the replay wrote"
    assert reads(world.alice, write.looks) == looked, "the replay changed what the route's reads show"

    refused_as_reused(write.send(key, other=True))
    assert tenant_item_bodies(local_aws, world.alice.tenant) == items, "the refused request wrote"
    same_answer(first, write.send(key))  # and the key still answers its own request


# -- MCP: every tool whose call may write, over the official SDK's client -----------------------------


@dataclass(frozen=True)
class ToolCall:
    by: Client
    arguments: dict[str, Any]
    other: dict[str, Any]  # other arguments: another call under the same key
    looks: tuple[str, ...]


ToolBuilder = Callable[[World], ToolCall]
MCP_BUILDERS: dict[str, ToolBuilder] = {}


def builds_tool(name: str) -> Callable[[ToolBuilder], ToolBuilder]:
    def register(builder: ToolBuilder) -> ToolBuilder:
        assert name not in MCP_BUILDERS, name
        MCP_BUILDERS[name] = builder
        return builder

    return register


@builds_tool("memory_remember")
def _tool_remember(w: World) -> ToolCall:
    memory = w.memory()
    return ToolCall(w.harness("h_tool", memory), {"type": "fact", "content": "Acme renews in March"},
                    {"type": "fact", "content": "Acme renews in April"}, (records_of(memory),))


@builds_tool("memory_revise")
def _tool_revise(w: World) -> ToolCall:
    memory = w.memory()
    record = w.alice.remember(memory, "v1")["id"]
    given = {"memory_id": memory, "record_id": record}
    return ToolCall(w.harness("h_tool", memory), {**given, "content": "v2"}, {**given, "content": "v3"},
                    (records_of(memory), f"/v1/memories/{memory}/records/{record}/history"))


@builds_tool("memory_forget")
def _tool_forget(w: World) -> ToolCall:
    memory = w.memory()
    record, other = (w.alice.remember(memory, text)["id"] for text in ("wrong", "also wrong"))
    return ToolCall(w.harness("h_tool", memory), {"memory_id": memory, "record_id": record},
                    {"memory_id": memory, "record_id": other}, (records_of(memory),))


@builds_tool("memory_operate")
def _tool_operate(w: World) -> ToolCall:
    memory = w.memory()
    task = w.alice.remember(memory, "", type="x.task", attributes={"title": "ship it"})["id"]
    given = {"memory_id": memory, "record_id": task}
    return ToolCall(w.harness("h_tool", memory), {**given, "operation": "complete"},
                    {**given, "operation": "assign", "input": {"assignee": "bob"}},
                    (records_of(memory), f"/v1/memories/{memory}/records/{task}/history"))


def test_every_mcp_write_tool_has_a_replay_case() -> None:
    """A tool whose call may write (WRITING_TOOLS, which make_handler keeps the answers of) and has no
    builder here fails this test; and every tool marked as writing is one of them."""
    assert {t.name for t in tools.TOOLS if t.writes} <= WRITING_TOOLS
    missing = sorted(WRITING_TOOLS - set(MCP_BUILDERS))
    assert not missing, f"MCP write tools without a replay case (add a @builds_tool builder): {missing}"
    assert not set(MCP_BUILDERS) - WRITING_TOOLS


@asynccontextmanager
async def mcp_session(client: Client, key: str, *hooks: Callable[[Any], Any]) -> AsyncIterator[McpClient]:
    """The official SDK's client on /mcp, every request it sends carrying this Idempotency-Key."""
    headers = {"x-api-key": client.key, "Idempotency-Key": key}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"request": list(hooks)}) as http,
        McpClient(streamable_http_client(client.base_url + "/mcp", http_client=http)) as mcp,
    ):
        yield mcp


def tool_answer(result: Any) -> tuple[bool, dict[str, Any]]:
    assert len(result.content) == 1
    return bool(result.is_error), json.loads(result.content[0].text)


@pytest.mark.parametrize("tool", sorted(WRITING_TOOLS))
def test_every_mcp_write_tool_replays_a_retry_with_a_new_request_id(
    tool: str, world: World, local_aws: LocalAws
) -> None:
    """The SDK's client retrying a tool call under the same Idempotency-Key sends a new JSON-RPC
    request, with a new id: it is answered the first answer, writes nothing, and another call under
    that key is refused as the tool's error result, idempotency_key_reused."""
    if tool not in MCP_BUILDERS:
        pytest.fail(f"MCP tool {tool} may write and has no replay case")
    call = MCP_BUILDERS[tool](world)
    key = new_key()
    sent: list[Any] = []

    async def note(request: Any) -> None:
        message = json.loads(request.content or b"null")
        if isinstance(message, dict) and message.get("method") == "tools/call":
            sent.append(message["id"])

    async def main() -> None:
        async with mcp_session(call.by, key, note) as mcp:
            first = tool_answer(await mcp.call_tool(tool, call.arguments))
            assert first[0] is False, first
            looked = reads(world.alice, call.looks)
            items = tenant_item_bodies(local_aws, world.alice.tenant)

            assert tool_answer(await mcp.call_tool(tool, call.arguments)) == first
            assert tenant_item_bodies(local_aws, world.alice.tenant) == items, "the retry wrote"
            assert reads(world.alice, call.looks) == looked

            is_error, refused = tool_answer(await mcp.call_tool(tool, call.other))
            assert (is_error, refused["error"]["code"]) == (True, "idempotency_key_reused"), refused
            assert tenant_item_bodies(local_aws, world.alice.tenant) == items, "the refused call wrote"
            assert tool_answer(await mcp.call_tool(tool, call.arguments)) == first

    asyncio.run(main())
    assert len(sent) == 4, sent
    assert len(set(sent)) == 4, f"each call a new JSON-RPC id: {sent}"


# -- MCP over raw HTTP: the JSON-RPC id is not part of the request a key names -------------------------


def post_mcp(client: Client, message: dict[str, Any], key: str, **headers: str) -> requests.Response:
    return client.session.post(client.base_url + "/mcp", json=message, timeout=30, headers={
        "x-api-key": client.key, "Idempotency-Key": key, "Accept": MCP_ACCEPT, **headers})


def test_an_mcp_retry_with_a_new_json_rpc_id_is_answered_the_replay_under_its_own_id(
    world: World, local_aws: LocalAws
) -> None:
    """A retry was refused as a reused key: the JSON-RPC id was part of the body compared. A retry is
    the same call whatever its id and its `_meta` (the SDK's progress token is the id again; trace
    context is per request); the replay carries the retry's own id."""
    memory = world.memory()
    harness = world.harness("h_retry", memory)
    arguments = {"type": "fact", "content": "Deploys: Tuesdays."}
    key = new_key()
    first = post_mcp(harness, mcp_call("memory_remember", arguments, 1, _meta={"progressToken": 1}), key)
    assert first.status_code == 200, first.text
    assert first.json()["id"] == 1
    assert first.json()["result"]["isError"] is False, first.text
    items = tenant_item_bodies(local_aws, world.alice.tenant)

    same_answer(first, post_mcp(harness, mcp_call("memory_remember", arguments, 1, _meta={"progressToken": 1}), key))
    traced = {"progressToken": 7, "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    for retry_id in (7, "retry-8", 0):
        again = post_mcp(harness, mcp_call("memory_remember", arguments, retry_id, _meta=traced), key)
        assert again.status_code == 200, again.text
        assert again.json() == {**first.json(), "id": retry_id}
    assert tenant_item_bodies(local_aws, world.alice.tenant) == items, "a retry wrote"
    assert len(world.alice.get(f"/v1/memories/{memory}/records").json()["data"]) == 1

    # Another call under the key is refused as a tool's refusal is, to the request's own id.
    other = post_mcp(harness, mcp_call("memory_remember", {**arguments, "content": "Fridays"}, 9), key)
    assert other.status_code == 200, other.text
    assert other.json()["id"] == 9
    assert tool_refusal(other) == "idempotency_key_reused"
    assert tenant_item_bodies(local_aws, world.alice.tenant) == items


def test_an_mcp_call_under_a_used_key_naming_another_session_memory_is_refused(
    world: World, local_aws: LocalAws
) -> None:
    """`x-uhp-memory` says where a memory_remember without memory_id writes: the same call for another
    session memory is another request, never answered "written" with the first memory's record."""
    one, two = world.memory("one"), world.memory("two")
    call = mcp_call("memory_remember", {"type": "fact", "content": "session note"})
    key = new_key()
    first = post_mcp(world.alice, call, key, **{SESSION_MEMORY_HEADER: one})
    assert first.status_code == 200, first.text
    assert one in first.text
    items = tenant_item_bodies(local_aws, world.alice.tenant)
    same_answer(first, post_mcp(world.alice, call, key, **{SESSION_MEMORY_HEADER: one}))
    refused = post_mcp(world.alice, call, key, **{SESSION_MEMORY_HEADER: two})
    assert refused.status_code == 200, refused.text
    assert tool_refusal(refused) == "idempotency_key_reused"
    assert tenant_item_bodies(local_aws, world.alice.tenant) == items
    assert world.alice.get(f"/v1/memories/{two}/records").json()["data"] == []


def test_an_mcp_retry_whose_first_answer_was_not_kept_is_told_what_was_written(
    world: World, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call wrote and its answer was lost (test_idempotency.py, issue 27): the SDK's client is
    answered idempotency_key_committed with the ids written, as the tool's error result in its protocol
    version's shape. The result was built by hand without 2026-07-28's `resultType`, and the client
    raised a validation error instead of showing the refusal."""
    monkeypatch.setattr(gateway_module.LambdaContext, "get_remaining_time_in_millis", lambda self: 1)

    def not_kept(self: Any, data_record: Any) -> None:
        raise RuntimeError("the answer could not be kept")

    monkeypatch.setattr(PackedDynamoDBPersistenceLayer, "_update_record", not_kept)
    memory = world.memory()
    harness = world.harness("h_lost", memory)
    arguments = {"type": "fact", "content": "written once"}

    async def main() -> tuple[dict[str, Any], tuple[bool, dict[str, Any]]]:
        async with mcp_session(harness, new_key()) as mcp:
            is_error, first = tool_answer(await mcp.call_tool("memory_remember", arguments))
            assert is_error is False, first
            return first, tool_answer(await mcp.call_tool("memory_remember", arguments))

    first, (is_error, again) = asyncio.run(main())
    assert (is_error, again["error"]["code"]) == (True, "idempotency_key_committed"), again
    assert first["record"]["id"] in again["error"]["written_ids"]
    assert len(world.alice.get(f"/v1/memories/{memory}/records").json()["data"]) == 1
