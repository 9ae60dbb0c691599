"""Integration tests: real HTTP through the local gateway, the deployed handlers, DynamoDB on moto.

One server for the whole session (tests/conftest.py: `local_aws`, `gateway`); each test makes its own
tenant, so tests never see each other."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from uhp_memories.domain.types.model import TENANT_ADMIN_GROUP
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws


@contextmanager
def answering_at_once(local_aws: LocalAws) -> Iterator[None]:
    """Erase, delete and consolidation answer 202 at once instead of waiting for their workflow (the
    path a long one takes); the workflow still runs to its end."""
    container = local_aws.container
    assert container is not None
    saved = container.removal.wait_seconds, container.consolidation.wait_seconds
    container.removal.wait_seconds = container.consolidation.wait_seconds = 0.0
    try:
        yield
    finally:
        container.removal.wait_seconds, container.consolidation.wait_seconds = saved


@pytest.fixture
def workflows_answer_at_once(local_aws: LocalAws) -> Iterator[None]:
    """A test's erases, deletes and consolidations answer 202 at once (answering_at_once)."""
    with answering_at_once(local_aws):
        yield


@dataclass
class Client:
    """One API key: a tenant and a principal, talking HTTP to the local gateway."""

    base_url: str
    key: str
    tenant: str
    principal: str
    session: requests.Session
    # The tenant's administrator (a key in group:admins), made when first asked for: who hands this client
    # a harness list nobody has written yet (`claim`).
    admin: Callable[[], Client] | None = None

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                **params: Any) -> requests.Response:
        all_headers = {"x-api-key": self.key, **(headers or {})}
        return self.session.request(
            method, self.base_url + path, json=body, headers=all_headers,
            params={k: v for k, v in params.items() if v is not None}, timeout=30,
        )

    def get(self, path: str, **params: Any) -> requests.Response:
        return self.request("GET", path, **params)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("PUT", path, body, **kwargs)

    def patch(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("PATCH", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, **kwargs)

    # Conveniences for arranging a test; the assertions go through the raw calls above.
    def create_memory(self, name: str = "m", **fields: Any) -> dict[str, Any]:
        answer = self.post("/v1/memories", {"name": name, **fields})
        assert answer.status_code == 201, answer.text
        return answer.json()

    def remember(self, memory_id: str, content: str = "a fact", type: str = "fact", **fields: Any) -> dict[str, Any]:
        answer = self.post(f"/v1/memories/{memory_id}/records", {"type": type, "content": content, **fields})
        assert answer.status_code == 201, answer.text
        return answer.json()

    def upload(self, name: str, data: bytes) -> dict[str, Any]:
        """POST /v1/files, multipart as a browser or curl -F sends it; the file's metadata."""
        answer = self.session.post(self.base_url + "/v1/files", files={"file": (name, data, "text/plain")},
                                   headers={"x-api-key": self.key}, timeout=30)
        assert answer.status_code == 201, answer.text
        return dict(answer.json())

    def grant(self, memory_id: str, principal: str, *privileges: str) -> dict[str, Any]:
        answer = self.post(f"/v1/memories/{memory_id}/grants", {"principal": principal, "privileges": list(privileges)})
        assert answer.status_code == 201, answer.text
        return answer.json()

    def claim(self, harness_id: str) -> None:
        """Have the tenant's administrator hand this client the harness's list when nobody has written it
        yet (before its first write a list is its administrators': docs/decisions.md, "Harness
        ownership"), naming it the owner (a harness key owns its own list and is named by nobody). A list
        written already is left as it is."""
        assert self.admin is not None, "this client was made without its tenant's administrator"
        admin = self.admin()
        if admin.get(f"/v1/harnesses/{harness_id}/owners").status_code != 404:
            return
        owners = [] if self.principal == f"harness:{harness_id}" else [self.principal]
        answer = admin.put(f"/v1/harnesses/{harness_id}/owners", {"owners": owners})
        assert answer.status_code == 200, answer.text

    def attach(self, harness_id: str, memory_id: str, access: str = "write", default: bool = True) -> dict[str, Any]:
        """Make `memory_id` the harness's whole list (granting what it lacks), a list nobody has written
        yet first handed to this client (`claim`): a harness writes only at or below a memory attached
        with write (domain/access/model.py HarnessReach)."""
        self.claim(harness_id)
        entry = {"memory_id": memory_id, "access": access, "default": default and access == "write"}
        answer = self.put(f"/v1/harnesses/{harness_id}/memories", {"memories": [entry]})
        assert answer.status_code == 200, answer.text
        return answer.json()


ClientFactory = Callable[..., Client]
TENANT_ADMIN = "user:tenant-admin"  # the principal of the administrator's key each tenant is given


@pytest.fixture
def tenant() -> str:
    return "t-" + secrets.token_hex(6)


@pytest.fixture
def make_client(local_aws: LocalAws, gateway: LocalGateway, tenant: str) -> ClientFactory:
    """make_client("user:alice", groups=("group:sales",), tenant=None) -> a Client with a new key, which
    knows its tenant's administrator (`Client.claim`)."""
    admins: dict[str, Client] = {}

    def admin_of(chosen_tenant: str) -> Client:
        if chosen_tenant not in admins:
            admins[chosen_tenant] = factory(TENANT_ADMIN, (TENANT_ADMIN_GROUP,), chosen_tenant)
        return admins[chosen_tenant]

    def factory(principal: str, groups: tuple[str, ...] = (), tenant_name: str | None = None) -> Client:
        key = "k-" + secrets.token_hex(16)
        chosen_tenant = tenant_name or tenant
        local_aws.add_keys([KeyEntry(key, chosen_tenant, principal, groups)])
        return Client(gateway.url, key, chosen_tenant, principal, requests.Session(),
                      admin=lambda: admin_of(chosen_tenant))

    return factory


@pytest.fixture
def admin(make_client: ClientFactory) -> Client:
    """The tenant's administrator (a key of the principal `claim` uses, in group:admins): who writes a
    harness list first."""
    return make_client(TENANT_ADMIN, (TENANT_ADMIN_GROUP,))


@pytest.fixture
def alice(make_client: ClientFactory) -> Client:
    return make_client("user:alice")


@pytest.fixture
def bob(make_client: ClientFactory) -> Client:
    return make_client("user:bob")


def purge_tenant(local_aws: LocalAws, tenant: str) -> None:
    """Remove a finished test's items. moto answers a query on a secondary index by scanning the whole
    table, so every item left behind slows every later request of the session."""
    assert local_aws.container is not None
    client = local_aws.container.dynamodb
    table = local_aws.container.settings.table_name
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "begins_with(PK, :t)",
        "ExpressionAttributeValues": {":t": {"S": f"T#{tenant}#"}},
        "ProjectionExpression": "PK, SK",
    }
    while True:
        page = client.scan(**kwargs)
        items = page.get("Items", [])
        for start in range(0, len(items), 25):
            deletes = [{"DeleteRequest": {"Key": item}} for item in items[start : start + 25]]
            client.batch_write_item(RequestItems={table: deletes})
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.fixture(autouse=True)
def _purge_after(local_aws: LocalAws, tenant: str) -> Iterator[None]:
    yield
    purge_tenant(local_aws, tenant)


def error_code(answer: requests.Response) -> str:
    return answer.json()["error"]["code"]
