"""§9: attaching memories to a harness is granting; access narrows, never widens."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code


def _attach(client: Client, harness: str, *entries: dict) -> object:
    return client.put(f"/v1/harnesses/{harness}/memories", {"memories": list(entries)})


@pytest.mark.slow
def test_attaching_grants_the_harness_and_lists_the_entries(alice: Client, make_client: ClientFactory) -> None:
    shared = alice.create_memory("Team")
    personal = alice.create_memory("Alice private", restricted=True)
    alice.claim("chrn_1")
    answer = _attach(
        alice, "chrn_1",
        {"memory_id": shared["id"], "access": "read"},
        {"memory_id": personal["id"], "access": "write", "default": True},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["memories"] == [
        {"memory_id": shared["id"], "access": "read", "default": False},
        {"memory_id": personal["id"], "access": "write", "default": True},
    ]
    harness = make_client("harness:chrn_1")
    assert harness.get(f"/v1/memories/{shared['id']}").json()["privileges"] == ["read"]
    assert harness.get(f"/v1/memories/{personal['id']}").json()["privileges"] == ["read", "write"]
    assert harness.post(f"/v1/memories/{shared['id']}/records", {"type": "fact", "content": "x"}).status_code == 403
    assert harness.post(f"/v1/memories/{personal['id']}/records", {"type": "fact", "content": "x"}).status_code == 201
    listed = alice.get("/v1/harnesses/chrn_1/memories")
    assert listed.status_code == 200
    assert [m["memory_id"] for m in listed.json()["memories"]] == [shared["id"], personal["id"]]
    grants = alice.get(f"/v1/memories/{shared['id']}/grants").json()["data"]
    assert {"principal": "harness:chrn_1", "privileges": ["read"]}.items() <= next(
        g for g in grants if g["principal"] == "harness:chrn_1"
    ).items()


@pytest.mark.slow
def test_an_entry_the_harness_already_holds_is_attached_without_a_new_grant(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Team")
    alice.grant(memory["id"], "harness:chrn_2", "read", "write")
    alice.claim("chrn_2")
    answer = _attach(alice, "chrn_2", {"memory_id": memory["id"], "access": "write", "default": True})
    assert answer.status_code == 200, answer.text
    grants = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    assert sum(1 for g in grants if g["principal"] == "harness:chrn_2") == 1


@pytest.mark.slow
def test_an_entry_the_harness_already_holds_needs_only_visibility(
    alice: Client, make_client: ClientFactory
) -> None:
    """§9: "an entry the harness already holds is attached as it is"; granting is what needs delete."""
    memory = alice.create_memory("Team")
    alice.grant(memory["id"], "harness:chrn_2b", "read", "write")
    carol = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "read")
    carol.claim("chrn_2b")
    answer = _attach(carol, "chrn_2b", {"memory_id": memory["id"], "access": "write", "default": True})
    assert answer.status_code == 200, answer.text
    grants = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    assert sum(1 for g in grants if g["principal"] == "harness:chrn_2b") == 1


@pytest.mark.slow
def test_attaching_what_the_caller_may_not_grant_is_refused(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
    carol = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "read")
    carol.claim("chrn_3")
    answer = _attach(carol, "chrn_3", {"memory_id": memory["id"], "access": "read"})
    assert answer.status_code == 403
    assert error_code(answer) == "memory_forbidden"
    assert "'delete' privilege" in answer.json()["error"]["message"]
    assert make_client("harness:chrn_3").get(f"/v1/memories/{memory['id']}").status_code == 404


@pytest.mark.slow
def test_invisible_and_foreign_memories_are_not_found(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Alice only")
    mallory = make_client("user:mallory", tenant_name="other-tenant")
    answer = _attach(mallory, "chrn_4", {"memory_id": memory["id"], "access": "read"})
    assert answer.status_code == 404
    assert error_code(answer) == "memory_not_found"


@pytest.mark.slow
def test_two_defaults_a_read_default_and_duplicates_are_invalid(alice: Client) -> None:
    a, b = alice.create_memory("A"), alice.create_memory("B")
    for entries in (
        ({"memory_id": a["id"], "access": "write", "default": True},
         {"memory_id": b["id"], "access": "write", "default": True}),
        ({"memory_id": a["id"], "access": "read", "default": True},),
        ({"memory_id": a["id"], "access": "read"}, {"memory_id": a["id"], "access": "write"}),
        ({"memory_id": a["id"], "access": "admin"},),
    ):
        answer = _attach(alice, "chrn_5", *entries)
        assert answer.status_code == 422, entries
        assert error_code(answer) == "memory_invalid"
    assert alice.get("/v1/harnesses/chrn_5/memories").status_code == 404


@pytest.mark.slow
def test_an_empty_list_detaches_every_memory_and_keeps_the_grants(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
    alice.claim("chrn_6")
    assert _attach(alice, "chrn_6", {"memory_id": memory["id"], "access": "read"}).status_code == 200
    assert _attach(alice, "chrn_6").status_code == 200
    answer = alice.get("/v1/harnesses/chrn_6/memories")
    assert answer.status_code == 404
    assert error_code(answer) == "memories_not_attached"
    # Detaching removes a starting point; the grant stays until revoked where grants are.
    assert make_client("harness:chrn_6").get(f"/v1/memories/{memory['id']}").status_code == 200


def test_a_bad_harness_id_is_invalid(alice: Client) -> None:
    answer = alice.get("/v1/harnesses/bad%20id/memories")
    assert answer.status_code == 422


# -- who owns the list (docs/decisions.md, "Harness ownership") ----------------------------------------


def _listed(client: Client, harness: str) -> list[dict]:
    answer = client.get(f"/v1/harnesses/{harness}/memories")
    if answer.status_code == 404:
        assert error_code(answer) == "memories_not_attached"
        return []
    assert answer.status_code == 200, answer.text
    return answer.json()["memories"]


def _owners(client: Client, harness: str, *owners: str) -> object:
    return client.put(f"/v1/harnesses/{harness}/owners", {"owners": list(owners)})


@pytest.mark.slow
def test_a_principal_who_does_not_own_the_harness_is_refused_everything(
    alice: Client, make_client: ClientFactory
) -> None:
    """The issue's attacks: a user with no relation to a harness emptied its list, made its own memory the
    harness's default (so the harness's writes and turns land where it reads), and primed it."""
    memory = alice.create_memory("Team")
    entry = {"memory_id": memory["id"], "access": "write", "default": True}
    alice.claim("chrn_7")
    assert _attach(alice, "chrn_7", entry).status_code == 200
    dave = make_client("user:dave")
    daves = dave.create_memory("Dave's")
    for answer in (
        _attach(dave, "chrn_7"),
        _attach(dave, "chrn_7", {"memory_id": daves["id"], "access": "write", "default": True}),
        dave.get("/v1/harnesses/chrn_7/memories"),
        _owners(dave, "chrn_7", "user:dave"),
        dave.get("/v1/harnesses/chrn_7/owners"),
        dave.get("/v1/harnesses/chrn_7/prime"),
        dave.post("/v1/harnesses/chrn_7/turns", {"asked": "a", "answered": "b"}),
    ):
        assert (answer.status_code, error_code(answer)) == (403, "memory_forbidden"), answer.text
        assert "owned by other principals" in answer.json()["error"]["message"]
    assert _listed(alice, "chrn_7") == [entry]
    assert make_client("harness:chrn_7").post(
        f"/v1/memories/{memory['id']}/records", {"type": "fact", "content": "still attached"}).status_code == 201


@pytest.mark.slow
def test_owners_are_shared_by_the_owner_and_the_harness_owns_itself(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
    alice.claim("chrn_8")
    assert _attach(alice, "chrn_8", {"memory_id": memory["id"], "access": "read"}).status_code == 200
    assert alice.get("/v1/harnesses/chrn_8/owners").json() == {
        "object": "harness.owners", "harness_id": "chrn_8", "owners": ["user:alice"]}
    carol = make_client("user:carol", groups=("group:ops",))
    alice.grant(memory["id"], "user:carol", "read")
    assert _attach(carol, "chrn_8").status_code == 403
    shared = _owners(alice, "chrn_8", "user:alice", "group:ops")
    assert (shared.status_code, shared.json()["owners"]) == (200, ["user:alice", "group:ops"])
    assert _listed(carol, "chrn_8") == [{"memory_id": memory["id"], "access": "read", "default": False}]
    harness = make_client("harness:chrn_8")
    assert _listed(harness, "chrn_8") == _listed(carol, "chrn_8")  # the harness owns itself
    assert _owners(carol, "chrn_8", "group:ops").status_code == 200  # an owner may drop the others
    assert _attach(alice, "chrn_8").status_code == 403
    bad = _owners(carol, "chrn_8", "harness:chrn_8")
    assert (bad.status_code, error_code(bad)) == (422, "memory_invalid")


@pytest.mark.slow
def test_a_list_nobody_holds_is_no_list_and_another_tenant_never_reaches_one(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Team")
    alice.claim("chrn_10")
    assert _attach(alice, "chrn_10", {"memory_id": memory["id"], "access": "read"}).status_code == 200
    mallory = make_client("user:alice", tenant_name="other-tenant")
    attached, never = mallory.get("/v1/harnesses/chrn_10/memories"), alice.get("/v1/harnesses/chrn_11/memories")
    assert (attached.status_code, error_code(attached)) == (never.status_code, error_code(never)) == (
        404, "memories_not_attached")


@pytest.mark.slow
def test_an_owner_sees_how_many_entries_it_cannot_and_a_replacement_leaves_none_behind(
    alice: Client, make_client: ClientFactory
) -> None:
    private = alice.create_memory("Alice private", restricted=True)
    shared = alice.create_memory("Team")
    bob = make_client("user:bob")
    alice.grant(shared["id"], "user:bob", "read", "write", "delete")
    alice.claim("chrn_12")
    assert _attach(alice, "chrn_12", {"memory_id": private["id"], "access": "write", "default": True},
                   {"memory_id": shared["id"], "access": "read"}).status_code == 200
    assert _owners(alice, "chrn_12", "user:alice", "user:bob").status_code == 200
    seen = bob.get("/v1/harnesses/chrn_12/memories").json()
    assert (seen["memories"], seen["hidden"]) == ([{"memory_id": shared["id"], "access": "read", "default": False}], 1)
    assert private["id"] not in str(seen)

    bobs = bob.create_memory("Bob's")
    replaced = _attach(bob, "chrn_12", {"memory_id": bobs["id"], "access": "write", "default": True})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["memories"] == [{"memory_id": bobs["id"], "access": "write", "default": True}]
    harness = make_client("harness:chrn_12")
    assert [m["memory_id"] for m in _listed(harness, "chrn_12")] == [bobs["id"]]  # nothing survives unseen
    assert alice.get("/v1/harnesses/chrn_12/memories").json()["hidden"] == 1
    emptied = _attach(bob, "chrn_12")
    assert (emptied.status_code, emptied.json()["memories"]) == (200, [])
    assert _listed(harness, "chrn_12") == []


@pytest.mark.slow
def test_a_harness_key_writes_only_where_its_list_lets_it_whichever_door(
    alice: Client, make_client: ClientFactory
) -> None:
    """One reach rule for REST and MCP (domain/access/model.py): read narrows, and no list means read only."""
    team = alice.create_memory("Team")
    child = alice.create_memory("Child", parent_id=team["id"])
    alice.grant(team["id"], "harness:chrn_14", "read", "write")
    harness = make_client("harness:chrn_14")
    fact = {"type": "fact", "content": "x"}
    unattached = harness.post(f"/v1/memories/{team['id']}/records", fact)
    assert (unattached.status_code, error_code(unattached)) == (404, "memories_not_attached")
    assert "PUT /v1/harnesses/chrn_14/memories" in unattached.json()["error"]["message"]
    alice.claim("chrn_14")
    assert _attach(alice, "chrn_14", {"memory_id": team["id"], "access": "read"}).status_code == 200
    for memory_id in (team["id"], child["id"]):
        refused = harness.post(f"/v1/memories/{memory_id}/records", fact)
        assert (refused.status_code, error_code(refused)) == (403, "memory_forbidden")
    assert harness.get(f"/v1/memories/{child['id']}").json()["privileges"] == ["read"]
    assert _attach(alice, "chrn_14", {"memory_id": child["id"], "access": "write"}).status_code == 200
    assert harness.post(f"/v1/memories/{child['id']}/records", fact).status_code == 201
    assert harness.post(f"/v1/memories/{team['id']}/records", fact).status_code == 403


# -- the nearest attachment decides, and a session's memory widens nothing (issue 36, §9) -------------------


def test_a_memory_attached_read_below_one_attached_write_is_not_written(
    alice: Client, make_client: ClientFactory
) -> None:
    """§9 "access narrows": the nearest attachment on a memory's chain decides, not the farthest, so a
    memory attached read is read-only with all below it, whatever is attached write above it."""
    team = alice.create_memory("Team")
    deals = alice.create_memory("Deals", parent_id=team["id"])
    acme = alice.create_memory("Acme", parent_id=deals["id"])
    notes = alice.create_memory("Notes", parent_id=team["id"])
    alice.claim("chrn_30")
    assert _attach(alice, "chrn_30", {"memory_id": team["id"], "access": "write", "default": True},
                   {"memory_id": deals["id"], "access": "read"}).status_code == 200
    harness = make_client("harness:chrn_30")
    fact = {"type": "fact", "content": "x"}
    for memory in (deals, acme):
        refused = harness.post(f"/v1/memories/{memory['id']}/records", fact)
        assert (refused.status_code, error_code(refused)) == (403, "memory_forbidden"), refused.text
        assert harness.get(f"/v1/memories/{memory['id']}").json()["privileges"] == ["read"]
    for memory in (team, notes):
        assert harness.post(f"/v1/memories/{memory['id']}/records", fact).status_code == 201
    assert alice.get(f"/v1/memories/{deals['id']}/records").json()["data"] == []


def test_a_session_memory_under_a_read_attachment_is_read_only_in_prime_and_turns(
    alice: Client, make_client: ClientFactory
) -> None:
    """§9 `metadata.memory` (prime's `?memory=`, a turn's `memory`) counts as an attachment of the access
    of the nearest attachment on its chain: under a memory attached read it is read-only, as the
    harness's own POST finds, so a turn goes to the default attachment, whoever posts it; and it is
    checked with the harness's privileges, never an owner's."""
    team = alice.create_memory("Team")
    deals = alice.create_memory("Deals", parent_id=team["id"])
    inbox = alice.create_memory("Inbox")
    private = alice.create_memory("Alice private")
    alice.grant(team["id"], "harness:chrn_31", "read", "write")  # held: only the list narrows it
    alice.claim("chrn_31")
    assert _attach(alice, "chrn_31", {"memory_id": team["id"], "access": "read"},
                   {"memory_id": inbox["id"], "access": "write", "default": True}).status_code == 200
    harness = make_client("harness:chrn_31")
    refused = harness.post(f"/v1/memories/{deals['id']}/records", {"type": "fact", "content": "x"})
    assert (refused.status_code, error_code(refused)) == (403, "memory_forbidden")

    for client in (harness, alice):
        primed = client.get("/v1/harnesses/chrn_31/prime", memory=deals["id"])
        assert primed.status_code == 200, primed.text
        assert [(m["memory_id"], m["access"], m["default"]) for m in primed.json()["memories"]] == [
            (team["id"], "read", False), (inbox["id"], "write", True), (deals["id"], "read", False)]
        turn = client.post("/v1/harnesses/chrn_31/turns", {"asked": "hi", "answered": "hello", "memory": deals["id"]})
        assert (turn.status_code, turn.json()["memory_id"]) == (201, inbox["id"]), turn.text
    assert alice.get(f"/v1/memories/{deals['id']}/records").json()["data"] == []

    # An owner names a memory for the harness's session: the harness's privileges decide, not the owner's.
    for answer in (alice.get("/v1/harnesses/chrn_31/prime", memory=private["id"]),
                   alice.post("/v1/harnesses/chrn_31/turns", {"asked": "a", "answered": "b", "memory": private["id"]})):
        assert (answer.status_code, error_code(answer)) == (404, "memory_not_found"), answer.text
    assert alice.get(f"/v1/memories/{private['id']}/records").json()["data"] == []


# -- a list nobody has written yet (issue 36): its administrators', never its first writer's ---------------


def test_a_list_nobody_has_written_is_not_claimed_by_a_plain_principal(
    alice: Client, make_client: ClientFactory
) -> None:
    """The attack: "first writer owns" let any principal of the tenant claim a harness it had never been
    given, and make its own memory the default, where the harness's turns then landed."""
    mine = alice.create_memory("Alice's inbox")
    entry = {"memory_id": mine["id"], "access": "write", "default": True}
    for answer in (_attach(alice, "chrn_20", entry), _owners(alice, "chrn_20", "user:alice")):
        assert (answer.status_code, error_code(answer)) == (403, "memory_forbidden"), answer.text
        assert "never been written" in answer.json()["error"]["message"]
        assert "group:admins" in answer.json()["error"]["message"]
    harness = make_client("harness:chrn_20")
    turn = harness.post("/v1/harnesses/chrn_20/turns", {"asked": "my secret", "answered": "ok"})
    assert (turn.status_code, error_code(turn)) == (404, "memories_not_attached")
    assert alice.get(f"/v1/memories/{mine['id']}/records").json()["data"] == []
    # The harness may not claim its own list either: before its first write it is its administrators'.
    refused = _attach(harness, "chrn_20")
    assert (refused.status_code, error_code(refused)) == (403, "memory_forbidden")


def test_an_administrator_writes_a_list_nobody_has_and_names_its_owners(
    alice: Client, make_client: ClientFactory
) -> None:
    admin = make_client("user:root", groups=("group:admins",))
    team = alice.create_memory("Team")
    alice.grant(team["id"], "user:root", "read")
    alice.grant(team["id"], "harness:chrn_21", "read", "write")
    entry = {"memory_id": team["id"], "access": "write", "default": True}
    assert _attach(admin, "chrn_21", entry).status_code == 200
    assert admin.get("/v1/harnesses/chrn_21/owners").json()["owners"] == ["user:root"]
    assert _attach(alice, "chrn_21").status_code == 403  # written now: its owners', as before
    assert _owners(admin, "chrn_21", "user:root", "user:alice").status_code == 200
    assert _listed(alice, "chrn_21") == [entry]
    # A harness key in group:admins is no administrator (nothing an agent does widens its reach).
    agent = make_client("harness:chrn_99", groups=("group:admins",))
    answer = _owners(agent, "chrn_22", "user:root")
    assert (answer.status_code, error_code(answer)) == (403, "memory_forbidden")
    # Naming the owners first is the other way to hand a new list to a person.
    assert _owners(admin, "chrn_23", "user:alice").status_code == 200
    assert _attach(alice, "chrn_23", entry).status_code == 200
    assert _listed(alice, "chrn_23") == [entry]


def test_a_harness_never_changes_its_own_owners(alice: Client, make_client: ClientFactory) -> None:
    """The lockout: a harness set its owners to [] and its owners could no longer reach it."""
    admin = make_client("user:root", groups=("group:admins",))
    assert _owners(admin, "chrn_24", "user:alice").status_code == 200
    team = alice.create_memory("Team")
    entry = {"memory_id": team["id"], "access": "write", "default": True}
    assert _attach(alice, "chrn_24", entry).status_code == 200
    harness = make_client("harness:chrn_24")
    for owners in ((), ("user:mallory",)):
        answer = _owners(harness, "chrn_24", *owners)
        assert (answer.status_code, error_code(answer)) == (403, "memory_forbidden"), answer.text
    # Writing its own list's entries leaves its owners as they are.
    assert _attach(harness, "chrn_24", entry).status_code == 200
    assert alice.get("/v1/harnesses/chrn_24/owners").json()["owners"] == ["user:alice"]
    assert _listed(alice, "chrn_24") == [entry]
