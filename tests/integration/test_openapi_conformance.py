"""The OpenAPI document (docs/openapi.json) is what the API answers: schemathesis generates requests for
every operation from the document, valid ones and invalid ones, sends them over real HTTP to the local
server, and checks each answer against the document (no 5xx, a documented status, a documented content
type, a body of the documented schema).

Bounded: EXAMPLES per operation and mode, with a fixed seed (hypothesis' derandomize), so a run is
repeatable and takes about a minute. Path parameters are half the time the ids of a memory, record and
run the caller owns, so requests reach the handlers' own checks and not only the 404 of an unknown id."""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.conftest import Client, ClientFactory, purge_tenant
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
EXAMPLES = 12
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
TENANT = "t-schemathesis"

schema = schemathesis.openapi.from_dict(json.loads(DOCUMENT.read_text()))
schema.config.generation.update(
    modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE],
    max_examples=EXAMPLES,
    deterministic=True,
)
# Methods no route has: the gateway's own answers to OPTIONS, TRACE and QUERY (local/gateway.py) are
# not the handlers' and are checked apart; the methods the API uses on other paths answer 404 not_found.
schema.config.phases.coverage.unexpected_methods = {"get", "put", "post", "delete", "patch"}
# The ids requests may name besides what hypothesis makes up (filled in by the `owned` fixture).
OWNED: dict[str, str] = {}


@schema.hook
def flatmap_path_parameters(context: schemathesis.HookContext, path_parameters: dict[str, Any]) -> Any:
    """Each path parameter is the generated value or, as often, one the caller owns."""
    options = {
        name: st.sampled_from([value, OWNED[name]]) if name in OWNED else st.just(value)
        for name, value in (path_parameters or {}).items()
    }
    return st.fixed_dictionaries(options)


# Framing headers are the HTTP server's, not the API's: a Content-Length that does not match the body is
# the local gateway's to refuse (400 or 408, tests/integration/test_gateway_edges.py; API Gateway answers
# such a request itself), so the document's operations are sent with their own framing.
FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "host", "connection"})


@schema.hook
def map_headers(context: schemathesis.HookContext, headers: dict[str, Any] | None) -> dict[str, Any] | None:
    if headers is None:
        return None
    kept = {name: value for name, value in headers.items() if name.lower() not in FRAMING_HEADERS}
    # Generated keys repeat ("0" for every case), and a key reused with another body is refused before
    # anything runs (422 idempotency_key_reused): each case gets a key of its own, so writes run.
    if "Idempotency-Key" in kept and isinstance(kept["Idempotency-Key"], str):
        kept["Idempotency-Key"] = f"{kept['Idempotency-Key'][:200]}-{next(KEY_NUMBERS)}"
    return kept


KEY_NUMBERS = itertools.count()


# Operations that remove what they name are pointed at a memory (or record) made for them, so the one
# the other operations use stays.
REMOVALS = {"DELETE /v1/memories/{memory_id}", "POST /v1/memories/{memory_id}/erase"}


@pytest.fixture(scope="module")
def owned(local_aws: LocalAws, make_client: ClientFactory) -> Iterator[Client]:
    """A caller (in a tenant of this module's own) with a memory, a child, a record and a finished run."""
    client = make_client("user:probe", tenant_name=TENANT)
    memory = client.create_memory("probed", description="what the probe writes")
    client.create_memory("child", parent_id=memory["id"])
    record = client.remember(memory["id"], "Acme renews in March.")
    run = client.post(f"/v1/memories/{memory['id']}/consolidations", {})
    OWNED.update(memory_id=memory["id"], record_id=record["id"], harness_id="h1", name="q1")
    if run.status_code in (201, 202):
        OWNED["run_id"] = run.json()["id"]
    yield client
    OWNED.clear()
    purge_tenant(local_aws, TENANT)


@pytest.fixture(scope="module")
def make_client(local_aws: LocalAws, gateway: LocalGateway) -> ClientFactory:  # module scope: one caller
    def factory(principal: str, groups: tuple[str, ...] = (), tenant_name: str | None = None) -> Client:
        key = "k-" + secrets.token_hex(16)
        local_aws.add_keys([KeyEntry(key, tenant_name or TENANT, principal, groups)])
        return Client(gateway.url, key, tenant_name or TENANT, principal, requests.Session())

    return factory


@pytest.fixture
def tenant() -> str:
    """Each case's own tenant, which conftest purges after it: nothing is written there (the cases
    write in TENANT, purged once by `owned`)."""
    return TENANT + "-per-case"


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_operation_answers_as_the_document_says(case: schemathesis.Case, owned: Client) -> None:
    if case.operation.label in REMOVALS and case.path_parameters.get("memory_id") == OWNED["memory_id"]:
        spare = owned.create_memory("spare")
        owned.remember(spare["id"], "to be removed")
        case.path_parameters["memory_id"] = spare["id"]
    case.call_and_validate(
        base_url=owned.base_url, session=owned.session, headers={"x-api-key": owned.key}, checks=CHECKS,
        allow_redirects=False, timeout=30,
    )
