"""Records through the API (§4, §5, §5.3): remember, list, get, revise, forget, history, references,
snapshots and as_of, over real HTTP through the local gateway on moto."""

from __future__ import annotations

import json
import re
import secrets
import time
from datetime import datetime
from itertools import pairwise
from typing import Any

import pytest
import requests

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws

CORE_TYPES = ("episode", "fact", "note", "procedure", "link")
RECORD_ID = re.compile(r"^hrec_[0-9a-f]{32}$")
SNAPSHOT_ID = re.compile(r"^hsnp_[0-9a-f]{32}$")
# Record times are RFC 3339 in UTC with milliseconds.
INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
MISSING_RECORD = "hrec_" + "0" * 32


# -- helpers -----------------------------------------------------------------------------------


def records_path(memory_id: str, record_id: str | None = None) -> str:
    path = f"/v1/memories/{memory_id}/records"
    return f"{path}/{record_id}" if record_id else path


def listing(client: Client, memory_id: str, **params: Any) -> dict[str, Any]:
    if isinstance(params.get("filters"), (dict, list)):
        params["filters"] = json.dumps(params["filters"])
    answer = client.get(records_path(memory_id), **params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "list"
    return body


def listed_ids(client: Client, memory_id: str, **params: Any) -> set[str]:
    body = listing(client, memory_id, limit=100, **params)
    assert body["next_cursor"] is None
    ids = [r["id"] for r in body["data"]]
    assert len(ids) == len(set(ids)), "a listing returned a record twice"
    return set(ids)


def every_page(client: Client, memory_id: str, limit: int, **params: Any) -> list[list[dict[str, Any]]]:
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        body = listing(client, memory_id, limit=limit, cursor=cursor, **params)
        pages.append(body["data"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 50, "pagination does not end"


def revise(client: Client, memory_id: str, record_id: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.patch(records_path(memory_id, record_id), body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def forget(client: Client, memory_id: str, record_id: str) -> dict[str, Any]:
    answer = client.delete(records_path(memory_id, record_id))
    assert answer.status_code == 200, answer.text
    return answer.json()


def get_record(client: Client, memory_id: str, record_id: str, **params: Any) -> dict[str, Any]:
    """The record a get answers, without where the reader can go from its memory (§6.1: `children`
    always, `parent` where there is one the caller may read; tests/integration/test_contract_gaps.py)."""
    answer = client.get(records_path(memory_id, record_id), **params)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert isinstance(got.pop("children"), list)
    got.pop("parent", None)
    return dict(got)


def history(client: Client, memory_id: str, record_id: str) -> list[dict[str, Any]]:
    answer = client.get(records_path(memory_id, record_id) + "/history", limit=100)
    assert answer.status_code == 200, answer.text
    assert answer.json()["next_cursor"] is None
    return answer.json()["data"]


def record_count(client: Client, memory_id: str) -> int:
    answer = client.get(f"/v1/memories/{memory_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()["records"]["count"]


def _epoch_ms(instant: str) -> int:
    return round(datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp() * 1000)


def wait_past(instant: str) -> None:
    """Let the clock (the server runs in this process, on this clock) pass `instant`, so that the next
    write is stamped strictly later. Times have millisecond resolution: this waits at most ~1 ms."""
    target = _epoch_ms(instant)
    while time.time_ns() // 1_000_000 <= target:
        time.sleep(0.0005)


def filtered(client: Client, memory_id: str, flt: Any, **params: Any) -> set[str]:
    return listed_ids(client, memory_id, filters=json.dumps(flt), **params)


# -- remember ----------------------------------------------------------------------------------


@pytest.mark.parametrize("record_type", CORE_TYPES)
def test_remember_each_core_type(alice: Client, record_type: str) -> None:
    memory = alice.create_memory("Sales")
    answer = alice.post(
        records_path(memory["id"]),
        {"type": record_type, "content": f"a {record_type}", "attributes": {"account": "acme", "n": 3}},
    )
    assert answer.status_code == 201, answer.text
    record = answer.json()
    assert RECORD_ID.match(record["id"])
    assert record["object"] == "memory.record"
    assert record["memory_id"] == memory["id"]
    assert record["type"] == record_type
    assert record["content"] == f"a {record_type}"
    assert record["attributes"] == {"account": "acme", "n": 3}
    assert record["version"] == 1
    assert record["status"] == "active"
    assert record["supersedes"] is None
    assert record["time"]["valid_from"] is None
    assert record["time"]["valid_to"] is None
    assert INSTANT.match(record["time"]["written_at"])
    assert record["time"]["invalidated_at"] is None
    assert record["written_by"] == {"kind": "user", "id": "alice"}
    assert record["references"] == []
    assert record["trust"] == "untrusted"
    # What a read returns is exactly what the write answered.
    assert get_record(alice, memory["id"], record["id"]) == record
    assert listing(alice, memory["id"])["data"] == [record]


def test_remember_defaults_attributes_to_empty(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"], "no attributes")
    assert record["attributes"] == {}


@pytest.mark.slow
def test_unknown_type_is_carried_unchanged(alice: Client) -> None:
    memory = alice.create_memory()
    attributes = {
        "starts_at": "2026-10-05T09:00:00Z",
        "attendees": ["alice", {"name": "bob", "optional": True}],
        "nested": {"deep": {"deeper": [1, 2.5, None, False]}},
        "big": 12345678901234567890,
        "unicode": "Zürich ☃",
    }
    record = alice.remember(memory["id"], "Weekly sync with Acme", type="x.acme.meeting", attributes=attributes)
    assert record["type"] == "x.acme.meeting"
    assert record["attributes"] == attributes
    read = get_record(alice, memory["id"], record["id"])
    assert read["type"] == "x.acme.meeting"
    assert read["content"] == "Weekly sync with Acme"
    assert read["attributes"] == attributes
    assert listed_ids(alice, memory["id"], types="x.acme.meeting") == {record["id"]}
    # An extension record is versioned like any other.
    moved = {**attributes, "starts_at": "2026-10-06T09:00:00Z"}
    revised = revise(alice, memory["id"], record["id"], {"attributes": moved})
    assert revised["type"] == "x.acme.meeting"
    assert revised["version"] == 2


@pytest.mark.parametrize("bad_type", ["", "Fact", "x calendar", "x..event", "1fact", "fact!", "x." + "a" * 100])
def test_remember_refuses_a_malformed_type(alice: Client, bad_type: str) -> None:
    memory = alice.create_memory()
    answer = alice.post(records_path(memory["id"]), {"type": bad_type, "content": "c"})
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert listed_ids(alice, memory["id"]) == set()


@pytest.mark.parametrize(
    ("principal", "expected"),
    [
        ("user:alice", {"kind": "user", "id": "alice"}),
        ("harness:chrn_41c0", {"kind": "harness", "id": "chrn_41c0"}),
        ("service:etl", {"kind": "service", "id": "etl"}),
        ("key:k_123", {"kind": "key", "id": "k_123"}),
    ],
)
def test_written_by_is_stamped_from_the_key(
    make_client: ClientFactory, principal: str, expected: dict[str, str]
) -> None:
    writer = make_client(principal)
    memory = writer.create_memory()
    if principal.startswith("harness:"):  # a harness writes where its list lets it, its own memory too
        writer.attach(principal.partition(":")[2], memory["id"])
    record = writer.remember(memory["id"])
    assert record["written_by"] == expected
    assert get_record(writer, memory["id"], record["id"])["written_by"] == expected


def test_written_by_names_the_member_not_the_group(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory()
    alice.grant(memory["id"], "group:sales", "read", "write")
    carol = make_client("user:carol", groups=("group:sales",))
    record = carol.remember(memory["id"], "via the group")
    assert record["written_by"] == {"kind": "user", "id": "carol"}


@pytest.mark.parametrize(
    "extra",
    [
        {"written_by": {"kind": "user", "id": "mallory"}},
        {"trust": "trusted"},
        {"trust": "untrusted"},
        {"id": "hrec_" + "1" * 32},
        {"object": "memory.record"},
        {"memory_id": "hmem_" + "1" * 32},
        {"version": 7},
        {"status": "superseded"},
        {"supersedes": "hrec_" + "1" * 32},
        {"time": {"written_at": "2020-01-01T00:00:00Z"}},
        {"time": {"invalidated_at": "2020-01-01T00:00:00Z"}},
        {"unknown_field": 1},
    ],
)
def test_remember_refuses_fields_the_server_owns(alice: Client, extra: dict[str, Any]) -> None:
    memory = alice.create_memory()
    answer = alice.post(records_path(memory["id"]), {"type": "fact", "content": "c", **extra})
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert listed_ids(alice, memory["id"], include="all") == set()
    assert record_count(alice, memory["id"]) == 0


def test_validity_times_are_normalized_to_utc_milliseconds(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(
        memory["id"],
        time={"valid_from": "2026-09-30T02:00:00+02:00", "valid_to": "2026-12-31T23:59:59.5Z"},
    )
    assert record["time"]["valid_from"] == "2026-09-30T00:00:00.000Z"
    assert record["time"]["valid_to"] == "2026-12-31T23:59:59.500Z"
    assert INSTANT.match(record["time"]["written_at"])
    assert record["time"]["invalidated_at"] is None
    only_from = alice.remember(memory["id"], time={"valid_from": "2026-01-01T00:00:00Z"})
    assert only_from["time"]["valid_from"] == "2026-01-01T00:00:00.000Z"
    assert only_from["time"]["valid_to"] is None


@pytest.mark.parametrize(
    "validity",
    [
        {"valid_from": "2026-10-01T00:00:00Z", "valid_to": "2026-09-30T00:00:00Z"},
        {"valid_from": "yesterday"},
        {"valid_from": "2026-10-01"},
        {"valid_from": "2026-10-01T00:00:00"},
        {"valid_to": "2026-13-01T00:00:00Z"},
    ],
)
def test_bad_validity_is_refused(alice: Client, validity: dict[str, str]) -> None:
    memory = alice.create_memory()
    answer = alice.post(records_path(memory["id"]), {"type": "fact", "content": "c", "time": validity})
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert listed_ids(alice, memory["id"]) == set()


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ({"text": "not a file"}, "memory_invalid"),
        (42, "memory_invalid"),
        (None, "memory_invalid"),
        (["a", "b"], "memory_invalid"),
    ],
)
def test_content_other_than_text(alice: Client, content: Any, code: str) -> None:
    memory = alice.create_memory()
    answer = alice.post(records_path(memory["id"]), {"type": "fact", "content": content})
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == code
    assert listed_ids(alice, memory["id"]) == set()


def test_remember_needs_content_and_type(alice: Client) -> None:
    memory = alice.create_memory()
    for body in ({"type": "fact"}, {"content": "c"}, {}):
        answer = alice.post(records_path(memory["id"]), body)
        assert answer.status_code == 422, answer.text
        assert error_code(answer) == "memory_invalid"


@pytest.mark.slow
def test_remember_needs_write(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    answer = bob.post(records_path(memory["id"]), {"type": "fact", "content": "c"})
    assert answer.status_code == 404
    assert error_code(answer) == "memory_not_found"
    alice.grant(memory["id"], "user:bob", "read")
    answer = bob.post(records_path(memory["id"]), {"type": "fact", "content": "c"})
    assert answer.status_code == 403
    assert error_code(answer) == "memory_forbidden"
    alice.grant(memory["id"], "user:bob", "write")
    assert bob.remember(memory["id"])["written_by"] == {"kind": "user", "id": "bob"}


@pytest.mark.slow
def test_write_privilege_is_inherited_from_an_ancestor(alice: Client, bob: Client) -> None:
    parent = alice.create_memory("Company")
    child = alice.create_memory("Sales", parent_id=parent["id"])
    alice.grant(parent["id"], "user:bob", "read", "write")
    record = bob.remember(child["id"], "inherited")
    assert record["memory_id"] == child["id"]


@pytest.mark.slow
def test_records_count_tracks_remember_and_forget(alice: Client) -> None:
    memory = alice.create_memory()
    assert record_count(alice, memory["id"]) == 0
    first = alice.remember(memory["id"], "one")
    alice.remember(memory["id"], "two")
    third = alice.remember(memory["id"], "three")
    assert record_count(alice, memory["id"]) == 3
    revised = revise(alice, memory["id"], first["id"], {"content": "one, revised"})
    assert record_count(alice, memory["id"]) == 3, "a revision replaces a record, it does not add one"
    forget(alice, memory["id"], revised["id"])
    assert record_count(alice, memory["id"]) == 2
    forget(alice, memory["id"], third["id"])
    assert record_count(alice, memory["id"]) == 1
    # A refused forget changes nothing.
    assert alice.delete(records_path(memory["id"], third["id"])).status_code == 409
    assert record_count(alice, memory["id"]) == 1
    # A refused remember changes nothing.
    assert alice.post(records_path(memory["id"]), {"type": "fact", "content": 1}).status_code == 422
    assert record_count(alice, memory["id"]) == 1


# -- list: types, include ----------------------------------------------------------------------


@pytest.mark.slow
def test_list_by_types(alice: Client) -> None:
    memory = alice.create_memory()
    ids = {t: alice.remember(memory["id"], f"a {t}", type=t)["id"] for t in (*CORE_TYPES, "x.acme.item")}
    assert listed_ids(alice, memory["id"]) == set(ids.values())
    assert listed_ids(alice, memory["id"], types="fact") == {ids["fact"]}
    assert listed_ids(alice, memory["id"], types="fact,note") == {ids["fact"], ids["note"]}
    wanted = {ids["episode"], ids["x.acme.item"], ids["link"]}
    assert listed_ids(alice, memory["id"], types="episode,x.acme.item,link") == wanted
    assert listed_ids(alice, memory["id"], types="x.nothing") == set()


@pytest.mark.slow
def test_list_include_active_and_all(alice: Client) -> None:
    memory = alice.create_memory()
    kept = alice.remember(memory["id"], "kept")
    old = alice.remember(memory["id"], "old")
    new = revise(alice, memory["id"], old["id"], {"content": "new"})
    gone = alice.remember(memory["id"], "gone")
    forget(alice, memory["id"], gone["id"])

    active = listing(alice, memory["id"])["data"]
    assert {r["id"] for r in active} == {kept["id"], new["id"]}
    assert all(r["status"] == "active" for r in active)
    assert listed_ids(alice, memory["id"], include="active") == {kept["id"], new["id"]}

    every = {r["id"]: r for r in listing(alice, memory["id"], include="all", limit=100)["data"]}
    assert set(every) == {kept["id"], old["id"], new["id"], gone["id"]}
    assert every[old["id"]]["status"] == "superseded"
    assert every[gone["id"]]["status"] == "forgotten"
    assert every[new["id"]]["status"] == "active"
    assert every[kept["id"]]["status"] == "active"

    answer = alice.get(records_path(memory["id"]), include="everything")
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"


@pytest.mark.slow
def test_list_is_confined_to_its_memory(alice: Client) -> None:
    one = alice.create_memory("one")
    two = alice.create_memory("two", parent_id=one["id"])
    a = alice.remember(one["id"], "in one")
    b = alice.remember(two["id"], "in two")
    assert listed_ids(alice, one["id"]) == {a["id"]}, "list never reads a descendant"
    assert listed_ids(alice, two["id"]) == {b["id"]}, "list never reads an ancestor"


@pytest.mark.slow
def test_list_needs_read(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    alice.remember(memory["id"])
    answer = bob.get(records_path(memory["id"]))
    assert answer.status_code == 404
    assert error_code(answer) == "memory_not_found"
    alice.grant(memory["id"], "user:bob", "write")
    answer = bob.get(records_path(memory["id"]))
    assert answer.status_code == 403
    assert error_code(answer) == "memory_forbidden"
    alice.grant(memory["id"], "user:bob", "read")
    assert len(listing(bob, memory["id"])["data"]) == 1


# -- list: filters -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalogue(local_aws: LocalAws, gateway: LocalGateway) -> dict[str, Any]:
    """Five records with varied attributes and validity, to filter over. Read-only, so written once
    for the module, by a client of its own tenant."""
    key = "k-" + secrets.token_hex(16)
    tenant = "t-" + secrets.token_hex(6)
    local_aws.add_keys([KeyEntry(key, tenant, "user:alice")])
    alice = Client(gateway.url, key, tenant, "user:alice", requests.Session())
    memory = alice.create_memory("catalogue")
    mid = memory["id"]
    recs = {
        "acme": alice.remember(
            mid, "acme renews in march", type="fact",
            attributes={"account": "acme", "amount": 10, "tier": "gold", "open": True, "owner": {"name": "ann"}},
            time={"valid_from": "2026-01-01T00:00:00Z", "valid_to": "2026-06-30T00:00:00Z"},
        ),
        "globex": alice.remember(
            mid, "globex wants a demo", type="fact",
            attributes={"account": "globex", "amount": 20.5, "tier": "silver", "open": False},
            time={"valid_from": "2026-03-01T00:00:00Z"},
        ),
        "initech": alice.remember(
            mid, "initech pricing", type="note",
            attributes={"account": "initech", "amount": 30, "tier": "gold", "owner": {"name": "bo"}},
        ),
        "string_amount": alice.remember(
            mid, "amount as a string", type="procedure", attributes={"account": "umbrella", "amount": "10"},
        ),
        "bare": alice.remember(mid, "no attributes", type="link"),
    }
    return {"client": alice, "mid": mid, "ids": {k: v["id"] for k, v in recs.items()}}


def _ids(catalogue: dict[str, Any], *names: str) -> set[str]:
    return {catalogue["ids"][n] for n in names}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"field": "attributes.account", "op": "eq", "value": "acme"}, ["acme"]),
        ({"field": "attributes.account", "value": "acme"}, ["acme"]),  # op defaults to eq
        ({"field": "attributes.account", "op": "ne", "value": "acme"}, ["globex", "initech", "string_amount", "bare"]),
        ({"field": "attributes.amount", "op": "eq", "value": 10}, ["acme"]),  # "10" is not 10
        ({"field": "attributes.amount", "op": "eq", "value": "10"}, ["string_amount"]),
        ({"field": "attributes.amount", "op": "eq", "value": 20.5}, ["globex"]),
        ({"field": "attributes.amount", "op": "lt", "value": 20.5}, ["acme"]),
        ({"field": "attributes.amount", "op": "lte", "value": 20.5}, ["acme", "globex"]),
        ({"field": "attributes.amount", "op": "gt", "value": 10}, ["globex", "initech"]),
        ({"field": "attributes.amount", "op": "gte", "value": 10}, ["acme", "globex", "initech"]),
        ({"field": "attributes.amount", "op": "gte", "value": "1"}, ["string_amount"]),
        ({"field": "attributes.tier", "op": "in", "value": ["gold", "bronze"]}, ["acme", "initech"]),
        ({"field": "attributes.tier", "op": "nin", "value": ["gold"]}, ["globex", "string_amount", "bare"]),
        ({"field": "attributes.tier", "op": "in", "value": []}, []),
        ({"field": "attributes.open", "op": "eq", "value": True}, ["acme"]),
        ({"field": "attributes.open", "op": "eq", "value": False}, ["globex"]),
        ({"field": "attributes.open", "op": "exists", "value": True}, ["acme", "globex"]),
        ({"field": "attributes.open", "op": "exists", "value": False}, ["initech", "string_amount", "bare"]),
        ({"field": "attributes.owner.name", "op": "eq", "value": "bo"}, ["initech"]),
        ({"field": "attributes.owner.name", "op": "exists", "value": True}, ["acme", "initech"]),
        ({"field": "type", "op": "eq", "value": "fact"}, ["acme", "globex"]),
        ({"field": "type", "op": "ne", "value": "fact"}, ["initech", "string_amount", "bare"]),
        ({"field": "type", "op": "in", "value": ["note", "link"]}, ["initech", "bare"]),
        ({"field": "type", "op": "nin", "value": ["note", "link"]}, ["acme", "globex", "string_amount"]),
        ({"field": "type", "op": "exists", "value": True}, ["acme", "globex", "initech", "string_amount", "bare"]),
        ({"field": "time.valid_from", "op": "eq", "value": "2026-01-01T00:00:00Z"}, ["acme"]),
        ({"field": "time.valid_from", "op": "eq", "value": "2026-01-01T01:00:00+01:00"}, ["acme"]),
        ({"field": "time.valid_from", "op": "gte", "value": "2026-02-01T00:00:00Z"}, ["globex"]),
        ({"field": "time.valid_from", "op": "gt", "value": "2026-03-01T00:00:00Z"}, []),
        ({"field": "time.valid_from", "op": "lte", "value": "2026-03-01T00:00:00Z"}, ["acme", "globex"]),
        ({"field": "time.valid_from", "op": "lt", "value": "2026-03-01T00:00:00Z"}, ["acme"]),
        ({"field": "time.valid_to", "op": "exists", "value": True}, ["acme"]),
        ({"field": "time.valid_to", "op": "exists", "value": False}, ["globex", "initech", "string_amount", "bare"]),
        ({"field": "time.valid_to", "op": "ne", "value": "2026-06-30T00:00:00Z"},
         ["globex", "initech", "string_amount", "bare"]),
        ({"field": "time.invalidated_at", "op": "exists", "value": True}, []),
        ({"field": "time.written_at", "op": "exists", "value": True},
         ["acme", "globex", "initech", "string_amount", "bare"]),
        ({"and": [{"field": "type", "op": "eq", "value": "fact"},
                  {"field": "attributes.amount", "op": "gt", "value": 15}]}, ["globex"]),
        ({"or": [{"field": "attributes.account", "op": "eq", "value": "acme"},
                 {"field": "type", "op": "eq", "value": "link"}]}, ["acme", "bare"]),
        ({"not": {"field": "attributes.tier", "op": "eq", "value": "gold"}}, ["globex", "string_amount", "bare"]),
        ({"not": {"or": [{"field": "type", "op": "eq", "value": "fact"},
                         {"field": "attributes.account", "op": "exists", "value": False}]}},
         ["initech", "string_amount"]),
        ({"and": [{"or": [{"field": "attributes.tier", "op": "eq", "value": "gold"},
                          {"field": "attributes.tier", "op": "eq", "value": "silver"}]},
                  {"not": {"field": "attributes.open", "op": "eq", "value": True}}]}, ["globex", "initech"]),
        ({"and": [{"field": "attributes.amount", "op": "gte", "value": 10},
                  {"field": "attributes.amount", "op": "lte", "value": 20.5}]}, ["acme", "globex"]),
    ],
)
def test_list_filters(catalogue: dict[str, Any], flt: dict[str, Any], expected: list[str]) -> None:
    assert filtered(catalogue["client"], catalogue["mid"], flt) == _ids(catalogue, *expected)


def test_filters_combine_with_types(catalogue: dict[str, Any]) -> None:
    alice = catalogue["client"]
    flt = {"field": "attributes.tier", "op": "eq", "value": "gold"}
    assert filtered(alice, catalogue["mid"], flt, types="note") == _ids(catalogue, "initech")
    assert filtered(alice, catalogue["mid"], flt, types="fact,note") == _ids(catalogue, "acme", "initech")


@pytest.mark.slow
def test_filter_on_written_at_and_invalidated_at(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    first = alice.remember(mid, "first")
    wait_past(first["time"]["written_at"])
    second = alice.remember(mid, "second")
    cut = second["time"]["written_at"]
    assert first["time"]["written_at"] < cut
    written_before = {"field": "time.written_at", "op": "lt", "value": cut}
    assert filtered(alice, mid, written_before) == {first["id"]}
    assert filtered(alice, mid, {"field": "time.written_at", "op": "gte", "value": cut}) == {second["id"]}
    assert filtered(alice, mid, {"field": "time.written_at", "op": "eq", "value": cut}) == {second["id"]}

    forgotten = forget(alice, mid, first["id"])
    closed = {"field": "time.invalidated_at", "op": "exists", "value": True}
    assert filtered(alice, mid, closed) == set(), "an active listing holds nothing closed"
    assert filtered(alice, mid, closed, include="all") == {first["id"]}
    at = {"field": "time.invalidated_at", "op": "eq", "value": forgotten["time"]["invalidated_at"]}
    assert filtered(alice, mid, at, include="all") == {first["id"]}
    assert filtered(alice, mid, {"field": "type", "op": "eq", "value": "fact"}, include="all") == {
        first["id"], second["id"]
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "{\"field\": ",
        json.dumps([{"field": "type", "op": "eq", "value": "fact"}]),
        json.dumps("type"),
        json.dumps({"field": "content", "op": "eq", "value": "x"}),
        json.dumps({"field": "attributes.", "op": "eq", "value": "x"}),
        json.dumps({"field": "attributes..a", "op": "eq", "value": "x"}),
        json.dumps({"field": "time.created", "op": "eq", "value": "2026-01-01T00:00:00Z"}),
        json.dumps({"field": "status", "op": "eq", "value": "active"}),
        json.dumps({"field": 3, "op": "eq", "value": "x"}),
        json.dumps({"field": "type", "op": "like", "value": "f%"}),
        json.dumps({"field": "type", "op": "eq"}),
        json.dumps({"field": "type", "op": "in", "value": "fact"}),
        json.dumps({"field": "type", "op": "nin", "value": {"a": 1}}),
        json.dumps({"field": "type", "op": "in", "value": ["x"] * 101}),
        json.dumps({"field": "type", "op": "in", "value": [["nested"]]}),
        json.dumps({"field": "type", "op": "exists", "value": "yes"}),
        json.dumps({"field": "type", "op": "eq", "value": {"a": 1}}),
        json.dumps({"field": "type", "op": "eq", "value": [1]}),
        json.dumps({"field": "type", "op": "eq", "value": "fact", "extra": 1}),
        json.dumps({"field": "time.valid_from", "op": "gte", "value": "last week"}),
        json.dumps({"field": "time.valid_from", "op": "gte", "value": 1700000000}),
        json.dumps({"and": []}),
        json.dumps({"or": {"field": "type", "value": "fact"}}),
        json.dumps({"not": [{"field": "type", "value": "fact"}]}),
        json.dumps({"and": [{"field": "type", "value": "fact"}], "or": [{"field": "type", "value": "note"}]}),
        json.dumps({"and": [{"field": "type", "value": "fact"}], "field": "type"}),
        json.dumps({"and": [{"field": "type", "op": "eq", "value": "fact"}] * 64}),
    ],
)
def test_bad_filters_are_refused(alice: Client, raw: str) -> None:
    memory = alice.create_memory()
    alice.remember(memory["id"])
    answer = alice.get(records_path(memory["id"]), filters=raw)
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"


def test_filter_node_limit_is_inclusive(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    # 1 combination + 63 conditions = 64 nodes: the most a filter may hold.
    flt = {"and": [{"field": "type", "op": "eq", "value": "fact"}] * 63}
    assert filtered(alice, memory["id"], flt) == {record["id"]}


# -- list: pagination --------------------------------------------------------------------------


@pytest.mark.slow
def test_pagination_crosses_pages_without_duplicates_or_gaps(alice: Client) -> None:
    memory = alice.create_memory()
    written = {alice.remember(memory["id"], f"record {i}", attributes={"i": i})["id"] for i in range(11)}
    pages = every_page(alice, memory["id"], limit=3)
    assert [len(p) for p in pages] == [3, 3, 3, 2]
    seen = [r["id"] for page in pages for r in page]
    assert len(seen) == len(set(seen)), "a record appeared on two pages"
    assert set(seen) == written, "a record was skipped"
    # Paging reads the same order as one big page.
    whole = [r["id"] for r in listing(alice, memory["id"], limit=100)["data"]]
    assert seen == whole


@pytest.mark.slow
def test_pagination_ends_without_an_empty_page(alice: Client) -> None:
    memory = alice.create_memory()
    for i in range(6):
        alice.remember(memory["id"], f"r{i}")
    pages = every_page(alice, memory["id"], limit=3)
    assert [len(p) for p in pages] == [3, 3]
    assert [len(p) for p in every_page(alice, memory["id"], limit=6)] == [6]
    assert [len(p) for p in every_page(alice, memory["id"], limit=100)] == [6]


@pytest.mark.slow
def test_default_and_maximum_page_sizes(alice: Client) -> None:
    memory = alice.create_memory()
    for i in range(21):
        alice.remember(memory["id"], f"r{i}")
    first = listing(alice, memory["id"])
    assert len(first["data"]) == 20
    assert first["next_cursor"] is not None
    rest = listing(alice, memory["id"], cursor=first["next_cursor"])
    assert len(rest["data"]) == 1
    assert rest["next_cursor"] is None
    assert len(listing(alice, memory["id"], limit=100)["data"]) == 21
    assert len(listing(alice, memory["id"], limit=1)["data"]) == 1


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["0", "-1", "101", "abc", "1.5"])
def test_bad_limit_is_refused(alice: Client, limit: str) -> None:
    memory = alice.create_memory()
    answer = alice.get(records_path(memory["id"]), limit=limit)
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"


@pytest.mark.slow
def test_pagination_with_filters_and_types(alice: Client) -> None:
    memory = alice.create_memory()
    evens = set()
    for i in range(12):
        kind = "fact" if i % 3 else "note"
        record = alice.remember(memory["id"], f"r{i}", type=kind, attributes={"even": i % 2 == 0})
        if i % 2 == 0 and i % 3:
            evens.add(record["id"])
    flt = json.dumps({"field": "attributes.even", "op": "eq", "value": True})
    pages = every_page(alice, memory["id"], limit=2, filters=flt, types="fact")
    seen = [r["id"] for p in pages for r in p]
    assert len(seen) == len(set(seen))
    assert set(seen) == evens
    assert len(evens) == 4  # 2, 4, 8, 10
    assert [len(p) for p in pages] == [2, 2]


@pytest.mark.slow
def test_pagination_of_include_all(alice: Client) -> None:
    memory = alice.create_memory()
    every_id = set()
    for i in range(4):
        record = alice.remember(memory["id"], f"r{i}")
        every_id.add(record["id"])
        revised = revise(alice, memory["id"], record["id"], {"content": f"r{i} again"})
        every_id.add(revised["id"])
        if i % 2:
            forget(alice, memory["id"], revised["id"])
    pages = every_page(alice, memory["id"], limit=3, include="all")
    seen = [r["id"] for p in pages for r in p]
    assert len(seen) == len(set(seen)) == 8
    assert set(seen) == every_id


@pytest.mark.slow
def test_records_written_between_pages_cause_no_duplicates(alice: Client) -> None:
    memory = alice.create_memory()
    before = {alice.remember(memory["id"], f"r{i}")["id"] for i in range(6)}
    first = listing(alice, memory["id"], limit=3)
    alice.remember(memory["id"], "written while paging")
    rest: list[str] = []
    cursor = first["next_cursor"]
    while cursor:
        body = listing(alice, memory["id"], limit=3, cursor=cursor)
        rest.extend(r["id"] for r in body["data"])
        cursor = body["next_cursor"]
    seen = [r["id"] for r in first["data"]] + rest
    assert len(seen) == len(set(seen))
    assert before <= set(seen), "a record that existed throughout was skipped"


@pytest.mark.parametrize("cursor", ["garbage", "eyJrIjoieCJ9", "%%%", "eyJrIjoicmVjb3JkczphY3RpdmU6IiwicCI6NX0"])
def test_bad_cursor_is_refused(alice: Client, cursor: str) -> None:
    memory = alice.create_memory()
    alice.remember(memory["id"])
    answer = alice.get(records_path(memory["id"]), cursor=cursor)
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"


@pytest.mark.slow
def test_cursor_of_another_listing_is_refused(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    for i in range(3):
        record = revise(alice, memory["id"], record["id"], {"content": f"v{i + 2}"})
        alice.remember(memory["id"], f"other {i}")
    history_cursor = alice.get(records_path(memory["id"], record["id"]) + "/history", limit=1).json()["next_cursor"]
    assert history_cursor
    answer = alice.get(records_path(memory["id"]), cursor=history_cursor)
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"
    # A cursor of the active listing does not resume include=all.
    active_cursor = listing(alice, memory["id"], limit=1)["next_cursor"]
    assert active_cursor
    answer = alice.get(records_path(memory["id"]), cursor=active_cursor, include="all")
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"


# -- get ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_get_unknown_record(alice: Client) -> None:
    memory = alice.create_memory()
    for rid in (MISSING_RECORD, "hrec_nothex", "not-an-id", "hmem_" + "0" * 32):
        answer = alice.get(records_path(memory["id"], rid))
        assert answer.status_code == 404, rid
        assert error_code(answer) == "memory_record_not_found"


@pytest.mark.slow
def test_get_through_another_memory_is_not_found(alice: Client) -> None:
    one = alice.create_memory("one")
    two = alice.create_memory("two")
    record = alice.remember(one["id"])
    for method, body in (("GET", None), ("PATCH", {"content": "x"}), ("DELETE", None)):
        answer = alice.request(method, records_path(two["id"], record["id"]), body)
        assert answer.status_code == 404, method
        assert error_code(answer) == "memory_record_not_found"
    answer = alice.get(records_path(two["id"], record["id"]) + "/history")
    assert answer.status_code == 404
    assert error_code(answer) == "memory_record_not_found"
    # Nothing changed in the record's own memory.
    assert get_record(alice, one["id"], record["id"]) == record


@pytest.mark.slow
def test_get_in_an_invisible_memory_is_memory_not_found(alice: Client, bob: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    for reader in (bob, make_client("user:alice", tenant_name="other-" + alice.tenant)):
        answer = reader.get(records_path(memory["id"], record["id"]))
        assert answer.status_code == 404
        assert error_code(answer) == "memory_not_found"
    answer = alice.get(records_path("hmem_" + "f" * 32, record["id"]))
    assert answer.status_code == 404
    assert error_code(answer) == "memory_not_found"


@pytest.mark.slow
def test_get_by_a_superseded_id_returns_that_version(alice: Client) -> None:
    memory = alice.create_memory()
    v1 = alice.remember(memory["id"], "v1", attributes={"k": 1})
    v2 = revise(alice, memory["id"], v1["id"], {"content": "v2"})
    old = get_record(alice, memory["id"], v1["id"])
    assert old["id"] == v1["id"]
    assert old["content"] == "v1"
    assert old["version"] == 1
    assert old["status"] == "superseded"
    assert old["time"]["invalidated_at"] == v2["time"]["written_at"]
    assert old["time"]["written_at"] == v1["time"]["written_at"]
    current = get_record(alice, memory["id"], v2["id"])
    assert current == v2


@pytest.mark.slow
def test_get_as_of_answers_the_named_version_as_it_stood_then(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    v1 = alice.remember(mid, "v1")
    t1 = v1["time"]["written_at"]
    wait_past(t1)
    v2 = revise(alice, mid, v1["id"], {"content": "v2"})
    t2 = v2["time"]["written_at"]
    wait_past(t2)
    forgotten = forget(alice, mid, v2["id"])
    t3 = forgotten["time"]["invalidated_at"]
    assert t1 < t2 < t3

    # Each id answers its own version, with the status it had at the instant: open then, or closed
    # by then (a superseded or forgotten version is history, read by its id).
    at1 = get_record(alice, mid, v1["id"], as_of=t1)
    assert (at1["id"], at1["content"], at1["status"]) == (v1["id"], "v1", "active")
    assert at1["time"]["invalidated_at"] is None
    for instant in (t2, t3):
        later = get_record(alice, mid, v1["id"], as_of=instant)
        assert (later["id"], later["content"], later["status"]) == (v1["id"], "v1", "superseded"), instant
        assert later["time"]["invalidated_at"] == t2
    at2 = get_record(alice, mid, v2["id"], as_of=t2)
    assert (at2["id"], at2["content"], at2["status"]) == (v2["id"], "v2", "active")
    assert at2["time"]["invalidated_at"] is None
    # Forgotten by t3: out of every read but history's (§5.2), which include=all asks for.
    assert error_code(alice.get(records_path(mid, v2["id"]), as_of=t3)) == "memory_record_not_found"
    assert get_record(alice, mid, v2["id"], as_of=t3, include="all") == forgotten

    # as_of now is the read without as_of.
    wait_past(t3)
    now = datetime.now().astimezone().isoformat(timespec="milliseconds")
    for version in (v1, v2):
        assert get_record(alice, mid, version["id"], as_of=now, include="all") == get_record(
            alice, mid, version["id"], include="all")


@pytest.mark.slow
def test_get_as_of_a_version_written_later_is_not_found(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    v1 = alice.remember(mid, "v1")
    t1 = v1["time"]["written_at"]
    wait_past(t1)
    snapshot = alice.post(f"/v1/memories/{mid}/snapshots", {"name": "before-v2"})
    assert snapshot.status_code == 201, snapshot.text
    wait_past(snapshot.json()["time"])
    v2 = revise(alice, mid, v1["id"], {"content": "v2"})
    # v2 did not exist yet, at t1 or at the snapshot: not found, never v1 answered under v2's id.
    for as_of in (t1, "before-v2"):
        answer = alice.get(records_path(mid, v2["id"]), as_of=as_of)
        assert answer.status_code == 404, (as_of, answer.text)
        assert error_code(answer) == "memory_record_not_found"
        then = get_record(alice, mid, v1["id"], as_of=as_of)
        assert (then["id"], then["content"], then["status"]) == (v1["id"], "v1", "active"), as_of
    assert get_record(alice, mid, v1["id"])["status"] == "superseded"
    # Before anything was written, neither version existed.
    for version in (v1, v2):
        answer = alice.get(records_path(mid, version["id"]), as_of=_before(t1))
        assert answer.status_code == 404, version["id"]
        assert error_code(answer) == "memory_record_not_found"


@pytest.mark.slow
def test_a_forgotten_record_leaves_get_by_id_unless_history_is_asked_for(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    v1 = alice.remember(mid, "v1")
    v2 = revise(alice, mid, v1["id"], {"content": "v2"})
    assert get_record(alice, mid, v1["id"])["status"] == "superseded"  # a live record's earlier version
    gone = forget(alice, mid, v2["id"])
    # §5.2: forgotten "leaves every read that does not ask for history", every version of it.
    for version in (v1, v2):
        answer = alice.get(records_path(mid, version["id"]))
        assert (answer.status_code, error_code(answer)) == (404, "memory_record_not_found")
        assert "v1" not in answer.text
        assert "v2" not in answer.text
    assert get_record(alice, mid, v2["id"], include="all") == gone
    assert get_record(alice, mid, v1["id"], include="all")["status"] == "superseded"
    # Forget takes the record out of the reads that search the memory.
    assert listed_ids(alice, mid) == set()
    assert listed_ids(alice, mid, include="all") == {v1["id"], v2["id"]}


def _before(instant: str) -> str:
    ms = _epoch_ms(instant) - 1
    moment = datetime.fromtimestamp(ms / 1000).astimezone()
    return moment.isoformat(timespec="milliseconds")


@pytest.mark.slow
def test_get_as_of_a_bad_instant(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    for as_of in ("2026-99-01T00:00:00Z", "no-such-snapshot", "2026-10-01"):
        answer = alice.get(records_path(memory["id"], record["id"]), as_of=as_of)
        assert answer.status_code == 422, as_of
        assert error_code(answer) == "memory_invalid"


# -- revise ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_revise_appends_a_version(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    alice.grant(mid, "user:bob", "read", "write")
    v1 = alice.remember(
        mid, "Acme renews in March", attributes={"account": "acme"},
        time={"valid_from": "2026-01-01T00:00:00Z"},
    )
    v2 = revise(bob, mid, v1["id"], {"content": "Acme renews in April"})
    assert RECORD_ID.match(v2["id"])
    assert v2["id"] != v1["id"]
    assert v2["supersedes"] == v1["id"]
    assert v2["version"] == 2
    assert v2["status"] == "active"
    assert v2["type"] == "fact"
    assert v2["content"] == "Acme renews in April"
    assert v2["attributes"] == {"account": "acme"}, "fields not sent carry over"
    assert v2["time"]["valid_from"] == "2026-01-01T00:00:00.000Z"
    assert v2["time"]["invalidated_at"] is None
    assert v2["time"]["written_at"] >= v1["time"]["written_at"]
    assert v2["written_by"] == {"kind": "user", "id": "bob"}
    assert v2["trust"] == "untrusted"

    old = get_record(alice, mid, v1["id"])
    assert old["status"] == "superseded"
    assert old["time"]["invalidated_at"] == v2["time"]["written_at"]
    assert old["content"] == "Acme renews in March", "nothing is overwritten"
    assert old["written_by"] == {"kind": "user", "id": "alice"}

    v3 = revise(alice, mid, v2["id"], {"attributes": {"account": "acme", "stage": "won"}, "type": "fact"})
    assert v3["version"] == 3
    assert v3["supersedes"] == v2["id"]
    assert v3["content"] == "Acme renews in April"
    assert v3["attributes"] == {"account": "acme", "stage": "won"}
    assert listed_ids(alice, mid) == {v3["id"]}
    assert listed_ids(alice, mid, include="all") == {v1["id"], v2["id"], v3["id"]}


@pytest.mark.slow
def test_revise_validity_and_references(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    target = alice.remember(mid, "target")
    v1 = alice.remember(
        mid, "c", time={"valid_from": "2026-01-01T00:00:00Z"},
        references=[{"rel": "derived_from", "memory_id": mid, "record_id": target["id"]}],
    )
    v2 = revise(alice, mid, v1["id"], {"time": {"valid_to": "2026-02-01T00:00:00Z"}})
    assert v2["time"]["valid_from"] == "2026-01-01T00:00:00.000Z"
    assert v2["time"]["valid_to"] == "2026-02-01T00:00:00.000Z"
    assert v2["references"] == [
        {"rel": "derived_from", "memory_id": mid, "record_id": target["id"], "available": True}
    ]
    v3 = revise(alice, mid, v2["id"], {"time": {"valid_to": None}, "references": []})
    assert v3["time"]["valid_to"] is None
    assert v3["time"]["valid_from"] == "2026-01-01T00:00:00.000Z"
    assert v3["references"] == []
    answer = alice.patch(records_path(mid, v3["id"]), {"time": {"valid_to": "2025-01-01T00:00:00Z"}})
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"type": "note"}, "memory_invalid"),
        ({"content": None}, "memory_invalid"),
        ({"attributes": None}, "memory_invalid"),
        ({"content": 5}, "memory_invalid"),
        ({"written_by": {"kind": "user", "id": "mallory"}}, "memory_invalid"),
        ({"trust": "trusted"}, "memory_invalid"),
        ({"version": 9}, "memory_invalid"),
        ({"supersedes": "hrec_" + "1" * 32}, "memory_invalid"),
        ({"status": "active"}, "memory_invalid"),
        ({"time": {"written_at": "2020-01-01T00:00:00Z"}}, "memory_invalid"),
        ({"time": {"invalidated_at": "2020-01-01T00:00:00Z"}}, "memory_invalid"),
        ({"references": [{"memory_id": "nope", "record_id": "nope"}]}, "memory_invalid"),
    ],
)
def test_revise_refuses_bad_changes(alice: Client, body: dict[str, Any], code: str) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    answer = alice.patch(records_path(memory["id"], record["id"]), body)
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == code
    assert history(alice, memory["id"], record["id"]) == [record], "a refused revision writes nothing"


@pytest.mark.slow
def test_revise_unknown_record(alice: Client) -> None:
    memory = alice.create_memory()
    answer = alice.patch(records_path(memory["id"], MISSING_RECORD), {"content": "x"})
    assert answer.status_code == 404
    assert error_code(answer) == "memory_record_not_found"


@pytest.mark.slow
def test_revise_and_forget_need_write(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    for method, body in (("PATCH", {"content": "x"}), ("DELETE", None)):
        answer = bob.request(method, records_path(memory["id"], record["id"]), body)
        assert answer.status_code == 404, method
        assert error_code(answer) == "memory_not_found"
    alice.grant(memory["id"], "user:bob", "read")
    for method, body in (("PATCH", {"content": "x"}), ("DELETE", None)):
        answer = bob.request(method, records_path(memory["id"], record["id"]), body)
        assert answer.status_code == 403, method
        assert error_code(answer) == "memory_forbidden"
    assert history(alice, memory["id"], record["id"]) == [record]


@pytest.mark.slow
def test_episodes_are_append_only(alice: Client) -> None:
    memory = alice.create_memory()
    episode = alice.remember(memory["id"], "user: hi / agent: hello", type="episode")
    for body in ({"content": "rewritten"}, {"attributes": {"a": 1}}, {}):
        answer = alice.patch(records_path(memory["id"], episode["id"]), body)
        assert answer.status_code == 422, body
        assert error_code(answer) == "memory_invalid"
    assert history(alice, memory["id"], episode["id"]) == [episode]
    assert get_record(alice, memory["id"], episode["id"]) == episode
    # Appending is how an episode grows.
    second = alice.remember(memory["id"], "user: bye", type="episode")
    assert listed_ids(alice, memory["id"], types="episode") == {episode["id"], second["id"]}


@pytest.mark.slow
def test_revising_a_superseded_version_is_a_conflict(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    v1 = alice.remember(mid, "v1")
    v2 = revise(alice, mid, v1["id"], {"content": "v2"})
    answer = alice.patch(records_path(mid, v1["id"]), {"content": "stale edit"})
    assert answer.status_code == 409, answer.text
    assert error_code(answer) == "memory_conflict"
    assert answer.json()["error"]["current_record_id"] == v2["id"]
    v3 = revise(alice, mid, v2["id"], {"content": "v3"})
    for stale in (v1, v2):
        for method, body in (("PATCH", {"content": "x"}), ("DELETE", None)):
            answer = alice.request(method, records_path(mid, stale["id"]), body)
            assert answer.status_code == 409, (method, stale["version"])
            assert error_code(answer) == "memory_conflict"
            assert answer.json()["error"]["current_record_id"] == v3["id"]
    assert [v["id"] for v in history(alice, mid, v1["id"])] == [v1["id"], v2["id"], v3["id"]]
    assert listed_ids(alice, mid) == {v3["id"]}


@pytest.mark.slow
def test_changing_a_forgotten_record_is_a_conflict(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    v1 = alice.remember(mid, "v1")
    v2 = revise(alice, mid, v1["id"], {"content": "v2"})
    gone = forget(alice, mid, v2["id"])
    for rid in (v1["id"], v2["id"]):
        for method, body in (("PATCH", {"content": "back"}), ("DELETE", None)):
            answer = alice.request(method, records_path(mid, rid), body)
            assert answer.status_code == 409, (method, rid)
            assert error_code(answer) == "memory_conflict"
            assert answer.json()["error"]["current_record_id"] == v2["id"]
    assert get_record(alice, mid, v2["id"], include="all") == gone
    assert len(history(alice, mid, v1["id"])) == 2


# -- forget ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_forget_closes_and_keeps_the_trace(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    alice.grant(mid, "user:bob", "read", "write")
    record = alice.remember(mid, "to forget", attributes={"k": "v"})
    other = alice.remember(mid, "to keep")
    gone = forget(bob, mid, record["id"])
    assert gone["id"] == record["id"], "forget closes the version in place; it appends nothing"
    assert gone["status"] == "forgotten"
    assert INSTANT.match(gone["time"]["invalidated_at"])
    assert gone["time"]["invalidated_at"] >= record["time"]["written_at"]
    assert gone["content"] == "to forget"
    assert gone["version"] == 1
    assert gone["written_by"] == {"kind": "user", "id": "alice"}, "the writer of the version is unchanged"

    assert listed_ids(alice, mid) == {other["id"]}
    assert listed_ids(alice, mid, include="all") == {record["id"], other["id"]}
    assert get_record(alice, mid, record["id"], include="all") == gone, "history still names the version"
    assert history(alice, mid, record["id"]) == [gone]
    assert record_count(alice, mid) == 1


def test_forget_unknown_record(alice: Client) -> None:
    memory = alice.create_memory()
    answer = alice.delete(records_path(memory["id"], MISSING_RECORD))
    assert answer.status_code == 404
    assert error_code(answer) == "memory_record_not_found"


# -- history -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_history_is_the_chain_oldest_first_with_writers(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    alice.grant(mid, "user:bob", "read", "write")
    alice.attach("chrn_1", mid)  # a harness writes where its list lets it
    writers = [alice, make_client("user:bob"), make_client("harness:chrn_1")]
    versions = [alice.remember(mid, "v1")]
    for n in range(2, 8):
        versions.append(revise(writers[(n - 1) % 3], mid, versions[-1]["id"], {"content": f"v{n}"}))
    versions.append(forget(alice, mid, versions[-1]["id"]))

    for named in (versions[0]["id"], versions[3]["id"], versions[-1]["id"]):
        chain = history(alice, mid, named)
        assert [v["version"] for v in chain] == list(range(1, 8))
        assert [v["content"] for v in chain] == [f"v{n}" for n in range(1, 8)]
        assert chain[0]["supersedes"] is None
        for before, after in pairwise(chain):
            assert after["supersedes"] == before["id"]
            assert before["status"] == "superseded"
            assert before["time"]["invalidated_at"] == after["time"]["written_at"]
        assert chain[-1]["status"] == "forgotten"
        assert [v["written_by"] for v in chain] == [
            {"kind": "user", "id": "alice"},
            {"kind": "user", "id": "bob"},
            {"kind": "harness", "id": "chrn_1"},
            {"kind": "user", "id": "alice"},
            {"kind": "user", "id": "bob"},
            {"kind": "harness", "id": "chrn_1"},
            {"kind": "user", "id": "alice"},
        ]
        assert all(v["trust"] == "untrusted" for v in chain)


@pytest.mark.slow
def test_history_pagination(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    record = alice.remember(mid, "v1")
    for n in range(2, 8):
        record = revise(alice, mid, record["id"], {"content": f"v{n}"})
    seen: list[int] = []
    cursor = None
    sizes = []
    while True:
        answer = alice.get(records_path(mid, record["id"]) + "/history", limit=3, cursor=cursor)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["object"] == "list"
        sizes.append(len(body["data"]))
        seen.extend(v["version"] for v in body["data"])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sizes == [3, 3, 1]
    assert seen == list(range(1, 8))
    for limit in ("0", "101"):
        answer = alice.get(records_path(mid, record["id"]) + "/history", limit=limit)
        assert answer.status_code == 422
        assert error_code(answer) == "memory_invalid"
    answer = alice.get(records_path(mid, record["id"]) + "/history", cursor="bogus")
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"


@pytest.mark.slow
def test_history_needs_read(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    path = records_path(memory["id"], record["id"]) + "/history"
    answer = bob.get(path)
    assert answer.status_code == 404
    assert error_code(answer) == "memory_not_found"
    alice.grant(memory["id"], "user:bob", "write")
    answer = bob.get(path)
    assert answer.status_code == 403
    assert error_code(answer) == "memory_forbidden"
    answer = alice.get(records_path(memory["id"], MISSING_RECORD) + "/history")
    assert answer.status_code == 404
    assert error_code(answer) == "memory_record_not_found"


# -- references --------------------------------------------------------------------------------


@pytest.mark.slow
def test_references_are_resolved_with_the_readers_privileges(alice: Client, bob: Client) -> None:
    private = alice.create_memory("alice's own", restricted=True)
    shared = alice.create_memory("team")
    alice.grant(shared["id"], "user:bob", "read")
    source = alice.remember(private["id"], "what alice was told")
    sibling = alice.remember(shared["id"], "a shared record")
    promoted = alice.remember(
        shared["id"],
        "promoted from alice's memory",
        references=[
            {"rel": "derived_from", "memory_id": private["id"], "record_id": source["id"]},
            {"rel": "see_also", "memory_id": shared["id"], "record_id": sibling["id"]},
            {"memory_id": shared["id"], "record_id": MISSING_RECORD},
        ],
    )
    as_alice = [
        {"rel": "derived_from", "memory_id": private["id"], "record_id": source["id"], "available": True},
        {"rel": "see_also", "memory_id": shared["id"], "record_id": sibling["id"], "available": True},
        {"memory_id": shared["id"], "record_id": MISSING_RECORD, "available": False},
    ]
    as_bob = [
        {"memory_id": private["id"], "record_id": source["id"], "available": False},
        {"rel": "see_also", "memory_id": shared["id"], "record_id": sibling["id"], "available": True},
        {"memory_id": shared["id"], "record_id": MISSING_RECORD, "available": False},
    ]
    assert promoted["references"] == as_alice
    assert get_record(alice, shared["id"], promoted["id"])["references"] == as_alice
    assert get_record(bob, shared["id"], promoted["id"])["references"] == as_bob
    by_id = {r["id"]: r for r in listing(bob, shared["id"])["data"]}
    assert by_id[promoted["id"]]["references"] == as_bob
    assert history(bob, shared["id"], promoted["id"])[0]["references"] == as_bob
    # A reference to a forgotten record still names a record that exists.
    forget(alice, shared["id"], sibling["id"])
    assert get_record(bob, shared["id"], promoted["id"])["references"][1]["available"] is True

    # Once bob may read the source, he can follow it.
    alice.grant(private["id"], "user:bob", "read")
    assert get_record(bob, shared["id"], promoted["id"])["references"][0] == as_alice[0]


@pytest.mark.slow
def test_a_reference_with_write_only_on_its_target_is_unavailable(alice: Client, bob: Client) -> None:
    target_memory = alice.create_memory("write only for bob")
    home = alice.create_memory("home")
    alice.grant(target_memory["id"], "user:bob", "write")
    alice.grant(home["id"], "user:bob", "read")
    target = alice.remember(target_memory["id"])
    record = alice.remember(
        home["id"], references=[{"rel": "about", "memory_id": target_memory["id"], "record_id": target["id"]}]
    )
    assert get_record(bob, home["id"], record["id"])["references"] == [
        {"memory_id": target_memory["id"], "record_id": target["id"], "available": False}
    ]


@pytest.mark.slow
def test_writing_a_reference_needs_no_read_on_its_target(alice: Client, bob: Client) -> None:
    hidden = alice.create_memory("hidden from bob")
    target = alice.remember(hidden["id"], "secret")
    shared = alice.create_memory("shared")
    alice.grant(shared["id"], "user:bob", "read", "write")
    record = bob.remember(
        shared["id"], "points at something bob cannot read",
        references=[{"rel": "derived_from", "memory_id": hidden["id"], "record_id": target["id"]}],
    )
    assert record["references"] == [{"memory_id": hidden["id"], "record_id": target["id"], "available": False}]
    assert get_record(alice, shared["id"], record["id"])["references"] == [
        {"rel": "derived_from", "memory_id": hidden["id"], "record_id": target["id"], "available": True}
    ]


@pytest.mark.slow
def test_a_reference_into_another_tenant_is_never_available(alice: Client, make_client: ClientFactory) -> None:
    other = make_client("user:alice", tenant_name="other-" + alice.tenant)
    foreign_memory = other.create_memory()
    foreign = other.remember(foreign_memory["id"])
    memory = alice.create_memory()
    record = alice.remember(
        memory["id"], references=[{"rel": "x", "memory_id": foreign_memory["id"], "record_id": foreign["id"]}]
    )
    assert record["references"] == [
        {"memory_id": foreign_memory["id"], "record_id": foreign["id"], "available": False}
    ]


@pytest.mark.slow
def test_a_reference_whose_record_is_in_another_memory_is_unavailable(alice: Client) -> None:
    one = alice.create_memory("one")
    two = alice.create_memory("two")
    target = alice.remember(one["id"])
    record = alice.remember(two["id"], references=[{"rel": "r", "memory_id": two["id"], "record_id": target["id"]}])
    assert record["references"] == [{"memory_id": two["id"], "record_id": target["id"], "available": False}]


@pytest.mark.parametrize(
    "reference",
    [
        {"memory_id": "hmem_x", "record_id": "hrec_" + "0" * 32},
        {"memory_id": "hmem_" + "0" * 32, "record_id": "nope"},
        {"record_id": "hrec_" + "0" * 32},
        {"memory_id": "hmem_" + "0" * 32},
        {"rel": "", "memory_id": "hmem_" + "0" * 32, "record_id": "hrec_" + "0" * 32},
        {"rel": "x", "memory_id": "hmem_" + "0" * 32, "record_id": "hrec_" + "0" * 32, "available": True},
    ],
)
def test_malformed_references_are_refused(alice: Client, reference: dict[str, Any]) -> None:
    memory = alice.create_memory()
    answer = alice.post(records_path(memory["id"]), {"type": "fact", "content": "c", "references": [reference]})
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"


def test_a_reference_defaults_its_rel(alice: Client) -> None:
    memory = alice.create_memory()
    target = alice.remember(memory["id"])
    record = alice.remember(memory["id"], references=[{"memory_id": memory["id"], "record_id": target["id"]}])
    assert record["references"] == [
        {"rel": "related", "memory_id": memory["id"], "record_id": target["id"], "available": True}
    ]


# -- as_of on list, snapshots ------------------------------------------------------------------


@pytest.mark.slow
def test_list_as_of_reads_the_memory_as_it_stood(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    a1 = alice.remember(mid, "a1")
    t1 = a1["time"]["written_at"]
    wait_past(t1)
    a2 = revise(alice, mid, a1["id"], {"content": "a2"})
    t2 = a2["time"]["written_at"]
    wait_past(t2)
    b = alice.remember(mid, "b")
    t3 = b["time"]["written_at"]
    wait_past(t3)
    b_gone = forget(alice, mid, b["id"])
    t4 = b_gone["time"]["invalidated_at"]
    assert t1 < t2 < t3 < t4

    assert listing(alice, mid, as_of=_before(t1))["data"] == []
    at1 = listing(alice, mid, as_of=t1)["data"]
    assert [(r["id"], r["status"], r["time"]["invalidated_at"]) for r in at1] == [(a1["id"], "active", None)]
    assert listed_ids(alice, mid, as_of=t2) == {a2["id"]}
    at3 = {r["id"]: r for r in listing(alice, mid, as_of=t3)["data"]}
    assert set(at3) == {a2["id"], b["id"]}
    assert at3[b["id"]]["status"] == "active"
    assert at3[b["id"]]["time"]["invalidated_at"] is None
    assert listed_ids(alice, mid, as_of=t4) == {a2["id"]}
    assert listed_ids(alice, mid) == {a2["id"]}

    # include=all as_of: every version written by then, with its status as of then.
    all_at2 = {r["id"]: r["status"] for r in listing(alice, mid, as_of=t2, include="all")["data"]}
    assert all_at2 == {a1["id"]: "superseded", a2["id"]: "active"}
    all_at4 = {r["id"]: r["status"] for r in listing(alice, mid, as_of=t4, include="all")["data"]}
    assert all_at4 == {a1["id"]: "superseded", a2["id"]: "active", b["id"]: "forgotten"}
    all_at1 = {r["id"]: r["status"] for r in listing(alice, mid, as_of=t1, include="all")["data"]}
    assert all_at1 == {a1["id"]: "active"}

    # Filters see the records as they stood.
    flt = {"field": "time.invalidated_at", "op": "exists", "value": False}
    assert filtered(alice, mid, flt, as_of=t3) == {a2["id"], b["id"]}
    # Any RFC 3339 spelling of an instant is the same instant.
    assert listed_ids(alice, mid, as_of=t1.replace("Z", "+00:00")) == {a1["id"]}


@pytest.mark.slow
def test_list_as_of_paginates(alice: Client) -> None:
    memory = alice.create_memory()
    ids = [alice.remember(memory["id"], f"r{i}")["id"] for i in range(5)]
    instant = get_record(alice, memory["id"], ids[-1])["time"]["written_at"]
    wait_past(instant)
    for rid in ids[:2]:
        forget(alice, memory["id"], rid)
    alice.remember(memory["id"], "later")
    pages = every_page(alice, memory["id"], limit=2, as_of=instant)
    seen = [r["id"] for p in pages for r in p]
    assert len(seen) == len(set(seen))
    assert set(seen) == set(ids)
    assert all(r["status"] == "active" for p in pages for r in p)


@pytest.mark.slow
def test_snapshots_create_list_and_read_as_of(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    a1 = alice.remember(mid, "a1")
    wait_past(a1["time"]["written_at"])
    answer = alice.post(f"/v1/memories/{mid}/snapshots", {"name": "before-renewal", "message": "pre Q2"})
    assert answer.status_code == 201, answer.text
    snap = answer.json()
    assert SNAPSHOT_ID.match(snap["id"])
    assert snap["object"] == "memory.snapshot"
    assert snap["memory_id"] == mid
    assert snap["name"] == "before-renewal"
    assert snap["message"] == "pre Q2"
    assert INSTANT.match(snap["time"])
    assert snap["time"] >= a1["time"]["written_at"]
    assert snap["created_by"] == "user:alice"
    wait_past(snap["time"])

    a2 = revise(alice, mid, a1["id"], {"content": "a2"})
    b = alice.remember(mid, "b")
    assert a2["time"]["written_at"] > snap["time"]

    then = listing(alice, mid, as_of="before-renewal")["data"]
    assert [(r["id"], r["content"], r["status"]) for r in then] == [(a1["id"], "a1", "active")]
    assert get_record(alice, mid, a1["id"], as_of="before-renewal")["status"] == "active"
    assert get_record(alice, mid, a1["id"])["status"] == "superseded"
    for written_later in (a2, b):
        answer = alice.get(records_path(mid, written_later["id"]), as_of="before-renewal")
        assert answer.status_code == 404
        assert error_code(answer) == "memory_record_not_found"
    # Reading as_of a snapshot is the same read as as_of its time.
    assert listing(alice, mid, as_of="before-renewal") == listing(alice, mid, as_of=snap["time"])
    assert listed_ids(alice, mid) == {a2["id"], b["id"]}

    second = alice.post(f"/v1/memories/{mid}/snapshots", {"name": "after"})
    assert second.status_code == 201
    assert second.json()["message"] == ""
    listed = alice.get(f"/v1/memories/{mid}/snapshots")
    assert listed.status_code == 200
    body = listed.json()
    assert body["object"] == "list"
    assert body["next_cursor"] is None
    assert body["data"] == [snap, second.json()]
    assert listed_ids(alice, mid, as_of="after") == {a2["id"], b["id"]}


@pytest.mark.slow
def test_snapshot_names_are_unique_per_memory(alice: Client) -> None:
    one = alice.create_memory("one")
    two = alice.create_memory("two")
    assert alice.post(f"/v1/memories/{one['id']}/snapshots", {"name": "v1"}).status_code == 201
    answer = alice.post(f"/v1/memories/{one['id']}/snapshots", {"name": "v1", "message": "again"})
    assert answer.status_code == 409
    assert error_code(answer) == "memory_conflict"
    assert alice.post(f"/v1/memories/{two['id']}/snapshots", {"name": "v1"}).status_code == 201
    assert [s["name"] for s in alice.get(f"/v1/memories/{one['id']}/snapshots").json()["data"]] == ["v1"]


@pytest.mark.slow
def test_a_snapshot_is_only_readable_through_its_memory(alice: Client) -> None:
    one = alice.create_memory("one")
    two = alice.create_memory("two")
    alice.remember(two["id"])
    assert alice.post(f"/v1/memories/{one['id']}/snapshots", {"name": "only-in-one"}).status_code == 201
    answer = alice.get(records_path(two["id"]), as_of="only-in-one")
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        {"name": ""},
        {"name": "2026-10-01"},
        {"name": "2026-10-01T00:00:00Z"},
        {"name": "n" * 101},
        {"name": "ok", "message": "m" * 2001},
        {"message": "no name"},
        {"name": "ok", "time": "2020-01-01T00:00:00Z"},
        {"name": 5},
    ],
)
def test_bad_snapshots_are_refused(alice: Client, body: dict[str, Any]) -> None:
    memory = alice.create_memory()
    answer = alice.post(f"/v1/memories/{memory['id']}/snapshots", body)
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert alice.get(f"/v1/memories/{memory['id']}/snapshots").json()["data"] == []


@pytest.mark.slow
def test_snapshot_privileges(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/snapshots"
    assert alice.post(path, {"name": "s"}).status_code == 201
    for answer in (bob.post(path, {"name": "b"}), bob.get(path)):
        assert answer.status_code == 404
        assert error_code(answer) == "memory_not_found"
    alice.grant(memory["id"], "user:bob", "read")
    answer = bob.post(path, {"name": "b"})
    assert answer.status_code == 403
    assert error_code(answer) == "memory_forbidden"
    assert [s["name"] for s in bob.get(path).json()["data"]] == ["s"]
    assert listing(bob, memory["id"], as_of="s")["data"] == []


@pytest.mark.slow
def test_snapshot_listing_paginates(alice: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/snapshots"
    names = [f"s{i}" for i in range(5)]
    for name in names:
        assert alice.post(path, {"name": name}).status_code == 201
    seen: list[str] = []
    cursor = None
    while True:
        answer = alice.get(path, limit=2, cursor=cursor)
        assert answer.status_code == 200, answer.text
        seen.extend(s["name"] for s in answer.json()["data"])
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == names
    assert len(seen) == 5


@pytest.mark.slow
def test_a_record_closed_at_the_page_boundary_does_not_disturb_paging(alice: Client) -> None:
    memory = alice.create_memory()
    written = [alice.remember(memory["id"], f"r{i}")["id"] for i in range(7)]
    first = listing(alice, memory["id"], limit=3)
    boundary = first["data"][-1]["id"]
    # The version the cursor stands on leaves the active listing before the next page is read.
    forget(alice, memory["id"], boundary)
    rest: list[str] = []
    cursor = first["next_cursor"]
    while cursor:
        body = listing(alice, memory["id"], limit=3, cursor=cursor)
        rest.extend(r["id"] for r in body["data"])
        cursor = body["next_cursor"]
    seen = [r["id"] for r in first["data"]] + rest
    assert len(seen) == len(set(seen)), "a record appeared twice"
    assert set(seen) == set(written)


@pytest.mark.slow
def test_a_revision_that_changes_nothing_is_refused(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"], "v1")
    answer = alice.patch(records_path(memory["id"], record["id"]), {})
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"
    assert len(history(alice, memory["id"], record["id"])) == 1


@pytest.mark.slow
def test_a_null_time_filter_matches_an_open_validity(alice: Client) -> None:
    memory = alice.create_memory()
    mid = memory["id"]
    open_ended = alice.remember(mid, "open", time={"valid_from": "2026-01-01T00:00:00Z"})
    closed = alice.remember(mid, "closed", time={"valid_from": "2026-01-01T00:00:00Z",
                                                 "valid_to": "2026-06-01T00:00:00Z"})
    null = json.dumps({"field": "time.valid_to", "op": "eq", "value": None})
    assert listed_ids(alice, mid, filters=null) == {open_ended["id"]}
    not_null = json.dumps({"field": "time.valid_to", "op": "exists", "value": True})
    assert listed_ids(alice, mid, filters=not_null) == {closed["id"]}
