"""Effective privileges (§3): union over the ancestors, the restricted cutoff, groups, 404 against
403, tenants kept apart, and grants."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.conftest import World, attach, caller
from uhp_memories.domain.access.model import AccessView, Grant, direct_privileges, effective_privileges, ordered
from uhp_memories.domain.errors import GrantNotFound, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import PRIVILEGES
from uhp_memories.domain.records.model import RecordInput

ALICE = caller("user:alice")
BOB = caller("user:bob")
CAROL_IN_SALES = caller("user:carol", groups=("group:sales",))
BOB_ELSEWHERE = caller("user:bob", tenant="globex")


def node(memory_id: str, parent_id: str | None, restricted: bool = False) -> Memory:
    return Memory("acme", memory_id, memory_id, "", parent_id, restricted, "native", "user:x", 1, 1)


def loader(*nodes: Memory):
    by_id = {n.id: n for n in nodes}
    return by_id.get


# -- the pure rule -------------------------------------------------------------------------------


def test_privileges_are_the_union_over_the_memory_and_every_ancestor() -> None:
    load = loader(node("root", None), node("mid", "root"), node("leaf", "mid"))
    direct = {"root": frozenset({"read"}), "mid": frozenset({"write"}), "leaf": frozenset({"create"})}
    assert effective_privileges("leaf", load, direct) == {"read", "write", "create"}
    assert effective_privileges("mid", load, direct) == {"read", "write"}
    assert effective_privileges("root", load, direct) == {"read"}


def test_a_restricted_node_keeps_its_own_grants_and_cuts_those_above() -> None:
    load = loader(node("root", None), node("private", "root", restricted=True), node("leaf", "private"))
    direct = {"root": frozenset({"read", "delete"}), "private": frozenset({"write"})}
    assert effective_privileges("private", load, direct) == {"write"}
    assert effective_privileges("leaf", load, direct) == {"write"}
    assert effective_privileges("leaf", load, {"root": frozenset({"read"})}) == frozenset()


def test_the_nearest_restricted_node_is_the_cutoff() -> None:
    load = loader(
        node("a", None),
        node("b", "a", restricted=True),
        node("c", "b"),
        node("d", "c", restricted=True),
        node("e", "d"),
    )
    direct = {"a": frozenset({"read"}), "b": frozenset({"write"}), "c": frozenset({"create"}),
              "d": frozenset({"delete"})}
    assert effective_privileges("c", load, direct) == {"write", "create"}
    assert effective_privileges("e", load, direct) == {"delete"}


def test_a_missing_memory_or_a_broken_chain_stops_the_walk() -> None:
    load = loader(node("orphan", "gone"))
    assert effective_privileges("nothing", load, {"nothing": frozenset({"read"})}) == frozenset()
    assert effective_privileges("orphan", load, {"orphan": frozenset({"read"}), "gone": frozenset({"write"})}) == {
        "read"
    }


def test_a_cycle_in_stored_data_does_not_loop_forever() -> None:
    load = loader(node("a", "b"), node("b", "a"))
    assert effective_privileges("a", load, {"b": frozenset({"read"})}) == {"read"}


def test_direct_privileges_merge_every_grant_on_a_node() -> None:
    grants = [
        Grant("acme", "g1", "m1", "user:a", ("read",), 1, "user:a"),
        Grant("acme", "g2", "m1", "group:x", ("write", "read"), 1, "user:a"),
        Grant("acme", "g3", "m2", "user:a", ("delete",), 1, "user:a"),
    ]
    assert direct_privileges(grants) == {"m1": {"read", "write"}, "m2": {"delete"}}
    assert ordered({"delete", "read", "create"}) == ["read", "create", "delete"]



def test_a_view_reads_each_memory_once_with_its_grants_and_all_grants_only_for_entry_points() -> None:
    root, child, walled = node("root", None), node("child", "root"), node("walled", "root", restricted=True)
    on = {
        "root": [Grant("acme", "g1", "root", "group:sales", ("read",), 1, "user:x"),
                 Grant("acme", "g2", "root", "user:bob", ("delete",), 1, "user:x"),
                 Grant("globex", "g3", "root", "user:carol", ("write",), 1, "user:x")],
        "child": [Grant("acme", "g4", "child", "user:carol", ("write",), 1, "user:x")],
        "walled": [],
    }
    reads: list[str] = []

    def load(memory_id: str):
        reads.append(memory_id)
        found = {m.id: m for m in (root, child, walled)}.get(memory_id)
        return found, on.get(memory_id, [])

    def everywhere():
        reads.append("all grants")
        return [g for grants in on.values() for g in grants if g.principal in CAROL_IN_SALES.principal_ids]

    view = AccessView(CAROL_IN_SALES, load, everywhere)
    # Her group's grant on the root, her own on the child; bob's grant and another tenant's are not hers.
    assert view.privileges("child") == {"read", "write"}
    assert view.privileges("root") == {"read"}
    assert view.privileges("walled") == frozenset()  # restricted: the root's grants stop above it
    assert view.privileges("nowhere") == frozenset()
    assert reads == ["child", "root", "walled", "nowhere"]  # each once, no read of all her grants
    assert view.granted_memory_ids == ["child", "root"]
    assert reads[-1] == "all grants"


# -- through the services ------------------------------------------------------------------------


def test_the_creator_holds_all_four_privileges_as_a_real_grant(world: World) -> None:
    memory = world.memories.create(ALICE, name="Sales")
    assert memory.privileges == list(PRIVILEGES)
    grants = world.grants.list(ALICE, memory.memory.id)
    assert [(g.principal, g.privileges, g.implicit) for g in grants] == [("user:alice", PRIVILEGES, True)]


def test_a_grant_on_a_parent_reaches_the_children_and_unions_with_their_own(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    child = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    grandchild = world.memories.create(ALICE, name="Acme", parent_id=child.id).memory
    world.grants.create(ALICE, root.id, "user:bob", ["read"])
    world.grants.create(ALICE, child.id, "user:bob", ["write"])

    assert world.memories.get(BOB, root.id).privileges == ["read"]
    assert world.memories.get(BOB, child.id).privileges == ["read", "write"]
    assert world.memories.get(BOB, grandchild.id).privileges == ["read", "write"]


def test_the_restricted_cutoff_hides_a_branch_from_grants_above_it(world: World) -> None:
    root = world.memories.create(ALICE, name="Team").memory
    private = world.memories.create(ALICE, name="Alice's own", parent_id=root.id, restricted=True).memory
    below = world.memories.create(ALICE, name="Drafts", parent_id=private.id).memory
    world.grants.create(ALICE, root.id, "user:bob", ["read", "write", "create", "delete"])

    assert world.memories.get(BOB, root.id).privileges == list(PRIVILEGES)
    for hidden in (private.id, below.id):
        with pytest.raises(MemoryNotFound):
            world.memories.get(BOB, hidden)
    # The creator's own grant sits on the restricted node itself, so it still applies.
    assert world.memories.get(ALICE, below.id).privileges == list(PRIVILEGES)

    world.grants.create(ALICE, private.id, "user:bob", ["read"])
    assert world.memories.get(BOB, private.id).privileges == ["read"]
    assert world.memories.get(BOB, below.id).privileges == ["read"]


def test_restricting_an_existing_node_takes_effect_at_once(world: World) -> None:
    root = world.memories.create(ALICE, name="Team").memory
    child = world.memories.create(ALICE, name="Project", parent_id=root.id).memory
    world.grants.create(ALICE, root.id, "user:bob", ["read"])
    assert world.memories.get(BOB, child.id).privileges == ["read"]

    world.memories.update(ALICE, child.id, {"restricted": True})
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB, child.id)
    world.memories.update(ALICE, child.id, {"restricted": False})
    assert world.memories.get(BOB, child.id).privileges == ["read"]


def test_a_grant_to_a_group_applies_to_its_members_only(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.grants.create(ALICE, root.id, "group:sales", ["read"])
    world.grants.create(ALICE, root.id, "user:carol", ["write"])

    assert world.memories.get(CAROL_IN_SALES, root.id).privileges == ["read", "write"]
    assert world.memories.get(caller("user:carol"), root.id).privileges == ["write"]
    assert world.memories.get(caller("user:dave", groups=("group:sales",)), root.id).privileges == ["read"]
    with pytest.raises(MemoryNotFound):
        world.memories.get(caller("user:erin", groups=("group:support",)), root.id)


def test_unseen_is_not_found_and_seen_without_the_privilege_is_forbidden(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    record = world.records.remember(ALICE, root.id, RecordInput("fact", "Acme renews in March.", {})).record

    for attempt in (
        lambda who: world.memories.get(who, root.id),
        lambda who: world.records.list(who, root.id),
        lambda who: world.records.get(who, root.id, record.id),
        lambda who: world.records.remember(who, root.id, RecordInput("fact", "x", {})),
        lambda who: world.memories.update(who, root.id, {"name": "Renamed"}),
        lambda who: world.memories.delete(who, root.id),
        lambda who: world.grants.list(who, root.id),
    ):
        with pytest.raises(MemoryNotFound):
            attempt(BOB)

    world.grants.create(ALICE, root.id, "user:bob", ["read"])
    assert world.records.get(BOB, root.id, record.id).record.id == record.id
    for attempt in (
        lambda who: world.records.remember(who, root.id, RecordInput("fact", "x", {})),
        lambda who: world.records.revise(who, root.id, record.id, {"content": "y"}),
        lambda who: world.records.forget(who, root.id, record.id),
        lambda who: world.memories.create(who, name="Child", parent_id=root.id),
        lambda who: world.memories.update(who, root.id, {"name": "Renamed"}),
        lambda who: world.memories.delete(who, root.id),
        lambda who: world.grants.list(who, root.id),
        lambda who: world.grants.create(who, root.id, "user:bob", ["write"]),
    ):
        with pytest.raises(MemoryForbidden):
            attempt(BOB)
    assert world.memories.get(ALICE, root.id).memory.name == "Sales"


def test_a_write_only_grant_does_not_give_read(world: World) -> None:
    root = world.memories.create(ALICE, name="Inbox").memory
    world.grants.create(ALICE, root.id, "user:bob", ["write"])
    written = world.records.remember(BOB, root.id, RecordInput("fact", "dropped off", {})).record
    assert written.written_by == {"kind": "user", "id": "bob"}
    with pytest.raises(MemoryForbidden):
        world.records.get(BOB, root.id, written.id)
    with pytest.raises(MemoryForbidden):
        world.records.list(BOB, root.id)


def test_tenants_never_see_each_other(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.grants.create(ALICE, root.id, "user:bob", ["read", "write", "create", "delete"])
    assert world.memories.get(BOB, root.id).privileges == list(PRIVILEGES)

    # The same principal name in another tenant is another principal.
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB_ELSEWHERE, root.id)
    with pytest.raises(MemoryNotFound):
        world.memories.create(BOB_ELSEWHERE, name="Child", parent_id=root.id)
    with pytest.raises(MemoryNotFound):
        world.grants.create(BOB_ELSEWHERE, root.id, "user:bob", ["read"])
    assert world.memories.list(BOB_ELSEWHERE).items == []

    theirs = world.memories.create(BOB_ELSEWHERE, name="Globex").memory
    with pytest.raises(MemoryNotFound):
        world.memories.get(ALICE, theirs.id)
    assert [v.memory.id for v in world.memories.list(BOB_ELSEWHERE).items] == [theirs.id]
    assert [v.memory.id for v in world.memories.list(BOB).items] == [root.id]


def test_ancestors_are_named_only_as_far_up_as_the_caller_sees(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    sales = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    acme = world.memories.create(ALICE, name="Acme", parent_id=sales.id).memory
    world.grants.create(ALICE, sales.id, "user:bob", ["read"])

    assert world.memories.get(ALICE, acme.id).ancestors == [root.id, sales.id]
    bob_view = world.memories.get(BOB, acme.id)
    assert bob_view.ancestors == [sales.id]
    assert bob_view.parent_id == sales.id
    entry = world.memories.get(BOB, sales.id)
    assert entry.ancestors == []
    assert entry.parent_id is None
    assert entry.memory.parent_id == root.id  # the stored placement is unchanged, only the view hides it


def test_children_count_counts_only_children_the_caller_may_see(world: World) -> None:
    root = world.memories.create(ALICE, name="Team").memory
    world.memories.create(ALICE, name="Shared", parent_id=root.id)
    world.memories.create(ALICE, name="Private", parent_id=root.id, restricted=True)
    world.grants.create(ALICE, root.id, "user:bob", ["read"])
    assert world.memories.get(ALICE, root.id).children_count == 2
    assert world.memories.get(BOB, root.id).children_count == 1


def test_a_memory_being_deleted_is_gone_for_every_reader(world: World) -> None:
    root = world.memories.create(ALICE, name="Doomed").memory
    world.ports.memories.mark_deleting("acme", [root.id])
    with pytest.raises(MemoryNotFound):
        world.memories.get(ALICE, root.id)
    assert world.memories.list(ALICE).items == []


# -- grants --------------------------------------------------------------------------------------


def test_grants_list_names_the_node_each_sits_on_up_to_the_cutoff(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    sales = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    private = world.memories.create(ALICE, name="Private", parent_id=sales.id, restricted=True).memory
    on_root = world.grants.create(ALICE, root.id, "group:all", ["read"])
    on_sales = world.grants.create(ALICE, sales.id, "group:sales", ["write"])
    on_private = world.grants.create(ALICE, private.id, "user:bob", ["read"])

    listed = {(g.id, g.memory_id) for g in world.grants.list(ALICE, sales.id)}
    assert (on_root.id, root.id) in listed
    assert (on_sales.id, sales.id) in listed
    assert on_private.id not in {g for g, _ in listed}

    below_cutoff = {g.id for g in world.grants.list(ALICE, private.id)}
    assert on_private.id in below_cutoff
    assert on_root.id not in below_cutoff
    assert on_sales.id not in below_cutoff


def test_grants_on_an_ancestor_the_caller_cannot_see_are_not_listed(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    sales = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    world.grants.create(ALICE, root.id, "group:all", ["read"])
    world.grants.create(ALICE, sales.id, "user:bob", ["delete"])
    listed = world.grants.list(BOB, sales.id)
    assert {g.memory_id for g in listed} == {sales.id}


def test_grants_are_validated(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    for principal in ("bob", "robot:r2", "user:", "user:has space", "group:" + "x" * 129):
        with pytest.raises(MemoryInvalid):
            world.grants.create(ALICE, root.id, principal, ["read"])
    for privileges in ([], ["admin"], ["read", "owner"]):
        with pytest.raises(MemoryInvalid):
            world.grants.create(ALICE, root.id, "user:bob", privileges)
    grant = world.grants.create(ALICE, root.id, "service:etl", ["delete", "read", "read"])
    assert grant.privileges == ("read", "delete")
    assert grant.created_by == "user:alice"
    assert not grant.implicit


def test_deleting_a_grant_revokes_it(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    grant = world.grants.create(ALICE, root.id, "user:bob", ["read"])
    assert world.memories.get(BOB, root.id).privileges == ["read"]
    world.grants.delete(ALICE, root.id, grant.id)
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB, root.id)
    with pytest.raises(GrantNotFound):
        world.grants.delete(ALICE, root.id, grant.id)


def test_a_grant_is_deleted_only_through_the_memory_it_sits_on(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    child = world.memories.create(ALICE, name="Sales", parent_id=root.id).memory
    grant = world.grants.create(ALICE, root.id, "user:bob", ["read"])
    with pytest.raises(GrantNotFound):
        world.grants.delete(ALICE, child.id, grant.id)
    assert world.memories.get(BOB, child.id).privileges == ["read"]


def test_a_creator_may_give_up_its_implicit_grant(world: World) -> None:
    root = world.memories.create(ALICE, name="Handed over").memory
    world.grants.create(ALICE, root.id, "user:bob", list(PRIVILEGES))
    implicit = next(g for g in world.grants.list(ALICE, root.id) if g.implicit)
    world.grants.delete(BOB, root.id, implicit.id)
    with pytest.raises(MemoryNotFound):
        world.memories.get(ALICE, root.id)


# -- references ----------------------------------------------------------------------------------


def test_a_reference_is_followable_only_with_read_on_its_target(world: World) -> None:
    private = world.memories.create(ALICE, name="Alice's notes").memory
    shared = world.memories.create(ALICE, name="Shared").memory
    world.grants.create(ALICE, shared.id, "user:bob", ["read"])
    source = world.records.remember(ALICE, private.id, RecordInput("fact", "source", {})).record
    ref = {"rel": "derived_from", "memory_id": private.id, "record_id": source.id}
    promoted = world.records.remember(ALICE, shared.id, RecordInput("fact", "promoted", {}, references=(ref,)))

    assert promoted.references == [{**ref, "available": True}]
    as_bob = world.records.get(BOB, shared.id, promoted.record.id)
    assert as_bob.references == [{"memory_id": private.id, "record_id": source.id, "available": False}]

    world.grants.create(ALICE, private.id, "user:bob", ["read"])
    assert world.records.get(BOB, shared.id, promoted.record.id).references[0]["available"] is True


def test_a_reference_to_nothing_looks_like_a_reference_out_of_reach(world: World) -> None:
    shared = world.memories.create(ALICE, name="Shared").memory
    missing = {"memory_id": shared.id, "record_id": "hrec_" + "f" * 32}
    nowhere = {"memory_id": "hmem_" + "e" * 32, "record_id": "hrec_" + "f" * 32}
    view = world.records.remember(ALICE, shared.id, RecordInput("fact", "x", {}, references=(missing, nowhere)))
    assert view.references == [{**missing, "available": False}, {**nowhere, "available": False}]


# -- a harness's list narrows: the nearest attachment on a memory's chain decides (§9, issue 36) ----------

AGENT = caller("harness:h_near")


def _tree(world: World) -> tuple[str, str, str, str]:
    """Team, its child Deals with a grandchild Acme, and Team's other child Notes; the harness holds
    read and write on all of it (by a grant on Team)."""
    team = world.memories.create(ALICE, name="Team").memory.id
    deals = world.memories.create(ALICE, name="Deals", parent_id=team).memory.id
    acme = world.memories.create(ALICE, name="Acme", parent_id=deals).memory.id
    notes = world.memories.create(ALICE, name="Notes", parent_id=team).memory.id
    world.grants.create(ALICE, team, AGENT.principal, ["read", "write"])
    return team, deals, acme, notes


def test_a_memory_attached_read_below_one_attached_write_is_read_only(world: World) -> None:
    team, deals, acme, notes = _tree(world)
    attach(world, AGENT, team, "write")
    attach(world, AGENT, deals, "read")
    view = world.ports.access(AGENT)
    assert {m: ordered(view.privileges(m)) for m in (team, deals, acme, notes)} == {
        team: ["read", "write"], deals: ["read"], acme: ["read"], notes: ["read", "write"]}
    for memory_id in (deals, acme):
        with pytest.raises(MemoryForbidden) as refused:
            world.records.remember(AGENT, memory_id, RecordInput("fact", "x", {}))
        assert "nearest memory attached" in refused.value.message
    assert world.records.remember(AGENT, notes, RecordInput("fact", "x", {})).record.memory_id == notes


def test_a_memory_attached_write_below_one_attached_read_is_written(world: World) -> None:
    team, deals, acme, notes = _tree(world)
    attach(world, AGENT, team, "read")
    attach(world, AGENT, deals, "write")
    view = world.ports.access(AGENT)
    assert {m: ordered(view.privileges(m)) for m in (team, deals, acme, notes)} == {
        team: ["read"], deals: ["read", "write"], acme: ["read", "write"], notes: ["read"]}


def test_a_session_memory_takes_the_access_of_the_nearest_attachment_on_its_chain(world: World) -> None:
    """§9 `metadata.memory` widens nothing: under a memory attached read it is read-only; with no
    attachment on its chain it is the session's own starting point, written where the grants allow."""
    team, deals, acme, _ = _tree(world)
    attach(world, AGENT, team, "read")
    for session in (deals, acme):
        view = world.ports.access(replace(AGENT, session_memory=session))
        assert ordered(view.privileges(session)) == ["read"]
        with pytest.raises(MemoryForbidden):
            world.records.remember(replace(AGENT, session_memory=session), session, RecordInput("fact", "x", {}))
    attach(world, AGENT, deals, "write")
    attach(world, AGENT, acme, "read")
    assert ordered(world.ports.access(replace(AGENT, session_memory=acme)).privileges(acme)) == ["read"]
    # Another tree, nothing attached on it: the session's memory is written, and what lies below it.
    other = world.memories.create(ALICE, name="Bob's").memory.id
    child = world.memories.create(ALICE, name="Bob's deals", parent_id=other).memory.id
    world.grants.create(ALICE, other, AGENT.principal, ["read", "write"])
    view = world.ports.access(replace(AGENT, session_memory=other))
    assert [ordered(view.privileges(m)) for m in (other, child, team)] == [
        ["read", "write"], ["read", "write"], ["read"]]
