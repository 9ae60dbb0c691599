"""§9: attaching memories to a harness is granting; access narrows, never widens."""

from __future__ import annotations

from tests.integration.conftest import Client, ClientFactory, error_code


def _attach(client: Client, harness: str, *entries: dict) -> object:
    return client.put(f"/v1/harnesses/{harness}/memories", {"memories": list(entries)})


def test_attaching_grants_the_harness_and_lists_the_entries(alice: Client, make_client: ClientFactory) -> None:
    shared = alice.create_memory("Team")
    personal = alice.create_memory("Alice private", restricted=True)
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


def test_an_entry_the_harness_already_holds_is_attached_without_a_new_grant(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Team")
    alice.grant(memory["id"], "harness:chrn_2", "read", "write")
    answer = _attach(alice, "chrn_2", {"memory_id": memory["id"], "access": "write", "default": True})
    assert answer.status_code == 200, answer.text
    grants = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    assert sum(1 for g in grants if g["principal"] == "harness:chrn_2") == 1


def test_an_entry_the_harness_already_holds_needs_only_visibility(
    alice: Client, make_client: ClientFactory
) -> None:
    """§9: "an entry the harness already holds is attached as it is"; granting is what needs delete."""
    memory = alice.create_memory("Team")
    alice.grant(memory["id"], "harness:chrn_2b", "read", "write")
    carol = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "read")
    answer = _attach(carol, "chrn_2b", {"memory_id": memory["id"], "access": "write", "default": True})
    assert answer.status_code == 200, answer.text
    grants = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    assert sum(1 for g in grants if g["principal"] == "harness:chrn_2b") == 1


def test_attaching_what_the_caller_may_not_grant_is_refused(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
    carol = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "read")
    answer = _attach(carol, "chrn_3", {"memory_id": memory["id"], "access": "read"})
    assert answer.status_code == 403
    assert error_code(answer) == "memory_forbidden"
    assert make_client("harness:chrn_3").get(f"/v1/memories/{memory['id']}").status_code == 404


def test_invisible_and_foreign_memories_are_not_found(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Alice only")
    mallory = make_client("user:mallory", tenant_name="other-tenant")
    answer = _attach(mallory, "chrn_4", {"memory_id": memory["id"], "access": "read"})
    assert answer.status_code == 404
    assert error_code(answer) == "memory_not_found"


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


def test_an_empty_list_detaches_every_memory_and_keeps_the_grants(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
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


def test_a_principal_who_does_not_own_the_harness_is_refused_everything(
    alice: Client, make_client: ClientFactory
) -> None:
    """The issue's attacks: a user with no relation to a harness emptied its list, made its own memory the
    harness's default (so the harness's writes and turns land where it reads), and primed it."""
    memory = alice.create_memory("Team")
    entry = {"memory_id": memory["id"], "access": "write", "default": True}
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


def test_owners_are_shared_by_the_owner_and_the_harness_owns_itself(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
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
    assert _owners(harness, "chrn_8").status_code == 200  # the harness owns itself, and may drop the others
    assert _attach(alice, "chrn_8").status_code == 403
    bad = _owners(harness, "chrn_8", "harness:chrn_8")
    assert (bad.status_code, error_code(bad)) == (422, "memory_invalid")


def test_a_list_nobody_holds_is_no_list_and_another_tenant_never_reaches_one(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Team")
    assert _attach(alice, "chrn_10", {"memory_id": memory["id"], "access": "read"}).status_code == 200
    mallory = make_client("user:alice", tenant_name="other-tenant")
    attached, never = mallory.get("/v1/harnesses/chrn_10/memories"), alice.get("/v1/harnesses/chrn_11/memories")
    assert (attached.status_code, error_code(attached)) == (never.status_code, error_code(never)) == (
        404, "memories_not_attached")


def test_an_owner_sees_how_many_entries_it_cannot_and_a_replacement_leaves_none_behind(
    alice: Client, make_client: ClientFactory
) -> None:
    private = alice.create_memory("Alice private", restricted=True)
    shared = alice.create_memory("Team")
    bob = make_client("user:bob")
    alice.grant(shared["id"], "user:bob", "read", "write", "delete")
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


def test_a_harness_key_writes_only_where_its_list_lets_it_whichever_door(
    alice: Client, make_client: ClientFactory
) -> None:
    """One reach rule for REST and MCP (domain/access.py): read narrows, and no list means read only."""
    team = alice.create_memory("Team")
    child = alice.create_memory("Child", parent_id=team["id"])
    alice.grant(team["id"], "harness:chrn_14", "read", "write")
    harness = make_client("harness:chrn_14")
    fact = {"type": "fact", "content": "x"}
    unattached = harness.post(f"/v1/memories/{team['id']}/records", fact)
    assert (unattached.status_code, error_code(unattached)) == (404, "memories_not_attached")
    assert "PUT /v1/harnesses/chrn_14/memories" in unattached.json()["error"]["message"]
    assert _attach(alice, "chrn_14", {"memory_id": team["id"], "access": "read"}).status_code == 200
    for memory_id in (team["id"], child["id"]):
        refused = harness.post(f"/v1/memories/{memory_id}/records", fact)
        assert (refused.status_code, error_code(refused)) == (403, "memory_forbidden")
    assert harness.get(f"/v1/memories/{child['id']}").json()["privileges"] == ["read"]
    assert _attach(alice, "chrn_14", {"memory_id": child["id"], "access": "write"}).status_code == 200
    assert harness.post(f"/v1/memories/{child['id']}/records", fact).status_code == 201
    assert harness.post(f"/v1/memories/{team['id']}/records", fact).status_code == 403
