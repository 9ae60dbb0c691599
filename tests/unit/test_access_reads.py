"""The access check reads the same whether a memory exists or not, whatever its depth (issue 27, item 9;
docs/decisions.md, "The 404 of an unseen memory"): counted at DynamoDB's API, on moto. And what makes
that possible: each memory item keeps its ancestors (written on create, rewritten over the subtree on a
move, one transaction) and a copy of its grants (rewritten with every grant change); items written
before either was kept are still served, by the walk of old."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.unit.conftest import FakeClock, SequentialIds, World, caller
from uhp_memories.domain.access.grants import GrantService
from uhp_memories.domain.access.model import CHAIN_READ_WIDTH
from uhp_memories.domain.agents.harnesses import HarnessService
from uhp_memories.domain.agents.model import Attachment
from uhp_memories.domain.errors import MemoryInvalid, MemoryNotFound
from uhp_memories.domain.limits import MAX_TREE_DEPTH, MOVE_ITEMS_MAX
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.memories.service import MemoryService
from uhp_memories.domain.ports import Ports

ALICE = caller("user:alice")
BOB = caller("user:bob")
REGION = "eu-west-1"
MISSING = "hmem_" + "f" * 32


@dataclass(frozen=True)
class Call:
    """One DynamoDB call as a check makes it: the operation, the items that came back, and the ancestors'
    ids they list (what makes an item costly to send and to parse)."""

    operation: str
    items: int = 0
    listed_ancestors: int = 0


def total(calls: list[Call]) -> tuple[list[str], int, int]:
    return [c.operation for c in calls], sum(c.items for c in calls), sum(c.listed_ancestors for c in calls)


class CountingClient:
    """A boto3 DynamoDB client that notes each call it makes."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[Call] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            answer = attribute(*args, **kwargs)
            items = [answer["Item"]] if "Item" in answer else []
            items += [i for found in answer.get("Responses", {}).values() for i in found]
            listed = sum(len(i.get("ancestors", {}).get("S", "").split()) for i in items)
            self.calls.append(Call(name, len(items), listed))
            return answer

        return counted


@dataclass
class DynamoWorld:
    client: CountingClient
    ports: Ports
    memories: MemoryService
    grants: GrantService
    table: Any  # DynamoTable

    def chain(self, depth: int, restricted_at: int | None = None) -> list[str]:
        """A chain of `depth` memories of alice's, root first; the one at `restricted_at` (1-based) restricted."""
        ids: list[str] = []
        for level in range(1, depth + 1):
            view = self.memories.create(
                ALICE, name=f"level {level}", parent_id=ids[-1] if ids else None, restricted=level == restricted_at
            )
            ids.append(view.memory.id)
        return ids

    def lay_padding(self, who: Any) -> None:
        """The tenant's padding items are all there (laid by its first memory's creation): a check of a
        missing id reads the full width, and writes nothing (a read never does)."""
        calls, _ = self.reads_of_a_check(who, MISSING)
        assert [(c.operation, c.items) for c in calls] == [
            ("batch_get_item", 1), ("batch_get_item", CHAIN_READ_WIDTH + 1)], calls

    def reads_of_a_check(self, who: Any, memory_id: str) -> tuple[list[Call], bool]:
        """The DynamoDB calls one access check makes (a request's first check of an id it was given),
        and whether it answered the memory (False: memory_not_found)."""
        access = self.ports.access(who)
        self.client.calls.clear()
        try:
            access.visible(memory_id)
            seen = True
        except MemoryNotFound:
            seen = False
        return list(self.client.calls), seen


@pytest.fixture
def dynamo() -> Iterator[DynamoWorld]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "test")
    import boto3
    from moto import mock_aws

    from uhp_memories.adapters.dynamodb.harnesses import DynamoAttachmentRepository
    from uhp_memories.adapters.dynamodb.memories import DynamoMemoryRepository
    from uhp_memories.adapters.dynamodb.records import DynamoRecordRepository
    from uhp_memories.adapters.dynamodb.schema import MAIN_TABLE
    from uhp_memories.adapters.dynamodb.table import DynamoTable

    with mock_aws():
        raw = boto3.client("dynamodb", region_name=REGION)
        raw.create_table(**MAIN_TABLE.create_table_kwargs("access-reads"))
        client = CountingClient(raw)
        table = DynamoTable(client, "access-reads")
        memories = DynamoMemoryRepository(table)
        ports = Ports(
            memories=memories,
            records=DynamoRecordRepository(table),
            clock=FakeClock(),
            ids=SequentialIds(),
            attachments=DynamoAttachmentRepository(table),
        )
        service = MemoryService(ports)
        yield DynamoWorld(client, ports, service, GrantService(ports), table)
        raw.delete_table(TableName="access-reads")


# -- the same reads, counted at DynamoDB ----------------------------------------------------------


@pytest.mark.slow
def test_a_missing_id_and_an_unseen_memory_at_any_depth_cost_the_same_calls(dynamo: DynamoWorld) -> None:
    deepest = dynamo.chain(MAX_TREE_DEPTH)
    walled = dynamo.chain(3, restricted_at=2)
    dynamo.lay_padding(BOB)  # a tenant's first checks lay its padding items, one a check

    missing, seen = dynamo.reads_of_a_check(BOB, MISSING)
    assert not seen
    # Two batch reads: the id beside a padding item (listing 49 ancestors), then the chain's width and
    # one more in place of the memory not found, all padding, listing 0, 1, ... 49 ancestors.
    assert missing == [
        Call("batch_get_item", 1, MAX_TREE_DEPTH - 1),
        Call("batch_get_item", CHAIN_READ_WIDTH + 1, sum(range(MAX_TREE_DEPTH))),
    ]
    for depth in (1, 3, MAX_TREE_DEPTH):
        unseen, seen = dynamo.reads_of_a_check(BOB, deepest[depth - 1])
        assert not seen
        assert total(unseen) == total(missing), f"an unseen memory at depth {depth} read otherwise than a missing id"
    below_a_wall, seen = dynamo.reads_of_a_check(BOB, walled[-1])
    assert not seen
    assert total(below_a_wall) == total(missing)
    # What the caller may see reads alike (what follows the check, for a seen memory, is another matter).
    for memory_id in (deepest[0], deepest[-1], walled[-1]):
        visible, seen = dynamo.reads_of_a_check(ALICE, memory_id)
        assert seen
        assert total(visible) == total(missing)


@pytest.mark.slow
def test_a_memory_being_deleted_reads_as_a_missing_one(dynamo: DynamoWorld) -> None:
    ids = dynamo.chain(4)
    dynamo.lay_padding(BOB)
    dynamo.memories.hide(ALICE, ids[2])
    gone, seen = dynamo.reads_of_a_check(ALICE, ids[3])
    assert not seen
    assert total(gone)[0] == total(dynamo.reads_of_a_check(BOB, MISSING)[0])[0]


def test_the_padding_items_are_no_memories_and_in_no_listing(dynamo: DynamoWorld) -> None:
    root = dynamo.chain(1)[0]
    dynamo.lay_padding(ALICE)
    listed = dynamo.memories.list(ALICE)
    assert [v.memory.id for v in listed.items] == [root]
    assert [m.id for m in dynamo.ports.memories.children(ALICE.tenant, "ROOT")] == [root]  # the roots
    assert dynamo.ports.memories.get_many_with_grants(ALICE.tenant, [], CHAIN_READ_WIDTH) == {}
    # Another tenant reads none of these; its first memory lays its own.
    other = caller("user:alice", tenant="globex")
    first, _ = dynamo.reads_of_a_check(other, MISSING)
    assert first[0] == Call("batch_get_item", 0, 0)  # none of acme's
    assert all(c.operation == "batch_get_item" for c in first)  # a read writes nothing
    dynamo.memories.create(other, name="globex's first")
    dynamo.lay_padding(other)
    calls, _ = dynamo.reads_of_a_check(other, root)
    assert [c.items for c in calls] == [1, CHAIN_READ_WIDTH + 1]


@pytest.mark.slow
def test_a_listing_reads_its_children_without_the_padded_batch(dynamo: DynamoWorld) -> None:
    """Children found in the store are no caller's guess: checking each costs its own read only."""
    root = dynamo.chain(1)[0]
    for n in range(3):
        dynamo.memories.create(ALICE, name=f"child {n}", parent_id=root)
    dynamo.lay_padding(ALICE)
    dynamo.client.calls.clear()
    dynamo.memories.list(ALICE, parent=root)
    batches = [c for c in dynamo.client.calls if c.operation == "batch_get_item"]
    assert len(batches) == 2  # the parent's own check; none for the three children


# -- what the items keep -------------------------------------------------------------------------


def stored(dynamo: DynamoWorld, memory_id: str) -> Memory:
    found = dynamo.ports.memories.get(ALICE.tenant, memory_id)
    assert found is not None
    return found


@pytest.mark.slow
def test_a_memory_keeps_its_ancestors_and_a_move_rewrites_them_below_it(dynamo: DynamoWorld) -> None:
    a, b, c = dynamo.chain(3)
    d = dynamo.memories.create(ALICE, name="d", parent_id=c).memory.id
    other = dynamo.chain(2)
    assert stored(dynamo, a).ancestors == ()
    assert stored(dynamo, d).ancestors == (a, b, c)
    dynamo.memories.update(ALICE, b, {"parent_id": other[1]})
    assert stored(dynamo, b).ancestors == (other[0], other[1])
    assert stored(dynamo, c).ancestors == (other[0], other[1], b)
    assert stored(dynamo, d).ancestors == (other[0], other[1], b, c)
    dynamo.memories.update(ALICE, c, {"parent_id": None})
    assert stored(dynamo, c).ancestors == ()
    assert stored(dynamo, d).ancestors == (c,)
    dynamo.memories.update(ALICE, c, {"name": "renamed"})
    assert stored(dynamo, d).ancestors == (c,)


@pytest.mark.slow
def test_a_move_too_big_for_one_transaction_is_refused_whole(dynamo: DynamoWorld) -> None:
    top = dynamo.chain(1)[0]
    target = dynamo.chain(2)
    middle = dynamo.memories.create(ALICE, name="middle", parent_id=top).memory.id
    # The memory, the two above where it goes, and the middle and its leaves below it: one over the limit.
    for n in range(MOVE_ITEMS_MAX - 3):
        dynamo.memories.create(ALICE, name=f"leaf {n}", parent_id=middle)
    with pytest.raises(MemoryInvalid, match=f"at most {MOVE_ITEMS_MAX} memories"):
        dynamo.memories.update(ALICE, top, {"parent_id": target[1]})
    assert stored(dynamo, top).parent_id is None
    assert stored(dynamo, middle).ancestors == (top,)
    # One fewer below it fits, and moves whole.
    last = dynamo.ports.memories.children(ALICE.tenant, middle)[-1]
    dynamo.memories.delete(ALICE, last.id)
    dynamo.memories.update(ALICE, top, {"parent_id": target[1]})
    leaves = dynamo.ports.memories.children(ALICE.tenant, middle)
    assert {leaf.ancestors for leaf in leaves} == {(target[0], target[1], top, middle)}


@pytest.mark.slow
def test_every_grant_change_keeps_the_memory_items_copy_of_its_grants(dynamo: DynamoWorld) -> None:
    root = dynamo.chain(1)[0]
    memories = dynamo.ports.memories
    granted = dynamo.grants.create(ALICE, root, "user:bob", ["read"])
    dynamo.grants.create(ALICE, root, "group:sales", ["write", "read"])
    assert memories.get_with_grants(ALICE.tenant, root)[1] == memories.grants_on(ALICE.tenant, root)
    assert memories.get_many_with_grants(ALICE.tenant, [root], 1)[root][1] == memories.grants_on(ALICE.tenant, root)
    dynamo.grants.delete(ALICE, root, granted.id)
    assert memories.get_with_grants(ALICE.tenant, root)[1] == memories.grants_on(ALICE.tenant, root)
    assert "user:bob" not in {g.principal for g in memories.get_with_grants(ALICE.tenant, root)[1]}
    # A harness's list grants in its own transaction, and keeps the copy too.
    assert dynamo.ports.attachments is not None
    harnesses = HarnessService(dynamo.ports, dynamo.ports.attachments)  # type: ignore[arg-type]
    harnesses.set_owners(caller("user:root", groups=("group:admins",)), "chrn_1", [ALICE.principal])  # handed her
    harnesses.attach(ALICE, "chrn_1", [Attachment(root, "write", default=True)])
    assert memories.get_with_grants(ALICE.tenant, root)[1] == memories.grants_on(ALICE.tenant, root)
    assert "harness:chrn_1" in {g.principal for g in memories.get_with_grants(ALICE.tenant, root)[1]}


@pytest.mark.slow
def test_items_written_before_ancestors_and_grant_copies_were_kept_are_still_served(dynamo: DynamoWorld) -> None:
    """A table (or a local --data-dir) from before: the check walks and reads each partition's grants,
    as it did; the first grant change of a memory writes its copy, the next move its ancestors."""
    a, b, c = dynamo.chain(3, restricted_at=None)
    dynamo.grants.create(ALICE, a, "user:bob", ["read"])
    for memory_id in (a, b, c):
        dynamo.table.client.update_item(
            TableName=dynamo.table.name,
            Key={"PK": {"S": f"T#acme#M#{memory_id}"}, "SK": {"S": "META"}},
            UpdateExpression="REMOVE ancestors, grants, grants_version",
        )
    assert stored(dynamo, c).ancestors is None
    assert dynamo.ports.access(BOB).privileges(c) == {"read"}
    assert dynamo.ports.access(BOB).privileges(MISSING) == frozenset()
    with pytest.raises(MemoryNotFound):
        dynamo.ports.access(caller("user:carol")).visible(c)
    dynamo.grants.create(ALICE, b, "user:carol", ["write"])
    assert dynamo.ports.access(caller("user:carol")).privileges(c) == {"write"}
    assert [g.principal for g in dynamo.ports.memories.get_with_grants(ALICE.tenant, b)[1]] == [
        "user:alice", "user:carol"
    ]
    dynamo.memories.update(ALICE, b, {"parent_id": None})
    assert stored(dynamo, c).ancestors == (b,)
    assert dynamo.ports.access(BOB).privileges(c) == frozenset()


# -- the rule decides, the kept chain only reads ahead ---------------------------------------------


def test_a_kept_chain_that_went_stale_never_changes_an_answer(world: World) -> None:
    """A chain kept wrong (a create racing a move, say) costs reads, never an answer: the parent links decide."""
    a = world.memories.create(ALICE, name="a").memory
    b = world.memories.create(ALICE, name="b", parent_id=a.id).memory
    walled = world.memories.create(ALICE, name="walled", restricted=True).memory
    c = world.memories.create(ALICE, name="c", parent_id=walled.id).memory
    world.grants.create(ALICE, a.id, "user:bob", ["read"])
    repo = world.ports.memories
    repo.memories[("acme", c.id)] = c.evolve(ancestors=(a.id, b.id))  # says a, b; its parent is `walled`
    repo.memories[("acme", b.id)] = b.evolve(ancestors=(walled.id,))  # says walled; its parent is a
    assert world.ports.access(BOB).privileges(c.id) == frozenset()
    assert world.ports.access(BOB).privileges(b.id) == {"read"}
    assert world.memories.get(ALICE, c.id).ancestors == [walled.id]


def test_a_view_reads_a_named_memory_and_its_chain_once(world: World) -> None:
    a = world.memories.create(ALICE, name="a").memory
    b = world.memories.create(ALICE, name="b", parent_id=a.id).memory
    c = world.memories.create(ALICE, name="c", parent_id=b.id).memory
    repo = world.ports.memories
    calls: list[tuple[str, tuple[str, ...]]] = []
    one, many = repo.get_with_grants, repo.get_many_with_grants

    def get_one(tenant: str, memory_id: str) -> Any:
        calls.append(("one", (memory_id,)))
        return one(tenant, memory_id)

    widths: list[int] = []

    def get_many(tenant: str, memory_ids: Any, width: int) -> Any:
        widths.append(width)
        calls.append(("many", tuple(memory_ids)))
        return many(tenant, memory_ids, width)

    repo.get_with_grants = get_one  # type: ignore[method-assign]
    repo.get_many_with_grants = get_many  # type: ignore[method-assign]
    access = world.ports.access(BOB)
    assert access.privileges(c.id) == frozenset()
    assert access.privileges(b.id) == frozenset()  # on the chain already read: no read again
    assert access.privileges(MISSING) == frozenset()
    assert access.privileges(MISSING) == frozenset()
    assert calls == [("many", (c.id,)), ("many", (a.id, b.id)), ("many", (MISSING,)), ("many", ())]
    assert widths == [2, CHAIN_READ_WIDTH, 2, CHAIN_READ_WIDTH + 1]
