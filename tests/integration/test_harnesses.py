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


def test_adding_an_entry_needs_delete_even_when_the_harness_already_holds_it(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Team")
    alice.grant(memory["id"], "harness:chrn_2", "read", "write")
    carol = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "read")
    answer = _attach(carol, "chrn_2", {"memory_id": memory["id"], "access": "write", "default": True})
    assert answer.status_code == 403
    assert error_code(answer) == "memory_forbidden"
    assert error_code(alice.get("/v1/harnesses/chrn_2/memories")) == "memories_not_attached"


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


# -- who may read and who may change the list ----------------------------------------------------


def _listed(client: Client, harness: str) -> list[dict]:
    answer = client.get(f"/v1/harnesses/{harness}/memories")
    if answer.status_code == 404:
        assert error_code(answer) == "memories_not_attached"
        return []
    assert answer.status_code == 200, answer.text
    return answer.json()["memories"]


def test_a_principal_that_holds_nothing_cannot_empty_a_harness_list(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
    assert _attach(alice, "chrn_7", {"memory_id": memory["id"], "access": "write", "default": True}).status_code == 200
    dave = make_client("user:dave")
    answer = _attach(dave, "chrn_7")
    # The list dave replaces is his view of it, which is empty: the answer says nothing, and nothing changes.
    assert answer.status_code == 200, answer.text
    assert answer.json()["memories"] == []
    assert _listed(alice, "chrn_7") == [{"memory_id": memory["id"], "access": "write", "default": True}]
    assert make_client("harness:chrn_7").post(
        f"/v1/memories/{memory['id']}/records", {"type": "fact", "content": "still attached"}).status_code == 201


def test_a_reader_without_delete_cannot_remove_or_change_an_entry(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
    carol = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "read", "write", "create")
    entry = {"memory_id": memory["id"], "access": "read", "default": False}
    assert _attach(alice, "chrn_8", entry).status_code == 200
    for entries in ((), ({**entry, "access": "write"},), ({**entry, "access": "write", "default": True},)):
        answer = _attach(carol, "chrn_8", *entries)
        assert answer.status_code == 403, entries
        assert error_code(answer) == "memory_forbidden"
    assert _listed(alice, "chrn_8") == [entry]
    # Sending it unchanged needs only that she sees the memory; she may not read the entry back.
    unchanged = _attach(carol, "chrn_8", entry)
    assert unchanged.status_code == 200, unchanged.text
    assert unchanged.json()["memories"] == []
    assert error_code(carol.get("/v1/harnesses/chrn_8/memories")) == "memories_not_attached"


def test_a_caller_reads_the_entries_where_it_holds_delete_and_the_harness_all_it_sees(
    alice: Client, make_client: ClientFactory
) -> None:
    owned, read_only = alice.create_memory("Gina may change"), alice.create_memory("Gina reads")
    gina = make_client("user:gina")
    alice.grant(owned["id"], "user:gina", "delete")
    alice.grant(read_only["id"], "user:gina", "read", "write", "create")
    assert _attach(alice, "chrn_9", {"memory_id": owned["id"], "access": "read"},
                   {"memory_id": read_only["id"], "access": "read"}).status_code == 200
    assert [m["memory_id"] for m in _listed(alice, "chrn_9")] == [owned["id"], read_only["id"]]
    assert [m["memory_id"] for m in _listed(gina, "chrn_9")] == [owned["id"]]
    harness = make_client("harness:chrn_9")
    assert [m["memory_id"] for m in _listed(harness, "chrn_9")] == [owned["id"], read_only["id"]]
    # A harness whose grant was revoked no longer sees that memory, and so no longer reads its entry.
    grant = next(g for g in alice.get(f"/v1/memories/{owned['id']}/grants").json()["data"]
                 if g["principal"] == "harness:chrn_9")
    assert alice.delete(f"/v1/memories/{owned['id']}/grants/{grant['id']}").status_code == 200
    assert [m["memory_id"] for m in _listed(harness, "chrn_9")] == [read_only["id"]]


def test_a_list_the_caller_may_not_read_looks_like_no_list(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Team")
    assert _attach(alice, "chrn_10", {"memory_id": memory["id"], "access": "read"}).status_code == 200
    bob = make_client("user:bob")
    alice.grant(memory["id"], "user:bob", "read")
    for client in (bob, make_client("user:dave"), make_client("user:alice", tenant_name="other-tenant")):
        attached, never = client.get("/v1/harnesses/chrn_10/memories"), client.get("/v1/harnesses/chrn_11/memories")
        assert (attached.status_code, error_code(attached)) == (never.status_code, error_code(never)) == (
            404, "memories_not_attached")


def test_entries_the_caller_cannot_see_are_kept_and_never_shown(alice: Client, make_client: ClientFactory) -> None:
    private = alice.create_memory("Alice private", restricted=True)
    shared = alice.create_memory("Team")
    bob = make_client("user:bob")
    alice.grant(shared["id"], "user:bob", "read", "write", "delete")
    bobs = bob.create_memory("Bob's")
    assert _attach(alice, "chrn_12", {"memory_id": private["id"], "access": "write", "default": True},
                   {"memory_id": shared["id"], "access": "read"}).status_code == 200
    assert _listed(bob, "chrn_12") == [{"memory_id": shared["id"], "access": "read", "default": False}]

    replaced = _attach(bob, "chrn_12", {"memory_id": bobs["id"], "access": "read"})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["memories"] == [{"memory_id": bobs["id"], "access": "read", "default": False}]
    assert private["id"] not in replaced.text
    # bob's own memory is one alice cannot see: each of them reads their own part of the same list.
    assert _listed(alice, "chrn_12") == [{"memory_id": private["id"], "access": "write", "default": True}]
    harness = make_client("harness:chrn_12")
    assert [m["memory_id"] for m in _listed(harness, "chrn_12")] == [bobs["id"], private["id"]]

    emptied = _attach(bob, "chrn_12")
    assert (emptied.status_code, emptied.json()["memories"]) == (200, [])
    assert [m["memory_id"] for m in _listed(harness, "chrn_12")] == [private["id"]]


def test_a_hidden_default_cannot_be_replaced_and_the_refusal_names_no_memory(
    alice: Client, make_client: ClientFactory
) -> None:
    private = alice.create_memory("Alice private", restricted=True)
    bob = make_client("user:bob")
    bobs = bob.create_memory("Bob's")
    hidden_default = {"memory_id": private["id"], "access": "write", "default": True}
    assert _attach(alice, "chrn_13", hidden_default).status_code == 200
    refused = _attach(bob, "chrn_13", {"memory_id": bobs["id"], "access": "write", "default": True})
    assert refused.status_code == 403
    assert error_code(refused) == "memory_forbidden"
    assert refused.json()["error"]["message"] == "the harness's default is a memory you may not change"
    assert private["id"] not in refused.text
    assert _listed(alice, "chrn_13") == [hidden_default]
    # Without a default, bob's entry joins the list and the default stays alice's.
    joined = _attach(bob, "chrn_13", {"memory_id": bobs["id"], "access": "write"})
    assert joined.status_code == 200, joined.text
    assert joined.json()["memories"] == [{"memory_id": bobs["id"], "access": "write", "default": False}]
    assert _listed(make_client("harness:chrn_13"), "chrn_13") == [
        {"memory_id": bobs["id"], "access": "write", "default": False}, hidden_default]
