"""Errors (§12 and DESIGN's contract decisions), limits, authentication, unknown routes, discovery
(§10.2, §11), and that every feature the capability document does not offer answers
memory_unsupported through its route (404 memory_not_found first, for a memory the caller cannot see)."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
import requests

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.local.gateway import methods_at
from uhp_memories.local.moto_env import KeyEntry, LocalAws

MISSING_MEMORY = "hmem_" + "0" * 32
MISSING_RECORD = "hrec_" + "0" * 32
CORE_TYPES = {"episode", "fact", "note", "procedure", "link"}


def raw(client: Client, method: str, path: str, data: str | bytes | None = None,
        headers: dict[str, str] | None = None) -> requests.Response:
    """A request with a body sent exactly as given (for malformed JSON)."""
    all_headers = {"x-api-key": client.key, "Content-Type": "application/json", **(headers or {})}
    return client.session.request(method, client.base_url + path, data=data, headers=all_headers, timeout=30)


def assert_error(answer: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    return body["error"]


def provider_document(client: Client) -> dict[str, Any]:
    answer = client.get("/v1/memories/providers")
    assert answer.status_code == 200, answer.text
    providers = answer.json()["data"]
    native = [p for p in providers if p["id"] == "native"]
    assert len(native) == 1
    return native[0]


def record_at(client: Client, memory_id: str, record_id: str) -> dict[str, Any]:
    """The record a get answers, without where the reader can go from its memory (§6.1)."""
    got = client.get(f"/v1/memories/{memory_id}/records/{record_id}").json()
    return {k: v for k, v in got.items() if k not in ("parent", "children")}


def record_count(client: Client, memory_id: str) -> int:
    return client.get(f"/v1/memories/{memory_id}").json()["records"]["count"]


# -- authentication ----------------------------------------------------------------------------


AUTH_PROBES = [
    ("GET", "/v1/capabilities"),
    ("GET", "/v1/memories/providers"),
    ("GET", "/v1/memories/types"),
    ("GET", "/v1/memories"),
    ("POST", "/v1/memories"),
    ("GET", "/v1/memories/{mid}"),
    ("GET", "/v1/memories/{mid}/records"),
    ("POST", "/v1/memories/{mid}/records"),
    ("PATCH", "/v1/memories/{mid}/records/" + MISSING_RECORD),
    ("DELETE", "/v1/memories/{mid}/records/" + MISSING_RECORD),
    ("POST", "/v1/memories/{mid}/snapshots"),
    ("POST", "/v1/memories/{mid}/recall"),
    ("GET", "/v1/memories/{mid}/consolidations"),
]


@pytest.mark.parametrize(("method", "template"), AUTH_PROBES)
def test_missing_or_unknown_key_is_unauthenticated(alice: Client, method: str, template: str) -> None:
    memory = alice.create_memory()
    path = template.format(mid=memory["id"])
    body = {"type": "fact", "content": "c"} if method in ("POST", "PATCH") else None
    url = alice.base_url + path
    for headers in ({}, {"x-api-key": ""}, {"x-api-key": "unknown-" + alice.key}, {"x-api-key": alice.key.upper()},
                    {"x-api-key": "x" * 600}, {"authorization": f"Bearer {alice.key}"}):
        answer = requests.request(method, url, json=body, headers=headers, timeout=30)
        assert_error(answer, 401, "unauthenticated")
    # Nothing was written by any of them.
    assert record_count(alice, memory["id"]) == 0
    assert alice.get(f"/v1/memories/{memory['id']}/snapshots").json()["data"] == []


def test_header_name_of_the_key_is_case_insensitive(alice: Client) -> None:
    answer = requests.get(alice.base_url + "/v1/memories", headers={"X-API-Key": alice.key}, timeout=30)
    assert answer.status_code == 200, answer.text


@pytest.mark.slow
def test_the_authorizer_answer_is_reused_per_key_and_never_across_keys(
    make_client: ClientFactory, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As API Gateway's result cache: each key is resolved once, then its answer is reused; a
    refusal is not kept, so a key that becomes known later works at once."""
    import functions.authorizer.handler as authorizer

    asked: list[str] = []
    resolve = authorizer.lambda_handler

    def counting(event: dict[str, Any], context: Any) -> dict[str, Any]:
        asked.append(event["headers"].get("x-api-key", ""))
        return resolve(event, context)

    monkeypatch.setattr(authorizer, "lambda_handler", counting)
    alice, bob = make_client("user:alice"), make_client("user:bob")
    for _ in range(3):
        mine, theirs = alice.create_memory("mine"), bob.create_memory("theirs")
        # Each key still acts as its own principal: the answer reused is the key's, never another's.
        assert alice.get(f"/v1/memories/{theirs['id']}").status_code == 404
        assert bob.get(f"/v1/memories/{mine['id']}").status_code == 404
        assert alice.get(f"/v1/memories/{mine['id']}").json()["privileges"]
    assert asked.count(alice.key) == 1
    assert asked.count(bob.key) == 1

    late = "k-late-" + secrets.token_hex(8)
    answer = requests.get(alice.base_url + "/v1/memories", headers={"x-api-key": late}, timeout=30)
    assert_error(answer, 401, "unauthenticated")
    local_aws.add_keys([KeyEntry(late, alice.tenant, "user:late")])
    answer = requests.get(alice.base_url + "/v1/memories", headers={"x-api-key": late}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert asked.count(late) == 2


# -- unknown routes ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "template"),
    [
        ("GET", "/v1/nothing"),
        ("GET", "/v2/memories"),
        ("GET", "/v1/memories/{mid}/nothing"),
        ("GET", "/v1/memories/{mid}/records/{rid}/nothing"),
        ("POST", "/"),
        ("POST", "/v1/capabilities"),
        ("DELETE", "/v1/memories"),
        ("PUT", "/v1/memories/{mid}/records"),
        ("POST", "/v1/memories/{mid}/records/{rid}"),
        ("PUT", "/v1/memories/{mid}/records/{rid}"),
        ("DELETE", "/v1/memories/{mid}/snapshots"),
    ],
)
def test_unknown_route_is_404_and_a_method_a_path_lacks_405(alice: Client, method: str, template: str) -> None:
    """A path no route has: 404. A path some route has, asked with a method it lacks: 405 with Allow
    locally (deployed, API Gateway answers it 404 too: docs/decisions.md, "Local mode")."""
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    path = template.format(mid=memory["id"], rid=record["id"])
    known = bool(methods_at(path))
    status, code = (405, "method_not_allowed") if known else (404, "not_found")
    assert_error(alice.request(method, path, {"name": "x"} if method != "GET" else None), status, code)
    # With or without a key: the route does not exist either way.
    answer = requests.request(method, alice.base_url + path, timeout=30)
    assert_error(answer, status, code)
    if known:
        assert method not in answer.headers["Allow"].split(", ")
    # And nothing happened to what exists.
    assert record_at(alice, memory["id"], record["id"]) == record


# -- malformed requests ------------------------------------------------------------------------


MALFORMED = ["{bad", "{", '{"name": "x"', '{"name": "x"} trailing', "not json at all", "{'name': 'x'}"]


@pytest.mark.slow
@pytest.mark.parametrize("data", MALFORMED)
def test_malformed_json_is_invalid_request(alice: Client, data: str) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    record = alice.remember(mid)
    for method, path in (
        ("POST", "/v1/memories"),
        ("PUT", f"/v1/memories/{mid}"),
        ("POST", f"/v1/memories/{mid}/grants"),
        ("POST", f"/v1/memories/{mid}/records"),
        ("PATCH", f"/v1/memories/{mid}/records/{record['id']}"),
        ("POST", f"/v1/memories/{mid}/snapshots"),
    ):
        assert_error(raw(alice, method, path, data), 400, "invalid_request")
    # Nothing was written.
    assert [m["id"] for m in alice.get("/v1/memories").json()["data"]] == [mid]
    assert alice.get(f"/v1/memories/{mid}").json()["name"] == memory["name"]
    assert len(alice.get(f"/v1/memories/{mid}/grants").json()["data"]) == 1
    assert record_count(alice, mid) == 1
    history = alice.get(f"/v1/memories/{mid}/records/{record['id']}/history").json()["data"]
    assert history == [record]
    assert alice.get(f"/v1/memories/{mid}/snapshots").json()["data"] == []


def test_malformed_json_without_a_json_content_type(alice: Client) -> None:
    answer = raw(alice, "POST", "/v1/memories", "{bad", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_error(answer, 400, "invalid_request")
    # A JSON body labelled as a form (curl -d) is read as JSON.
    answer = raw(alice, "POST", "/v1/memories", '{"name": "from curl"}',
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["name"] == "from curl"


@pytest.mark.parametrize("data", ["[1, 2]", "null", "\"a string\"", "42", ""])
def test_a_body_that_is_not_an_object_is_invalid(alice: Client, data: str) -> None:
    memory = alice.create_memory()
    assert_error(raw(alice, "POST", f"/v1/memories/{memory['id']}/records", data), 422, "memory_invalid")
    assert record_count(alice, memory["id"]) == 0


# -- §12 codes ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_memory_not_found(alice: Client, bob: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    stranger_in_another_tenant = make_client("user:alice", tenant_name="other-" + alice.tenant)
    probes = [
        ("GET", "/v1/memories/{mid}", None),
        ("PUT", "/v1/memories/{mid}", {"name": "renamed"}),
        ("DELETE", "/v1/memories/{mid}", None),
        ("GET", "/v1/memories/{mid}/grants", None),
        ("POST", "/v1/memories/{mid}/grants", {"principal": "user:bob", "privileges": ["read"]}),
        ("GET", "/v1/memories/{mid}/records", None),
        ("POST", "/v1/memories/{mid}/records", {"type": "fact", "content": "c"}),
        ("GET", "/v1/memories/{mid}/records/{rid}", None),
        ("PATCH", "/v1/memories/{mid}/records/{rid}", {"content": "x"}),
        ("DELETE", "/v1/memories/{mid}/records/{rid}", None),
        ("GET", "/v1/memories/{mid}/records/{rid}/history", None),
        ("GET", "/v1/memories/{mid}/snapshots", None),
        ("POST", "/v1/memories/{mid}/snapshots", {"name": "s"}),
        ("POST", "/v1/memories", {"name": "child", "parent_id": "{mid}"}),
        ("GET", "/v1/memories?parent={mid}", None),
    ]
    cases = [(alice, MISSING_MEMORY), (alice, "not-an-id"), (bob, memory["id"]),
             (stranger_in_another_tenant, memory["id"])]
    for client, mid in cases:
        for method, template, body in probes:
            path = template.format(mid=mid, rid=record["id"])
            if body is not None:
                body = json.loads(json.dumps(body).replace("{mid}", mid))
            answer = client.request(method, path, body)
            assert_error(answer, 404, "memory_not_found")
    # Nothing changed.
    assert alice.get(f"/v1/memories/{memory['id']}").json()["name"] == memory["name"]
    assert record_at(alice, memory["id"], record["id"]) == record
    assert record_count(alice, memory["id"]) == 1


@pytest.mark.slow
def test_memory_forbidden(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    alice.grant(memory["id"], "user:bob", "read")
    mid, rid = memory["id"], record["id"]
    for method, path, body in (
        ("POST", f"/v1/memories/{mid}/records", {"type": "fact", "content": "c"}),
        ("PATCH", f"/v1/memories/{mid}/records/{rid}", {"content": "x"}),
        ("DELETE", f"/v1/memories/{mid}/records/{rid}", None),
        ("POST", f"/v1/memories/{mid}/snapshots", {"name": "s"}),
        ("POST", "/v1/memories", {"name": "child", "parent_id": mid}),
        ("GET", f"/v1/memories/{mid}/grants", None),
        ("POST", f"/v1/memories/{mid}/grants", {"principal": "user:bob", "privileges": ["write"]}),
        ("DELETE", f"/v1/memories/{mid}", None),
    ):
        assert_error(bob.request(method, path, body), 403, "memory_forbidden")
    # Reads are allowed.
    assert bob.get(f"/v1/memories/{mid}/records/{rid}").status_code == 200
    assert bob.get(f"/v1/memories/{mid}").json()["privileges"] == ["read"]
    assert alice.get(f"/v1/memories/{mid}/records/{rid}/history").json()["data"] == [record]


@pytest.mark.slow
def test_memory_record_not_found(alice: Client) -> None:
    memory = alice.create_memory()
    other = alice.create_memory("other")
    elsewhere = alice.remember(other["id"])
    for rid in (MISSING_RECORD, elsewhere["id"], "hrec_short", "x"):
        for method, suffix, body in (
            ("GET", "", None),
            ("PATCH", "", {"content": "x"}),
            ("DELETE", "", None),
            ("GET", "/history", None),
        ):
            answer = alice.request(method, f"/v1/memories/{memory['id']}/records/{rid}{suffix}", body)
            assert_error(answer, 404, "memory_record_not_found")
    assert record_at(alice, other["id"], elsewhere["id"]) == elsewhere


@pytest.mark.slow
def test_memory_invalid_on_a_cycle(alice: Client) -> None:
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    grandchild = alice.create_memory("grandchild", parent_id=child["id"])
    for target in (root["id"], child["id"]):
        for new_parent in (target, grandchild["id"]):
            if new_parent == target == grandchild["id"]:
                continue
            answer = alice.put(f"/v1/memories/{target}", {"parent_id": new_parent})
            assert_error(answer, 422, "memory_invalid")
    assert alice.get(f"/v1/memories/{root['id']}").json()["parent_id"] is None
    assert alice.get(f"/v1/memories/{child['id']}").json()["parent_id"] == root["id"]


@pytest.mark.slow
def test_memory_conflict_carries_the_current_version(alice: Client) -> None:
    memory = alice.create_memory()
    v1 = alice.remember(memory["id"])
    v2 = alice.patch(f"/v1/memories/{memory['id']}/records/{v1['id']}", {"content": "v2"}).json()
    error = assert_error(alice.patch(f"/v1/memories/{memory['id']}/records/{v1['id']}", {"content": "x"}),
                         409, "memory_conflict")
    assert error["current_record_id"] == v2["id"]


# -- limits (DESIGN: each a clear 422, never a silent cut) -------------------------------------


@pytest.mark.slow
def test_name_and_description_limits(alice: Client) -> None:
    longest = alice.create_memory("n" * 200, description="d" * 2000)
    assert alice.get(f"/v1/memories/{longest['id']}").json()["name"] == "n" * 200
    assert alice.get(f"/v1/memories/{longest['id']}").json()["description"] == "d" * 2000
    for body in ({"name": "n" * 201}, {"name": "ok", "description": "d" * 2001}, {"name": ""}):
        assert_error(alice.post("/v1/memories", body), 422, "memory_invalid")
    for body in ({"name": "n" * 201}, {"description": "d" * 2001}, {"name": ""}):
        assert_error(alice.put(f"/v1/memories/{longest['id']}", body), 422, "memory_invalid")
    assert alice.get(f"/v1/memories/{longest['id']}").json()["name"] == "n" * 200
    assert len(alice.get("/v1/memories").json()["data"]) == 1


@pytest.mark.slow
def test_content_limit_is_100_kib_of_utf8(alice: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    exact = "a" * (100 * 1024)
    record = alice.post(path, {"type": "note", "content": exact})
    assert record.status_code == 201, record.text[:200]
    assert alice.get(f"{path}/{record.json()['id']}").json()["content"] == exact, "stored whole"
    assert_error(alice.post(path, {"type": "note", "content": exact + "a"}), 422, "memory_invalid")
    # The limit is in bytes: fewer characters than the limit, more bytes.
    multibyte = "é" * (50 * 1024 + 1)
    assert len(multibyte) < 100 * 1024 < len(multibyte.encode())
    assert_error(alice.post(path, {"type": "note", "content": multibyte}), 422, "memory_invalid")
    # Revising over the limit is refused the same way.
    assert_error(alice.patch(f"{path}/{record.json()['id']}", {"content": exact + "a"}), 422, "memory_invalid")
    assert record_count(alice, memory["id"]) == 1
    assert len(alice.get(f"{path}/{record.json()['id']}/history").json()["data"]) == 1


@pytest.mark.slow
def test_content_that_is_not_unicode_is_invalid(alice: Client) -> None:
    """JSON can spell a lone surrogate; it is not text, and UTF-8 cannot hold it."""
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    assert_error(raw(alice, "POST", path, '{"type": "fact", "content": "a\\ud800b"}'), 422, "memory_invalid")
    record = alice.remember(memory["id"], "fine")
    assert_error(raw(alice, "PATCH", f"{path}/{record['id']}", '{"content": "\\udfff"}'), 422, "memory_invalid")
    # A surrogate pair is one character, and is text.
    pair = raw(alice, "POST", path, '{"type": "fact", "content": "\\ud83d\\ude00"}')
    assert pair.status_code == 201, pair.text
    assert pair.json()["content"] == "\U0001f600"
    assert record_count(alice, memory["id"]) == 2


@pytest.mark.slow
def test_content_within_the_limit_is_kept_whatever_its_characters(alice: Client) -> None:
    memory = alice.create_memory()
    content = "\x01" * (100 * 1024)
    answer = alice.post(f"/v1/memories/{memory['id']}/records", {"type": "note", "content": content})
    assert answer.status_code == 201, answer.text[:200]


@pytest.mark.slow
def test_attributes_limit_is_16_kib_of_json(alice: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"

    def attributes(size: int) -> dict[str, str]:
        value = {"a": "x" * (size - len('{"a":""}'))}
        assert len(json.dumps(value, separators=(",", ":")).encode()) == size
        return value

    exact = attributes(16 * 1024)
    record = alice.post(path, {"type": "fact", "content": "c", "attributes": exact})
    assert record.status_code == 201, record.text[:200]
    assert alice.get(f"{path}/{record.json()['id']}").json()["attributes"] == exact
    assert_error(alice.post(path, {"type": "fact", "content": "c", "attributes": attributes(16 * 1024 + 1)}),
                 422, "memory_invalid")
    assert_error(alice.patch(f"{path}/{record.json()['id']}", {"attributes": attributes(16 * 1024 + 1)}),
                 422, "memory_invalid")
    assert record_count(alice, memory["id"]) == 1


@pytest.mark.slow
def test_references_and_type_name_limits(alice: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    ref = {"rel": "r", "memory_id": memory["id"], "record_id": MISSING_RECORD}
    assert alice.post(path, {"type": "fact", "content": "c", "references": [ref] * 32}).status_code == 201
    assert_error(alice.post(path, {"type": "fact", "content": "c", "references": [ref] * 33}), 422, "memory_invalid")
    assert_error(alice.post(path, {"type": "fact", "content": "c", "references": [{**ref, "rel": "r" * 65}]}),
                 422, "memory_invalid")
    longest_type = "x." + "a" * 98
    assert alice.post(path, {"type": longest_type, "content": "c"}).status_code == 201
    assert_error(alice.post(path, {"type": longest_type + "a", "content": "c"}), 422, "memory_invalid")
    assert record_count(alice, memory["id"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["0", "101", "-5", "many"])
def test_page_size_limits(alice: Client, limit: str) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    for path in (
        f"/v1/memories/{memory['id']}/records",
        f"/v1/memories/{memory['id']}/records/{record['id']}/history",
        f"/v1/memories/{memory['id']}/snapshots",
        "/v1/memories",
    ):
        assert_error(alice.get(path, limit=limit), 422, "memory_invalid")
        assert alice.get(path, limit="100").status_code == 200


# -- discovery ---------------------------------------------------------------------------------


def test_capabilities(alice: Client) -> None:
    answer = alice.get("/v1/capabilities")
    assert answer.status_code == 200
    assert answer.json() == {"capabilities": {"memories": True}}


# The capability document this deployment (local mode: the native provider, the embedded index) must
# publish, written out here rather than read from the code that builds it: each value is then shown to be
# true of the deployment by what its routes do (test_every_capability_stated_is_true_of_the_deployment).
LOCAL_CAPABILITIES = {
    "id": "native",
    "object": "memory.provider",
    "isolation": "enforced_filter",
    "derivation": "none",
    "observe": {"keeps_episodes": True, "answers": "records"},
    "recall": {"signals": ["query", "text", "filters"], "abstain": True, "max_depth": 3},
    "history": {"content": "versions", "structure": "none"},
    "snapshots": True,
    "revise": "native",
    "forget": "native",
    "erase": {"unreachable": "reported"},
    "prime": True,
    "consolidate": "runs",
    "queries": {"named": True, "free": False},  # free queries need OpenSearch; local mode has none
    "types": True,
    "files": True,
    "mcp": {"path": "/mcp", "transport": "streamable-http", "session_memory_header": "x-uhp-memory"},
}


def test_providers_carry_the_capability_document(alice: Client) -> None:
    answer = alice.get("/v1/memories/providers")
    assert answer.status_code == 200
    assert set(answer.json()) == {"data"} | ({"next_cursor", "object"} & set(answer.json()))
    assert provider_document(alice) == LOCAL_CAPABILITIES
    # A memory names a provider the listing describes.
    assert alice.create_memory()["provider"] == "native"


@pytest.mark.slow
def test_every_capability_stated_is_true_of_the_deployment(alice: Client, bob: Client) -> None:
    memory = alice.create_memory("facts")
    mid = memory["id"]
    record = alice.remember(mid, "Acme renews in March.", attributes={"account": "acme"})
    # isolation enforced_filter: a record is reached only through its own memory.
    other = alice.create_memory("other")
    assert error_code(alice.get(f"/v1/memories/{other['id']}/records/{record['id']}")) == "memory_record_not_found"
    # observe answers records (derivation none, keeps_episodes): the episode itself, at once, no job.
    observed = alice.post(f"/v1/memories/{mid}/observe", {"episodes": [{"content": "user: hi"}]})
    assert observed.status_code == 200, observed.text
    assert [(r["type"], r["content"]) for r in observed.json()["records"]] == [("episode", "user: hi")]
    # recall: each signal alone is done (never "not_supported"), abstain is answered, depth capped at 3.
    for signal in ({"query": "when does acme renew"}, {"text": "renews"},
                   {"filters": {"field": "attributes.account", "op": "eq", "value": "acme"}}):
        answer = alice.post(f"/v1/memories/{mid}/recall", signal).json()
        assert answer["degraded"] == [], signal
        assert record["id"] in [r["record"]["id"] for r in answer["results"]], signal
        assert isinstance(answer["abstain"], bool)
    assert alice.post(f"/v1/memories/{mid}/recall", {"text": "zebra"}).json()["abstain"] is True
    assert alice.post(f"/v1/memories/{mid}/recall", {"text": "acme", "depth": 5}).json()["degraded"] == [
        "depth:capped_at_3"]
    # history of content is versions; revise and forget are native; snapshots name instants.
    revised = alice.patch(f"/v1/memories/{mid}/records/{record['id']}", {"content": "Acme renews in April."}).json()
    history = alice.get(f"/v1/memories/{mid}/records/{record['id']}/history").json()["data"]
    assert [v["content"] for v in history] == ["Acme renews in March.", "Acme renews in April."]
    assert alice.post(f"/v1/memories/{mid}/snapshots", {"name": "now"}).status_code == 201
    assert alice.delete(f"/v1/memories/{mid}/records/{revised['id']}").json()["status"] == "forgotten"
    # erase reports what it could not reach (local mode keeps no copy: an empty list, a guarantee).
    kept = alice.remember(mid, "erase me")
    erased = alice.post(f"/v1/memories/{mid}/erase", {"record_ids": [kept["id"]]}).json()
    assert (erased["erased"], erased["unreachable"]) == ([kept["id"]], [])
    # prime: an owner pins; consolidate: runs; queries: named yes, free no; types: beyond the core.
    pinned = alice.remember(mid, "always relevant")
    assert alice.put(f"/v1/memories/{mid}/prime", {"record_ids": [pinned["id"]]}).status_code == 200
    assert alice.post(f"/v1/memories/{mid}/consolidations", {}).json()["object"] == "memory.consolidation"
    defined = alice.put(f"/v1/memories/{mid}/queries/by_text", {"body": {"text": "{{words}}"},
                        "params": {"type": "object", "properties": {"words": {"type": "string"}}}})
    assert defined.status_code == 200, defined.text
    ran = alice.post(f"/v1/memories/{mid}/queries/by_text", {"params": {"words": "pinned relevant"}})
    assert pinned["id"] in [r["record"]["id"] for r in ran.json()["results"]]
    free = alice.post(f"/v1/memories/{mid}/query", {"language": "opensearch-dsl", "statement": {"match_all": {}}})
    assert error_code(free) == "memory_unsupported"
    assert "x.calendar.event" in {t["type"] for t in alice.get("/v1/memories/types").json()["data"]}
    # files: an upload becomes a record's content, served back.
    uploaded = alice.session.post(alice.base_url + "/v1/files", files={"file": ("a.txt", b"bytes", "text/plain")},
                                  headers={"x-api-key": alice.key}, timeout=30).json()
    file_record = alice.remember(mid, type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    assert alice.get(f"/v1/memories/{mid}/records/{file_record['id']}/content").content == b"bytes"


def test_types_list_the_core_types(alice: Client) -> None:
    answer = alice.get("/v1/memories/types")
    assert answer.status_code == 200
    data = answer.json()["data"]
    listed = {t["type"] for t in data}
    assert listed >= CORE_TYPES
    # The deployment reports types: true, and lists the two built in beside the core (a new tenant has
    # registered none).
    assert provider_document(alice)["types"] is True
    assert listed == CORE_TYPES | {"x.calendar.event", "x.task"}
    for entry in data:
        assert isinstance(entry["description"], str)
        assert entry["description"]
        if entry["type"] in CORE_TYPES:
            assert entry["operations"] == []


# -- every feature not offered answers memory_unsupported ---------------------------------------

# Each optional feature of the capability document (§10.2) and the routes that exercise it. {mid} is
# a memory, {rid} one of its records.
FEATURE_ROUTES: dict[str, list[tuple[str, str, Any]]] = {
    "recall": [("POST", "/v1/memories/{mid}/recall", {"query": "renewal", "limit": 5})],
    "observe": [("POST", "/v1/memories/{mid}/observe", {"episodes": [{"content": "user: hi"}]})],
    "consolidate": [
        ("POST", "/v1/memories/{mid}/consolidations", {}),
        ("GET", "/v1/memories/{mid}/consolidations", None),
        ("GET", "/v1/memories/{mid}/consolidations/hcon_" + "0" * 32, None),
        ("GET", "/v1/memories/{mid}/consolidations/hcon_" + "0" * 32 + "/changes", None),
        ("POST", "/v1/memories/{mid}/consolidations/hcon_" + "0" * 32 + "/revert", {}),
    ],
    "queries.named": [
        ("GET", "/v1/memories/{mid}/queries", None),
        ("PUT", "/v1/memories/{mid}/queries/open_deals_for",
         {"description": "d", "params": {"type": "object"}, "requires": "read", "language": "cypher", "body": "x"}),
        ("POST", "/v1/memories/{mid}/queries/open_deals_for", {"params": {"account": "acme"}}),
    ],
    "queries.free": [("POST", "/v1/memories/{mid}/query", {"language": "cypher", "statement": "MATCH (n) RETURN n"})],
    "types": [("POST", "/v1/memories/{mid}/records/{rid}/operations/reschedule", {"input": {}})],
    "files": [("GET", "/v1/memories/{mid}/records/{rid}/content", None)],
    # Last: where it is offered, it removes the record the routes above name.
    "erase": [("POST", "/v1/memories/{mid}/erase", {"record_ids": ["{rid}"]})],
}


def offered(doc: dict[str, Any], feature: str) -> bool:
    value: Any = doc
    for part in feature.split("."):
        value = value.get(part, False) if isinstance(value, dict) else False
    return bool(value)


def _fill(template: Any, mid: str, rid: str) -> Any:
    if template is None:
        return None
    return json.loads(json.dumps(template).replace("{mid}", mid).replace("{rid}", rid))


@pytest.mark.slow
def test_features_not_offered_answer_memory_unsupported(alice: Client, bob: Client) -> None:
    doc = provider_document(alice)
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    hidden = alice.create_memory("hidden from bob")
    hidden_record = alice.remember(hidden["id"])
    checked_absent = 0
    for feature, routes in FEATURE_ROUTES.items():
        for method, template, body in routes:
            path = _fill(template, memory["id"], record["id"])
            answer = alice.request(method, path, _fill(body, memory["id"], record["id"]))
            if offered(doc, feature):
                # A feature the document offers answers as it says: never unsupported, never a 5xx (a
                # 4xx such as an unknown run or query id is the route working).
                assert answer.status_code < 500, (feature, method, path, answer.text)
                assert not (answer.status_code == 422 and error_code(answer) == "memory_unsupported"), (
                    feature, method, path, answer.text)
                continue
            checked_absent += 1
            assert_error(answer, 422, "memory_unsupported")
            # A memory the caller cannot see is memory_not_found first: unsupported reveals nothing.
            for client, mid, rid in (
                (bob, hidden["id"], hidden_record["id"]),
                (alice, MISSING_MEMORY, MISSING_RECORD),
            ):
                answer = client.request(method, _fill(template, mid, rid), _fill(body, mid, rid))
                assert_error(answer, 404, "memory_not_found")
            # Without a key, unauthenticated before anything else.
            answer = requests.request(method, alice.base_url + path, json=_fill(body, memory["id"], record["id"]),
                                      timeout=30)
            assert_error(answer, 401, "unauthenticated")
    # Local mode offers every feature but free queries (they need OpenSearch to confine a statement).
    assert {f for f in FEATURE_ROUTES if not offered(doc, f)} == {"queries.free"}
    assert checked_absent == len(FEATURE_ROUTES["queries.free"])


def test_snapshots_are_offered_and_work(alice: Client) -> None:
    assert provider_document(alice)["snapshots"] is True
    memory = alice.create_memory()
    answer = alice.post(f"/v1/memories/{memory['id']}/snapshots", {"name": "s"})
    assert answer.status_code == 201, answer.text
    listed = alice.get(f"/v1/memories/{memory['id']}/snapshots").json()["data"]
    assert [s["name"] for s in listed] == ["s"]


def test_extension_types_are_carried_whatever_the_types_capability(alice: Client) -> None:
    """§4.1: a server MUST carry a record of a type it does not understand unchanged."""
    memory = alice.create_memory()
    answer = alice.post(f"/v1/memories/{memory['id']}/records",
                        {"type": "x.board.task", "content": "ship it", "attributes": {"column": "doing"}})
    assert answer.status_code == 201, answer.text
    got = alice.get(f"/v1/memories/{memory['id']}/records/{answer.json()['id']}")
    assert got.status_code == 200
    assert (got.json()["type"], got.json()["attributes"]) == ("x.board.task", {"column": "doing"})


# -- wrong JSON types are refused, never coerced -----------------------------------------------

WRONG_TYPES = [
    ("POST", "/v1/memories", {"name": "m", "restricted": "yes"}),
    ("POST", "/v1/memories", {"name": "m", "restricted": 1}),
    ("POST", "/v1/memories", {"name": 42}),
    ("POST", "/v1/memories", {"name": "m", "description": ["a"]}),
    ("PUT", "/v1/memories/{memory}", {"restricted": "false"}),
    ("PUT", "/v1/memories/{memory}", {"name": 7}),
    ("POST", "/v1/memories/{memory}/records", {"type": "fact", "content": 12}),
    ("POST", "/v1/memories/{memory}/records", {"type": 1, "content": "a fact"}),
    ("POST", "/v1/memories/{memory}/records", {"type": "fact", "content": "a", "attributes": "x"}),
    ("POST", "/v1/memories/{memory}/records", {"type": "fact", "content": "a", "references": "hrec_1"}),
    ("POST", "/v1/memories/{memory}/records", {"type": "fact", "content": "a", "time": {"valid_from": 17}}),
    ("PATCH", "/v1/memories/{memory}/records/{record}", {"content": 3.5}),
    ("POST", "/v1/memories/{memory}/recall", {"query": "renewal", "limit": "5"}),
    ("POST", "/v1/memories/{memory}/recall", {"query": "renewal", "limit": 5.0}),
    ("POST", "/v1/memories/{memory}/recall", {"query": "renewal", "limit": True}),
    ("POST", "/v1/memories/{memory}/recall", {"query": "renewal", "types": "fact"}),
    ("POST", "/v1/memories/{memory}/recall", {"query": 5}),
    ("POST", "/v1/memories/{memory}/recall", {"query": "renewal", "depth": "1"}),
    ("POST", "/v1/memories/{memory}/observe", {"episodes": [{"content": 1}]}),
    ("POST", "/v1/memories/{memory}/observe", {"episodes": {"content": "turn"}}),
    ("POST", "/v1/memories/{memory}/grants", {"principal": "user:bob", "privileges": "read"}),
    ("POST", "/v1/memories/{memory}/grants", {"principal": 5, "privileges": ["read"]}),
    ("POST", "/v1/memories/{memory}/erase", {"record_ids": "{record}"}),
    ("POST", "/v1/memories/{memory}/snapshots", {"name": 3}),
    ("POST", "/v1/memories/{memory}/consolidations", {"budget": {"limit": "10"}}),
    ("PUT", "/v1/harnesses/h1/memories", {"memories": [{"memory_id": "{memory}", "access": "write", "default": 1}]}),
    ("PUT", "/v1/memories/{memory}/queries/q1", {"body": {"query": "{{x}}"}, "description": 5}),
    ("POST", "/v1/memories/{memory}/queries/q1", {"params": []}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("method", "template", "body"), WRONG_TYPES)
def test_fields_of_the_wrong_json_type_are_invalid_never_coerced(
    alice: Client, method: str, template: str, body: dict[str, Any]
) -> None:
    memory = alice.create_memory("typed")
    record = alice.remember(memory["id"], "Acme renews in March.")
    path = template.format(memory=memory["id"], record=record["id"])
    filled = json.loads(json.dumps(body).replace("{memory}", memory["id"]).replace("{record}", record["id"]))
    assert_error(alice.request(method, path, filled), 422, "memory_invalid")
    after = alice.get(f"/v1/memories/{memory['id']}").json()
    assert after["restricted"] is False  # nothing was half-applied
    assert after["name"] == "typed"
    assert after["records"]["count"] == 1
    assert alice.get(f"/v1/memories/{memory['id']}/records/{record['id']}").json()["content"] == "Acme renews in March."
