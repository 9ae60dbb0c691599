"""The OpenAPI document (docs/openapi.json) is what the API answers: schemathesis generates requests for
every operation from the document, valid ones and invalid ones, sends them over real HTTP to the local
server, and checks each answer against the document (no 5xx, a documented status, a documented content
type, a body of the documented schema).

Bounded: EXAMPLES per operation and mode, with a fixed seed (hypothesis' derandomize), so a run is
repeatable and takes about a minute (the seed comes from the test's source: editing the test changes
the cases). Two cases of three name the ids of what the caller owns (a memory, record, run, job,
grant, named query, harness list, file), made again where an earlier case may have changed them, so
requests reach the handlers' own checks and not only the 404 of an unknown id, and the run fails if
too few operations ever answer a 2xx."""

from __future__ import annotations

import itertools
import json
import secrets
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.conftest import TENANT_ADMIN, Client, ClientFactory, answering_at_once, purge_tenant
from uhp_memories.domain.types.model import TENANT_ADMIN_GROUP
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws

pytestmark = pytest.mark.slow

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
# Every status each operation answered in this run.
STATUSES: defaultdict[str, set[int]] = defaultdict(set)
OPERATIONS = [result.ok() for result in schema.get_all_operations()]
# How many operations at least must answer a 2xx to some case: cases that never get past the 404 of
# an unknown id or a refused body check little of the document (a key reused by every case once hid
# a 500 behind 422 idempotency_key_reused). A floor: 45 of 50 at this seed (23 before each case had
# its own key and the caller's ids; 37 with them in every other case, before `restored`). The five
# left send bodies the document allows and the API refuses by rules it cannot state (an MCP message,
# a multipart upload, a named query's statement, a harness's turns, a type's definition). Two below
# 45: some answers depend on timing (whether a run is still going), not on the document.
REACHED_AT_LEAST = 43


CASE_NUMBERS = itertools.count()


def reaching_path_parameters(path_parameters: dict[str, Any]) -> dict[str, Any]:
    """The ids the caller owns in place of the generated ones, so requests reach the handlers' own
    checks and not only the 404 of an unknown id. Two cases of three get them, in the test itself: a
    schemathesis hook runs only for hypothesis' generated cases, not for the coverage phase's, whose
    positive cases all named memory "0" (not found) and never reached a 2xx."""
    return {name: OWNED.get(name, value) for name, value in path_parameters.items()}


def restored(label: str, owned: Client) -> dict[str, str]:
    """What an earlier case may have changed or removed, made again for a case of `label` that names
    the caller's ids, and the ids that case should name instead: a revised record is no longer the
    current version, a schedule or a harness list another case deleted is gone, and some operations
    need an object of their own kind (a file record, a task)."""
    memory_id = OWNED["memory_id"]
    if label == "PATCH /v1/memories/{memory_id}/records/{record_id}":
        return {"record_id": owned.remember(memory_id, "Acme renews in March.")["id"]}
    if label == "GET /v1/memories/{memory_id}/records/{record_id}/content":
        file_content = {"file": {"id": owned.upload("notes.txt", b"Acme renews in March.")["id"]}}
        held = owned.post(f"/v1/memories/{memory_id}/records", {"type": "note", "content": file_content})
        assert held.status_code == 201, held.text
        return {"record_id": held.json()["id"]}
    if label == "POST /v1/memories/{memory_id}/records/{record_id}/operations/{name}":
        task = owned.remember(memory_id, "call them first", type="x.task", attributes={"title": "renew Acme"})
        return {"record_id": task["id"], "name": "complete"}
    if label == "GET /v1/memories/{memory_id}/consolidation-schedule":
        assert owned.put(f"/v1/memories/{memory_id}/consolidation-schedule", SCHEDULE).status_code == 200
    if "{harness_id}" in label:
        # A harness of its own, handed to the caller now: an earlier case may have given h1's list other owners.
        harness = "h-" + secrets.token_hex(4)
        owned.claim(harness)
        assert owned.put(f"/v1/harnesses/{harness}/memories", attachments(memory_id)).status_code == 200
        return {"harness_id": harness}
    return {}


SCHEDULE = {"every_minutes": 60}


def attachments(memory_id: str) -> dict[str, Any]:
    return {"memories": [{"memory_id": memory_id, "access": "write"}]}


# Framing headers are the HTTP server's, not the API's: a Content-Length that does not match the body is
# the local gateway's to refuse (400 or 408, tests/integration/test_gateway_edges.py; API Gateway answers
# such a request itself), so the document's operations are sent with their own framing.
FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "host", "connection"})
KEY_NUMBERS = itertools.count()


def sendable_headers(headers: dict[str, Any] | None) -> dict[str, Any] | None:
    """The case's headers without framing, and with an Idempotency-Key of its own. Applied to every
    case in the test itself: a hook runs only for hypothesis' generated cases, not for the coverage
    phase's, which sent the same key ("0") with every body, so every write after the first was
    refused before anything ran (422 idempotency_key_reused) and creations seldom reached 201."""
    if headers is None:
        return None
    kept = {name: value for name, value in headers.items() if name.lower() not in FRAMING_HEADERS}
    for name, value in kept.items():
        if name.lower() == "idempotency-key" and isinstance(value, str):
            kept[name] = f"{value[:200]}-{next(KEY_NUMBERS)}"
    return kept


# Operations that remove what they name are pointed at a memory (or record) made for them, so the one
# the other operations use stays.
REMOVALS = {"DELETE /v1/memories/{memory_id}", "POST /v1/memories/{memory_id}/erase"}


@pytest.fixture(scope="module")
def owned(local_aws: LocalAws, make_client: ClientFactory) -> Iterator[Client]:
    """A caller (in a tenant of this module's own) with a memory, a child, a record, a finished run, a
    grant, a named query, a consolidation schedule, a harness list, a primed record and an uploaded
    file: the ids requests may name.
    After every case has run, checks that the cases reached far enough (REACHED_AT_LEAST)."""
    client = make_client("user:probe", tenant_name=TENANT)
    memory = client.create_memory("probed", description="what the probe writes")
    client.create_memory("child", parent_id=memory["id"])
    record = client.remember(memory["id"], "Acme renews in March.")
    run = client.post(f"/v1/memories/{memory['id']}/consolidations", {})
    grant = client.post(f"/v1/memories/{memory['id']}/grants", {"principal": "user:other", "privileges": ["read"]})
    query = {"description": "Facts.", "params": {"type": "object", "properties": {}}, "requires": "read",
             "language": "uhp-recall", "body": {"text": "Acme", "limit": 5}}
    client.claim("h1")
    made = [
        grant,
        client.put(f"/v1/memories/{memory['id']}/queries/q1", query),
        client.put(f"/v1/memories/{memory['id']}/consolidation-schedule", SCHEDULE),
        client.put("/v1/harnesses/h1/memories", attachments(memory["id"])),
        client.put(f"/v1/memories/{memory['id']}/prime", {"record_ids": [record["id"]]}),
    ]
    assert all(answer.status_code in (200, 201) for answer in made), [answer.text for answer in made]
    OWNED.update(
        memory_id=memory["id"], record_id=record["id"], harness_id="h1", name="q1", grant_id=grant.json()["id"],
        file_id=client.upload("notes.txt", b"Acme renews in March.")["id"],
        job_id=erase_job(local_aws, client, memory["id"]),
    )
    if run.status_code in (201, 202):
        OWNED["run_id"] = run.json()["id"]
    yield client
    OWNED.clear()
    purge_tenant(local_aws, TENANT)
    if set(STATUSES) == {operation.label for operation in OPERATIONS}:  # the whole document ran
        reached = sorted(label for label, statuses in STATUSES.items() if any(200 <= s < 300 for s in statuses))
        missed = {label: sorted(STATUSES[label]) for label in sorted(set(STATUSES) - set(reached))}
        assert len(reached) >= REACHED_AT_LEAST, f"only {len(reached)} operations answered a 2xx; not: {missed}"


def erase_job(local_aws: LocalAws, client: Client, memory_id: str) -> str:
    """The id of a job of `memory_id`: an erase answered at once with 202, its workflow run to its end."""
    doomed = client.remember(memory_id, "to be erased")
    with answering_at_once(local_aws):
        answer = client.post(f"/v1/memories/{memory_id}/erase", {"record_ids": [doomed["id"]]},
                             headers={"Idempotency-Key": secrets.token_hex(8)})
    assert answer.status_code == 202, answer.text
    return str(answer.json()["job"]["id"])


@pytest.fixture(scope="module")
def make_client(local_aws: LocalAws, gateway: LocalGateway) -> ClientFactory:  # module scope: one caller
    def factory(principal: str, groups: tuple[str, ...] = (), tenant_name: str | None = None) -> Client:
        key = "k-" + secrets.token_hex(16)
        local_aws.add_keys([KeyEntry(key, tenant_name or TENANT, principal, groups)])
        return Client(gateway.url, key, tenant_name or TENANT, principal, requests.Session(),
                      admin=lambda: factory(TENANT_ADMIN, (TENANT_ADMIN_GROUP,), tenant_name))

    return factory


@pytest.fixture
def tenant() -> str:
    """Each case's own tenant, which conftest purges after it: nothing is written there (the cases
    write in TENANT, purged once by `owned`)."""
    return TENANT + "-per-case"


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_operation_answers_as_the_document_says(case: schemathesis.Case, owned: Client) -> None:
    if case.path_parameters and next(CASE_NUMBERS) % 3 != 2:
        case.path_parameters = reaching_path_parameters(case.path_parameters)
        case.path_parameters.update(restored(case.operation.label, owned))
    if case.operation.label in REMOVALS and case.path_parameters.get("memory_id") == OWNED["memory_id"]:
        spare = owned.create_memory("spare")
        removed = owned.remember(spare["id"], "to be removed")
        case.path_parameters["memory_id"] = spare["id"]
        if isinstance(case.body, dict) and isinstance(case.body.get("record_ids"), list) and case.body["record_ids"]:
            case.body["record_ids"] = [removed["id"]]  # a record of that memory, which erase can reach
    case.headers = sendable_headers(case.headers)
    response = case.call_and_validate(
        base_url=owned.base_url, session=owned.session, headers={"x-api-key": owned.key}, checks=CHECKS,
        allow_redirects=False, timeout=30,
    )
    STATUSES[case.operation.label].add(response.status_code)
