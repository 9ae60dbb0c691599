"""§6.4 named queries (this provider's language: a recall request template with typed params) and
§6.5 free queries (declared unsupported where the index cannot confine a statement)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code

pytestmark = pytest.mark.slow

OPEN_DEALS = {
    "description": "Deals not yet closed for one account.",
    "params": {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
    "requires": "read",
    "language": "uhp-recall",
    "body": {
        "text": "deal",
        "filters": {"and": [{"field": "attributes.account", "op": "eq", "value": "{{account}}"},
                            {"field": "attributes.stage", "op": "ne", "value": "closed"}]},
        "limit": 10,
    },
}


def _seed(client: Client) -> dict[str, Any]:
    memory = client.create_memory("Deals")
    deals = (("acme", "open", "Acme deal for 40 seats"), ("acme", "closed", "Acme deal for 5 seats"),
             ("globex", "open", "Globex deal for 12 seats"))
    for account, stage, text in deals:
        client.remember(memory["id"], text, attributes={"account": account, "stage": stage})
    return memory


def test_define_list_and_run_a_named_query(alice: Client) -> None:
    memory = _seed(alice)
    path = f"/v1/memories/{memory['id']}/queries/open_deals_for"
    defined = alice.put(path, OPEN_DEALS)
    assert defined.status_code == 200, defined.text
    assert defined.json()["name"] == "open_deals_for"
    listed = alice.get(f"/v1/memories/{memory['id']}/queries").json()["data"]
    assert [q["name"] for q in listed] == ["open_deals_for"]
    assert listed[0]["params"]["required"] == ["account"]
    answer = alice.post(path, {"params": {"account": "acme"}})
    assert answer.status_code == 200, answer.text
    assert [r["record"]["content"] for r in answer.json()["results"]] == ["Acme deal for 40 seats"]
    assert "abstain" in answer.json()


def test_a_named_query_exactly_as_the_spec_shows_it_is_accepted_with_its_name_and_a_string_body(
    alice: Client,
) -> None:
    memory = _seed(alice)
    path = f"/v1/memories/{memory['id']}/queries/open_deals_for"
    as_written = {**OPEN_DEALS, "name": "open_deals_for", "body": json.dumps(OPEN_DEALS["body"])}
    defined = alice.put(path, as_written)
    assert defined.status_code == 200, defined.text
    assert defined.json()["name"] == "open_deals_for"
    assert defined.json()["body"] == OPEN_DEALS["body"]  # the string's object, answered as the object
    answer = alice.post(path, {"params": {"account": "acme"}})
    assert [r["record"]["content"] for r in answer.json()["results"]] == ["Acme deal for 40 seats"]
    as_object = alice.put(path, {**OPEN_DEALS, "name": "open_deals_for"})
    assert as_object.status_code == 200, as_object.text


def test_a_named_query_whose_name_differs_from_the_path_is_invalid(alice: Client) -> None:
    memory = _seed(alice)
    path = f"/v1/memories/{memory['id']}/queries/open_deals_for"
    answer = alice.put(path, {**OPEN_DEALS, "name": "another_name"})
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"
    assert "another_name" in answer.json()["error"]["message"]
    assert alice.get(f"/v1/memories/{memory['id']}/queries").json()["data"] == []


def test_a_string_body_that_does_not_hold_a_recall_object_is_invalid(alice: Client) -> None:
    memory = _seed(alice)
    path = f"/v1/memories/{memory['id']}/queries/open_deals_for"
    for body in ("MATCH (d:Deal) RETURN d", "[1, 2]", '"text"', ""):
        answer = alice.put(path, {**OPEN_DEALS, "body": body})
        assert answer.status_code == 422, body
        assert error_code(answer) == "memory_invalid"


def test_params_that_do_not_match_are_refused(alice: Client) -> None:
    memory = _seed(alice)
    path = f"/v1/memories/{memory['id']}/queries/open_deals_for"
    alice.put(path, OPEN_DEALS)
    for params in ({}, {"account": 7}, {"account": "acme", "extra": 1}):
        answer = alice.post(path, {"params": params})
        assert answer.status_code == 422, params
        assert error_code(answer) == "memory_invalid"
    unknown = alice.post(f"/v1/memories/{memory['id']}/queries/nope", {"params": {}})
    assert error_code(unknown) == "memory_query_not_found"


def test_bad_definitions_are_refused(alice: Client) -> None:
    memory = _seed(alice)
    base = f"/v1/memories/{memory['id']}/queries/"
    for name, definition in (
        ("Bad-Name", OPEN_DEALS),
        ("q", {**OPEN_DEALS, "language": "cypher"}),
        ("q", {**OPEN_DEALS, "body": {"text": "{{undeclared}}"}}),
        ("q", {**OPEN_DEALS, "body": {"memory_id": "hmem_x"}}),
        ("q", {**OPEN_DEALS, "params": {"type": "object", "properties": {"a": {"type": "object"}}}}),
        ("q", {**OPEN_DEALS, "body": {"filters": {"field": "nope", "op": "eq", "value": "{{account}}"}}}),
    ):
        answer = alice.put(base + name, definition)
        assert answer.status_code == 422, (name, definition)


def test_defining_needs_write_and_running_stays_within_the_callers_reach(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = _seed(alice)
    path = f"/v1/memories/{memory['id']}/queries/open_deals_for"
    reader = make_client("user:reader")
    alice.grant(memory["id"], "user:reader", "read")
    assert error_code(reader.put(path, OPEN_DEALS)) == "memory_forbidden"
    alice.put(path, OPEN_DEALS)
    assert reader.post(path, {"params": {"account": "acme"}}).status_code == 200
    writers_only = {**OPEN_DEALS, "requires": "write"}
    alice.put(f"/v1/memories/{memory['id']}/queries/for_writers", writers_only)
    listed = [q["name"] for q in reader.get(f"/v1/memories/{memory['id']}/queries").json()["data"]]
    assert listed == ["open_deals_for"]
    assert error_code(reader.post(f"/v1/memories/{memory['id']}/queries/for_writers",
                                  {"params": {"account": "acme"}})) == "memory_forbidden"
    stranger = make_client("user:stranger")
    assert error_code(stranger.post(path, {"params": {"account": "acme"}})) == "memory_not_found"


def test_free_queries_are_unsupported_where_they_cannot_be_confined(alice: Client) -> None:
    memory = _seed(alice)
    answer = alice.post(f"/v1/memories/{memory['id']}/query",
                        {"language": "opensearch-dsl", "statement": {"match_all": {}}})
    assert answer.status_code == 422
    assert error_code(answer) == "memory_unsupported"
    providers = alice.get("/v1/memories/providers").json()["data"][0]
    assert providers["queries"] == {"named": True, "free": False}
