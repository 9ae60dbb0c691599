"""Hostile input and every caller (issue 19): no 500, no leak, no poisoned memory. One test per finding
of the black-box probe, named after the rule it holds, each over real HTTP through the local gateway.

What a refused request leaves is checked as a whole: `snapshot_of` reads every version of the memory,
its grants, its child listing and its counts, before and after."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
import requests

from tests.integration.conftest import Client, ClientFactory, error_code

JSON_ROUTES = [  # every operation that reads a JSON body; {m} a memory, {r} one of its records
    ("POST", "/v1/memories"),
    ("PUT", "/v1/memories/{m}"),
    ("POST", "/v1/memories/{m}/grants"),
    ("POST", "/v1/memories/{m}/records"),
    ("PATCH", "/v1/memories/{m}/records/{r}"),
    ("DELETE", "/v1/memories/{m}/records/{r}"),
    ("POST", "/v1/memories/{m}/recall"),
    ("POST", "/v1/memories/{m}/observe"),
    ("POST", "/v1/memories/{m}/erase"),
    ("POST", "/v1/memories/{m}/snapshots"),
    ("POST", "/v1/memories/{m}/query"),
    ("PUT", "/v1/memories/{m}/queries/q1"),
    ("POST", "/v1/memories/{m}/queries/q1"),
    ("POST", "/v1/memories/{m}/consolidations"),
    ("POST", "/v1/memories/{m}/grep"),
    ("PUT", "/v1/memories/{m}/prime"),
    ("POST", "/v1/memories/{m}/records/{r}/operations/complete"),
    ("PUT", "/v1/memories/types/x.thing"),
    ("PUT", "/v1/harnesses/h1/memories"),
    ("POST", "/v1/harnesses/h1/turns"),
    ("POST", "/v1/files"),
    ("POST", "/mcp"),
]


def send(client: Client, method: str, path: str, data: bytes | str, content_type: str = "application/json",
         **params: Any) -> requests.Response:
    """A body sent exactly as given."""
    return client.session.request(
        method, client.base_url + path, data=data, params=params, timeout=60,
        headers={"x-api-key": client.key, "Content-Type": content_type},
    )


def nested(levels: int, leaf: Any = 1) -> str:
    """JSON text of `levels` arrays one inside the other, built as text (json.dumps would recurse)."""
    return "[" * levels + json.dumps(leaf) + "]" * levels


def snapshot_of(client: Client, memory_id: str) -> dict[str, Any]:
    """Everything a refused request could have changed in a memory, as its owner reads it."""
    listing = client.get(f"/v1/memories/{memory_id}/records", include="all", limit="100").json()["data"]
    return {
        "memory": client.get(f"/v1/memories/{memory_id}").json(),
        "records": listing,
        "histories": {r["id"]: client.get(f"/v1/memories/{memory_id}/records/{r['id']}/history").json()["data"]
                      for r in listing},
        "grants": client.get(f"/v1/memories/{memory_id}/grants").json()["data"],
        "children": client.get("/v1/memories", parent=memory_id).json()["data"],
        "snapshots": client.get(f"/v1/memories/{memory_id}/snapshots").json()["data"],
    }


@pytest.fixture
def memory(alice: Client) -> dict[str, Any]:
    created = alice.create_memory("hostile", description="what the probe attacks")
    alice.remember(created["id"], "Acme renews in March.", attributes={"account": "acme"})
    return created


def fill(path: str, memory_id: str, record_id: str) -> str:
    return path.replace("{m}", memory_id).replace("{r}", record_id)


# -- finding 1: a write-only grantee cannot poison a memory -------------------------------------


@pytest.mark.slow
def test_attributes_nested_past_the_json_limit_are_refused_before_anything_is_written(
    alice: Client, bob: Client, memory: dict[str, Any]
) -> None:
    mid = memory["id"]
    alice.grant(mid, "user:bob", "write")
    before = snapshot_of(alice, mid)
    for depth in (65, 254, 1_000):
        body = '{"type": "fact", "content": "c", "attributes": {"a": ' + nested(depth - 2) + "}}"
        answer = send(bob, "POST", f"/v1/memories/{mid}/records", body)
        assert answer.status_code == 422, answer.text
        assert error_code(answer) == "memory_invalid"
        assert "64 levels" in answer.json()["error"]["message"]
    assert snapshot_of(alice, mid) == before
    # The memory still reads whole: listing and recall answer 200.
    assert alice.get(f"/v1/memories/{mid}/records").status_code == 200
    assert alice.post(f"/v1/memories/{mid}/recall", {"text": "acme"}).status_code == 200


@pytest.mark.slow
def test_attributes_nested_to_the_limit_are_kept_and_read_back(alice: Client, memory: dict[str, Any]) -> None:
    deepest: Any = "leaf"
    for _ in range(61):  # body {} -> attributes {} -> a {} -> 61 lists: 64 levels in all
        deepest = [deepest]
    record = alice.remember(memory["id"], "deep", attributes={"a": deepest})
    assert alice.get(f"/v1/memories/{memory['id']}/records/{record['id']}").json()["attributes"] == {"a": deepest}
    assert alice.post(f"/v1/memories/{memory['id']}/recall", {"text": "deep"}).status_code == 200


@pytest.mark.slow
def test_a_refused_write_leaves_the_memory_exactly_as_it_was(alice: Client, memory: dict[str, Any]) -> None:
    """Every way a write can be refused (bad JSON, bad field, a limit, a stale version, a type's
    schema) leaves every version, grant, child and snapshot as it was."""
    mid = memory["id"]
    record = alice.get(f"/v1/memories/{mid}/records").json()["data"][0]
    stale = record["id"]
    current = alice.patch(f"/v1/memories/{mid}/records/{stale}", {"content": "Acme renews in April."}).json()
    before = snapshot_of(alice, mid)
    refusals = [
        ("POST", f"/v1/memories/{mid}/records", '{"type": "fact", "content": "x", "written_by": "me"}'),
        ("POST", f"/v1/memories/{mid}/records", '{"type": "fact", "content": "' + "x" * (100 * 1024 + 1) + '"}'),
        ("POST", f"/v1/memories/{mid}/records",
         '{"type": "x.calendar.event", "content": "c", "attributes": {"title": "t", "starts_at": "soon"}}'),
        ("PATCH", f"/v1/memories/{mid}/records/{stale}", '{"content": "too late"}'),
        ("PATCH", f"/v1/memories/{mid}/records/{current['id']}", '{"type": "note"}'),
        ("DELETE", f"/v1/memories/{mid}/records/{stale}", ""),
        ("POST", f"/v1/memories/{mid}/observe", '{"episodes": [{"content": "ok"}, {"content": 5}]}'),
        ("PUT", f"/v1/memories/{mid}", '{"name": "renamed", "parent_id": "' + mid + '"}'),
        ("POST", f"/v1/memories/{mid}/grants", '{"principal": "nobody", "privileges": ["read"]}'),
        ("POST", "/v1/memories", '{"name": "child", "parent_id": "' + mid + '", "restricted": "yes"}'),
        ("POST", f"/v1/memories/{mid}/snapshots", '{"name": "2026-01-01"}'),
        ("POST", f"/v1/memories/{mid}/erase", '{"record_ids": ["' + stale + '"], "filters": {}}'),
    ]
    for method, path, body in refusals:
        answer = send(alice, method, path, body)
        assert 400 <= answer.status_code < 500, (method, path, answer.status_code, answer.text[:200])
    assert snapshot_of(alice, mid) == before


# -- finding 2: a write-only grantee reads nothing through write responses -----------------------


@pytest.mark.slow
def test_revise_and_forget_answer_a_write_only_caller_what_it_sent_and_the_stamps(
    alice: Client, bob: Client, memory: dict[str, Any]
) -> None:
    mid = memory["id"]
    alice.grant(mid, "user:bob", "write")
    secret = alice.remember(mid, "the secret price is 40k", attributes={"price": 40_000},
                            references=[{"rel": "derived_from", "memory_id": mid, "record_id": "hrec_" + "1" * 32}])
    assert bob.get(f"/v1/memories/{mid}/records/{secret['id']}").status_code == 403
    revised = bob.patch(f"/v1/memories/{mid}/records/{secret['id']}", {"attributes": {"price": 1}})
    assert revised.status_code == 200, revised.text
    body = revised.json()
    assert "40k" not in revised.text
    assert body["attributes"] == {"price": 1}  # what bob sent
    assert not {"content", "type", "references", "path"} & set(body)
    assert body["written_by"] == {"kind": "user", "id": "bob"}  # the stamps
    assert (body["version"], body["supersedes"], body["status"]) == (2, secret["id"], "active")
    assert set(body["time"]) == {"written_at", "invalidated_at"}
    forgotten = bob.delete(f"/v1/memories/{mid}/records/{body['id']}")
    assert forgotten.status_code == 200, forgotten.text
    assert "40k" not in forgotten.text
    assert not {"content", "type", "attributes", "references"} & set(forgotten.json())
    assert forgotten.json()["status"] == "forgotten"
    # A reader of the memory is answered the whole record, as always.
    again = alice.remember(mid, "another")
    whole = alice.patch(f"/v1/memories/{mid}/records/{again['id']}", {"attributes": {"k": 1}}).json()
    assert whole["content"] == "another"
    assert whole["type"] == "fact"


@pytest.mark.slow
def test_a_conflict_names_the_current_version_only_to_a_reader(
    alice: Client, bob: Client, memory: dict[str, Any]
) -> None:
    mid = memory["id"]
    alice.grant(mid, "user:bob", "write")
    first = alice.remember(mid, "v1")
    second = alice.patch(f"/v1/memories/{mid}/records/{first['id']}", {"content": "v2"}).json()
    for attempt in (bob.patch(f"/v1/memories/{mid}/records/{first['id']}", {"content": "x"}),
                    bob.delete(f"/v1/memories/{mid}/records/{first['id']}")):
        assert attempt.status_code == 409, attempt.text
        assert "current_record_id" not in attempt.json()["error"]
        assert second["id"] not in attempt.text
    as_reader = alice.patch(f"/v1/memories/{mid}/records/{first['id']}", {"content": "x"})
    assert as_reader.status_code == 409
    assert as_reader.json()["error"]["current_record_id"] == second["id"]


# -- finding 3: no 500 on bad input ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("method", "template"), JSON_ROUTES)
def test_a_body_that_is_not_utf8_is_a_bad_request_on_every_route(
    alice: Client, memory: dict[str, Any], method: str, template: str
) -> None:
    record = alice.get(f"/v1/memories/{memory['id']}/records").json()["data"][0]
    path = fill(template, memory["id"], record["id"])
    before = snapshot_of(alice, memory["id"])
    answer = send(alice, method, path, b'{"name": "\xff\xfe caf\xe9"}')
    assert answer.status_code == 400, answer.text
    assert error_code(answer) == "invalid_request"
    assert snapshot_of(alice, memory["id"]) == before


@pytest.mark.slow
@pytest.mark.parametrize(("method", "template"), JSON_ROUTES)
def test_a_body_nested_past_the_limit_is_invalid_on_every_route(
    alice: Client, memory: dict[str, Any], method: str, template: str
) -> None:
    record = alice.get(f"/v1/memories/{memory['id']}/records").json()["data"][0]
    answer = send(alice, method, fill(template, memory["id"], record["id"]), nested(100_000))
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"


def test_a_body_larger_than_6_mb_is_too_large(alice: Client, memory: dict[str, Any]) -> None:
    body = json.dumps({"type": "fact", "content": "x" * (6 * 1024 * 1024)})
    answer = send(alice, "POST", f"/v1/memories/{memory['id']}/records", body)
    assert answer.status_code == 413, answer.text[:200]
    assert error_code(answer) == "request_too_large"


@pytest.mark.parametrize(
    ("content_type", "data"),
    [
        ("application/json", b"{bad"),
        ("application/json", b'{"name": "f.txt", "media_type": "text/plain", "bytes": 5'),
        ("application/json", b"[1, 2]"),
        ("multipart/form-data; boundary=x", b"{bad"),
        ("multipart/form-data; boundary=x", b'--x\r\nContent-Disposition: form-data; name="other"\r\n\r\nv\r\n--x--'),
        ("multipart/form-data", b"--x\r\n"),
    ],
)
def test_a_malformed_upload_is_a_clear_client_error(alice: Client, content_type: str, data: bytes) -> None:
    answer = send(alice, "POST", "/v1/files", data, content_type)
    assert answer.status_code in (400, 422), answer.text
    assert error_code(answer) in ("invalid_request", "memory_invalid")
    assert answer.json()["error"]["message"]


# The upload takes multipart itself; MCP's body goes to its SDK, which answers JSON-RPC's parse error.
@pytest.mark.slow
@pytest.mark.parametrize(("method", "template"), [r for r in JSON_ROUTES if r[1] not in ("/v1/files", "/mcp")])
@pytest.mark.parametrize("content_type", ["multipart/form-data", "multipart/form-data; boundary=x"])
def test_a_multipart_label_on_a_json_route_is_read_as_json(
    alice: Client, memory: dict[str, Any], method: str, template: str, content_type: str
) -> None:
    """Only a file upload takes multipart: elsewhere the body is read as JSON whatever its label (as a
    form label is), never parsed as a form (which answered 500 without a boundary, found by
    schemathesis once each of its cases had an Idempotency-Key of its own)."""
    record = alice.get(f"/v1/memories/{memory['id']}/records").json()["data"][0]
    before = snapshot_of(alice, memory["id"])
    path = fill(template, memory["id"], record["id"])
    answer = send(alice, method, path, b"--x\r\nnot json\r\n--x--", content_type)
    assert answer.status_code == 400, answer.text
    assert error_code(answer) == "invalid_request"
    assert snapshot_of(alice, memory["id"]) == before
    if (method, template) == ("POST", "/v1/memories"):
        created = send(alice, method, path, b'{"name": "labelled as a form"}', content_type)
        assert created.status_code == 201, created.text


@pytest.mark.slow
def test_filters_nested_1000_deep_are_invalid_wherever_filters_are_read(alice: Client, memory: dict[str, Any]) -> None:
    deep = '{"and": [' * 1_000 + '{"field": "type", "op": "eq", "value": "fact"}' + "]}" * 1_000
    mid = memory["id"]
    for answer in (
        send(alice, "POST", f"/v1/memories/{mid}/recall", '{"filters": ' + deep + "}"),
        send(alice, "POST", f"/v1/memories/{mid}/erase", '{"filters": ' + deep + "}"),
        alice.get(f"/v1/memories/{mid}/records", filters=deep),
    ):
        assert answer.status_code == 422, answer.text[:300]
        assert error_code(answer) == "memory_invalid"
    assert len(alice.get(f"/v1/memories/{mid}/records").json()["data"]) == 1


# -- finding 4: erase and delete take a file's metadata with them --------------------------------


@pytest.mark.slow
def test_erase_removes_a_files_metadata_and_reports_it(alice: Client) -> None:
    memory = alice.create_memory("docs")
    uploaded = alice.upload("acme-pricing-secret.txt", b"40k")
    record = alice.remember(memory["id"], type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    assert alice.get(f"/v1/files/{uploaded['id']}").json()["status"] == "attached"
    erased = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"]]})
    assert erased.status_code == 200, erased.text
    assert erased.json()["erased_files"] == [uploaded["id"]]
    gone = alice.get(f"/v1/files/{uploaded['id']}")
    assert gone.status_code == 404
    assert "acme-pricing-secret" not in gone.text


@pytest.mark.slow
def test_memory_delete_removes_its_files_metadata(alice: Client) -> None:
    memory = alice.create_memory("docs")
    uploaded = alice.upload("plan.txt", b"bytes")
    alice.remember(memory["id"], type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    assert alice.delete(f"/v1/memories/{memory['id']}").status_code == 200
    assert alice.get(f"/v1/files/{uploaded['id']}").status_code == 404


@pytest.mark.slow
def test_a_files_metadata_follows_its_records_memory(alice: Client, bob: Client, make_client: ClientFactory) -> None:
    """Attached, a file is read by whoever reads its record's memory (the uploader too only then)."""
    memory = alice.create_memory("docs")
    uploaded = alice.upload("plan.txt", b"bytes")
    assert bob.get(f"/v1/files/{uploaded['id']}").status_code == 404  # another's upload
    alice.remember(memory["id"], type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    assert bob.get(f"/v1/files/{uploaded['id']}").status_code == 404
    alice.grant(memory["id"], "user:bob", "read")
    assert bob.get(f"/v1/files/{uploaded['id']}").json()["name"] == "plan.txt"
    writer = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "write")
    assert writer.get(f"/v1/files/{uploaded['id']}").status_code == 404


# -- finding 5: cursors name what they page; limits are integers ---------------------------------


@pytest.mark.slow
def test_a_cursor_of_one_memorys_listing_is_refused_on_another(alice: Client) -> None:
    first, second = alice.create_memory("a"), alice.create_memory("b")
    for mid in (first["id"], second["id"]):
        for n in range(3):
            alice.remember(mid, f"fact {n}")
            alice.post(f"/v1/memories/{mid}/snapshots", {"name": f"s{n}"})
        alice.grant(mid, "user:bob", "read")
        alice.grant(mid, "user:carol", "read")
    for suffix in ("/records", "/snapshots", "/grants"):
        page = alice.get(f"/v1/memories/{first['id']}{suffix}", limit="1").json()
        assert page["next_cursor"], suffix
        assert alice.get(f"/v1/memories/{first['id']}{suffix}", cursor=page["next_cursor"]).status_code == 200
        elsewhere = alice.get(f"/v1/memories/{second['id']}{suffix}", cursor=page["next_cursor"])
        assert elsewhere.status_code == 422, (suffix, elsewhere.text)
        assert error_code(elsewhere) == "memory_invalid"


@pytest.mark.slow
def test_grants_are_listed_a_page_at_a_time(alice: Client) -> None:
    memory = alice.create_memory("shared")
    for n in range(4):
        alice.grant(memory["id"], f"user:u{n}", "read")
    seen, cursor = [], None
    while True:
        page = alice.get(f"/v1/memories/{memory['id']}/grants", limit="2", cursor=cursor).json()
        assert len(page["data"]) <= 2
        seen += [g["id"] for g in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5  # the creator's implicit grant and four


GET_ROUTES = ["/v1/memories", "/v1/memories/{m}", "/v1/memories/{m}/records", "/v1/memories/{m}/records/{r}",
              "/v1/memories/{m}/records/{r}/history", "/v1/memories/{m}/grants", "/v1/memories/{m}/snapshots",
              "/v1/memories/{m}/consolidations", "/v1/memories/{m}/queries", "/v1/memories/{m}/paths",
              "/v1/memories/{m}/changes", "/v1/memories/{m}/prime", "/v1/memories/types", "/v1/memories/providers",
              "/v1/capabilities"]


@pytest.mark.slow
@pytest.mark.parametrize("template", GET_ROUTES)
def test_a_limit_that_is_not_an_integer_or_a_parameter_the_route_lacks_is_invalid(
    alice: Client, memory: dict[str, Any], template: str
) -> None:
    record = alice.get(f"/v1/memories/{memory['id']}/records").json()["data"][0]
    path = fill(template, memory["id"], record["id"])
    assert alice.get(path).status_code == 200
    for params in ({"limit": "abc"}, {"limit": "5.0"}, {"surprise": "1"}):
        answer = alice.get(path, **params)
        assert answer.status_code == 422, (params, answer.text)
        assert error_code(answer) == "memory_invalid"


# -- finding 7: revert needs write ---------------------------------------------------------------


@pytest.mark.slow
def test_revert_needs_write_not_read(alice: Client, bob: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("facts")
    alice.remember(memory["id"], "Acme renews in March.")
    alice.remember(memory["id"], "acme renews in march.")
    run = alice.post(f"/v1/memories/{memory['id']}/consolidations", {}).json()
    reader = make_client("user:reader")
    alice.grant(memory["id"], "user:reader", "read")
    alice.grant(memory["id"], "user:bob", "write")
    refused = reader.post(f"/v1/memories/{memory['id']}/consolidations/{run['id']}/revert")
    assert refused.status_code == 403, refused.text
    reverted = bob.post(f"/v1/memories/{memory['id']}/consolidations/{run['id']}/revert")
    assert reverted.status_code == 200, reverted.text
    assert reverted.json()["reverted_by"] == "user:bob"


# -- another memory's parts through this one ------------------------------------------------------


@pytest.mark.slow
def test_another_memorys_content_run_and_revert_are_not_found_through_this_one(alice: Client) -> None:
    """(A job through another memory: test_erase.py, test_a_job_is_read_only_through_the_memory_it_belongs_to.)"""
    mine, other = alice.create_memory("mine"), alice.create_memory("other")
    uploaded = alice.upload("x.txt", b"bytes")
    file_record = alice.remember(other["id"], type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    alice.remember(other["id"], "repeat")
    alice.remember(other["id"], "repeat")
    run = alice.post(f"/v1/memories/{other['id']}/consolidations", {}).json()
    probes = [
        ("GET", f"/v1/memories/{mine['id']}/records/{file_record['id']}/content", "memory_record_not_found"),
        ("GET", f"/v1/memories/{mine['id']}/consolidations/{run['id']}", "memory_consolidation_not_found"),
        ("GET", f"/v1/memories/{mine['id']}/consolidations/{run['id']}/changes", "memory_consolidation_not_found"),
        ("POST", f"/v1/memories/{mine['id']}/consolidations/{run['id']}/revert", "memory_consolidation_not_found"),
    ]
    for method, path, code in probes:
        answer = alice.request(method, path)
        assert answer.status_code == 404, (path, answer.text)
        assert error_code(answer) == code, path
    # Through its own memory each answers, and the refused revert changed nothing.
    assert alice.get(f"/v1/memories/{other['id']}/records/{file_record['id']}/content").content == b"bytes"
    assert alice.get(f"/v1/memories/{other['id']}/consolidations/{run['id']}").json()["status"] == "completed"


# -- values JSON text can spell and nothing can keep (issue 27) -----------------------------------

# Each: JSON text of a value the rule refuses, as it reaches the server (escapes and all).
UNKEEPABLE = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e400": "1e400",
    "-1e400": "-1e400",
    "1e-400": "1e-400",
    "39 digits": "1" + "0" * 38,
    "-39 digits": "-" + "9" * 39,
    "a lone surrogate": '"\\ud800"',
    "a lone low surrogate": '"x\\udfffy"',
    "a reversed pair": '"\\udc00\\ud800"',
}


def _refused_naming(answer: requests.Response, field: str) -> None:
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert field in answer.json()["error"]["message"], answer.text


@pytest.mark.slow
@pytest.mark.parametrize("spelled", list(UNKEEPABLE.values()), ids=list(UNKEEPABLE))
def test_a_value_json_cannot_keep_is_refused_naming_its_field_and_nothing_is_written(
    alice: Client, memory: dict[str, Any], spelled: str
) -> None:
    """NaN and Infinity were kept as null, 1e400 became null, 39-digit integers were taken locally (and
    refused by DynamoDB deployed), a lone surrogate answered 500: each is a clear 422."""
    mid = memory["id"]
    before = snapshot_of(alice, mid)
    records = f"/v1/memories/{mid}/records"
    _refused_naming(send(alice, "POST", records, '{"type": "fact", "content": "c", "attributes": {"price": '
                         + spelled + "}}"), "attributes.price")
    _refused_naming(send(alice, "POST", records, '{"type": "fact", "content": "c", "attributes": {"a": [1, {"b": '
                         + spelled + "}]}}"), "attributes.a[1].b")
    _refused_naming(send(alice, "POST", f"/v1/memories/{mid}/observe",
                         '{"episodes": [{"content": "ok"}, {"content": "x", "attributes": {"n": ' + spelled + "}}]}"),
                    "episodes[1].attributes.n")
    filters = '{"field": "attributes.price", "op": "eq", "value": ' + spelled + "}"
    _refused_naming(send(alice, "POST", f"/v1/memories/{mid}/recall", '{"text": "acme", "filters": ' + filters + "}"),
                    "filters.value")
    _refused_naming(alice.get(records, filters=filters), "filters.value")
    assert snapshot_of(alice, mid) == before


@pytest.mark.slow
@pytest.mark.parametrize("where", ["content", "path", "attributes key", "memory name"])
def test_a_lone_surrogate_anywhere_in_a_body_is_a_422_not_a_500(
    alice: Client, memory: dict[str, Any], where: str
) -> None:
    mid = memory["id"]
    before = snapshot_of(alice, mid)
    method, path, body, field = {
        "content": ("POST", f"/v1/memories/{mid}/records", '{"type": "fact", "content": "a\\ud800b"}', "content"),
        "path": ("POST", f"/v1/memories/{mid}/records", '{"type": "note", "content": "c", "path": "notes/\\udbff.md"}',
                 "path"),
        "attributes key": ("POST", f"/v1/memories/{mid}/records",
                           '{"type": "fact", "content": "c", "attributes": {"k\\ud800": 1}}', "attributes"),
        "memory name": ("PUT", f"/v1/memories/{mid}", '{"name": "\\ud800"}', "name"),
    }[where]
    _refused_naming(send(alice, method, path, body), field)
    assert snapshot_of(alice, mid) == before


@pytest.mark.slow
def test_numbers_the_rule_takes_are_kept_exactly(alice: Client, memory: dict[str, Any]) -> None:
    """The edges on the taken side: 38 digits, the largest and smallest finite floats, a proper pair."""
    body = ('{"type": "fact", "content": "c \\ud83d\\ude00", "attributes": {"big": ' + "9" * 38 + ', "neg": -'
            + "9" * 38 + ', "max": 1.7976931348623157e308, "tiny": 5e-324, "zero": 0e10}}')
    created = send(alice, "POST", f"/v1/memories/{memory['id']}/records", body)
    assert created.status_code == 201, created.text
    got = alice.get(f"/v1/memories/{memory['id']}/records/{created.json()['id']}").json()
    assert got["content"] == "c \U0001f600"
    assert got["attributes"] == {"big": int("9" * 38), "neg": -int("9" * 38), "max": 1.7976931348623157e308,
                                 "tiny": 5e-324, "zero": 0.0}


def _mcp_call(client: Client, arguments_json: str, headers: dict[str, str] | None = None) -> requests.Response:
    """A tools/call of memory_remember sent as raw JSON-RPC text (the SDK's client cannot spell these)."""
    body = ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "memory_remember", '
            '"arguments": ' + arguments_json + "}}")
    return client.session.post(client.base_url + "/mcp", data=body.encode(), timeout=30, headers={
        "x-api-key": client.key, "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", **(headers or {})})


@pytest.mark.slow
@pytest.mark.parametrize("spelled", list(UNKEEPABLE.values()), ids=list(UNKEEPABLE))
def test_mcp_arguments_are_held_to_the_same_rule(
    alice: Client, make_client: ClientFactory, memory: dict[str, Any], spelled: str
) -> None:
    """MCP's body reaches its SDK, which parses JSON itself (and took NaN): the rule is applied to it first."""
    mid = memory["id"]
    alice.attach("hostile_mcp", mid)
    harness = make_client("harness:hostile_mcp")
    before = snapshot_of(alice, mid)
    answer = _mcp_call(harness, '{"memory_id": "' + mid + '", "type": "fact", "content": "c", "attributes": {"x": '
                       + spelled + "}}")
    # Answered as MCP answers bad arguments: a JSON-RPC error to the request, invalid params, memory_invalid.
    assert answer.status_code == 200, answer.text
    error = answer.json()["error"]
    assert (answer.json()["id"], error["code"], error["data"]["code"]) == (7, -32602, "memory_invalid")
    assert "params.arguments.attributes.x" in error["message"]
    assert snapshot_of(alice, mid) == before
    taken = _mcp_call(harness, '{"memory_id": "' + mid + '", "type": "fact", "content": "c", "attributes": {"x": 1}}')
    assert taken.status_code == 200, taken.text
    assert len(snapshot_of(alice, mid)["records"]) == len(before["records"]) + 1


@pytest.mark.slow
def test_a_39_digit_integer_from_the_mcp_sdk_is_refused(
    alice: Client, make_client: ClientFactory, memory: dict[str, Any]
) -> None:
    from mcp import Client as McpClient
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    from tests.integration.test_mcp import call, with_mcp

    mid = memory["id"]
    alice.attach("hostile_sdk", mid)
    harness = make_client("harness:hostile_sdk")
    before = snapshot_of(alice, mid)
    async def remember_too_big(mcp: McpClient) -> MCPError | None:
        try:
            await mcp.call_tool("memory_remember", {"memory_id": mid, "type": "fact", "content": "c",
                                                    "attributes": {"n": 10**38}})
        except MCPError as error:
            return error
        return None

    refused = with_mcp(harness, remember_too_big)
    assert refused is not None, "a 39-digit integer was taken"
    assert (refused.code, (refused.data or {}).get("code")) == (INVALID_PARAMS, "memory_invalid")
    assert "attributes.n" in str(refused)
    assert snapshot_of(alice, mid) == before
    failed, kept = call(harness, "memory_remember", {"memory_id": mid, "type": "fact", "content": "c",
                                                     "attributes": {"n": 10**38 - 1}})
    assert not failed, kept


@pytest.mark.slow
def test_repeated_key_headers_are_refused_on_rest_and_mcp(alice: Client, memory: dict[str, Any]) -> None:
    """Two x-api-key headers (401), and two Idempotency-Key headers, which name two requests (422)."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(alice.base_url)

    def raw(method: str, path: str, lines: list[tuple[str, str]], body: bytes = b"") -> tuple[int, dict[str, Any]]:
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        try:
            connection.putrequest(method, path)
            for name, value in [*lines, ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]:
                connection.putheader(name, value)
            connection.endheaders(body)
            answer = connection.getresponse()
            return answer.status, json.loads(answer.read() or b"null")
        finally:
            connection.close()

    mcp_body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    for method, path, body in (("GET", "/v1/memories", b""), ("POST", "/mcp", mcp_body)):
        status, answer = raw(method, path, [("x-api-key", "k-not-a-key"), ("X-Api-Key", alice.key),
                                            ("Accept", "application/json, text/event-stream")], body)
        assert (status, answer["error"]["code"]) == (401, "unauthenticated"), answer
    before = snapshot_of(alice, memory["id"])
    status, answer = raw("POST", f"/v1/memories/{memory['id']}/records",
                         [("x-api-key", alice.key), ("Idempotency-Key", "one"), ("idempotency-key", "two")],
                         b'{"type": "fact", "content": "twice keyed"}')
    assert (status, answer["error"]["code"]) == (422, "memory_invalid"), answer
    assert "Idempotency-Key" in answer["error"]["message"]
    assert snapshot_of(alice, memory["id"]) == before


@pytest.mark.slow
@pytest.mark.parametrize("name", ["a\u200b.md", "notes/\u202etxt.exe", "\ufeffbom.md", "x\u2066y\u2069.md",
                                  "joined\u200d.md", "rtl\u200f/x.md", "soft\u00adhyphen.md"])
def test_a_path_with_invisible_or_bidi_characters_is_refused(alice: Client, memory: dict[str, Any], name: str) -> None:
    """`a\u200b.md` was taken beside `a.md` (two files a listing shows under one name), and a bidi
    override made `txt.exe` read as `exe.txt`: format characters (Unicode Cf) are refused in paths."""
    mid = memory["id"]
    before = snapshot_of(alice, mid)
    answer = alice.post(f"/v1/memories/{mid}/records", {"type": "note", "content": "c", "path": name})
    _refused_naming(answer, "path")
    assert snapshot_of(alice, mid) == before


@pytest.mark.slow
def test_ids_made_together_keep_their_order_and_do_not_name_each_other(alice: Client) -> None:
    """The episodes of one observe share a millisecond: their ids keep the order they were sent in, and
    no id gives away another (the random part was counted up by 1..65,536 within a millisecond)."""
    memory = alice.create_memory("ids")
    answer = alice.post(f"/v1/memories/{memory['id']}/observe",
                        {"episodes": [{"content": f"episode {n}"} for n in range(50)]})
    assert answer.status_code == 200, answer.text
    made = [r["id"] for r in answer.json()["records"]]
    assert [r["content"] for r in answer.json()["records"]] == [f"episode {n}" for n in range(50)]
    assert made == sorted(made)
    listed = alice.get(f"/v1/memories/{memory['id']}/records", limit="100").json()["data"]
    assert sorted(r["id"] for r in listed) == made
    neighbours = [(a, b) for a, b in pairwise(made) if a[5:17] == b[5:17]]
    assert neighbours, "50 episodes written in one transaction share a millisecond"
    for a, b in neighbours:
        assert abs(int(b[-16:], 16) - int(a[-16:], 16)) > 1 << 20, (a, b)


# -- one reference twice, one key twice (issue 36) -----------------------------------------------

def _twice(memory_id: str, record_id: str, other_memory_id: str) -> dict[str, list[dict[str, str]]]:
    """References that say one record is derived from another twice: exactly, or through another memory's
    id (what a record is derived from is kept by record id, whichever memory is named beside it)."""
    same = {"rel": "derived_from", "memory_id": memory_id, "record_id": record_id}
    return {
        "derived_from exactly twice": [same, dict(same)],
        "derived_from through another memory": [same, {**same, "memory_id": other_memory_id}],
    }


@pytest.mark.parametrize("case", ["derived_from exactly twice", "derived_from through another memory"])
def test_a_reference_given_twice_is_refused_on_remember_observe_and_revise(
    alice: Client, memory: dict[str, Any], case: str
) -> None:
    """The same derived_from reference twice answered 500 (DynamoDB refused a transaction writing one
    reverse-index item twice), after the checks had passed: each write refuses it first, 422."""
    mid = memory["id"]
    target = alice.get(f"/v1/memories/{mid}/records").json()["data"][0]["id"]
    refs = _twice(mid, target, alice.create_memory("elsewhere")["id"])[case]
    before = snapshot_of(alice, mid)
    for answer in (
        alice.post(f"/v1/memories/{mid}/records", {"type": "fact", "content": "c", "references": refs}),
        alice.post(f"/v1/memories/{mid}/observe", {"episodes": [{"content": "e", "references": refs}]}),
        alice.patch(f"/v1/memories/{mid}/records/{target}", {"references": refs}),
    ):
        _refused_naming(answer, "twice")
        assert target in answer.json()["error"]["message"]
    assert snapshot_of(alice, mid) == before
    # One record under two rels is two references, and taken.
    both = [{"rel": "derived_from", "memory_id": mid, "record_id": target},
            {"rel": "related", "memory_id": mid, "record_id": target}]
    taken = alice.post(f"/v1/memories/{mid}/records", {"type": "fact", "content": "c", "references": both})
    assert taken.status_code == 201, taken.text
    assert [{k: r[k] for k in ("rel", "memory_id", "record_id")} for r in taken.json()["references"]] == both


@pytest.mark.parametrize(("body", "field"), [
    ('{"type": "fact", "content": "first", "content": "last"}', "content"),
    ('{"type": "fact", "content": "c", "attributes": {"owner": "alice", "owner": "mallory"}}', "attributes"),
    ('{"type": "fact", "content": "c", "attributes": {"a": [{"b": {"k": 1, "k": 2}}]}}', "attributes.a[0].b"),
], ids=["top level", "in attributes", "deep in attributes"])
def test_a_key_twice_in_one_json_object_is_refused_and_nothing_is_written(
    alice: Client, memory: dict[str, Any], body: str, field: str
) -> None:
    """`{"owner": "alice", "owner": "mallory"}` was kept as mallory (the last wins): a parser in front of
    this one (a gateway, a WAF, an audit log) may read alice. Refused wherever JSON is parsed, naming the key."""
    mid = memory["id"]
    before = snapshot_of(alice, mid)
    answer = send(alice, "POST", f"/v1/memories/{mid}/records", body)
    _refused_naming(answer, field)
    assert "twice" in answer.json()["error"]["message"]
    assert snapshot_of(alice, mid) == before
    # The same key in two objects is two keys, and taken.
    taken = send(alice, "POST", f"/v1/memories/{mid}/records",
                 '{"type": "fact", "content": "c", "attributes": {"k": {"k": 1}, "j": [{"k": 2}, {"k": 3}]}}')
    assert taken.status_code == 201, taken.text


def test_a_key_twice_is_refused_in_a_query_parameter_and_over_mcp(
    alice: Client, make_client: ClientFactory, memory: dict[str, Any]
) -> None:
    mid = memory["id"]
    twice = '{"field": "attributes.account", "op": "eq", "value": "acme", "value": "x"}'
    listed = alice.get(f"/v1/memories/{mid}/records", filters=twice)
    _refused_naming(listed, "filters")
    alice.attach("hostile_keys", mid)
    harness = make_client("harness:hostile_keys")
    before = snapshot_of(alice, mid)
    answer = _mcp_call(harness, '{"memory_id": "' + mid + '", "type": "fact", "content": "a", "content": "b"}')
    assert answer.status_code == 200, answer.text
    error = answer.json()["error"]
    assert (answer.json()["id"], error["code"], error["data"]["code"]) == (7, -32602, "memory_invalid")
    assert "params.arguments" in error["message"]
    assert snapshot_of(alice, mid) == before
