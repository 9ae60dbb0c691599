"""The authorization state machine of tests/unit/test_access_model.py, through real HTTP: the local
gateway, the authorizer, the deployed handlers and DynamoDB on moto. Each principal calls with an API
key of its own (its groups on the key, as the admin CLI makes them), each example in a tenant of its
own; a refusal is read from the answer's status and error code, so the statuses of §12 (404 for a
memory the caller cannot see, 403 for one it sees without the privilege, 422 for an invalid move)
are checked against the same reference model as the services are. Fewer examples than the unit
suite's: every step's check asks every principal about every memory, three requests each."""

from __future__ import annotations

import secrets
from typing import Any

import requests
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.integration.conftest import Client, purge_tenant
from tests.unit.test_access_model import GROUPS, AccessModel, Driver, GrantSeen
from uhp_memories.domain.errors import DomainError, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws

REFUSALS: dict[tuple[int, str], type[DomainError]] = {
    (404, "memory_not_found"): MemoryNotFound,
    (403, "memory_forbidden"): MemoryForbidden,
    (422, "memory_invalid"): MemoryInvalid,
}


class HttpDriver:
    """The model's operations as HTTP requests, each principal with its own key in one tenant."""

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
        code = answer.json().get("error", {}).get("code", "")
        refused = REFUSALS.get((answer.status_code, code))
        if refused is None:
            raise AssertionError(f"{method} {path}: {answer.status_code} {answer.text[:300]}")
        raise refused(code)

    def create_memory(self, principal: str, parent: str | None, restricted: bool) -> str:
        body = {"name": "root" if parent is None else "child", "parent_id": parent, "restricted": restricted}
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

    def attach(self, principal: str, harness: str, memory_id: str, access: str) -> None:
        body = {"memories": [{"memory_id": memory_id, "access": access}]}
        self.call(principal, "PUT", f"/v1/harnesses/{harness}/memories", body)

    def remember(self, principal: str, memory_id: str, content: str) -> tuple[str, bool]:
        answer = self.call(principal, "POST", f"/v1/memories/{memory_id}/records", {"type": "fact", "content": content})
        return str(answer["id"]), "content" not in answer

    def revise(self, principal: str, memory_id: str, record_id: str, content: str) -> tuple[str, bool]:
        answer = self.call(principal, "PATCH", f"/v1/memories/{memory_id}/records/{record_id}", {"content": content})
        return str(answer["id"]), "content" not in answer

    def forget(self, principal: str, memory_id: str, record_id: str) -> None:
        self.call(principal, "DELETE", f"/v1/memories/{memory_id}/records/{record_id}")

    def list_records(self, principal: str, memory_id: str) -> None:
        self.call(principal, "GET", f"/v1/memories/{memory_id}/records")

    def history(self, principal: str, memory_id: str, record_id: str) -> None:
        self.call(principal, "GET", f"/v1/memories/{memory_id}/records/{record_id}/history")

    def recall(self, principal: str, memory_id: str, text: str) -> None:
        self.call(principal, "POST", f"/v1/memories/{memory_id}/recall", {"text": text})

    def close(self) -> None:
        purge_tenant(self.local_aws, self.tenant)


def test_every_answer_over_http_agrees_with_the_reference_model(local_aws: LocalAws, gateway: LocalGateway) -> None:
    class OverHttp(AccessModel):
        def driver(self) -> Driver:
            return HttpDriver(local_aws, gateway)  # a tenant of its own, purged at the example's end

    run_state_machine_as_test(OverHttp, settings=settings(
        max_examples=10, stateful_step_count=15, deadline=None, derandomize=True, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    ))
