"""The memory tree (§2): create, get, update and move, delete, and the three listings."""

from __future__ import annotations

import pytest

from tests.unit.conftest import World, caller
from uhp_memories.domain import cursors
from uhp_memories.domain.errors import MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.limits import MAX_TREE_DEPTH
from uhp_memories.domain.records.model import RecordInput

ALICE = caller("user:alice")
BOB = caller("user:bob")


def ids(page) -> list[str]:
    return [view.memory.id for view in page.items]


def make_tree(world: World) -> dict[str, str]:
    """company > (sales > (acme, globex), support)"""
    company = world.memories.create(ALICE, name="Company").memory.id
    sales = world.memories.create(ALICE, name="Sales", parent_id=company).memory.id
    acme = world.memories.create(ALICE, name="Acme", parent_id=sales).memory.id
    globex = world.memories.create(ALICE, name="Globex", parent_id=sales).memory.id
    support = world.memories.create(ALICE, name="Support", parent_id=company).memory.id
    return {"company": company, "sales": sales, "acme": acme, "globex": globex, "support": support}


# -- create and get ------------------------------------------------------------------------------


def test_create_a_root(world: World) -> None:
    view = world.memories.create(ALICE, name="Sales", description="What the sales team knows.")
    memory = view.memory
    assert memory.id.startswith("hmem_")
    assert len(memory.id) == 37
    assert (memory.name, memory.description, memory.parent_id) == ("Sales", "What the sales team knows.", None)
    assert memory.restricted is False
    assert memory.provider == "native"
    assert memory.created_by == "user:alice"
    assert memory.created_at == memory.updated_at
    assert memory.record_count == 0
    assert (view.parent_id, view.ancestors, view.children_count) == (None, [], 0)
    assert world.memories.get(ALICE, memory.id) == view


def test_create_a_child_inherits_the_provider_and_counts_on_the_parent(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    child = world.memories.create(ALICE, name="Sales", parent_id=root.id, restricted=True)
    assert child.memory.parent_id == root.id
    assert child.parent_id == root.id
    assert child.ancestors == [root.id]
    assert child.memory.restricted is True
    assert child.memory.provider == "native"
    assert world.memories.get(ALICE, root.id).children_count == 1


def test_an_unknown_provider_is_invalid(world: World) -> None:
    with pytest.raises(MemoryInvalid):
        world.memories.create(ALICE, name="Elsewhere", provider="mem0")
    assert world.memories.list(ALICE).items == []


def test_creating_a_child_needs_create_on_the_parent(world: World) -> None:
    root = world.memories.create(ALICE, name="Company").memory
    with pytest.raises(MemoryNotFound):
        world.memories.create(BOB, name="Mine", parent_id=root.id)
    world.grants.create(ALICE, root.id, "user:bob", ["read", "write", "delete"])
    with pytest.raises(MemoryForbidden):
        world.memories.create(BOB, name="Mine", parent_id=root.id)
    world.grants.create(ALICE, root.id, "user:bob", ["create"])
    child = world.memories.create(BOB, name="Mine", parent_id=root.id)
    assert child.memory.created_by == "user:bob"
    assert world.memories.get(ALICE, root.id).children_count == 1


def test_a_child_of_a_missing_parent_is_not_found(world: World) -> None:
    with pytest.raises(MemoryNotFound):
        world.memories.create(ALICE, name="Orphan", parent_id="hmem_" + "0" * 32)


def test_get_an_unknown_memory_is_not_found(world: World) -> None:
    with pytest.raises(MemoryNotFound):
        world.memories.get(ALICE, "hmem_" + "0" * 32)
    with pytest.raises(MemoryNotFound):
        world.memories.get(ALICE, "not-an-id")


def test_the_tree_is_at_most_max_depth_levels(world: World) -> None:
    parent_id = None
    for level in range(MAX_TREE_DEPTH):
        parent_id = world.memories.create(ALICE, name=f"level {level}", parent_id=parent_id).memory.id
    deepest = world.memories.get(ALICE, parent_id)
    assert len(deepest.ancestors) == MAX_TREE_DEPTH - 1
    with pytest.raises(MemoryInvalid):
        world.memories.create(ALICE, name="too deep", parent_id=parent_id)


# -- update --------------------------------------------------------------------------------------


def test_rename_and_describe_need_write(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.grants.create(ALICE, root.id, "user:bob", ["read"])
    with pytest.raises(MemoryForbidden):
        world.memories.update(BOB, root.id, {"description": "mine now"})
    world.grants.create(ALICE, root.id, "user:bob", ["write"])
    world.clock.advance(1000)
    updated = world.memories.update(BOB, root.id, {"name": "Sales EMEA", "description": "Europe"})
    assert (updated.memory.name, updated.memory.description) == ("Sales EMEA", "Europe")
    assert updated.memory.updated_at > root.updated_at
    assert updated.memory.created_at == root.created_at
    assert world.memories.get(ALICE, root.id).memory.name == "Sales EMEA"


def test_changing_restricted_needs_delete(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.grants.create(ALICE, root.id, "user:bob", ["read", "write", "create"])
    with pytest.raises(MemoryForbidden):
        world.memories.update(BOB, root.id, {"restricted": True})
    assert world.memories.get(ALICE, root.id).memory.restricted is False
    assert world.memories.update(ALICE, root.id, {"restricted": True}).memory.restricted is True


def test_the_provider_cannot_change(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    with pytest.raises(MemoryInvalid):
        world.memories.update(ALICE, root.id, {"provider": "mem0"})
    assert world.memories.update(ALICE, root.id, {"provider": "native", "name": "Same"}).memory.name == "Same"


def test_update_keeps_the_record_count(world: World) -> None:
    root = world.memories.create(ALICE, name="Sales").memory
    world.records.remember(ALICE, root.id, RecordInput("fact", "x", {}))
    assert world.memories.update(ALICE, root.id, {"name": "Renamed"}).memory.record_count == 1


# -- moves ---------------------------------------------------------------------------------------


def test_move_under_another_parent(world: World) -> None:
    tree = make_tree(world)
    moved = world.memories.update(ALICE, tree["acme"], {"parent_id": tree["support"]})
    assert moved.memory.parent_id == tree["support"]
    assert moved.ancestors == [tree["company"], tree["support"]]
    assert ids(world.memories.list(ALICE, parent=tree["sales"])) == [tree["globex"]]
    assert ids(world.memories.list(ALICE, parent=tree["support"])) == [tree["acme"]]


def test_move_to_the_root_and_back(world: World) -> None:
    tree = make_tree(world)
    as_root = world.memories.update(ALICE, tree["sales"], {"parent_id": None})
    assert as_root.memory.parent_id is None
    assert as_root.ancestors == []
    assert world.memories.get(ALICE, tree["acme"]).ancestors == [tree["sales"]]
    assert set(ids(world.memories.list(ALICE))) == {tree["company"], tree["sales"]}
    back = world.memories.update(ALICE, tree["sales"], {"parent_id": tree["company"]})
    assert back.ancestors == [tree["company"]]
    assert ids(world.memories.list(ALICE)) == [tree["company"]]


@pytest.mark.parametrize(
    ("subject", "target"), [("company", "company"), ("company", "sales"), ("company", "acme"), ("sales", "globex")]
)
def test_a_move_that_would_make_a_cycle_is_invalid_and_changes_nothing(world: World, subject: str, target: str) -> None:
    tree = make_tree(world)
    before = {name: world.memories.get(ALICE, memory_id) for name, memory_id in tree.items()}
    with pytest.raises(MemoryInvalid):
        world.memories.update(ALICE, tree[subject], {"parent_id": tree[target], "name": "Renamed"})
    after = {name: world.memories.get(ALICE, memory_id) for name, memory_id in tree.items()}
    assert after == before


def test_a_move_under_itself_is_invalid(world: World) -> None:
    tree = make_tree(world)
    with pytest.raises(MemoryInvalid):
        world.memories.update(ALICE, tree["acme"], {"parent_id": tree["acme"]})
    assert world.memories.get(ALICE, tree["acme"]).memory.parent_id == tree["sales"]


def test_a_cycle_is_refused_even_through_a_node_the_caller_cannot_see(world: World) -> None:
    root = world.memories.create(ALICE, name="Root").memory
    hidden = world.memories.create(ALICE, name="Hidden", parent_id=root.id, restricted=True).memory
    below = world.memories.create(ALICE, name="Below", parent_id=hidden.id).memory
    world.grants.create(ALICE, root.id, "user:bob", ["delete"])
    world.grants.create(ALICE, below.id, "user:bob", ["create"])
    with pytest.raises(MemoryInvalid):
        world.memories.update(BOB, root.id, {"parent_id": below.id})
    assert world.memories.get(ALICE, root.id).memory.parent_id is None


def test_moving_needs_delete_on_the_memory_and_create_on_the_new_parent(world: World) -> None:
    tree = make_tree(world)
    elsewhere = world.memories.create(ALICE, name="Elsewhere").memory.id
    world.grants.create(ALICE, tree["acme"], "user:bob", ["read", "write", "create"])
    with pytest.raises(MemoryForbidden):
        world.memories.update(BOB, tree["acme"], {"parent_id": tree["acme"]})

    world.grants.create(ALICE, tree["acme"], "user:bob", ["delete"])
    with pytest.raises(MemoryNotFound):  # bob cannot see the new parent
        world.memories.update(BOB, tree["acme"], {"parent_id": elsewhere})
    world.grants.create(ALICE, elsewhere, "user:bob", ["read", "write", "delete"])
    with pytest.raises(MemoryForbidden):
        world.memories.update(BOB, tree["acme"], {"parent_id": elsewhere})
    assert world.memories.get(ALICE, tree["acme"]).memory.parent_id == tree["sales"]

    world.grants.create(ALICE, elsewhere, "user:bob", ["create"])
    assert world.memories.update(BOB, tree["acme"], {"parent_id": elsewhere}).memory.parent_id == elsewhere


def test_a_move_to_the_same_parent_is_not_a_move(world: World) -> None:
    tree = make_tree(world)
    world.grants.create(ALICE, tree["acme"], "user:bob", ["write"])
    view = world.memories.update(BOB, tree["acme"], {"parent_id": tree["sales"], "name": "ACME"})
    assert view.memory.name == "ACME"
    assert view.memory.parent_id == tree["sales"]


def test_a_move_that_would_make_the_tree_too_deep_is_invalid(world: World) -> None:
    parent_id = None
    for level in range(MAX_TREE_DEPTH):
        parent_id = world.memories.create(ALICE, name=f"level {level}", parent_id=parent_id).memory.id
    loose = world.memories.create(ALICE, name="Loose").memory.id
    with pytest.raises(MemoryInvalid):
        world.memories.update(ALICE, loose, {"parent_id": parent_id})
    assert world.memories.get(ALICE, loose).memory.parent_id is None


def test_a_move_reshapes_who_can_reach_the_subtree(world: World) -> None:
    tree = make_tree(world)
    world.grants.create(ALICE, tree["sales"], "user:bob", ["read"])
    assert world.memories.get(BOB, tree["acme"]).privileges == ["read"]
    world.memories.update(ALICE, tree["acme"], {"parent_id": tree["support"]})
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB, tree["acme"])


# -- delete --------------------------------------------------------------------------------------


def test_delete_removes_the_subtree_its_records_and_grants(world: World) -> None:
    tree = make_tree(world)
    record = world.records.remember(ALICE, tree["acme"], RecordInput("fact", "x", {})).record
    world.grants.create(ALICE, tree["acme"], "user:bob", ["read"])
    world.memories.delete(ALICE, tree["sales"])

    for name in ("sales", "acme", "globex"):
        with pytest.raises(MemoryNotFound):
            world.memories.get(ALICE, tree[name])
        assert world.ports.memories.get("acme", tree[name]) is None
        assert world.ports.memories.grants_on("acme", tree[name]) == []
    assert world.ports.records.get("acme", tree["acme"], record.id) is None
    assert world.ports.records.chain("acme", record.chain_id) == []
    assert world.ports.memories.grants_of("acme", ["user:bob"]) == []
    assert ids(world.memories.list(ALICE, parent=tree["company"])) == [tree["support"]]
    assert world.memories.get(ALICE, tree["company"]).children_count == 1


def test_delete_needs_delete(world: World) -> None:
    tree = make_tree(world)
    world.grants.create(ALICE, tree["company"], "user:bob", ["read", "write", "create"])
    with pytest.raises(MemoryForbidden):
        world.memories.delete(BOB, tree["sales"])
    with pytest.raises(MemoryNotFound):
        world.memories.delete(caller("user:mallory"), tree["sales"])
    assert world.memories.get(ALICE, tree["acme"]).memory.id == tree["acme"]


# -- listings ------------------------------------------------------------------------------------


def test_entry_points_are_where_the_caller_enters_the_tree(world: World) -> None:
    tree = make_tree(world)
    other_root = world.memories.create(ALICE, name="Other").memory.id
    assert ids(world.memories.list(ALICE)) == [tree["company"], other_root]

    world.grants.create(ALICE, tree["acme"], "user:bob", ["read"])
    world.grants.create(ALICE, tree["support"], "group:help", ["read"])
    world.grants.create(ALICE, tree["sales"], "user:bob", ["write"])  # acme is below sales now
    bob = caller("user:bob", groups=("group:help",))
    assert ids(world.memories.list(bob)) == [tree["sales"], tree["support"]]
    views = world.memories.list(bob).items
    assert all(view.parent_id is None and view.ancestors == [] for view in views)


def test_a_node_below_an_unseen_restricted_node_is_an_entry_point(world: World) -> None:
    root = world.memories.create(ALICE, name="Root").memory.id
    hidden = world.memories.create(ALICE, name="Hidden", parent_id=root, restricted=True).memory.id
    below = world.memories.create(ALICE, name="Below", parent_id=hidden).memory.id
    world.grants.create(ALICE, root, "user:bob", ["read"])
    world.grants.create(ALICE, below, "user:bob", ["read"])
    assert ids(world.memories.list(BOB)) == [root, below]


def test_children_listing_is_one_level_oldest_first_and_only_what_the_caller_sees(world: World) -> None:
    tree = make_tree(world)
    private = world.memories.create(ALICE, name="Private", parent_id=tree["company"], restricted=True).memory.id
    assert ids(world.memories.list(ALICE, parent=tree["company"])) == [tree["sales"], tree["support"], private]
    world.grants.create(ALICE, tree["company"], "user:bob", ["read"])
    assert ids(world.memories.list(BOB, parent=tree["company"])) == [tree["sales"], tree["support"]]
    assert ids(world.memories.list(ALICE, parent=tree["acme"])) == []


def test_children_of_an_unseen_memory_are_not_found(world: World) -> None:
    tree = make_tree(world)
    world.grants.create(ALICE, tree["acme"], "user:bob", ["read"])
    with pytest.raises(MemoryNotFound):
        world.memories.list(BOB, parent=tree["sales"])
    with pytest.raises(MemoryNotFound):
        world.memories.list(BOB, ancestor=tree["sales"])


def test_descendants_walk_through_restricted_nodes_the_caller_cannot_see(world: World) -> None:
    root = world.memories.create(ALICE, name="Root").memory.id
    open_child = world.memories.create(ALICE, name="Open", parent_id=root).memory.id
    hidden = world.memories.create(ALICE, name="Hidden", parent_id=root, restricted=True).memory.id
    hidden_child = world.memories.create(ALICE, name="Hidden child", parent_id=hidden).memory.id
    granted = world.memories.create(ALICE, name="Granted", parent_id=hidden_child).memory.id
    granted_child = world.memories.create(ALICE, name="Granted child", parent_id=granted).memory.id
    world.grants.create(ALICE, root, "user:bob", ["read"])
    world.grants.create(ALICE, granted, "user:bob", ["read"])

    assert set(ids(world.memories.list(BOB, ancestor=root, limit=100))) == {open_child, granted, granted_child}
    assert set(ids(world.memories.list(ALICE, ancestor=root, limit=100))) == {
        open_child, hidden, hidden_child, granted, granted_child
    }
    assert ids(world.memories.list(BOB, ancestor=granted)) == [granted_child]


def test_parent_and_ancestor_together_are_invalid(world: World) -> None:
    tree = make_tree(world)
    with pytest.raises(MemoryInvalid):
        world.memories.list(ALICE, parent=tree["company"], ancestor=tree["company"])


@pytest.mark.parametrize("scope", ["entry", "children", "descendants"])
def test_listings_paginate_without_gaps_or_repeats(world: World, scope: str) -> None:
    root = world.memories.create(ALICE, name="Root").memory.id
    created = []
    for i in range(7):
        parent = None if scope == "entry" else root
        created.append(world.memories.create(ALICE, name=f"m{i}", parent_id=parent).memory.id)
    if scope == "entry":
        created.insert(0, root)
    kwargs = {"entry": {}, "children": {"parent": root}, "descendants": {"ancestor": root}}[scope]

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = world.memories.list(ALICE, limit=3, cursor=cursor, **kwargs)
        pages += 1
        assert len(page.items) <= 3
        seen.extend(ids(page))
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == created
    assert pages == -(-len(created) // 3)


def test_a_full_last_page_has_no_next_cursor(world: World) -> None:
    root = world.memories.create(ALICE, name="Root").memory.id
    for i in range(4):
        world.memories.create(ALICE, name=f"m{i}", parent_id=root)
    first = world.memories.list(ALICE, parent=root, limit=2)
    second = world.memories.list(ALICE, parent=root, limit=2, cursor=first.next_cursor)
    assert len(second.items) == 2
    assert second.next_cursor is None


def test_limits_are_checked(world: World) -> None:
    for limit in (0, 101):
        with pytest.raises(MemoryInvalid):
            world.memories.list(ALICE, limit=limit)


def test_a_cursor_from_another_listing_or_tampered_is_invalid(world: World) -> None:
    root = world.memories.create(ALICE, name="Root").memory.id
    for i in range(3):
        world.memories.create(ALICE, name=f"m{i}", parent_id=root)
    children_cursor = world.memories.list(ALICE, parent=root, limit=1).next_cursor
    assert children_cursor is not None
    bad_cursors = [
        "garbage",
        children_cursor[:-3],
        cursors.encode("entry", [0, ""], over=root),
        cursors.encode("children", "x", over=root),
        cursors.encode("children", {"created_at": 0}, over=root),
        cursors.encode("children", [0], over=root),
        cursors.encode("children", ["0", "hmem_"], over=root),
        cursors.encode("children", None, over=root),
    ]
    for bad in bad_cursors:
        with pytest.raises(MemoryInvalid):
            world.memories.list(ALICE, parent=root, cursor=bad)
    with pytest.raises(MemoryInvalid):
        world.memories.list(ALICE, cursor=children_cursor)
    with pytest.raises(MemoryInvalid):
        world.memories.list(ALICE, ancestor=root, cursor=children_cursor)


def test_memories_being_deleted_are_left_out_of_every_listing(world: World) -> None:
    tree = make_tree(world)
    world.ports.memories.mark_deleting("acme", [tree["sales"], tree["acme"], tree["globex"]])
    assert ids(world.memories.list(ALICE, parent=tree["company"])) == [tree["support"]]
    assert ids(world.memories.list(ALICE, ancestor=tree["company"])) == [tree["support"]]
    assert ids(world.memories.list(ALICE)) == [tree["company"]]


def test_neighbours_name_the_visible_parent_and_children(world: World) -> None:
    tree = make_tree(world)
    world.grants.create(ALICE, tree["sales"], "user:bob", ["read"])
    world.memories.create(ALICE, name="Private", parent_id=tree["sales"], restricted=True)
    access = world.ports.access(BOB)
    sales = access.visible(tree["sales"])
    parent, children = world.memories.neighbours(access, sales)
    assert parent is None
    assert [c.id for c in children] == [tree["acme"], tree["globex"]]
    parent, children = world.memories.neighbours(access, access.visible(tree["acme"]))
    assert parent is not None
    assert parent.id == tree["sales"]
    assert parent.children_count == 2
    assert children == []


def test_an_update_that_cuts_the_callers_own_inherited_reach_takes_effect_and_names_the_memory(world: World) -> None:
    tree = make_tree(world)
    world.grants.create(ALICE, tree["sales"], "user:bob", ["delete"])
    # Bob's delete comes from sales: moved to the root, acme inherits nothing from it any more. The
    # answer still names the memory as written (Bob was just told it exists), holding no privilege.
    moved = world.memories.update(BOB, tree["acme"], {"parent_id": None})
    assert (moved.memory.id, moved.memory.parent_id, moved.parent_id) == (tree["acme"], None, None)
    assert moved.privileges == []
    assert world.memories.get(ALICE, tree["acme"]).memory.parent_id is None
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB, tree["acme"])
    # A restricted node inherits nothing from above it: the same cut, by the other field.
    restricted = world.memories.update(BOB, tree["globex"], {"restricted": True})
    assert (restricted.memory.id, restricted.memory.restricted) == (tree["globex"], True)
    assert restricted.privileges == []
    assert world.memories.get(ALICE, tree["globex"]).memory.restricted is True
    with pytest.raises(MemoryNotFound):
        world.memories.get(BOB, tree["globex"])


def test_a_no_op_update_by_a_reader_is_answered_and_writes_nothing(world: World) -> None:
    """Fields a reader could not change, sent with the values they already hold, change nothing: the
    update needs no privilege beyond seeing the memory and writes nothing (updated_at stays)."""
    root = world.memories.create(ALICE, name="Sales").memory
    world.grants.create(ALICE, root.id, "user:bob", ["read"])
    world.clock.advance(5000)
    answer = world.memories.update(BOB, root.id, {"restricted": False, "parent_id": None})
    assert answer.privileges == ["read"]
    assert answer.memory.updated_at == root.updated_at
    assert world.memories.get(ALICE, root.id).memory == root


def test_an_update_is_answered_with_the_callers_own_grants_on_the_memory_and_those_it_inherits(world: World) -> None:
    tree = make_tree(world)
    world.grants.create(ALICE, tree["sales"], "user:bob", ["read"])
    world.grants.create(ALICE, tree["acme"], "user:bob", ["write"])
    answer = world.memories.update(BOB, tree["acme"], {"name": "Acme Corp"})
    assert answer.memory.name == "Acme Corp"
    assert answer.privileges == ["read", "write"]
