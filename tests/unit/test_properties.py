"""Property tests against a reference model written here, independently of the domain code.

(a) The tree and access: random creates, moves (valid or cyclic), restricted flips and grants by
    several principals. After every step the stored tree has no cycle and matches the model, every
    refused operation is refused with the error the model predicts and changes nothing, and every
    principal's privileges, ancestors, children counts and entry points equal the model's
    union-over-ancestors with the restricted cutoff.
(b) Records: random revise / forget sequences, naming current or stale versions, keep exactly one
    linear version chain per record, and reading as_of any past instant gives what was current then.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.unit.conftest import World, caller, make_world
from uhp_memories.domain.access.model import ordered
from uhp_memories.domain.errors import DomainError, MemoryConflict, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.model import PRIVILEGES, Caller
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.timefmt import format_ms

pytestmark = pytest.mark.slow

TENANT = "acme"
ACTORS = (
    caller("user:root", TENANT),
    caller("user:ann", TENANT),
    caller("user:ben", TENANT, groups=("group:crew",)),
)
GRANTEES = ("user:root", "user:ann", "user:ben", "group:crew", "group:nobody")

PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


# -- (a) the tree ------------------------------------------------------------------------------


@dataclass
class TreeModel:
    """The rules of §3 stated directly: a node's privileges are the union of the principal's grants
    on it and on each ancestor, walking up and stopping after the first restricted node."""

    parent: dict[str, str | None] = field(default_factory=dict)
    restricted: dict[str, bool] = field(default_factory=dict)
    grants: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def privileges(self, who: Caller, node: str) -> set[str]:
        found: set[str] = set()
        current: str | None = node
        while current is not None:
            for principal in who.principal_ids:
                found |= self.grants.get((principal, current), set())
            if self.restricted[current]:
                break
            current = self.parent[current]
        return found

    def subtree(self, node: str) -> list[str]:
        return [n for n in self.order if self.is_under(n, node)]

    def is_under(self, node: str | None, ancestor: str) -> bool:
        while node is not None:
            if node == ancestor:
                return True
            node = self.parent[node]
        return False

    def entry_points(self, who: Caller) -> list[str]:
        return [
            n
            for n in self.order
            if self.privileges(who, n) and (self.parent[n] is None or not self.privileges(who, self.parent[n]))
        ]

    def visible_ancestors(self, who: Caller, node: str) -> list[str]:
        found: list[str] = []
        current = self.parent[node]
        while current is not None and self.privileges(who, current):
            found.append(current)
            current = self.parent[current]
        return list(reversed(found))

    def visible_children(self, who: Caller, node: str) -> int:
        return sum(1 for n in self.order if self.parent[n] == node and self.privileges(who, n))

    # What the service must answer, in the order it checks (404 before 403 before 422).

    def expect_create(self, who: Caller, parent: str | None) -> type[DomainError] | None:
        if parent is None:
            return None
        held = self.privileges(who, parent)
        if not held:
            return MemoryNotFound
        return None if "create" in held else MemoryForbidden

    def expect_move(self, who: Caller, node: str, target: str | None) -> type[DomainError] | None:
        held = self.privileges(who, node)
        if not held:
            return MemoryNotFound
        if target == self.parent[node]:
            return None
        if "delete" not in held:
            return MemoryForbidden
        if target is not None:
            on_target = self.privileges(who, target)
            if not on_target:
                return MemoryNotFound
            if "create" not in on_target:
                return MemoryForbidden
            if self.is_under(target, node):
                return MemoryInvalid
        return None

    def expect_restrict(self, who: Caller, node: str, value: bool) -> type[DomainError] | None:
        held = self.privileges(who, node)
        if not held:
            return MemoryNotFound
        return None if value == self.restricted[node] or "delete" in held else MemoryForbidden

    def expect_grant(self, who: Caller, node: str) -> type[DomainError] | None:
        held = self.privileges(who, node)
        if not held:
            return MemoryNotFound
        return None if "delete" in held else MemoryForbidden


actor_index = st.sampled_from([0, 0, 0, 1, 2])
create_op = st.tuples(st.just("create"), actor_index, st.integers(0, 40), st.booleans())
move_op = st.tuples(st.just("move"), actor_index, st.integers(0, 40), st.integers(0, 40))
cyclic_move_op = st.tuples(st.just("move_cyclic"), actor_index, st.integers(0, 40), st.integers(0, 40))
restrict_op = st.tuples(st.just("restrict"), actor_index, st.integers(0, 40), st.booleans())
grant_op = st.tuples(
    st.just("grant"),
    actor_index,
    st.integers(0, 40),
    st.sampled_from(GRANTEES),
    st.sets(st.sampled_from(PRIVILEGES), min_size=1),
)
tree_ops = st.lists(
    st.one_of(create_op, create_op, move_op, cyclic_move_op, restrict_op, grant_op, grant_op), min_size=12, max_size=40
)


def attempt(action) -> tuple[DomainError | None, object]:
    """(the domain error raised, or None; what the action returned)."""
    try:
        return None, action()
    except DomainError as error:
        return error, None


def outcome(action) -> type[DomainError] | None:
    error, _ = attempt(action)
    return type(error) if error is not None else None


def stored_tree(world: World, model: TreeModel) -> dict[str, tuple[str | None, bool]]:
    found = {}
    for node in model.order:
        memory = world.ports.memories.get(TENANT, node)
        assert memory is not None
        found[node] = (memory.parent_id, memory.restricted)
    return found


def check_tree(world: World, model: TreeModel) -> None:
    stored = stored_tree(world, model)
    # No cycle: from every node the parent links reach a root within as many steps as there are nodes.
    for node in stored:
        current: str | None = node
        for _ in range(len(stored) + 1):
            if current is None:
                break
            current = stored[current][0]
        assert current is None, f"cycle through {node}"
    assert stored == {n: (model.parent[n], model.restricted[n]) for n in model.order}

    for who in ACTORS:
        for node in model.order:
            expected = model.privileges(who, node)
            if not expected:
                assert outcome(lambda who=who, node=node: world.memories.get(who, node)) is MemoryNotFound
                continue
            view = world.memories.get(who, node)
            assert view.privileges == ordered(expected), (who.principal, node)
            assert view.ancestors == model.visible_ancestors(who, node)
            assert view.children_count == model.visible_children(who, node)
        listed = [v.memory.id for v in world.memories.list(who, limit=100).items]
        assert listed == model.entry_points(who), who.principal


@PROPERTY_SETTINGS
@given(tree_ops)
def test_the_tree_and_privileges_always_match_the_reference_model(ops) -> None:
    world = make_world()
    model = TreeModel()

    for op in ops:
        kind, who = op[0], ACTORS[op[1]]
        if kind != "create" and not model.order:
            continue
        before = stored_tree(world, model)

        if kind == "create":
            parent = None if op[2] == 0 or not model.order else model.order[(op[2] - 1) % len(model.order)]
            expected = model.expect_create(who, parent)
            error, view = attempt(
                lambda who=who, parent=parent, op=op: world.memories.create(
                    who, name="m", parent_id=parent, restricted=op[3]
                )
            )
            got = type(error) if error is not None else None
            if expected is None and view is not None:
                node = view.memory.id
                model.order.append(node)
                model.parent[node] = parent
                model.restricted[node] = op[3]
                model.grants[(who.principal, node)] = set(PRIVILEGES)

        elif kind in ("move", "move_cyclic"):
            node = model.order[op[2] % len(model.order)]
            if kind == "move":
                target = None if op[3] == 0 else model.order[(op[3] - 1) % len(model.order)]
            else:
                below = model.subtree(node)
                target = below[op[3] % len(below)]
            expected = model.expect_move(who, node, target)
            if kind == "move_cyclic":
                assert expected in (MemoryNotFound, MemoryForbidden, MemoryInvalid)
            got = outcome(lambda who=who, node=node, target=target: world.memories.update(
                who, node, {"parent_id": target}))
            if expected is None:
                model.parent[node] = target

        elif kind == "restrict":
            node = model.order[op[2] % len(model.order)]
            expected = model.expect_restrict(who, node, op[3])
            got = outcome(lambda who=who, node=node, op=op: world.memories.update(who, node, {"restricted": op[3]}))
            if expected is None:
                model.restricted[node] = op[3]

        else:
            node = model.order[op[2] % len(model.order)]
            expected = model.expect_grant(who, node)
            got = outcome(lambda who=who, node=node, op=op: world.grants.create(who, node, op[3], sorted(op[4])))
            if expected is None:
                model.grants.setdefault((op[3], node), set()).update(op[4])

        # A change that takes effect is answered as done, even when it cut the caller's own reach.
        event(f"{kind}: {got.__name__ if got else 'done'}")
        assert got is expected, op
        if expected is not None:
            assert stored_tree(world, model) == before, f"refused {op} changed the tree"
        check_tree(world, model)


# -- (b) record chains -------------------------------------------------------------------------


@dataclass
class ChainModel:
    ids: list[str]
    contents: list[str]
    forgotten: bool = False


record_ops = st.lists(
    st.one_of(
        st.tuples(st.just("remember"), st.just(0), st.just(0)),
        st.tuples(st.just("revise"), st.integers(0, 20), st.integers(0, 3)),
        st.tuples(st.just("revise"), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("forget"), st.integers(0, 20), st.integers(0, 3)),
    ),
    min_size=5,
    max_size=40,
)


def check_chains(world: World, memory_id: str, chains: list[ChainModel]) -> None:
    repo = world.ports.records
    every_version: set[str] = set()
    for chain in chains:
        stored = repo.chain(TENANT, chain.ids[0])
        assert [v.id for v in stored] == chain.ids
        assert [v.content for v in stored] == chain.contents
        assert [v.version for v in stored] == list(range(1, len(stored) + 1))
        assert {v.chain_id for v in stored} == {chain.ids[0]}
        assert stored[0].supersedes is None
        for older, newer in itertools.pairwise(stored):
            assert newer.supersedes == older.id
            assert older.superseded_by == newer.id
            assert older.status == "superseded"
            assert older.invalidated_at == newer.written_at
            assert older.written_at < newer.written_at
        last = stored[-1]
        assert last.superseded_by is None
        assert [v.id for v in stored if v.is_current] == [last.id]
        if chain.forgotten:
            assert last.status == "forgotten"
            assert last.invalidated_at is not None
        else:
            assert last.status == "active"
            assert last.invalidated_at is None
        assert not every_version & set(chain.ids)
        every_version |= set(chain.ids)

    all_versions = [v.id for _, v in repo.scan_versions(TENANT, memory_id, None, None)]
    assert sorted(all_versions) == sorted(every_version)
    active = {v.id for _, v in repo.scan_active(TENANT, memory_id, None)}
    assert active == {c.ids[-1] for c in chains if not c.forgotten}
    assert world.ports.memories.get(TENANT, memory_id).record_count == len(active)


@PROPERTY_SETTINGS
@given(record_ops)
def test_revise_and_forget_keep_one_linear_chain_per_record(ops) -> None:
    world = make_world()
    alice = ACTORS[0]
    memory_id = world.memories.create(alice, name="m").memory.id
    chains: list[ChainModel] = []
    history: list[tuple[str, set[str]]] = []

    for step, (kind, which, age) in enumerate(ops):
        content = f"c{step}"
        if kind == "remember" or not chains:
            record = world.records.remember(alice, memory_id, RecordInput("fact", content, {})).record
            chains.append(ChainModel([record.id], [content]))
        else:
            chain = chains[which % len(chains)]
            named = chain.ids[-1 - (age % len(chain.ids))]
            stale = named != chain.ids[-1] or chain.forgotten
            if kind == "revise":
                error, view = attempt(lambda named=named, content=content: world.records.revise(
                    alice, memory_id, named, {"content": content}))
            else:
                error, view = attempt(lambda named=named: world.records.forget(alice, memory_id, named))
            event(f"{kind}: {'conflict' if error else 'done'}")
            if stale:
                assert isinstance(error, MemoryConflict), (kind, named, error)
                assert error.details == {"current_record_id": chain.ids[-1]}
            else:
                assert error is None, (kind, named, error)
                if kind == "revise":
                    chain.ids.append(view.record.id)
                    chain.contents.append(content)
                else:
                    chain.forgotten = True
        check_chains(world, memory_id, chains)
        history.append((format_ms(world.clock.now), sorted(c.contents[-1] for c in chains if not c.forgotten)))
        world.clock.advance(10)

    assert sorted(v.record.content for v in world.records.list(alice, memory_id, limit=100).items) == history[-1][1]
    for instant, current in history:
        page = world.records.list(alice, memory_id, as_of=instant, limit=100)
        assert sorted(v.record.content for v in page.items) == current, instant
        assert all(v.record.status == "active" for v in page.items)
