"""§9: who owns a harness's list, and what its owners may do with it, over the in-memory fakes
(domain/agents/harnesses.py; docs/decisions.md, "Harness ownership").

The harness and the principals on its owners list own it; a list nobody has written yet is its tenant's
administrators' (a key in group:admins), one of whom writes it first; every other principal is refused,
and the harness never sets owners (a person's act). A PUT replaces the whole list (entries the caller
cannot see included, so nothing survives unseen); adding an entry the harness does not hold grants it,
which needs delete (and a person's key)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from tests.fakes import InMemoryAttachmentRepository, InMemoryMemoryRepository
from tests.unit.conftest import World, caller
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.agents.harnesses import (
    ATTACH_ATTEMPTS,
    MAX_ATTACHED,
    Attachment,
    HarnessService,
    MemoriesNotAttached,
)
from uhp_memories.domain.agents.model import HarnessList
from uhp_memories.domain.errors import MemoryConflict, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.model import Caller

ALICE = caller("user:alice")
BOB = caller("user:bob")
CAROL = caller("user:carol", groups=("group:ops",))
DAVE = caller("user:dave")  # holds nothing
HARNESS = caller("harness:chrn_1")
ADMIN = caller("user:root", groups=("group:admins",))  # a tenant administrator


@dataclass
class Setup:
    world: World
    harnesses: HarnessService
    repo: InMemoryAttachmentRepository

    def memory(self, name: str, restricted: bool = False) -> str:
        return self.world.memories.create(ALICE, name=name, restricted=restricted).memory.id

    def hand(self, owner: Caller = ALICE, harness_id: str = "chrn_1") -> None:
        """An administrator hands a list nobody has written yet to its owner (the first write is theirs)."""
        self.harnesses.set_owners(ADMIN, harness_id, [owner.principal])

    def stored(self, harness_id: str = "chrn_1") -> list[Attachment] | None:
        return self.repo.get("acme", harness_id)

    def harness_grants(self, memory_id: str, principal: str = "harness:chrn_1") -> list[tuple[str, ...]]:
        return [tuple(g.privileges) for g in self.world.grants.list(ALICE, memory_id)
                if g.principal == principal and g.memory_id == memory_id]


@pytest.fixture
def setup(world: World) -> Setup:
    repo = world.ports.attachments  # the list the access rule reads too
    assert isinstance(repo, InMemoryAttachmentRepository)
    return Setup(world, HarnessService(world.ports, repo), repo)


def read(memory_id: str) -> Attachment:
    return Attachment(memory_id, "read")


def default(memory_id: str) -> Attachment:
    return Attachment(memory_id, "write", default=True)


# -- ownership ----------------------------------------------------------------------------------------


def test_an_owner_and_no_one_else_may_touch_the_list(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.world.grants.create(ALICE, team, "user:bob", ["read", "write", "create", "delete"])
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [default(team)])
    assert setup.harnesses.owners(ALICE, "chrn_1") == ("user:alice",)
    # Bob holds every privilege on the memory, and still may not read or change another's harness.
    for act in (
        lambda: setup.harnesses.attach(BOB, "chrn_1", []),
        lambda: setup.harnesses.attach(BOB, "chrn_1", [read(team)]),
        lambda: setup.harnesses.listed(BOB, "chrn_1"),
        lambda: setup.harnesses.owners(BOB, "chrn_1"),
        lambda: setup.harnesses.set_owners(BOB, "chrn_1", ["user:bob"]),
        lambda: setup.harnesses.starting(BOB, "chrn_1"),
    ):
        with pytest.raises(MemoryForbidden) as refused:
            act()
        assert "owned by other principals" in refused.value.message
    assert setup.stored() == [default(team)]


def test_a_user_cannot_make_its_own_memory_another_harness_default(setup: Setup) -> None:
    """The issue's attack: a user with no relation to h2 made its own memory h2's write default, so h2's
    unaddressed writes and turns landed where that user reads them."""
    team = setup.memory("Team")
    setup.hand(ALICE, "h2")
    setup.harnesses.attach(ALICE, "h2", [default(team)])
    mallorys = setup.world.memories.create(DAVE, name="Dave's").memory.id
    with pytest.raises(MemoryForbidden):
        setup.harnesses.attach(DAVE, "h2", [default(mallorys)])
    assert setup.stored("h2") == [default(team)]
    assert [g.principal for g in setup.world.grants.list(DAVE, mallorys)] == ["user:dave"]


def test_the_harness_owns_itself_and_an_owner_shares_ownership_by_principal_or_group(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.world.grants.create(ALICE, team, "group:ops", ["read", "delete"])
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [read(team)])
    assert setup.harnesses.listed(HARNESS, "chrn_1").memories == [read(team)]
    assert setup.harnesses.set_owners(ALICE, "chrn_1", ["user:alice", "group:ops"]) == ("user:alice", "group:ops")
    assert setup.harnesses.attach(CAROL, "chrn_1", [default(team)]) == [default(team)]  # as a member of group:ops
    setup.harnesses.set_owners(CAROL, "chrn_1", ["group:ops"])
    with pytest.raises(MemoryForbidden):
        setup.harnesses.attach(ALICE, "chrn_1", [])
    assert setup.stored() == [default(team)]


def test_a_list_nobody_has_written_is_its_administrators_and_no_first_writer_claims_it(setup: Setup) -> None:
    """Issue 36: "first writer owns" let any principal of the tenant claim a harness it was never given (so
    the harness's turns landed in the claimer's memory), the harness itself included."""
    team = setup.memory("Team")
    setup.world.grants.create(ALICE, team, "harness:chrn_1", ["read", "write", "delete"])
    setup.world.grants.create(ALICE, team, "user:root", ["read"])
    for act in (
        lambda: setup.harnesses.attach(ALICE, "chrn_1", [default(team)]),
        lambda: setup.harnesses.set_owners(ALICE, "chrn_1", ["user:alice"]),
        lambda: setup.harnesses.attach(HARNESS, "chrn_1", [default(team)]),
        lambda: setup.harnesses.attach(caller("harness:chrn_2", groups=("group:admins",)), "chrn_1", []),
    ):
        with pytest.raises(MemoryForbidden) as refused:
            act()
        assert "never been written" in refused.value.message
    with pytest.raises(MemoryForbidden) as refused:
        setup.harnesses.set_owners(HARNESS, "chrn_1", [])
    assert "a person's act" in refused.value.message
    assert setup.repo.get_list("acme", "chrn_1") is None
    assert setup.harnesses.attach(ADMIN, "chrn_1", [default(team)]) == [default(team)]
    assert setup.harnesses.owners(ADMIN, "chrn_1") == ("user:root",)
    with pytest.raises(MemoryForbidden):
        setup.harnesses.attach(caller("user:eve", groups=("group:admins",)), "chrn_1", [])  # written: its owners'


def test_a_harness_reads_and_writes_its_list_and_never_its_owners(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.world.grants.create(ALICE, team, "harness:chrn_1", ["read", "write", "delete"])
    setup.hand(ALICE)
    assert setup.harnesses.attach(HARNESS, "chrn_1", [default(team)]) == [default(team)]
    assert setup.harnesses.owners(HARNESS, "chrn_1") == ("user:alice",)  # its write leaves them as they are
    for owners in ([], ["user:mallory"]):
        with pytest.raises(MemoryForbidden) as refused:
            setup.harnesses.set_owners(HARNESS, "chrn_1", owners)
        assert "a person's act" in refused.value.message
    assert setup.harnesses.owners(ALICE, "chrn_1") == ("user:alice",)
    assert setup.harnesses.attach(ALICE, "chrn_1", []) == []


def test_a_list_written_before_owners_existed_is_its_administrators_until_one_writes_it(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.repo.lists[("acme", "chrn_1")] = HarnessList([read(team)], None)
    for grantee in ("user:root", "harness:chrn_1"):
        setup.world.grants.create(ALICE, team, grantee, ["read"])
    for act in (lambda: setup.harnesses.listed(BOB, "chrn_1"), lambda: setup.harnesses.attach(ALICE, "chrn_1", [])):
        with pytest.raises(MemoryForbidden):
            act()
    assert setup.harnesses.listed(HARNESS, "chrn_1").memories == [read(team)]  # the harness still starts there
    assert setup.harnesses.listed(ADMIN, "chrn_1").memories == [read(team)]
    setup.harnesses.set_owners(ADMIN, "chrn_1", ["user:alice"])
    assert setup.harnesses.owners(ALICE, "chrn_1") == ("user:alice",)
    with pytest.raises(MemoryForbidden):
        setup.harnesses.listed(BOB, "chrn_1")


@pytest.mark.parametrize("owners", [["harness:chrn_1"], ["nobody"], ["user:a"] * 2, [f"user:{n}" for n in range(21)]])
def test_owners_are_distinct_principals_other_than_the_harness(setup: Setup, owners: list[str]) -> None:
    with pytest.raises(MemoryInvalid):
        setup.harnesses.set_owners(ALICE, "chrn_1", owners)
    assert setup.repo.get_list("acme", "chrn_1") is None


def test_a_principal_of_another_tenant_never_reaches_the_list(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [read(memory)])
    mallory = caller("user:alice", tenant="other")
    with pytest.raises(MemoryNotFound):
        setup.harnesses.attach(mallory, "chrn_1", [read(memory)])
    with pytest.raises(MemoriesNotAttached):
        setup.harnesses.listed(mallory, "chrn_1")
    assert setup.stored() == [read(memory)]


# -- reading ----------------------------------------------------------------------------------------


def test_an_owner_reads_the_entries_it_can_see_and_how_many_others_there_are(setup: Setup) -> None:
    private, shared = setup.memory("Private", restricted=True), setup.memory("Shared")
    setup.world.grants.create(ALICE, shared, "user:bob", ["read"])
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [read(private), read(shared)])
    setup.harnesses.set_owners(ALICE, "chrn_1", ["user:alice", "user:bob"])
    listed = setup.harnesses.listed(BOB, "chrn_1")
    assert (listed.memories, listed.hidden) == ([read(shared)], 1)


def test_the_harness_reads_every_entry_on_a_memory_it_can_see(setup: Setup) -> None:
    kept, revoked = setup.memory("Kept"), setup.memory("Revoked")
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [read(kept), read(revoked)])
    assert setup.harnesses.attached(HARNESS, "chrn_1") == [read(kept), read(revoked)]
    grant = next(g for g in setup.world.grants.list(ALICE, revoked) if g.principal == "harness:chrn_1")
    setup.world.grants.delete(ALICE, revoked, grant.id)
    assert setup.harnesses.attached(HARNESS, "chrn_1") == [read(kept)]


def test_a_harness_with_no_list_or_an_empty_one_has_nothing_attached_and_says_how_to_attach(setup: Setup) -> None:
    memory = setup.memory("Team")
    for harness_id in ("chrn_never_attached", "chrn_1"):
        if harness_id == "chrn_1":
            setup.hand(ALICE)
            setup.harnesses.attach(ALICE, "chrn_1", [read(memory)])
            setup.harnesses.attach(ALICE, "chrn_1", [])
        with pytest.raises(MemoriesNotAttached) as refused:
            setup.harnesses.attached(ALICE, harness_id)
        assert f"PUT /v1/harnesses/{harness_id}/memories" in refused.value.message


# -- changing ---------------------------------------------------------------------------------------


def test_a_replacement_drops_the_entries_the_owner_cannot_see(setup: Setup) -> None:
    private, shared = setup.memory("Private", restricted=True), setup.memory("Shared")
    setup.world.grants.create(ALICE, shared, "user:bob", ["read"])
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [read(private), default(shared)])
    setup.harnesses.set_owners(ALICE, "chrn_1", ["user:alice", "user:bob"])
    assert setup.harnesses.attach(BOB, "chrn_1", []) == []  # an empty list detaches every memory (§9)
    assert setup.stored() == []
    # Detaching leaves the grants where grants are revoked.
    assert setup.harness_grants(private) == [("read",)]


def test_adding_an_entry_the_harness_lacks_needs_delete_and_grants_it(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.world.grants.create(ALICE, team, "user:bob", ["read", "write", "create"])
    setup.hand(BOB)  # bob's harness
    with pytest.raises(MemoryForbidden) as refused:
        setup.harnesses.attach(BOB, "chrn_1", [read(team)])
    assert "'delete' privilege" in refused.value.message
    assert setup.stored() == []
    assert setup.harness_grants(team) == []


def test_a_harness_key_never_grants_by_attaching(setup: Setup) -> None:
    """Attaching what the harness lacks is granting (§9), a person's act (§13): a harness key holding
    delete may attach what it holds, and grant itself nothing."""
    team, other = setup.memory("Team"), setup.memory("Other")
    setup.world.grants.create(ALICE, team, "harness:chrn_1", ["read", "write", "delete"])
    setup.world.grants.create(ALICE, other, "harness:chrn_1", ["read", "delete"])
    setup.hand(ALICE)
    assert setup.harnesses.attach(HARNESS, "chrn_1", [default(team), read(other)]) == [default(team), read(other)]
    with pytest.raises(MemoryForbidden) as refused:
        setup.harnesses.attach(HARNESS, "chrn_1", [default(team), Attachment(other, "write")])
    assert "a person's act" in refused.value.message
    assert setup.stored() == [default(team), read(other)]
    assert setup.harness_grants(other) == [("read", "delete")]


def test_adding_an_entry_the_harness_already_holds_needs_only_visibility(setup: Setup) -> None:
    """§9: "an entry the harness already holds is attached as it is"."""
    memory = setup.memory("Team")
    setup.world.grants.create(ALICE, memory, "harness:chrn_1", ["read", "write"])
    setup.world.grants.create(ALICE, memory, "user:bob", ["read"])
    setup.hand(BOB)
    assert setup.harnesses.attach(BOB, "chrn_1", [default(memory)]) == [default(memory)]
    assert setup.harness_grants(memory) == [("read", "write")]  # nothing granted


def test_naming_a_memory_the_caller_cannot_see_is_not_found(setup: Setup) -> None:
    hidden = setup.memory("Alice only")
    with pytest.raises(MemoryNotFound):
        setup.harnesses.attach(BOB, "chrn_1", [read(hidden)])
    with pytest.raises(MemoryNotFound):
        setup.harnesses.attach(BOB, "chrn_1", [read("hmem_" + "0" * 32)])
    assert setup.stored() is None


def test_an_entry_on_a_deleted_memory_blocks_nothing(setup: Setup) -> None:
    gone, other = setup.memory("Gone"), setup.memory("Other")
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [default(gone)])
    setup.world.memories.delete(ALICE, gone)
    assert setup.harnesses.attach(ALICE, "chrn_1", [default(other)]) == [default(other)]
    assert setup.stored() == [default(other)]


# -- grants ----------------------------------------------------------------------------------------


def test_an_added_or_changed_entry_grants_what_the_harness_lacks(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [read(memory)])
    assert setup.harness_grants(memory) == [("read",)]
    setup.harnesses.attach(ALICE, "chrn_1", [default(memory)])
    assert sorted(setup.harness_grants(memory)) == [("read",), ("read", "write")]


def test_resending_an_unchanged_entry_does_not_undo_a_revoked_grant(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.hand(ALICE)
    setup.harnesses.attach(ALICE, "chrn_1", [read(memory)])
    grant = next(g for g in setup.world.grants.list(ALICE, memory) if g.principal == "harness:chrn_1")
    setup.world.grants.delete(ALICE, memory, grant.id)
    assert setup.harnesses.attach(ALICE, "chrn_1", [read(memory)]) == [read(memory)]
    assert setup.harness_grants(memory) == []


def test_an_added_entry_grants_the_harness_in_the_callers_name(setup: Setup) -> None:
    memory = setup.memory("Team")
    setup.hand(ALICE)
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
    setup.hand(ALICE, "chrn_1.v2-" + "x" * 118)
    assert setup.harnesses.attach(ALICE, "chrn_1.v2-" + "x" * 118, [read(memory)]) == [read(memory)]


HANDED_TO_ALICE = HarnessList([], ("user:alice",))  # an administrator named her its owner before anything else


class DeletedWhileAttaching(InMemoryAttachmentRepository):
    """A delete that lands between the service's checks and its write."""

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        owners: Sequence[str],
        as_read: HarnessList | None,
    ) -> None:
        self.memories.mark_deleting(tenant, [a.memory_id for a in attachments])
        super().replace(tenant, harness_id, attachments, grants, owners=owners, as_read=as_read)


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
        owners: Sequence[str],
        as_read: HarnessList | None,
    ) -> None:
        if self.times:
            self.times -= 1
            before = self.lists.get((tenant, harness_id))
            entries = [*(before.entries if before else []), self.other]
            self.lists[(tenant, harness_id)] = HarnessList(entries, before.owners if before else ("user:alice",))
        super().replace(tenant, harness_id, attachments, grants, owners=owners, as_read=as_read)


def test_a_change_made_meanwhile_is_read_again_before_the_replacement(world: World) -> None:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    theirs = world.memories.create(BOB, name="Bob's").memory.id
    mine = world.memories.create(ALICE, name="Team").memory.id
    repo = ChangedWhileAttaching(memories, Attachment(theirs, "read"), times=1)
    repo.lists[("acme", "chrn_1")] = HANDED_TO_ALICE
    HarnessService(world.ports, repo).attach(ALICE, "chrn_1", [default(mine)])
    assert repo.get("acme", "chrn_1") == [default(mine)]  # a PUT replaces the list as it stood when written


def test_a_list_that_keeps_changing_is_a_conflict_and_nothing_of_this_caller_is_written(world: World) -> None:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    theirs = world.memories.create(BOB, name="Bob's").memory.id
    mine = world.memories.create(ALICE, name="Team").memory.id
    repo = ChangedWhileAttaching(memories, Attachment(theirs, "read"), times=ATTACH_ATTEMPTS)
    repo.lists[("acme", "chrn_1")] = HANDED_TO_ALICE
    with pytest.raises(MemoryConflict):
        HarnessService(world.ports, repo).attach(ALICE, "chrn_1", [default(mine)])
    assert all(a.memory_id == theirs for a in repo.get("acme", "chrn_1") or [])


def test_a_memory_deleted_while_attaching_is_not_found_and_nothing_is_written(world: World) -> None:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    repo = DeletedWhileAttaching(memories)
    repo.lists[("acme", "chrn_1")] = HANDED_TO_ALICE
    harnesses = HarnessService(world.ports, repo)
    memory = world.memories.create(ALICE, name="Team").memory.id
    with pytest.raises(MemoryNotFound):
        harnesses.attach(ALICE, "chrn_1", [default(memory)])
    assert repo.get("acme", "chrn_1") == []
    assert memories.grants_of("acme", ["harness:chrn_1"]) == []
