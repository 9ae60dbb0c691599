"""A memory's `children.count` comes from the count its item keeps (issue 35): summaries of every child a
list, a get or a recall names were one Query each (N+1). Every answer is held against an oracle that reads
the children: the listing of `?parent=` for that caller, through every change that moves the count (a child
created open or restricted, a grant on a restricted child and its revocation, a restrict, a move, a delete)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory

pytestmark = pytest.mark.slow


def listed_children(client: Client, memory_id: str) -> list[dict[str, Any]]:
    found, cursor = [], None
    while True:
        page = client.get("/v1/memories", parent=memory_id, limit=100, **({"cursor": cursor} if cursor else {}))
        assert page.status_code == 200, page.text
        found += page.json()["data"]
        cursor = page.json().get("next_cursor")
        if not cursor:
            return found


def counts_agree(client: Client, memory_id: str) -> int:
    """The count shown for the memory, and for each child listed, equals what listing each one finds."""
    shown = client.get(f"/v1/memories/{memory_id}")
    assert shown.status_code == 200, shown.text
    children = listed_children(client, memory_id)
    assert shown.json()["children"]["count"] == len(children), (client.principal, memory_id)
    for child in children:
        assert child["children"]["count"] == len(listed_children(client, child["id"])), (client.principal, child)
    return len(children)


def test_children_counts_are_kept_through_every_change_and_agree_with_the_listing(
    alice: Client, make_client: ClientFactory
) -> None:
    bob = make_client("user:bob")
    root = alice.create_memory("Root")["id"]
    alice.grant(root, "user:bob", "read")
    opened = alice.create_memory("Open", parent_id=root)["id"]
    secret = alice.create_memory("Secret", parent_id=root, restricted=True)["id"]
    other = alice.create_memory("Other", parent_id=root)["id"]
    assert (counts_agree(alice, root), counts_agree(bob, root)) == (3, 2)  # bob is granted nothing on Secret

    grant = alice.grant(secret, "user:bob", "read")
    assert counts_agree(bob, root) == 3
    assert alice.delete(f"/v1/memories/{secret}/grants/{grant['id']}").status_code in (200, 204)
    assert counts_agree(bob, root) == 2
    group = alice.grant(secret, "group:sales", "read")  # bob is no member: nothing changes for him
    assert (counts_agree(alice, root), counts_agree(bob, root)) == (3, 2)
    assert alice.delete(f"/v1/memories/{secret}/grants/{group['id']}").status_code in (200, 204)

    assert alice.put(f"/v1/memories/{opened}", {"restricted": True}).status_code == 200
    assert (counts_agree(alice, root), counts_agree(bob, root)) == (3, 1)
    assert alice.put(f"/v1/memories/{opened}", {"restricted": False}).status_code == 200
    assert (counts_agree(alice, root), counts_agree(bob, root)) == (3, 2)
    assert alice.put(f"/v1/memories/{opened}", {"name": "Renamed"}).status_code == 200  # a rename counts nothing
    assert counts_agree(bob, root) == 2

    assert alice.put(f"/v1/memories/{other}", {"parent_id": opened}).status_code == 200  # moved one level down
    assert (counts_agree(alice, root), counts_agree(bob, root), counts_agree(bob, opened)) == (2, 1, 1)
    assert alice.put(f"/v1/memories/{secret}", {"parent_id": opened}).status_code == 200  # restricted, moved
    assert (counts_agree(alice, opened), counts_agree(bob, opened), counts_agree(alice, root)) == (2, 1, 1)
    assert alice.put(f"/v1/memories/{other}", {"parent_id": None}).status_code == 200  # to a root of its own
    assert (counts_agree(alice, opened), counts_agree(bob, opened)) == (1, 0)

    deleted = alice.delete(f"/v1/memories/{secret}")
    assert deleted.status_code in (200, 202, 204), deleted.text
    assert (counts_agree(alice, opened), counts_agree(alice, root)) == (0, 1)


def test_a_listing_reads_no_child_of_the_children_it_names(alice: Client, local_aws: Any) -> None:
    """One Query for the children listed, none for each child's own (their counts are kept on them)."""
    root = alice.create_memory("Wide")["id"]
    for n in range(6):
        child = alice.create_memory(f"Child {n}", parent_id=root)["id"]
        alice.create_memory(f"Grandchild {n}", parent_id=child)
    queries: list[str] = []

    def count(params: dict[str, Any], **kwargs: Any) -> None:
        queries.append(params.get("IndexName", "table"))

    events = local_aws.container.dynamodb.meta.events
    events.register("provide-client-params.dynamodb.Query", count)
    try:
        listed = alice.get("/v1/memories", parent=root)
        got = alice.get(f"/v1/memories/{root}")
        recalled = alice.post(f"/v1/memories/{root}/recall", {"query": "anything"})
    finally:
        events.unregister("provide-client-params.dynamodb.Query", count)
    assert [c["children"]["count"] for c in listed.json()["data"]] == [1] * 6
    assert got.json()["children"]["count"] == 6
    assert recalled.status_code == 200, recalled.text
    assert [c["children"]["count"] for c in recalled.json()["children"]] == [1] * 6
    assert len(queries) <= 4, queries  # the children of the root, once a request (the grants of the key aside)
