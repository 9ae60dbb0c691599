"""GrantService (§3.1) beyond tests/unit/test_access.py: who may list, grant and revoke (delete, held
directly or inherited), the order and shape of a listing, the creator's implicit grant, validation
before anything is written, memories gone or being deleted, and tenants kept apart."""

from __future__ import annotations

import pytest

from tests.unit.conftest import World, caller
from uhp_memories.domain.access.grants import check_principal, check_privileges
from uhp_memories.domain.errors import GrantNotFound, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.model import PRIVILEGES

ALICE = caller("user:alice")
BOB = caller("user:bob")
CAROL_IN_ADMINS = caller("user:carol", groups=("group:admins",))
ALICE_ELSEWHERE = caller("user:alice", tenant="globex")
UNKNOWN = "hmem_" + "f" * 32


def test_listing_grants_needs_delete_and_read_write_create_are_not_enough(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.grants.create(ALICE, root.id, "user:bob", ["read", "write", "create"])
    with pytest.raises(MemoryForbidden):
        world.grants.list(BOB, root.id)
    world.grants.create(ALICE, root.id, "user:bob", ["delete"])
    assert {g.principal for g in world.grants.list(BOB, root.id)} == {"user:alice", "user:bob"}


def test_delete_inherited_from_an_ancestor_lets_a_caller_list_grant_and_revoke_below(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    child = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    world.grants.create(ALICE, root.id, "user:bob", ["delete"])
    given = world.grants.create(BOB, child.id, "user:dave", ["read"])
    assert given.created_by == "user:bob"
    assert given.id in {g.id for g in world.grants.list(BOB, child.id)}
    world.grants.delete(BOB, child.id, given.id)
    assert given.id not in {g.id for g in world.grants.list(BOB, child.id)}


def test_delete_held_through_a_group_is_enough_to_manage_grants(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.grants.create(ALICE, root.id, "group:admins", ["delete"])
    grant = world.grants.create(CAROL_IN_ADMINS, root.id, "user:bob", ["read"])
    assert grant.id in {g.id for g in world.grants.list(CAROL_IN_ADMINS, root.id)}
    world.grants.delete(CAROL_IN_ADMINS, root.id, grant.id)


def test_a_listing_gives_the_memorys_own_grants_then_each_ancestors_nearest_first(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    mid = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    leaf = world.memories.create(ALICE, name="Acme", parent_id=mid.id).memory
    on_root = world.grants.create(ALICE, root.id, "group:all", ["read"])
    on_mid = world.grants.create(ALICE, mid.id, "group:sales", ["write"])
    on_leaf = world.grants.create(ALICE, leaf.id, "user:bob", ["read"])
    listed = world.grants.list(ALICE, leaf.id)
    ids = [g.id for g in listed]
    assert ids.index(on_leaf.id) < ids.index(on_mid.id) < ids.index(on_root.id)
    # Every grant names the node it sits on, which is how an inherited one is told from an own one.
    assert {(g.id, g.memory_id) for g in listed} >= {
        (on_leaf.id, leaf.id), (on_mid.id, mid.id), (on_root.id, root.id)
    }
    # The creator's implicit grant on each of the three nodes is listed with them.
    assert sorted(g.memory_id for g in listed if g.implicit) == sorted([leaf.id, mid.id, root.id])


def test_a_restricted_memory_lists_its_own_grants_only(world: World) -> None:
    root = world.memories.create(ALICE, name="Team").memory
    private = world.memories.create(ALICE, name="Private", parent_id=root.id, restricted=True).memory
    world.grants.create(ALICE, root.id, "user:bob", list(PRIVILEGES))
    listed = world.grants.list(ALICE, private.id)
    assert {g.memory_id for g in listed} == {private.id}
    assert [(g.principal, g.implicit) for g in listed] == [("user:alice", True)]


def test_a_restricted_ancestor_is_listed_and_cuts_what_sits_above_it(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    walled = world.memories.create(ALICE, name="Board", parent_id=root.id, restricted=True).memory
    below = world.memories.create(ALICE, name="Minutes", parent_id=walled.id).memory
    on_root = world.grants.create(ALICE, root.id, "group:all", ["read"])
    on_walled = world.grants.create(ALICE, walled.id, "group:board", ["read"])
    ids = {g.id for g in world.grants.list(ALICE, below.id)}
    assert on_walled.id in ids
    assert on_root.id not in ids


def test_the_creators_implicit_grant_is_listed_as_a_grant_of_all_four_privileges(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    child = world.memories.create(ALICE, name="Accounts", parent_id=root.id).memory
    own = [g for g in world.grants.list(ALICE, child.id) if g.memory_id == child.id]
    assert len(own) == 1
    implicit = own[0]
    assert (implicit.principal, implicit.privileges, implicit.implicit, implicit.created_by) == (
        "user:alice", PRIVILEGES, True, "user:alice"
    )
    assert implicit.tenant == "acme"


def test_the_creator_of_a_child_under_someone_elses_memory_holds_an_implicit_grant_on_it(world: World) -> None:
    root = world.memories.create(ALICE, name="Shared").memory
    world.grants.create(ALICE, root.id, "user:bob", ["read", "create"])
    child = world.memories.create(BOB, name="Bob's corner", parent_id=root.id).memory
    # Bob holds delete on his child only through his implicit grant: he may manage its grants.
    listed = world.grants.list(BOB, child.id)
    assert [(g.principal, g.implicit) for g in listed if g.memory_id == child.id] == [("user:bob", True)]
    # The grants inherited from the root, which Bob can see, are listed with the node they sit on.
    assert {(g.principal, g.memory_id) for g in listed if g.memory_id == root.id} == {
        ("user:alice", root.id), ("user:bob", root.id)
    }
    with pytest.raises(MemoryForbidden):
        world.grants.list(BOB, root.id)


def test_a_new_grant_is_an_explicit_grant_stamped_by_its_granter(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.clock.advance(5000)
    grant = world.grants.create(ALICE, root.id, "group:sales", ["write", "read"])
    assert grant.id.startswith("hgrt_")
    assert (grant.tenant, grant.memory_id, grant.principal) == ("acme", root.id, "group:sales")
    assert grant.privileges == ("read", "write")  # in the protocol's order
    assert grant.created_at > root.created_at
    assert (grant.created_by, grant.implicit) == ("user:alice", False)
    assert grant in world.grants.list(ALICE, root.id)


def test_every_principal_kind_can_be_granted(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    for principal in ("user:bob@example.com", "harness:claude-code", "service:etl", "key:k_1", "group:sales.eu"):
        assert world.grants.create(ALICE, root.id, principal, ["read"]).principal == principal


def test_privileges_are_validated_and_deduplicated_in_protocol_order() -> None:
    assert check_privileges(["delete", "create", "write", "read", "read"]) == PRIVILEGES
    for bad in ([], ["READ"], ["read", ""], ["admin"]):
        with pytest.raises(MemoryInvalid) as raised:
            check_privileges(bad)
        assert raised.value.code == "memory_invalid"
    with pytest.raises(MemoryInvalid):
        check_principal("user:" + "x" * 129)
    assert check_principal("user:" + "x" * 128).endswith("x")


def test_an_invalid_grant_writes_nothing(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    before = world.grants.list(ALICE, root.id)
    for principal, privileges in (("user:bob", ["owner"]), ("bob", ["read"])):
        with pytest.raises(MemoryInvalid):
            world.grants.create(ALICE, root.id, principal, privileges)
    assert world.grants.list(ALICE, root.id) == before
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB, root.id)


def test_granting_needs_delete_before_the_request_is_validated(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    with pytest.raises(MemoryNotFound):
        world.grants.create(BOB, root.id, "not-a-principal", ["admin"])
    world.grants.create(ALICE, root.id, "user:bob", ["read", "write", "create"])
    with pytest.raises(MemoryForbidden):
        world.grants.create(BOB, root.id, "not-a-principal", ["admin"])


def test_revoking_needs_delete_and_an_outsider_is_told_not_found(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    grant = world.grants.create(ALICE, root.id, "user:bob", ["read", "write", "create"])
    with pytest.raises(MemoryForbidden):
        world.grants.delete(BOB, root.id, grant.id)  # not even its own grant
    with pytest.raises(MemoryNotFound):
        world.grants.delete(caller("user:eve"), root.id, grant.id)
    assert world.memories.get(BOB, root.id).privileges == ["read", "write", "create"]


def test_revoking_an_unknown_grant_is_grant_not_found(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    with pytest.raises(GrantNotFound) as raised:
        world.grants.delete(ALICE, root.id, "hgrt_" + "0" * 32)
    assert raised.value.code == "memory_grant_not_found"


def test_revoking_one_grant_leaves_a_principals_other_grants(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    child = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    on_root = world.grants.create(ALICE, root.id, "user:bob", ["read"])
    world.grants.create(ALICE, child.id, "user:bob", ["write"])
    world.grants.delete(ALICE, root.id, on_root.id)
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB, root.id)
    assert world.memories.get(BOB, child.id).privileges == ["write"]


def test_revoking_a_group_grant_takes_the_privilege_from_every_member(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    grant = world.grants.create(ALICE, root.id, "group:admins", ["read"])
    assert world.memories.get(CAROL_IN_ADMINS, root.id).privileges == ["read"]
    world.grants.delete(ALICE, root.id, grant.id)
    with pytest.raises(MemoryNotFound):
        world.memories.get(CAROL_IN_ADMINS, root.id)


def test_unknown_memories_are_not_found_for_every_grant_operation(world: World) -> None:
    for attempt in (
        lambda: world.grants.list(ALICE, UNKNOWN),
        lambda: world.grants.create(ALICE, UNKNOWN, "user:bob", ["read"]),
        lambda: world.grants.delete(ALICE, UNKNOWN, "hgrt_" + "0" * 32),
    ):
        with pytest.raises(MemoryNotFound):
            attempt()


def test_a_memory_being_deleted_takes_no_grant_and_lists_none(world: World) -> None:
    root = world.memories.create(ALICE, name="Doomed").memory
    grant = world.grants.create(ALICE, root.id, "user:bob", ["read"])
    world.ports.memories.mark_deleting("acme", [root.id])
    with pytest.raises(MemoryNotFound):
        world.grants.create(ALICE, root.id, "user:carol", ["read"])
    with pytest.raises(MemoryNotFound):
        world.grants.list(ALICE, root.id)
    with pytest.raises(MemoryNotFound):
        world.grants.delete(ALICE, root.id, grant.id)


def test_a_grant_racing_a_delete_of_its_memory_is_not_found_and_not_written(world: World) -> None:
    root = world.memories.create(ALICE, name="Doomed").memory
    repo = world.ports.memories
    put = repo.put_grant

    def put_after_the_delete_began(grant):  # the delete marks the memory between check and write
        repo.mark_deleting("acme", [root.id])
        put(grant)

    repo.put_grant = put_after_the_delete_began  # type: ignore[method-assign]
    with pytest.raises(MemoryNotFound):
        world.grants.create(ALICE, root.id, "user:bob", ["read"])
    assert all(g.principal != "user:bob" for g in repo.grants.values())


def test_grants_stay_in_their_tenant(world: World) -> None:
    ours = world.memories.create(ALICE, name="Sales").memory
    theirs = world.memories.create(ALICE_ELSEWHERE, name="Sales").memory
    granted = world.grants.create(ALICE, ours.id, "user:bob", ["read"])
    for attempt in (
        lambda: world.grants.list(ALICE_ELSEWHERE, ours.id),
        lambda: world.grants.create(ALICE_ELSEWHERE, ours.id, "user:bob", ["read"]),
        lambda: world.grants.delete(ALICE_ELSEWHERE, ours.id, granted.id),
        lambda: world.grants.list(ALICE, theirs.id),
    ):
        with pytest.raises(MemoryNotFound):
            attempt()
    # The same grant id asked for through another tenant's memory is not found there.
    with pytest.raises(GrantNotFound):
        world.grants.delete(ALICE_ELSEWHERE, theirs.id, granted.id)
    assert [g.tenant for g in world.grants.list(ALICE_ELSEWHERE, theirs.id)] == ["globex"]
    assert granted in world.grants.list(ALICE, ours.id)
    # A grant in one tenant gives nothing to the same principal name in another.
    with pytest.raises(MemoryNotFound):
        world.memories.get(caller("user:bob", tenant="globex"), ours.id)
