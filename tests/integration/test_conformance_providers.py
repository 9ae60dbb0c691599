"""§14's memories checks, through the public surface, on every provider this stage is connected to: the
native one and mem0 (tests/conftest.py). Each signal is checked against that provider's own capability
document (§10.2): a signal it declares finds what it should and says so in `why`; one it lacks is reported
in `degraded`, never ignored. The rest (the tree and its listing, a stated record and its stamped writer,
recall naming parent and children, revision and history, a record refused through another memory,
forgetting, erasing, moving, deleting) holds whichever provider keeps the records."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Client, error_code

PROVIDERS = ["native", "mem0"]


def document(client: Client, provider: str) -> dict[str, Any]:
    found = {p["id"]: p for p in client.get("/v1/memories/providers").json()["data"]}
    return found[provider]


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.slow
def test_the_tree_and_its_listing(alice: Client, provider: str) -> None:
    root = alice.create_memory("Company", provider=provider)
    child = alice.create_memory("Acme", parent_id=root["id"], description="one customer")
    assert (root["provider"], child["provider"]) == (provider, provider)
    children = alice.get("/v1/memories", parent=root["id"]).json()["data"]
    assert [(c["id"], c["description"]) for c in children] == [(child["id"], "one customer")]
    assert child["ancestors"] == [root["id"]]


def test_a_stated_record_and_its_stamped_writer(alice: Client, provider: str) -> None:
    memory = alice.create_memory("Facts", provider=provider)["id"]
    stated = alice.remember(memory, "Acme renews in March.", attributes={"account": "acme"})
    assert (stated["content"], stated["trust"], stated["written_by"]) == (
        "Acme renews in March.", "untrusted", {"kind": "user", "id": "alice"})
    forged = alice.post(f"/v1/memories/{memory}/records",
                        {"type": "fact", "content": "x", "written_by": {"kind": "user", "id": "mallory"}})
    assert (forged.status_code, error_code(forged)) == (422, "memory_invalid")


@pytest.mark.slow
def test_recall_on_one_memory_names_parent_and_children_and_each_signal_is_kept_or_reported(
    alice: Client, provider: str
) -> None:
    signals = document(alice, provider)["recall"]["signals"]
    parent = alice.create_memory("Company", provider=provider)
    memory = alice.create_memory("Acme", parent_id=parent["id"], provider=provider)
    child = alice.create_memory("Acme renewals", parent_id=memory["id"], provider=provider)
    fact = alice.remember(memory["id"], "Acme renews its contract in March.", attributes={"account": "acme"})
    alice.remember(memory["id"], "The office plants need water on Fridays.", attributes={"account": "office"})
    alice.remember(child["id"], "Below: never part of the parent's recall.")
    asks = {
        "query": {"query": "When does Acme renew its contract?", "query_words": False},
        "text": {"text": "contract"},
        "filters": {"filters": {"field": "attributes.account", "op": "eq", "value": "acme"}},
    }
    for signal, body in asks.items():
        answer = alice.post(f"/v1/memories/{memory['id']}/recall", {**body, "limit": 5})
        assert answer.status_code == 200, (signal, answer.text)
        found = answer.json()
        assert found["parent"]["id"] == parent["id"]
        assert [c["id"] for c in found["children"]] == [child["id"]]
        assert all(r["record"]["memory_id"] == memory["id"] for r in found["results"])
        if signal in signals:
            assert found["results"][0]["record"]["id"] == fact["id"], signal
            assert signal in found["results"][0]["why"], signal
            assert f"{signal}:not_supported" not in found["degraded"]
        else:
            assert f"{signal}:not_supported" in found["degraded"], signal


def test_revision_and_history(alice: Client, provider: str) -> None:
    memory = alice.create_memory("Facts", provider=provider)["id"]
    first = alice.remember(memory, "v1")
    revised = alice.patch(f"/v1/memories/{memory}/records/{first['id']}", {"content": "v2"})
    assert revised.status_code == 200, revised.text
    history = alice.get(f"/v1/memories/{memory}/records/{revised.json()['id']}/history").json()["data"]
    assert [(v["content"], v["status"]) for v in history] == [("v1", "superseded"), ("v2", "active")]
    assert all(v["written_by"] == {"kind": "user", "id": "alice"} for v in history)


@pytest.mark.slow
def test_a_records_id_is_refused_through_a_memory_it_is_not_in(alice: Client, provider: str) -> None:
    home, elsewhere = (alice.create_memory(n, provider=provider)["id"] for n in ("Home", "Elsewhere"))
    record = alice.remember(home, "Kept at home.")
    for answer in (alice.get(f"/v1/memories/{elsewhere}/records/{record['id']}"),
                   alice.patch(f"/v1/memories/{elsewhere}/records/{record['id']}", {"content": "x"}),
                   alice.delete(f"/v1/memories/{elsewhere}/records/{record['id']}")):
        assert (answer.status_code, error_code(answer)) == (404, "memory_record_not_found")


@pytest.mark.slow
def test_forgetting_and_erasing(alice: Client, provider: str) -> None:
    memory = alice.create_memory("Facts", provider=provider)["id"]
    forgotten, erased = alice.remember(memory, "Forget me."), alice.remember(memory, "Erase me.")
    assert alice.delete(f"/v1/memories/{memory}/records/{forgotten['id']}").json()["status"] == "forgotten"
    assert [r["id"] for r in alice.get(f"/v1/memories/{memory}/records").json()["data"]] == [erased["id"]]
    done = alice.post(f"/v1/memories/{memory}/erase", {"record_ids": [erased["id"]]}).json()
    assert erased["id"] in done["erased"]
    assert isinstance(done["unreachable"], list)  # an empty list is a guarantee, anything else is named
    assert error_code(alice.get(f"/v1/memories/{memory}/records/{erased['id']}", include="all")) == (
        "memory_record_not_found")


@pytest.mark.slow
def test_moving_and_deleting(alice: Client, provider: str) -> None:
    first, second = (alice.create_memory(n, provider=provider) for n in ("First", "Second"))
    moving = alice.create_memory("Moving", parent_id=first["id"])
    record = alice.remember(moving["id"], "Travels with its memory.")
    moved = alice.put(f"/v1/memories/{moving['id']}", {"parent_id": second["id"]})
    assert (moved.status_code, moved.json()["parent_id"]) == (200, second["id"])
    assert alice.get(f"/v1/memories/{moving['id']}/records/{record['id']}").json()["content"] == record["content"]
    deleted = alice.delete(f"/v1/memories/{second['id']}")
    assert deleted.status_code in (200, 202), deleted.text
    for gone in (second["id"], moving["id"]):
        assert error_code(alice.get(f"/v1/memories/{gone}")) == "memory_not_found"
