"""Which functions reach the mem0 provider, held to what they really do (infra/catalog.py `mem0`).

Every route that takes a memory is served on memories mem0 keeps, through the local gateway (the deployed
handlers, unchanged; the session's local stage is connected to mem0 OSS: tests/conftest.py), and every
question asked of the provider registry is recorded as the function's whose handler was running (a
workflow step's as the step's, as tests/infra/test_least_privilege.py attributes AWS calls):

- "declare": which providers the stage offers (a memory's creation), a provider's capability document,
  whether it runs outside the server: answered from the settings (`UHP_MEM0`);
- "connect": anything of its records (remember, get, scan, recall, erase, drop_memory...): mem0's library
  and, for the Platform, its key.

Each function's catalog entry is then held to the record both ways: a function that reaches mem0's records
without `connect` would fail deployed (no library, no key), and one granted `connect` that never does holds
a secret it does not need. A refusal from a memory's `provider` field alone (require_native) asks nothing.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from infra.catalog import FUNCTION_ACCESS
from tests.infra.attribution import Attribution, attribute_calls
from tests.integration.conftest import Client, purge_tenant
from uhp_memories.domain.providers.ports import Providers
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws

DESCRIBING = ("capabilities", "is_outside", "id")  # what a provider is, from the settings alone


class Reach(Attribution):
    """Who asked the provider registry what: function -> {"declare", "connect"}."""

    def __init__(self) -> None:
        super().__init__()
        self.found: defaultdict[str, set[str]] = defaultdict(set)

    def add(self, level: str) -> None:
        who = self.who()
        if who is not None:
            self.found[who].add(level)

    def level(self, name: str) -> str:
        found = self.found.get(name, set())
        return "connect" if "connect" in found else "declare" if found else ""


class Recorded:
    """The mem0 provider, each attribute asked of it recorded: what it is (declare) or its records (connect)."""

    def __init__(self, provider: Any, reach: Reach) -> None:
        self._provider, self._reach = provider, reach

    def __getattr__(self, name: str) -> Any:
        self._reach.add("declare" if name in DESCRIBING else "connect")
        return getattr(self._provider, name)


@pytest.fixture(scope="module")
def reach(local_aws: LocalAws) -> Iterator[Reach]:
    container = local_aws.container
    assert container is not None
    registry = container.ports.providers
    assert "mem0" in registry.ids, "the session's local stage is connected to mem0 (tests/conftest.py)"
    record = Reach()
    patches = pytest.MonkeyPatch()
    patches.setitem(registry._others, "mem0", Recorded(registry._others["mem0"], record))  # type: ignore[attr-defined]
    ids = Providers.ids

    def recorded_ids(self: Providers) -> tuple[str, ...]:
        record.add("declare")
        return ids.fget(self)  # type: ignore[attr-defined, no-any-return]

    patches.setattr(Providers, "ids", property(recorded_ids))
    attribute_calls(patches, record)
    yield record
    patches.undo()


def expect(answer: requests.Response, *statuses: int) -> Any:
    """The answer's JSON, after checking its status (any 2xx, when none is named)."""
    wanted = answer.status_code in statuses if statuses else 200 <= answer.status_code < 300
    assert wanted, f"{answer.request.method} {answer.request.url}: {answer.status_code} {answer.text[:500]}"
    return answer.json() if answer.headers.get("Content-Type", "").startswith("application/json") else None


def serve_on_mem0(owner: Client, harness: Client, local_aws: LocalAws) -> None:
    """Every route that takes a memory, on memories mem0 keeps; what mem0 cannot do answers 422."""
    expect(owner.get("/v1/memories/providers"))
    memory = expect(owner.post("/v1/memories", {"name": "kept by mem0", "provider": "mem0"}))["id"]
    m = f"/v1/memories/{memory}"
    expect(owner.get(m))
    expect(owner.get("/v1/memories"))
    expect(owner.put(m, {"description": "mem0 keeps its records"}))
    grant = expect(owner.post(m + "/grants", {"principal": "user:bob", "privileges": ["read"]}))["id"]
    expect(owner.get(m + "/grants"))
    expect(owner.delete(f"{m}/grants/{grant}"))
    record = expect(owner.post(m + "/records", {"type": "fact", "content": "Acme renews in March."}))["id"]
    r = f"{m}/records/{record}"
    expect(owner.get(m + "/records"))
    expect(owner.get(r))
    expect(owner.patch(r, {"content": "Acme renews in April."}))
    expect(owner.get(r + "/history"))
    expect(owner.post(m + "/recall", {"query": "When does Acme renew?"}))
    expect(owner.post(m + "/observe", {"episodes": [{"content": "The customer asked about renewal."}]}))
    # What mem0 does not implement: refused from the memory's provider alone (§12 memory_unsupported), or a
    # list of what mem0 memories never hold (queries, runs, pins), answered empty.
    elsewhere = [
        owner.get(m + "/paths"), owner.get(m + "/changes"), owner.post(m + "/grep", {"pattern": "Acme"}),
        owner.post(m + "/snapshots", {"name": "before"}), owner.get(m + "/snapshots"),
        owner.put(m + "/queries/facts", {"description": "Facts.", "params": {"type": "object", "properties": {}},
                                         "requires": "read", "language": "uhp-recall", "body": {"query": "x"}}),
        owner.get(m + "/queries"), owner.post(m + "/queries/facts", {"params": {}}),
        owner.post(m + "/query", {"language": "opensearch-dsl", "statement": {"match_all": {}}}),
        owner.post(r + "/operations/complete", {}),
        owner.post(m + "/consolidations", {}), owner.get(m + "/consolidations"),
        owner.put(m + "/consolidation-schedule", {"every_minutes": 60}),
        owner.put(m + "/prime", {"record_ids": [record]}), owner.get(m + "/prime"),
    ]
    answered = [(a.request.method, a.request.path_url, a.status_code, a.text[:200]) for a in elsewhere]
    assert [found for found in answered if found[2] not in (200, 404, 422)] == []
    expect(owner.get(r + "/content"), 404, 422)
    expect(owner.put("/v1/harnesses/h1/memories",
                     {"memories": [{"memory_id": memory, "access": "write", "default": True}]}))
    expect(owner.put("/v1/harnesses/h1/owners", {"owners": [owner.principal]}))
    expect(harness.get("/v1/harnesses/h1/prime"))
    expect(harness.post("/v1/harnesses/h1/turns", {"asked": "When?", "answered": "In April."}))
    for number, (tool, arguments) in enumerate([
        ("memory_remember", {"memory_id": memory, "content": "Initech renews in May.", "type": "fact"}),
        ("memory_recall", {"memory_id": memory, "query": "When does Initech renew?"}),
    ], 1):
        answer = expect(harness.request("POST", "/mcp", {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                                                         "params": {"name": tool, "arguments": arguments}},
                                        headers={"Accept": "application/json, text/event-stream"}))
        assert "error" not in answer, answer
        assert not answer["result"].get("isError"), answer
    erased = expect(owner.post(m + "/erase", {"record_ids": [record]}))
    assert erased["erased"] == [record]
    expect(owner.get(f"{m}/jobs/{erased['job_id']}"))
    expect(owner.delete(m))
    assert local_aws.wait_for_workflows(120)


@pytest.fixture(scope="module")
def reached(local_aws: LocalAws, gateway: LocalGateway, reach: Reach) -> Reach:
    tenant = "t-" + secrets.token_hex(6)
    clients = {}
    # Alice is the tenant's administrator: the first write of h1's list is hers (docs/decisions.md).
    for principal, groups in (("user:alice", ("group:admins",)), ("harness:h1", ())):
        key = "k-" + secrets.token_hex(16)
        local_aws.add_keys([KeyEntry(key, tenant, principal, groups)])
        clients[principal] = Client(gateway.url, key, tenant, principal, requests.Session())
    try:
        serve_on_mem0(clients["user:alice"], clients["harness:h1"], local_aws)
    finally:
        purge_tenant(local_aws, tenant)
    return reach


def test_the_functions_that_reached_mem0_are_those_the_catalog_connects_or_declares(reached: Reach) -> None:
    assert {"records", "recall", "observe", "erase", "harnesses", "mcp", "steps.purge_subtree"} <= set(
        reached.found), "the routes reached mem0 through each of them"
    for name, access in sorted(FUNCTION_ACCESS.items()):
        assert reached.level(name) == access.mem0, name
