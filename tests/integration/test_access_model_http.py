"""The authorization state machine of tests/unit/test_access_model.py, through real HTTP: the local
gateway, the authorizer, the deployed handlers and DynamoDB on moto. Each principal (people and
harnesses) calls with an API key of its own (its groups on the key, as the admin CLI makes them), each
example in a tenant of its own, the tree mixing memories kept by the server and by mem0 (the session's
stage is connected to mem0 OSS in process: tests/conftest.py); a refusal is read from the answer's
status and error code, so the statuses of §12 (404 for a memory the caller cannot see or a harness with
nothing attached, 403 for one it sees without the privilege or another's harness list, 422 for an
invalid move or owner, or for what mem0 does not implement) are checked against the same reference
model as the services are, and what each write answers a caller is checked against what it may read.

Two doors: REST alone, and MCP for what an agent does (the official SDK's client over real HTTP to
POST /mcp: remember, revise, forget, recall, get, operate, run a named query, by its tool or by
memory_run_query), REST for the rest (memories, grants, harness lists, history). Fewer examples than
the unit suite's: every step's check asks every principal about every memory and every harness list,
and every MCP call opens a session of the SDK's."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from mcp import Client as McpClient

from tests.integration.conftest import Client, purge_tenant
from tests.integration.test_mcp import answer, with_mcp
from tests.unit.test_access_model import GROUPS, AccessModel, Driver, Entry, GrantSeen, Operated, Shown, Written
from uhp_memories.domain.errors import (
    DomainError,
    MemoriesNotAttached,
    MemoryForbidden,
    MemoryInvalid,
    MemoryNotFound,
    MemoryUnsupported,
    RecordNotFound,
)
from uhp_memories.domain.fence import unwrap
from uhp_memories.domain.queries.model import QueryNotFound
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws
from uhp_memories.mcp.tools import QUERY_TOOL_PREFIX

pytestmark = pytest.mark.slow

REFUSALS: dict[str, type[DomainError]] = {
    "memory_not_found": MemoryNotFound,
    "memory_forbidden": MemoryForbidden,
    "memory_invalid": MemoryInvalid,
    "memories_not_attached": MemoriesNotAttached,
    "memory_record_not_found": RecordNotFound,
    "memory_query_not_found": QueryNotFound,
    "memory_unsupported": MemoryUnsupported,
}
STATUS = {MemoryNotFound: 404, MemoryForbidden: 403, MemoryInvalid: 422, MemoriesNotAttached: 404,
          RecordNotFound: 404, QueryNotFound: 404, MemoryUnsupported: 422}
RECORD_FIELDS = ("content", "type", "attributes")


def refusal(code: str, message: str, detail: str) -> DomainError:
    """The domain's error for a refusal's code, carrying its message."""
    refused = REFUSALS.get(code)
    if refused is None:
        raise AssertionError(f"unexpected refusal {code}: {detail}")
    error: DomainError = DomainError.__new__(refused)
    DomainError.__init__(error, f"{code}: {message}")  # the server's message, as each constructor would not
    return error


def shown_over_rest(record: dict[str, Any]) -> Shown:
    """What a REST record answer shows of the fields the model writes (a withheld one is absent)."""
    return {name: record[name] for name in RECORD_FIELDS if name in record}


class HttpDriver:
    """The model's operations as HTTP requests, each principal with its own key in one tenant."""

    door = "rest"

    def __init__(self, local_aws: LocalAws, gateway: LocalGateway) -> None:
        self.local_aws = local_aws
        self.url = gateway.url
        self.tenant = "t-model-" + secrets.token_hex(4)
        self.clients: dict[str, Client] = {}

    def client(self, principal: str) -> Client:
        if principal not in self.clients:
            key = "k-" + secrets.token_hex(16)
            self.local_aws.add_keys([KeyEntry(key, self.tenant, principal, GROUPS.get(principal, ()))])
            self.clients[principal] = Client(self.url, key, self.tenant, principal, requests.Session())
        return self.clients[principal]

    def call(self, principal: str, method: str, path: str, body: Any = None, **params: Any) -> Any:
        answer = self.client(principal).request(method, path, body, **params)
        if answer.status_code < 300:
            return answer.json() if answer.content else None
        error = answer.json().get("error", {})
        refused = refusal(error.get("code", ""), error.get("message", ""),
                          f"{method} {path}: {answer.status_code} {answer.text[:300]}")
        assert answer.status_code == STATUS[type(refused)], (method, path, answer.status_code, error)
        raise refused

    def create_memory(self, principal: str, parent: str | None, restricted: bool, provider: str | None) -> str:
        body = {"name": "root" if parent is None else "child", "parent_id": parent, "restricted": restricted}
        if provider is not None:
            body["provider"] = provider
        return str(self.call(principal, "POST", "/v1/memories", body)["id"])

    def update_memory(self, principal: str, memory_id: str, changes: dict[str, Any]) -> None:
        self.call(principal, "PUT", f"/v1/memories/{memory_id}", changes)  # a field sent is a change

    def privileges(self, principal: str, memory_id: str) -> frozenset[str]:
        return frozenset(self.call(principal, "GET", f"/v1/memories/{memory_id}")["privileges"])

    def grant(self, principal: str, memory_id: str, grantee: str, privileges: frozenset[str]) -> str:
        body = {"principal": grantee, "privileges": sorted(privileges)}
        return str(self.call(principal, "POST", f"/v1/memories/{memory_id}/grants", body)["id"])

    def revoke(self, principal: str, memory_id: str, grant_id: str) -> None:
        self.call(principal, "DELETE", f"/v1/memories/{memory_id}/grants/{grant_id}")

    def grants(self, principal: str, memory_id: str) -> list[GrantSeen]:
        seen: list[GrantSeen] = []
        cursor = None
        while True:
            page = self.call(principal, "GET", f"/v1/memories/{memory_id}/grants", limit=100, cursor=cursor)
            seen += [GrantSeen(g["id"], g["memory_id"], g["principal"], frozenset(g["privileges"]))
                     for g in page["data"]]
            cursor = page.get("next_cursor")
            if not cursor:
                return seen

    def attach(self, principal: str, harness: str, entries: Sequence[Entry]) -> list[Entry]:
        body = {"memories": [{"memory_id": e.memory_id, "access": e.access, "default": e.default} for e in entries]}
        put = self.call(principal, "PUT", f"/v1/harnesses/{harness}/memories", body)
        return [Entry(e["memory_id"], e["access"], e["default"]) for e in put["memories"]]

    def attached(self, principal: str, harness: str) -> tuple[list[Entry], int]:
        got = self.call(principal, "GET", f"/v1/harnesses/{harness}/memories")
        return [Entry(e["memory_id"], e["access"], e["default"]) for e in got["memories"]], got["hidden"]

    def set_owners(self, principal: str, harness: str, owners: Sequence[str]) -> list[str]:
        return list(self.call(principal, "PUT", f"/v1/harnesses/{harness}/owners", {"owners": list(owners)})["owners"])

    def owners(self, principal: str, harness: str) -> list[str]:
        return list(self.call(principal, "GET", f"/v1/harnesses/{harness}/owners")["owners"])

    def remember(self, principal: str, memory_id: str, type: str, content: str, attributes: dict[str, Any]) -> Written:
        body = {"type": type, "content": content, "attributes": attributes}
        written = self.call(principal, "POST", f"/v1/memories/{memory_id}/records", body)
        return str(written["id"]), shown_over_rest(written)

    def revise(self, principal: str, memory_id: str, record_id: str, content: str) -> Written:
        written = self.call(principal, "PATCH", f"/v1/memories/{memory_id}/records/{record_id}", {"content": content})
        return str(written["id"]), shown_over_rest(written)

    def forget(self, principal: str, memory_id: str, record_id: str) -> Shown:
        return shown_over_rest(self.call(principal, "DELETE", f"/v1/memories/{memory_id}/records/{record_id}"))

    def operate(self, principal: str, memory_id: str, record_id: str, operation: str) -> Operated:
        path = f"/v1/memories/{memory_id}/records/{record_id}/operations/{operation}"
        ran = self.call(principal, "POST", path, {"input": {}})
        if ran.get("record") is not None:
            return Operated(written=(str(ran["record"]["id"]), shown_over_rest(ran["record"])))
        return Operated(results=[r["id"] for r in ran["results"]])

    def define_query(self, principal: str, memory_id: str, name: str, requires: str) -> None:
        body = {"body": {"text": "seed"}, "requires": requires}
        self.call(principal, "PUT", f"/v1/memories/{memory_id}/queries/{name}", body)

    def run_query(self, principal: str, memory_id: str, name: str, own_tool: bool) -> list[str]:
        ran = self.call(principal, "POST", f"/v1/memories/{memory_id}/queries/{name}", {"params": {}})
        return [r["memory_id"] for r in ran["results"]]

    def get_record(self, principal: str, memory_id: str, record_id: str, include: str) -> str:
        got = self.call(principal, "GET", f"/v1/memories/{memory_id}/records/{record_id}", include=include)
        return str(got["status"])

    def list_records(self, principal: str, memory_id: str) -> None:
        self.call(principal, "GET", f"/v1/memories/{memory_id}/records")

    def history(self, principal: str, memory_id: str, record_id: str) -> None:
        self.call(principal, "GET", f"/v1/memories/{memory_id}/records/{record_id}/history")

    def recall(self, principal: str, memory_id: str, text: str) -> None:
        self.call(principal, "POST", f"/v1/memories/{memory_id}/recall", {"text": text})

    def close(self) -> None:
        purge_tenant(self.local_aws, self.tenant)


def shown_over_mcp(record: dict[str, Any], fence: str | None) -> Shown:
    """What an MCP record answer shows: content and attributes fenced (attributes as compact JSON), the
    type plain; a withheld field is absent."""
    shown: Shown = {}
    if "content" in record:
        assert fence is not None
        shown["content"] = unwrap(record["content"], fence)
    if "type" in record:
        shown["type"] = record["type"]
    if "attributes" in record:
        assert fence is not None
        shown["attributes"] = json.loads(unwrap(record["attributes"], fence))
    return shown


class McpDriver(HttpDriver):
    """What an agent does through the MCP tools (each call a session of the official SDK's client over
    real HTTP); memories, grants, harness lists, history and listings through REST, as HttpDriver does.
    A tool's refusal is an error result {"error": {"code", "message"}}, read as the domain's error."""

    door = "mcp"

    def tool(self, principal: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async def work(mcp: McpClient) -> tuple[bool, dict[str, Any]]:
            result = await mcp.call_tool(name, arguments)
            return result.is_error, answer(result)

        failed, got = with_mcp(self.client(principal), work)
        if failed:
            error = got.get("error", {})
            raise refusal(error.get("code", ""), error.get("message", ""), f"{name}: {str(got)[:300]}")
        return got

    def remember(self, principal: str, memory_id: str, type: str, content: str, attributes: dict[str, Any]) -> Written:
        got = self.tool(principal, "memory_remember",
                        {"memory_id": memory_id, "type": type, "content": content, "attributes": attributes})
        return str(got["record"]["id"]), shown_over_mcp(got["record"], got.get("fence"))

    def revise(self, principal: str, memory_id: str, record_id: str, content: str) -> Written:
        got = self.tool(principal, "memory_revise",
                        {"memory_id": memory_id, "record_id": record_id, "content": content})
        return str(got["record"]["id"]), shown_over_mcp(got["record"], got.get("fence"))

    def forget(self, principal: str, memory_id: str, record_id: str) -> Shown:
        got = self.tool(principal, "memory_forget", {"memory_id": memory_id, "record_id": record_id})
        return shown_over_mcp(got["record"], got.get("fence"))

    def operate(self, principal: str, memory_id: str, record_id: str, operation: str) -> Operated:
        got = self.tool(principal, "memory_operate",
                        {"memory_id": memory_id, "record_id": record_id, "operation": operation, "input": {}})
        if "record" in got:
            return Operated(written=(str(got["record"]["id"]), shown_over_mcp(got["record"], got.get("fence"))))
        return Operated(results=[r["id"] for r in got["results"]])

    def run_query(self, principal: str, memory_id: str, name: str, own_tool: bool) -> list[str]:
        if own_tool:
            got = self.tool(principal, QUERY_TOOL_PREFIX + name, {"memory_id": memory_id})
        else:
            got = self.tool(principal, "memory_run_query", {"memory_id": memory_id, "name": name, "params": {}})
        return [r["memory_id"] for r in got["results"]]

    def get_record(self, principal: str, memory_id: str, record_id: str, include: str) -> str:
        if include != "active":  # memory_get reads what is active; history's view is REST's
            return super().get_record(principal, memory_id, record_id, include)
        got = self.tool(principal, "memory_get", {"memory_id": memory_id, "record_id": record_id})
        return str(got["record"]["status"])

    def recall(self, principal: str, memory_id: str, text: str) -> None:
        self.tool(principal, "memory_recall", {"memory_id": memory_id, "text": text})


SETTINGS = settings(deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_every_answer_over_http_agrees_with_the_reference_model(local_aws: LocalAws, gateway: LocalGateway) -> None:
    class OverHttp(AccessModel):
        def driver(self) -> Driver:
            return HttpDriver(local_aws, gateway)  # a tenant of its own, purged at the example's end

    run_state_machine_as_test(OverHttp, settings=settings(SETTINGS, max_examples=6, stateful_step_count=15))


def test_every_answer_over_mcp_agrees_with_the_reference_model(local_aws: LocalAws, gateway: LocalGateway) -> None:
    class OverMcp(AccessModel):
        def driver(self) -> Driver:
            return McpDriver(local_aws, gateway)

        def every_answer_agrees_with_the_model(self) -> None:
            """Not an invariant here: it asks over REST, as the test above does after every step; the
            steps' own answers are what MCP adds, and its time goes to them."""

    run_state_machine_as_test(OverMcp, settings=settings(SETTINGS, max_examples=6, stateful_step_count=15))
