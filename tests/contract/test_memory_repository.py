"""The MemoryRepository contract (ports.py): one suite run against every adapter.

Each test runs once on the in-memory fake and once on the DynamoDB adapter over moto; where the two
differ, ports.py says which one is right."""

from __future__ import annotations

import pytest

from tests.contract.builders import (
    ACME,
    GLOBEX,
    add,
    at,
    creator_grant,
    first,
    gid,
    grant,
    ids,
    memory,
    mid,
)
from tests.contract.conftest import Repositories
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.records.model import Snapshot

# -- MemoryRepository: create, get, children -----------------------------------------------------


def test_create_then_get_returns_the_memory_as_written(repos: Repositories) -> None:
    root = add(repos, 1, restricted=True, name="Sales — Ünïcode")
    child = add(repos, 2, parent=1)
    assert repos.memories.get(ACME, root.id) == root
    assert repos.memories.get(ACME, child.id) == child
    assert repos.memories.get(ACME, mid(99)) is None


@pytest.mark.slow
def test_empty_and_absent_fields_round_trip(repos: Repositories) -> None:
    bare = memory(1).evolve(description="")
    repos.memories.create(bare, creator_grant(bare))
    assert repos.memories.get(ACME, bare.id) == bare
    record = first(1, bare.id, 10, content="").evolve(attributes={}, valid_from=None, references=())
    repos.records.append_first(record)
    assert repos.records.get(ACME, bare.id, record.id) == record


def test_create_writes_the_creators_grant(repos: Repositories) -> None:
    root = add(repos, 1)
    assert repos.memories.grants_on(ACME, root.id) == [creator_grant(root)]
    assert repos.memories.grants_of(ACME, ["user:alice"]) == [creator_grant(root)]


@pytest.mark.slow
def test_children_are_the_direct_children_oldest_first(repos: Repositories) -> None:
    add(repos, 1)
    add(repos, 5, parent=1, created_at=30)
    add(repos, 4, parent=1, created_at=10)
    add(repos, 3, parent=1, created_at=20)
    add(repos, 2, parent=1, created_at=20)  # same instant as 3: the id breaks the tie
    add(repos, 6, parent=4, created_at=40)
    assert ids(repos.memories.children(ACME, mid(1))) == [mid(4), mid(2), mid(3), mid(5)]
    assert ids(repos.memories.children(ACME, mid(4))) == [mid(6)]
    assert repos.memories.children(ACME, mid(6)) == []
    assert repos.memories.children(ACME, mid(99)) == []


def test_create_under_a_missing_parent_raises_tree_changed_and_writes_nothing(repos: Repositories) -> None:
    orphan = memory(2, parent=1)
    with pytest.raises(TreeChanged):
        repos.memories.create(orphan, creator_grant(orphan))
    assert repos.memories.get(ACME, orphan.id) is None
    assert repos.memories.grants_on(ACME, orphan.id) == []
    assert repos.memories.grants_of(ACME, ["user:alice"]) == []


def test_create_under_a_parent_being_deleted_raises_tree_changed(repos: Repositories) -> None:
    add(repos, 1)
    repos.memories.mark_deleting(ACME, [mid(1)])
    child = memory(2, parent=1)
    with pytest.raises(TreeChanged):
        repos.memories.create(child, creator_grant(child))
    assert repos.memories.get(ACME, child.id) is None
    assert repos.memories.children(ACME, mid(1)) == []


# -- MemoryRepository: update and the chain guard ------------------------------------------------


def test_update_replaces_the_client_fields(repos: Repositories) -> None:
    root = add(repos, 1)
    changed = root.evolve(name="Renamed", description="new words", restricted=True, updated_at=root.updated_at + 5,
                          described_by="user:bob")  # who set the name and description, shown to agents (§13)
    repos.memories.update(changed, None, [])
    assert repos.memories.get(ACME, root.id) == changed


def test_update_keeps_the_record_count(repos: Repositories) -> None:
    root = add(repos, 1)
    repos.records.append_first(first(1, root.id, 1))
    repos.memories.update(root.evolve(name="Renamed"), None, [])
    stored = repos.memories.get(ACME, root.id)
    assert stored.name == "Renamed"
    assert stored.record_count == 1


@pytest.mark.slow
def test_update_moves_a_memory_between_parents_and_to_the_root(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2)
    c = add(repos, 3, parent=2)
    x = add(repos, 4, parent=1)

    moved = x.evolve(parent_id=c.id)
    repos.memories.update(moved, a.id, [c, b])
    assert repos.memories.get(ACME, x.id) == moved
    assert repos.memories.children(ACME, a.id) == []
    assert ids(repos.memories.children(ACME, c.id)) == [x.id]

    as_root = moved.evolve(parent_id=None)
    repos.memories.update(as_root, c.id, [])
    assert repos.memories.get(ACME, x.id).parent_id is None
    assert repos.memories.children(ACME, c.id) == []

    back = as_root.evolve(parent_id=a.id)
    repos.memories.update(back, None, [a])
    assert repos.memories.get(ACME, x.id).parent_id == a.id
    assert ids(repos.memories.children(ACME, a.id)) == [x.id]


@pytest.mark.slow
def test_update_fails_when_the_parent_is_no_longer_the_expected_one(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2)
    x = add(repos, 3, parent=1)
    with pytest.raises(TreeChanged):
        repos.memories.update(x.evolve(parent_id=b.id, name="moved"), b.id, [b])
    with pytest.raises(TreeChanged):
        repos.memories.update(x.evolve(name="renamed"), None, [])
    assert repos.memories.get(ACME, x.id) == x
    assert ids(repos.memories.children(ACME, a.id)) == [x.id]


@pytest.mark.slow
def test_update_fails_when_a_node_of_the_parent_chain_moved(repos: Repositories) -> None:
    """Two concurrent moves: x under c (read while c sat under b), while c moves under x."""
    add(repos, 1)
    b = add(repos, 2, parent=1)
    c = add(repos, 3, parent=2)
    x = add(repos, 4, parent=1)
    chain_as_read = [c, b, repos.memories.get(ACME, mid(1))]

    repos.memories.update(c.evolve(parent_id=x.id), b.id, [x, repos.memories.get(ACME, mid(1))])
    with pytest.raises(TreeChanged):
        repos.memories.update(x.evolve(parent_id=c.id), mid(1), chain_as_read)
    assert repos.memories.get(ACME, x.id) == x
    assert repos.memories.get(ACME, c.id).parent_id == x.id


@pytest.mark.slow
def test_update_fails_when_a_higher_node_of_the_chain_moved(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2, parent=1)
    other = add(repos, 3)
    x = add(repos, 4)
    chain_as_read = [b, a]
    repos.memories.update(a.evolve(parent_id=other.id), None, [other])
    with pytest.raises(TreeChanged):
        repos.memories.update(x.evolve(parent_id=b.id), None, chain_as_read)
    assert repos.memories.get(ACME, x.id) == x


@pytest.mark.parametrize("fate", ["deleting", "purged"])
def test_update_fails_when_a_node_of_the_chain_is_going(repos: Repositories, fate: str) -> None:
    a = add(repos, 1)
    b = add(repos, 2, parent=1)
    x = add(repos, 3)
    if fate == "deleting":
        repos.memories.mark_deleting(ACME, [a.id])
    else:
        repos.memories.purge(ACME, a.id)
    with pytest.raises(TreeChanged):
        repos.memories.update(x.evolve(parent_id=b.id), None, [b, a])
    assert repos.memories.get(ACME, x.id) == x


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_update_of_a_memory_being_deleted_or_missing_fails(repos: Repositories, fate: str) -> None:
    x = add(repos, 1) if fate == "deleting" else memory(1)
    if fate == "deleting":
        repos.memories.mark_deleting(ACME, [x.id])
    with pytest.raises(TreeChanged):
        repos.memories.update(x.evolve(name="renamed"), None, [])
    stored = repos.memories.get(ACME, x.id)
    if fate == "missing":
        assert stored is None
    else:
        assert stored.name == x.name


# -- MemoryRepository: grants --------------------------------------------------------------------


@pytest.mark.slow
def test_grants_on_a_memory_oldest_first(repos: Repositories) -> None:
    root = add(repos, 1)
    later = grant(2, root.id, "group:sales", privileges=("read", "write"), created_at=50)
    earlier = grant(3, root.id, "user:bob", created_at=20)
    tie = grant(1, root.id, "user:carol", created_at=20)
    for g in (later, earlier, tie):
        repos.memories.put_grant(g)
    assert repos.memories.grants_on(ACME, root.id) == [creator_grant(root), tie, earlier, later]


def test_grants_of_finds_every_grant_of_any_of_the_principals(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2, parent=1)
    g1 = grant(1, a.id, "user:bob")
    g2 = grant(2, b.id, "user:bob", privileges=("write",))
    g3 = grant(3, b.id, "group:sales")
    g4 = grant(4, a.id, "user:carol")
    for g in (g1, g2, g3, g4):
        repos.memories.put_grant(g)

    def key(g: Grant) -> str:
        return g.id

    assert sorted(repos.memories.grants_of(ACME, ["user:bob"]), key=key) == [g1, g2]
    assert sorted(repos.memories.grants_of(ACME, ["user:bob", "group:sales"]), key=key) == [g1, g2, g3]
    assert sorted(repos.memories.grants_of(ACME, ["user:bob", "user:bob"]), key=key) == [g1, g2]
    assert repos.memories.grants_of(ACME, ["user:nobody"]) == []
    assert repos.memories.grants_of(ACME, []) == []


@pytest.mark.slow
def test_get_with_grants_reads_the_memory_and_every_grant_on_it_and_nothing_else(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2, parent=1)
    on_a = grant(1, a.id, "group:sales", privileges=("read", "write"), created_at=30)
    on_b = grant(2, b.id, "user:bob", created_at=40)
    for g in (on_a, on_b):
        repos.memories.put_grant(g)
    # Items of every other kind in the memory's partition: a record, a snapshot.
    repos.records.append_first(first(1, a.id, 10))
    repos.records.put_snapshot(Snapshot(ACME, a.id, "hsnp_" + "1" * 32, "v1", "m", at(20), "user:alice"))

    assert repos.memories.get_with_grants(ACME, a.id) == (repos.memories.get(ACME, a.id), [creator_grant(a), on_a])
    assert repos.memories.get_with_grants(ACME, b.id) == (b, [creator_grant(b), on_b])
    assert repos.memories.get_with_grants(GLOBEX, a.id) == (None, [])  # never another tenant's
    assert repos.memories.get_with_grants(ACME, mid(99)) == (None, [])
    repos.memories.mark_deleting(ACME, [b.id])
    assert repos.memories.get_with_grants(ACME, b.id) == (b.evolve(deleting=True), [creator_grant(b), on_b])


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_put_grant_on_a_memory_going_or_gone_raises_tree_changed(repos: Repositories, fate: str) -> None:
    if fate == "deleting":
        add(repos, 1)
        repos.memories.mark_deleting(ACME, [mid(1)])
    g = grant(1, mid(1))
    with pytest.raises(TreeChanged):
        repos.memories.put_grant(g)
    assert repos.memories.grants_of(ACME, ["user:bob"]) == []


def test_delete_grant(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2)
    g = grant(1, a.id)
    repos.memories.put_grant(g)
    assert repos.memories.delete_grant(ACME, b.id, g.id) is False  # only through the memory it sits on
    assert repos.memories.grants_of(ACME, ["user:bob"]) == [g]
    assert repos.memories.delete_grant(ACME, a.id, g.id) is True
    assert repos.memories.grants_of(ACME, ["user:bob"]) == []
    assert repos.memories.grants_on(ACME, a.id) == [creator_grant(a)]
    assert repos.memories.delete_grant(ACME, a.id, g.id) is False
    assert repos.memories.delete_grant(ACME, mid(99), gid(99)) is False


# -- MemoryRepository: mark_deleting and purge ---------------------------------------------------


def test_mark_deleting_hides_memories_at_once(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2, parent=1)
    keep = add(repos, 3)
    repos.memories.mark_deleting(ACME, [a.id, mid(99), b.id])  # one already gone: the rest are still marked
    assert repos.memories.get(ACME, a.id) == a.evolve(deleting=True)
    assert repos.memories.get(ACME, b.id) == b.evolve(deleting=True)
    assert repos.memories.get(ACME, keep.id) == keep
    assert repos.memories.get(ACME, mid(99)) is None


@pytest.mark.slow
def test_purge_removes_the_memory_and_its_grants(repos: Repositories) -> None:
    a = add(repos, 1)
    b = add(repos, 2, parent=1)
    c = add(repos, 3, parent=1)
    on_b = grant(1, b.id)
    on_c = grant(2, c.id)
    repos.memories.put_grant(on_b)
    repos.memories.put_grant(on_c)
    repos.memories.mark_deleting(ACME, [b.id])
    repos.memories.purge(ACME, b.id)

    assert repos.memories.get(ACME, b.id) is None
    assert repos.memories.grants_on(ACME, b.id) == []
    assert repos.memories.grants_of(ACME, ["user:bob"]) == [on_c]
    assert {g.memory_id for g in repos.memories.grants_of(ACME, ["user:alice"])} == {a.id, c.id}
    assert ids(repos.memories.children(ACME, a.id)) == [c.id]
    repos.memories.purge(ACME, b.id)  # a purge retried finds nothing left to do
    assert repos.memories.get(ACME, c.id) == c
