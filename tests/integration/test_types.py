"""Extension types (§8) through HTTP: the listing, records validated against their type, each built-in
operation with its privilege, idempotent replays, recall by the projection, range filters on typed
fields, and a tenant's own type registered through the API and used end to end."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory
from tests.integration.test_errors_and_discovery import error_code

EVENT = "x.calendar.event"
TASK = "x.task"


def event(client: Client, memory_id: str, title: str, starts: str, ends: str, **more: Any) -> dict[str, Any]:
    answer = client.post(
        f"/v1/memories/{memory_id}/records",
        {"type": EVENT, "content": more.pop("content", ""),
         "attributes": {"title": title, "starts_at": starts, "ends_at": ends, **more}},
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def task(client: Client, memory_id: str, title: str, **attributes: Any) -> dict[str, Any]:
    answer = client.post(
        f"/v1/memories/{memory_id}/records", {"type": TASK, "content": "", "attributes": {"title": title, **attributes}}
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def operate(client: Client, memory_id: str, record_id: str, name: str, given: Any = None, **kwargs: Any) -> Any:
    body = {} if given is None else {"input": given}
    return client.post(f"/v1/memories/{memory_id}/records/{record_id}/operations/{name}", body, **kwargs)


def test_the_listing_names_core_built_in_types_with_schemas_and_operations(alice: Client) -> None:
    listed = {t["type"]: t for t in alice.get("/v1/memories/types").json()["data"]}
    assert {"episode", "fact", "note", "procedure", "link", EVENT, TASK} <= set(listed)
    assert listed["fact"]["core"] is True
    assert listed["fact"]["operations"] == []
    calendar = listed[EVENT]
    assert calendar["schema"]["required"] == ["title", "starts_at", "ends_at"]
    assert "{title}" in calendar["text"]
    ops = {o["name"]: o["requires"] for o in calendar["operations"]}
    assert ops == {"reschedule": "write", "free_slots": "read"}
    assert {o["name"]: o["requires"] for o in listed[TASK]["operations"]} == {
        "complete": "write", "reopen": "write", "assign": "write", "blocked": "read",
    }
    providers = alice.get("/v1/memories/providers").json()["data"]
    assert providers[0]["types"] is True


@pytest.mark.slow
def test_attributes_are_validated_against_the_type_naming_the_field_and_nothing_is_written(alice: Client) -> None:
    memory = alice.create_memory("Calendar")
    bad = [
        ({"title": "Standup", "starts_at": "tomorrow", "ends_at": "2026-12-04T09:15:00Z"}, "attributes.starts_at"),
        ({"title": "Standup", "starts_at": "2026-12-04T09:00:00Z"}, "ends_at"),
        ({"title": "Standup", "starts_at": "2026-12-04T09:00:00Z", "ends_at": "2026-12-04T08:00:00Z"},
         "attributes.ends_at"),
        ({"title": "Standup", "starts_at": "2026-12-04T09:00:00Z", "ends_at": "2026-12-04T09:15:00Z",
          "attendees": "everyone"}, "attributes.attendees"),
        ({"title": "Standup", "starts_at": "2026-12-04T09:00:00Z", "ends_at": "2026-12-04T09:15:00Z",
          "colour": "red"}, "colour"),
    ]
    for attributes, named in bad:
        body = {"type": EVENT, "content": "", "attributes": attributes}
        answer = alice.post(f"/v1/memories/{memory['id']}/records", body)
        assert answer.status_code == 422, attributes
        assert error_code(answer) == "memory_invalid"
        assert named in answer.json()["error"]["message"]
    assert alice.get(f"/v1/memories/{memory['id']}/records").json()["data"] == []
    # Times are kept in the one form they sort in, whatever offset was written.
    kept = event(alice, memory["id"], "Standup", "2026-12-04T10:00:00+01:00", "2026-12-04T10:15:00+01:00")
    assert kept["attributes"]["starts_at"] == "2026-12-04T09:00:00.000Z"
    # A revise is validated too: the type's rules hold on every version.
    revised = alice.patch(f"/v1/memories/{memory['id']}/records/{kept['id']}", {"attributes": {"title": "x"}})
    assert revised.status_code == 422
    assert "starts_at" in revised.json()["error"]["message"]


@pytest.mark.slow
def test_a_type_the_server_does_not_know_is_carried_unchanged(alice: Client) -> None:
    memory = alice.create_memory()
    attributes = {"anything": {"nested": [1, "two"]}, "starts_at": "whenever"}
    written = alice.post(
        f"/v1/memories/{memory['id']}/records", {"type": "x.vendor.thing", "content": "c", "attributes": attributes}
    )
    assert written.status_code == 201, written.text
    read = alice.get(f"/v1/memories/{memory['id']}/records/{written.json()['id']}").json()
    assert (read["type"], read["attributes"]) == ("x.vendor.thing", attributes)
    refused = operate(alice, memory["id"], read["id"], "reschedule", {"starts_at": "2026-12-04T09:00:00Z"})
    assert refused.status_code == 422
    assert error_code(refused) == "memory_unsupported"


@pytest.mark.slow
def test_an_unprefixed_type_that_is_not_a_core_type_is_refused_with_the_core_types(alice: Client) -> None:
    """§4.1/§8: any type beyond the core ones is an extension, named x.<name>. "facts" is a typo of a
    core type and "preference" a type no reader asks for; both were stored with 201 (issue 28)."""
    memory = alice.create_memory()
    for name, hint in (("facts", "did you mean 'fact'?"), ("preference", "")):
        refused = alice.post(f"/v1/memories/{memory['id']}/records", {"type": name, "content": "Green tea."})
        assert refused.status_code == 422, refused.text
        assert error_code(refused) == "memory_invalid"
        message = refused.json()["error"]["message"]
        assert "episode, fact, note, procedure, link" in message
        assert "x.<name>" in message
        assert hint in message
    assert alice.get(f"/v1/memories/{memory['id']}/records").json()["data"] == []


@pytest.mark.slow
def test_reschedule_appends_a_version_keeps_the_length_and_conflicts_on_a_stale_version(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Calendar")
    first = event(alice, memory["id"], "Review", "2026-12-04T14:00:00Z", "2026-12-04T15:30:00Z")
    moved = operate(alice, memory["id"], first["id"], "reschedule", {"starts_at": "2026-12-05T09:00:00Z"},
                    headers={"Idempotency-Key": "move-review-1"})
    assert moved.status_code == 200, moved.text
    record = moved.json()["record"]
    assert (record["version"], record["supersedes"]) == (2, first["id"])
    assert (record["attributes"]["starts_at"], record["attributes"]["ends_at"]) == (
        "2026-12-05T09:00:00.000Z", "2026-12-05T10:30:00.000Z",
    )
    assert record["written_by"] == {"kind": "user", "id": "alice"}
    replay = operate(alice, memory["id"], first["id"], "reschedule", {"starts_at": "2026-12-05T09:00:00Z"},
                     headers={"Idempotency-Key": "move-review-1"})
    assert replay.json() == moved.json()  # the same answer, and no third version
    history = alice.get(f"/v1/memories/{memory['id']}/records/{record['id']}/history").json()["data"]
    assert len(history) == 2
    stale = operate(alice, memory["id"], first["id"], "reschedule", {"starts_at": "2026-12-06T09:00:00Z"})
    assert stale.status_code == 409
    assert stale.json()["error"]["current_record_id"] == record["id"]
    backwards = operate(alice, memory["id"], record["id"], "reschedule",
                        {"starts_at": "2026-12-06T09:00:00Z", "ends_at": "2026-12-06T08:00:00Z"})
    assert backwards.status_code == 422
    bad_input = operate(alice, memory["id"], record["id"], "reschedule", {"starts_at": 9})
    assert bad_input.status_code == 422
    assert "input.starts_at" in bad_input.json()["error"]["message"]


@pytest.mark.slow
def test_operation_privileges_follow_the_memory_and_an_unseen_memory_is_not_found(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Calendar")
    review = event(alice, memory["id"], "Review", "2026-12-04T14:00:00Z", "2026-12-04T15:00:00Z")
    reader, stranger = make_client("user:reader"), make_client("user:stranger")
    alice.grant(memory["id"], "user:reader", "read")
    refused = operate(reader, memory["id"], review["id"], "reschedule", {"starts_at": "2026-12-05T09:00:00Z"})
    assert refused.status_code == 403
    assert error_code(refused) == "memory_forbidden"
    assert operate(reader, memory["id"], review["id"], "free_slots", {}).status_code == 200
    unseen = operate(stranger, memory["id"], review["id"], "free_slots", {})
    assert unseen.status_code == 404
    assert error_code(unseen) == "memory_not_found"
    missing = operate(alice, memory["id"], "hrec_" + "0" * 32, "free_slots", {})
    assert error_code(missing) == "memory_record_not_found"
    unknown = operate(alice, memory["id"], review["id"], "teleport", {})
    assert unknown.status_code == 422
    assert "teleport" in unknown.json()["error"]["message"]
    # A record of another memory asked for through this one is not found.
    other = alice.create_memory("Other")
    assert error_code(operate(alice, other["id"], review["id"], "free_slots", {})) == "memory_record_not_found"


@pytest.mark.slow
def test_free_slots_are_open_time_around_the_event_in_the_callers_time_zone(alice: Client) -> None:
    memory = alice.create_memory("Calendar")
    # Paris is UTC+1 in December: working hours 09:00-17:00 there are 08:00-16:00 UTC.
    standup = event(alice, memory["id"], "Standup", "2026-12-04T08:30:00Z", "2026-12-04T09:00:00Z")
    event(alice, memory["id"], "Lunch", "2026-12-04T11:00:00Z", "2026-12-04T12:00:00Z")
    event(alice, memory["id"], "Late", "2026-12-04T15:45:00Z", "2026-12-04T17:00:00Z")
    event(alice, memory["id"], "Next day", "2026-12-05T08:00:00Z", "2026-12-05T09:00:00Z")
    answer = operate(alice, memory["id"], standup["id"], "free_slots", {"time_zone": "Europe/Paris"})
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["slots"] == [
        {"starts_at": "2026-12-04T09:00:00+01:00", "ends_at": "2026-12-04T09:30:00+01:00"},
        {"starts_at": "2026-12-04T10:00:00+01:00", "ends_at": "2026-12-04T12:00:00+01:00"},
        {"starts_at": "2026-12-04T13:00:00+01:00", "ends_at": "2026-12-04T16:45:00+01:00"},
    ]
    longer = operate(alice, memory["id"], standup["id"], "free_slots",
                     {"time_zone": "Europe/Paris", "min_minutes": 121, "days": 2}).json()["result"]["slots"]
    assert longer == [
        {"starts_at": "2026-12-04T13:00:00+01:00", "ends_at": "2026-12-04T16:45:00+01:00"},
        {"starts_at": "2026-12-05T10:00:00+01:00", "ends_at": "2026-12-05T17:00:00+01:00"},
    ]
    bad = operate(alice, memory["id"], standup["id"], "free_slots", {"time_zone": "Mars/Olympus"})
    assert bad.status_code == 422


@pytest.mark.slow
def test_task_operations_complete_reopen_assign_and_blocked(alice: Client) -> None:
    board = alice.create_memory("Board")
    design = task(alice, board["id"], "Design")
    build = task(alice, board["id"], "Build", depends_on=[design["id"]])
    task(alice, board["id"], "Ship", depends_on=[build["id"]])
    task(alice, board["id"], "Unrelated")

    def blocked() -> list[str]:
        answer = operate(alice, board["id"], design["id"], "blocked")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["abstain"] is False
        return sorted(r["record"]["attributes"]["title"] for r in body["results"])

    assert blocked() == ["Build", "Ship"]
    done = operate(alice, board["id"], design["id"], "complete").json()["record"]
    assert done["attributes"]["status"] == "done"
    assert blocked() == ["Ship"]  # Build's dependency is done; Ship still waits on Build
    assigned = operate(alice, board["id"], build["id"], "assign", {"assignee": "bob"}).json()["record"]
    assert assigned["attributes"] == {**build["attributes"], "assignee": "bob"}
    built = operate(alice, board["id"], assigned["id"], "complete").json()["record"]
    assert blocked() == []
    reopened = operate(alice, board["id"], built["id"], "reopen").json()["record"]
    assert reopened["attributes"]["status"] == "open"
    # Ship names Build's first version: the dependency is its chain, open again.
    assert blocked() == ["Ship"]
    assert operate(alice, board["id"], build["id"], "assign", {}).status_code == 422  # assignee is required


@pytest.mark.slow
def test_typed_records_are_recalled_by_their_projection_and_filtered_by_typed_fields(alice: Client) -> None:
    memory = alice.create_memory("Calendar")
    event(alice, memory["id"], "Quarterly planning", "2026-12-10T09:00:00Z", "2026-12-10T11:00:00Z",
          attendees=["Marguerite", "Ignatius"], location="Room Zanzibar")
    event(alice, memory["id"], "Dentist", "2026-12-20T09:00:00Z", "2026-12-20T10:00:00Z")
    found = alice.post(f"/v1/memories/{memory['id']}/recall", {"text": "Zanzibar Ignatius", "limit": 5}).json()
    assert [r["record"]["attributes"]["title"] for r in found["results"]][:1] == ["Quarterly planning"]
    ranged = {"and": [{"field": "attributes.starts_at", "op": "gte", "value": "2026-12-15T00:00:00Z"},
                      {"field": "attributes.starts_at", "op": "lt", "value": "2027-01-01T00:00:00Z"}]}
    in_range = alice.post(f"/v1/memories/{memory['id']}/recall", {"filters": ranged, "types": [EVENT]}).json()
    assert [r["record"]["attributes"]["title"] for r in in_range["results"]] == ["Dentist"]


CRM_DEAL = {
    "description": "A sales opportunity.",
    "schema": {
        "type": "object",
        "properties": {
            "account": {"type": "string"},
            "stage": {"enum": ["lead", "won", "lost"]},
            "amount": {"type": "number", "minimum": 0},
        },
        "required": ["account", "stage"],
        "additionalProperties": False,
    },
    "text": "Deal with {account}, {stage}, worth {amount}. {content}",
    "operations": [
        {"name": "win", "description": "Mark the deal won.", "requires": "write", "set": {"stage": "won"}},
        {"name": "reprice", "description": "Set the amount.", "requires": "write",
         "input": {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
         "set": {"amount": "{{amount}}"}},
        {"name": "same_account", "description": "Deals with the same account.", "requires": "read",
         "input": {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
         "recall": {"filters": {"field": "attributes.account", "op": "eq", "value": "{{account}}"}}},
    ],
}


@pytest.mark.slow
def test_a_tenant_admin_registers_a_type_that_is_then_used_end_to_end(make_client: ClientFactory) -> None:
    admin = make_client("user:root", groups=("group:admins",))
    alice = make_client("user:alice")
    agent = make_client("harness:h1", groups=("group:admins",))
    for refused_by in (alice, agent):
        refused = refused_by.put("/v1/memories/types/x.crm.deal", CRM_DEAL)
        assert refused.status_code == 403
    registered = admin.put("/v1/memories/types/x.crm.deal", CRM_DEAL)
    assert registered.status_code == 200, registered.text
    assert (registered.json()["version"], registered.json()["registered_by"]) == (1, "user:root")
    listed = {t["type"]: t for t in alice.get("/v1/memories/types").json()["data"]}
    assert listed["x.crm.deal"]["operations"][0]["set"] == {"stage": "won"}
    other_tenant = make_client("user:alice", tenant_name="globex")
    assert "x.crm.deal" not in {t["type"] for t in other_tenant.get("/v1/memories/types").json()["data"]}

    memory = alice.create_memory("Deals")
    bad = alice.post(f"/v1/memories/{memory['id']}/records",
                     {"type": "x.crm.deal", "content": "", "attributes": {"account": "acme", "stage": "maybe"}})
    assert bad.status_code == 422
    assert "attributes.stage" in bad.json()["error"]["message"]
    deal = alice.post(f"/v1/memories/{memory['id']}/records", {
        "type": "x.crm.deal", "content": "renewal", "attributes": {"account": "acme", "stage": "lead", "amount": 10}
    }).json()
    alice.post(f"/v1/memories/{memory['id']}/records", {
        "type": "x.crm.deal", "content": "", "attributes": {"account": "globex", "stage": "lead"}
    })
    won = operate(alice, memory["id"], deal["id"], "win").json()["record"]
    assert won["attributes"] == {"account": "acme", "stage": "won", "amount": 10}
    repriced = operate(alice, memory["id"], won["id"], "reprice", {"amount": 25}).json()["record"]
    assert repriced["attributes"]["amount"] == 25
    same = operate(alice, memory["id"], repriced["id"], "same_account", {"account": "acme"}).json()
    assert [r["record"]["id"] for r in same["results"]] == [repriced["id"]]
    assert error_code(operate(alice, memory["id"], repriced["id"], "reprice", {"amount": "lots"})) == "memory_invalid"
    recalled = alice.post(f"/v1/memories/{memory['id']}/recall", {"text": "acme won", "limit": 3}).json()
    assert recalled["results"][0]["record"]["id"] == repriced["id"]

    # A new version of the type: records are validated against it when next written.
    stricter = {**CRM_DEAL, "schema": {**CRM_DEAL["schema"], "required": ["account", "stage", "amount"]}}
    second = admin.put("/v1/memories/types/x.crm.deal", stricter)
    assert second.json()["version"] == 2
    unpriced = alice.post(f"/v1/memories/{memory['id']}/records",
                          {"type": "x.crm.deal", "content": "", "attributes": {"account": "a", "stage": "lead"}})
    assert unpriced.status_code == 422


def test_a_type_definition_is_validated_whole_when_registered(make_client: ClientFactory) -> None:
    admin = make_client("user:root", groups=("group:admins",))
    schema = CRM_DEAL["schema"]
    bad = [
        ("x.calendar.event", CRM_DEAL, 409),  # built in
        ("crm.deal", CRM_DEAL, 422),  # no x. prefix
        ("x.crm.deal", {**CRM_DEAL, "schema": {"type": "string"}}, 422),
        ("x.crm.deal", {**CRM_DEAL, "schema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}, 422),
        ("x.crm.deal", {**CRM_DEAL, "schema": {**schema, "properties": {"a": {"$ref": "https://evil/x"}}}}, 422),
        ("x.crm.deal", {**CRM_DEAL, "text": "{missing_field}"}, 422),
        ("x.crm.deal", {**CRM_DEAL, "operations": [{"name": "w", "requires": "read", "set": {"stage": "won"}}]}, 422),
        ("x.crm.deal", {**CRM_DEAL, "operations": [{"name": "w", "requires": "write", "set": {"content": "x"}}]}, 422),
        ("x.crm.deal", {**CRM_DEAL, "operations": [
            {"name": "r", "requires": "read", "recall": {"text": "x", "depth": 2}}]}, 422),
        ("x.crm.deal", {**CRM_DEAL, "operations": [
            {"name": "r", "requires": "read", "recall": {"text": "{{undeclared}}"}}]}, 422),
        ("x.crm.deal", {**CRM_DEAL, "extra": True}, 422),
    ]
    for name, definition, status in bad:
        answer = admin.put(f"/v1/memories/types/{name}", definition)
        assert answer.status_code == status, (name, definition, answer.text)
    assert "x.crm.deal" not in {t["type"] for t in admin.get("/v1/memories/types").json()["data"]}
