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
    reader = make_client("user:carol")
    alice.grant(memory["id"], "user:carol", "read")
    # Carol may not change grants, but the harness already holds write: attaching is allowed.
    answer = _attach(reader, "chrn_2", {"memory_id": memory["id"], "access": "write", "default": True})
    assert answer.status_code == 200, answer.text
    grants = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    assert sum(1 for g in grants if g["principal"] == "harness:chrn_2") == 1


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
