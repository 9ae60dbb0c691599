"""§9: who may read and who may change a harness's list of memories, over the in-memory fakes.

Reading: the harness itself reads every entry on a memory it can see; anyone else reads the entries on
memories where it holds delete. Changing: an entry added, removed or changed needs delete on its
memory; an entry on a memory the caller cannot see is kept as it is and never shown to it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from tests.fakes import InMemoryAttachmentRepository, InMemoryMemoryRepository
from tests.unit.conftest import World, caller
from uhp_memories.domain.errors import MemoryConflict, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.harnesses import (
    ATTACH_ATTEMPTS,
    MAX_ATTACHED,
    Attachment,
    HarnessService,
    HiddenDefault,
    MemoriesNotAttached,
)
from uhp_memories.domain.models import Grant

ALICE = caller("user:alice")
BOB = caller("user:bob")
DAVE = caller("user:dave")  # holds nothing
HARNESS = caller("harness:chrn_1")


@dataclass
class Setup:
    world: World
    harnesses: HarnessService
    repo: InMemoryAttachmentRepository

    def memory(self, name: str, restricted: bool = False) -> str:
        return self.world.memories.create(ALICE, name=name, restricted=restricted).memory.id

    def stored(self, harness_id: str = "chrn_1") -> list[Attachment] | None:
        return self.repo.get("acme", harness_id)

    def harness_grants(self, memory_id: str, principal: str = "harness:chrn_1") -> list[tuple[str, ...]]:
        return [tuple(g.privileges) for g in self.world.grants.list(ALICE, memory_id)
                if g.principal == principal and g.memory_id == memory_id]


@pytest.fixture
def setup(world: World) -> Setup:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    repo = InMemoryAttachmentRepository(memories)
    return Setup(world, HarnessService(world.ports, repo), repo)


def read(memory_id: str) -> Attachment:
    return Attachment(memory_id, "read")


def default(memory_id: str) -> Attachment:
    return Attachment(memory_id, "write", default=True)


# -- reading ----------------------------------------------------------------------------------------


def test_a_caller_reads_only_the_entries_on_memories_where_it_holds_delete(setup: Setup) -> None:
    owned, readable = setup.memory("Bob may change"), setup.memory("Bob reads")
    setup.world.grants.create(ALICE, owned, "user:bob", ["delete"])
    setup.world.grants.create(ALICE, readable, "user:bob", ["read", "write", "create"])
    setup.harnesses.attach(ALICE, "chrn_1", [read(owned), read(readable)])
    assert setup.harnesses.attached(ALICE, "chrn_1") == [read(owned), read(readable)]
    assert setup.harnesses.attached(BOB, "chrn_1") == [read(owned)]


def test_the_harness_reads_every_entry_on_a_memory_it_can_see(setup: Setup) -> None:
    kept, revoked = setup.memory("Kept"), setup.memory("Revoked")
    setup.harnesses.attach(ALICE, "chrn_1", [read(kept), read(revoked)])
    assert setup.harnesses.attached(HARNESS, "chrn_1") == [read(kept), read(revoked)]
    grant = next(g for g in setup.world.grants.list(ALICE, revoked) if g.principal == "harness:chrn_1")
    setup.world.grants.delete(ALICE, revoked, grant.id)
    assert setup.harnesses.attached(HARNESS, "chrn_1") == [read(kept)]


def test_a_caller_that_may_read_no_entry_is_told_nothing_is_attached(setup: Setup) -> None:
    shared = setup.memory("Shared")
    setup.world.grants.create(ALICE, shared, "user:bob", ["read"])
    setup.harnesses.attach(ALICE, "chrn_1", [read(shared)])
    for who, harness_id in ((BOB, "chrn_1"), (DAVE, "chrn_1"), (ALICE, "chrn_never_attached")):
        with pytest.raises(MemoriesNotAttached) as refused:
            setup.harnesses.attached(who, harness_id)
        assert refused.value.message == f"harness {harness_id} has no memories attached"
    with pytest.raises(MemoriesNotAttached):
        setup.harnesses.attached(caller("user:alice", tenant="other"), "chrn_1")


# -- changing ---------------------------------------------------------------------------------------


def test_a_principal_that_holds_nothing_cannot_empty_a_harness_list(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.harnesses.attach(ALICE, "chrn_1", [default(memory)])
    assert setup.harnesses.attach(DAVE, "chrn_1", []) == []
    assert setup.stored() == [default(memory)]


def test_a_principal_of_another_tenant_cannot_touch_the_list(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.harnesses.attach(ALICE, "chrn_1", [read(memory)])
    mallory = caller("user:alice", tenant="other")
    with pytest.raises(MemoryNotFound):
        setup.harnesses.attach(mallory, "chrn_1", [read(memory)])
    assert setup.harnesses.attach(mallory, "chrn_1", []) == []
    assert setup.stored() == [read(memory)]


def test_a_reader_without_delete_may_not_add_remove_or_change_an_entry(setup: Setup) -> None:
    attached, other = setup.memory("Attached"), setup.memory("Other")
    for memory_id in (attached, other):
        setup.world.grants.create(ALICE, memory_id, "user:bob", ["read", "write", "create"])
    setup.harnesses.attach(ALICE, "chrn_1", [read(attached)])
    for entries in (
        [],  # removes the entry
        [Attachment(attached, "write")],  # changes its access
        [default(attached)],  # makes it the default
        [read(attached), read(other)],  # adds one
    ):
        with pytest.raises(MemoryForbidden) as refused:
            setup.harnesses.attach(BOB, "chrn_1", entries)
        assert refused.value.message == "this operation needs the 'delete' privilege on the memory"
    assert setup.stored() == [read(attached)]


def test_adding_an_entry_the_harness_already_holds_still_needs_delete(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.world.grants.create(ALICE, memory, "harness:chrn_1", ["read", "write"])
    setup.world.grants.create(ALICE, memory, "user:bob", ["read"])
    with pytest.raises(MemoryForbidden):
        setup.harnesses.attach(BOB, "chrn_1", [default(memory)])
    assert setup.stored() is None


def test_an_unchanged_entry_needs_only_visibility(setup: Setup) -> None:
    readable, owned = setup.memory("Bob reads"), setup.memory("Bob may change")
    setup.world.grants.create(ALICE, readable, "user:bob", ["read"])
    setup.world.grants.create(ALICE, owned, "user:bob", ["delete"])
    setup.harnesses.attach(ALICE, "chrn_1", [read(readable)])
    answer = setup.harnesses.attach(BOB, "chrn_1", [read(readable), default(owned)])
    # The answer lists only what bob may read: the entry he changed, not the one he only sees.
    assert answer == [default(owned)]
    assert setup.stored() == [read(readable), default(owned)]


def test_naming_a_memory_the_caller_cannot_see_is_not_found(setup: Setup) -> None:
    hidden = setup.memory("Alice only")
    with pytest.raises(MemoryNotFound):
        setup.harnesses.attach(BOB, "chrn_1", [read(hidden)])
    setup.harnesses.attach(ALICE, "chrn_1", [read(hidden)])
    # Naming it as it is stored is refused the same way: unchanged needs visibility.
    with pytest.raises(MemoryNotFound):
        setup.harnesses.attach(BOB, "chrn_1", [read(hidden)])
    with pytest.raises(MemoryNotFound):
        setup.harnesses.attach(BOB, "chrn_1", [read("hmem_" + "0" * 32)])
    assert setup.stored() == [read(hidden)]


def test_entries_on_memories_the_caller_cannot_see_are_kept_and_never_shown(setup: Setup) -> None:
    private, shared, bobs = setup.memory("Private", restricted=True), setup.memory("Shared"), setup.memory("Bob's")
    for memory_id in (shared, bobs):
        setup.world.grants.create(ALICE, memory_id, "user:bob", ["read", "delete"])
    setup.harnesses.attach(ALICE, "chrn_1", [read(private), read(shared)])
    assert setup.harnesses.attached(BOB, "chrn_1") == [read(shared)]
    # Bob replaces his view (shared) with bobs; the private entry stays where he cannot see it.
    assert setup.harnesses.attach(BOB, "chrn_1", [read(bobs)]) == [read(bobs)]
    assert setup.stored() == [read(bobs), read(private)]
    assert setup.harnesses.attach(BOB, "chrn_1", []) == []
    assert setup.stored() == [read(private)]
    with pytest.raises(MemoriesNotAttached):
        setup.harnesses.attached(BOB, "chrn_1")


def test_a_hidden_default_cannot_be_replaced_and_the_refusal_names_no_memory(setup: Setup) -> None:
    private, bobs = setup.memory("Private", restricted=True), setup.memory("Bob's")
    setup.world.grants.create(ALICE, bobs, "user:bob", ["read", "write", "delete"])
    setup.harnesses.attach(ALICE, "chrn_1", [default(private)])
    with pytest.raises(HiddenDefault) as refused:
        setup.harnesses.attach(BOB, "chrn_1", [default(bobs)])
    assert isinstance(refused.value, MemoryForbidden)
    assert refused.value.code == "memory_forbidden"  # answered 403: tests/unit/test_error_statuses.py
    assert refused.value.message == "the harness's default is a memory you may not change"
    assert not refused.value.details
    assert setup.stored() == [default(private)]
    # Without a default of his own, bob's entry joins the list and the hidden default stays.
    assert setup.harnesses.attach(BOB, "chrn_1", [Attachment(bobs, "write")]) == [Attachment(bobs, "write")]
    assert setup.stored() == [Attachment(bobs, "write"), default(private)]


def test_a_visible_default_moves_only_with_delete_on_it(setup: Setup) -> None:
    first, second = setup.memory("First"), setup.memory("Second")
    setup.world.grants.create(ALICE, first, "user:bob", ["read", "write"])
    setup.world.grants.create(ALICE, second, "user:bob", ["read", "write", "delete"])
    setup.harnesses.attach(ALICE, "chrn_1", [default(first)])
    with pytest.raises(MemoryForbidden):
        setup.harnesses.attach(BOB, "chrn_1", [Attachment(first, "write"), default(second)])
    setup.world.grants.create(ALICE, first, "user:bob", ["delete"])
    assert setup.harnesses.attach(BOB, "chrn_1", [Attachment(first, "write"), default(second)]) == [
        Attachment(first, "write"), default(second)]


def test_the_limit_counts_the_entries_kept_out_of_the_callers_view(setup: Setup) -> None:
    private = setup.memory("Private", restricted=True)
    setup.harnesses.attach(ALICE, "chrn_1", [read(private)])
    bobs = [setup.memory(f"Bob's {n}") for n in range(MAX_ATTACHED)]
    for memory_id in bobs:
        setup.world.grants.create(ALICE, memory_id, "user:bob", ["delete"])
    with pytest.raises(MemoryInvalid):
        setup.harnesses.attach(BOB, "chrn_1", [read(m) for m in bobs])
    assert len(setup.harnesses.attach(BOB, "chrn_1", [read(m) for m in bobs[1:]])) == MAX_ATTACHED - 1
    assert len(setup.stored() or []) == MAX_ATTACHED


def test_an_entry_on_a_deleted_memory_is_dropped_and_blocks_no_default(setup: Setup) -> None:
    gone, bobs = setup.memory("Gone"), setup.memory("Bob's")
    setup.world.grants.create(ALICE, bobs, "user:bob", ["read", "write", "delete"])
    setup.harnesses.attach(ALICE, "chrn_1", [default(gone)])
    setup.world.memories.delete(ALICE, gone)
    assert setup.harnesses.attach(BOB, "chrn_1", [default(bobs)]) == [default(bobs)]
    assert setup.stored() == [default(bobs)]


# -- grants ----------------------------------------------------------------------------------------


def test_an_added_or_changed_entry_grants_what_the_harness_lacks(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.harnesses.attach(ALICE, "chrn_1", [read(memory)])
    assert setup.harness_grants(memory) == [("read",)]
    setup.harnesses.attach(ALICE, "chrn_1", [default(memory)])
    assert sorted(setup.harness_grants(memory)) == [("read",), ("read", "write")]


def test_resending_an_unchanged_entry_does_not_undo_a_revoked_grant(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.harnesses.attach(ALICE, "chrn_1", [read(memory)])
    grant = next(g for g in setup.world.grants.list(ALICE, memory) if g.principal == "harness:chrn_1")
    setup.world.grants.delete(ALICE, memory, grant.id)
    assert setup.harnesses.attach(ALICE, "chrn_1", [read(memory)]) == [read(memory)]
    assert setup.harness_grants(memory) == []


def test_an_added_entry_grants_the_harness_in_the_callers_name(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.harnesses.attach(ALICE, "chrn_1", [default(memory)])
    [grant] = [g for g in setup.world.grants.list(ALICE, memory) if g.principal == "harness:chrn_1"]
    assert (grant.tenant, grant.memory_id, grant.privileges, grant.created_by) == (
        "acme", memory, ("read", "write"), "user:alice")
    assert grant.id.startswith("hgrt_")


# -- the list's shape --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entries",
    [
        lambda m: [default(m[0]), default(m[1])],
        lambda m: [read(m[0]), Attachment(m[0], "write")],
        lambda m: [Attachment(m[0], "admin")],
        lambda m: [Attachment(m[0], "read", default=True)],
    ],
    ids=["two-defaults", "a-memory-twice", "unknown-access", "default-read-only"],
)
def test_a_list_has_at_most_one_default_each_memory_once_and_write_access_for_the_default(
    setup: Setup, entries: Callable[[list[str]], list[Attachment]]
) -> None:
    memories = [setup.memory("First"), setup.memory("Second")]
    with pytest.raises(MemoryInvalid):
        setup.harnesses.attach(ALICE, "chrn_1", entries(memories))
    assert setup.stored() is None
    assert setup.harness_grants(memories[0]) == []


def test_a_list_longer_than_the_limit_is_refused_before_anything_is_read(setup: Setup) -> None:
    unknown = [read(f"hmem_{n:032x}") for n in range(1000, 1001 + MAX_ATTACHED)]
    with pytest.raises(MemoryInvalid):  # not memory_not_found: the shape is checked first
        setup.harnesses.attach(ALICE, "chrn_1", unknown)


@pytest.mark.parametrize("harness_id", ["", "a" * 129, "with space", "slash/ed", "ünï"])
def test_a_harness_id_is_1_to_128_letters_digits_and_a_few_marks(setup: Setup, harness_id: str) -> None:
    with pytest.raises(MemoryInvalid):
        setup.harnesses.attach(ALICE, harness_id, [])
    with pytest.raises(MemoryInvalid):
        setup.harnesses.attached(ALICE, harness_id)
    memory = setup.memory("Team")
    assert setup.harnesses.attach(ALICE, "chrn_1.v2-" + "x" * 118, [read(memory)]) == [read(memory)]


class DeletedWhileAttaching(InMemoryAttachmentRepository):
    """A delete that lands between the service's checks and its write."""

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        as_read: Sequence[Attachment] | None,
    ) -> None:
        self.memories.mark_deleting(tenant, [a.memory_id for a in attachments])
        super().replace(tenant, harness_id, attachments, grants, as_read=as_read)


class ChangedWhileAttaching(InMemoryAttachmentRepository):
    """Another caller's change lands between this caller's read of the list and its write, `times` times."""

    def __init__(self, memories: InMemoryMemoryRepository, other: Attachment, times: int) -> None:
        super().__init__(memories)
        self.other, self.times = other, times

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        as_read: Sequence[Attachment] | None,
    ) -> None:
        if self.times:
            self.times -= 1
            self.lists[(tenant, harness_id)] = [*(self.lists.get((tenant, harness_id)) or []), self.other]
        super().replace(tenant, harness_id, attachments, grants, as_read=as_read)


def test_a_change_made_meanwhile_is_merged_again_not_lost(world: World) -> None:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    theirs = world.memories.create(BOB, name="Bob's").memory.id
    mine = world.memories.create(ALICE, name="Team").memory.id
    repo = ChangedWhileAttaching(memories, Attachment(theirs, "read"), times=1)
    HarnessService(world.ports, repo).attach(ALICE, "chrn_1", [default(mine)])
    assert repo.get("acme", "chrn_1") == [default(mine), Attachment(theirs, "read")]  # bob's entry kept


def test_a_list_that_keeps_changing_is_a_conflict_and_nothing_of_this_caller_is_written(world: World) -> None:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    theirs = world.memories.create(BOB, name="Bob's").memory.id
    mine = world.memories.create(ALICE, name="Team").memory.id
    repo = ChangedWhileAttaching(memories, Attachment(theirs, "read"), times=ATTACH_ATTEMPTS)
    with pytest.raises(MemoryConflict):
        HarnessService(world.ports, repo).attach(ALICE, "chrn_1", [default(mine)])
    assert all(a.memory_id == theirs for a in repo.get("acme", "chrn_1") or [])


def test_a_memory_deleted_while_attaching_is_not_found_and_nothing_is_written(world: World) -> None:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    repo = DeletedWhileAttaching(memories)
    harnesses = HarnessService(world.ports, repo)
    memory = world.memories.create(ALICE, name="Team").memory.id
    with pytest.raises(MemoryNotFound):
        harnesses.attach(ALICE, "chrn_1", [default(memory)])
    assert repo.get("acme", "chrn_1") is None
    assert memories.grants_of("acme", ["harness:chrn_1"]) == []
