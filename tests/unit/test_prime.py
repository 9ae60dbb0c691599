"""§9.1 over the in-memory fakes: the owner's pins, prime within a budget, turns to the default memory,
and the notice for a memory whose provider is outside the server."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.fakes import (
    InMemoryAttachmentRepository,
    InMemoryMemoryRepository,
    InMemoryPinRepository,
    InMemoryPlacementRepository,
)
from tests.unit.conftest import World, caller, make_observing
from uhp_memories.domain.agents.harnesses import Attachment, HarnessService, MemoriesNotAttached
from uhp_memories.domain.agents.model import MAX_PINS, OUTSIDE_PROVIDER, PlacedMemory, ToolRun, Turn
from uhp_memories.domain.agents.prime import PLACEMENT_DAYS, PrimeService, header_text
from uhp_memories.domain.agents.turns import TurnService
from uhp_memories.domain.errors import MemoryConflict, MemoryForbidden, MemoryInvalid, RecordNotFound
from uhp_memories.domain.fence import CLOSE, OPEN, unwrap
from uhp_memories.domain.records.model import RecordInput

ALICE = caller("user:alice")
BOB = caller("user:bob")
HARNESS = caller("harness:h1")
ADMIN = caller("user:root", groups=("group:admins",))


def answer_fence_wrap(nonce: str, text: str) -> str:
    return f"{OPEN.format(nonce=nonce)}\n{text}\n{CLOSE.format(nonce=nonce)}"


def words(text: str) -> int:
    """A counter the tests can do by hand: one token per whitespace-separated word."""
    return len(text.split())


@dataclass
class Setup:
    world: World
    harnesses: HarnessService
    prime: PrimeService
    turns: TurnService

    def memory(self, name: str, **fields: object) -> str:
        return self.world.memories.create(ALICE, name=name, **fields).memory.id  # type: ignore[arg-type]

    def remember(self, memory_id: str, content: str, who=ALICE) -> str:
        return self.world.records.remember(who, memory_id, RecordInput("fact", content, {})).record.id

    def contents(self, answer) -> list[str]:
        return [unwrap(r.content, answer.fence) for m in answer.memories for r in m.records]


class OneOutside:
    def is_outside(self, provider: str) -> bool:
        return provider == "native"  # the test's registry calls the only provider an outside one


@pytest.fixture
def setup(world: World) -> Setup:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    attachments = world.ports.attachments  # the list the access rule reads too
    assert isinstance(attachments, InMemoryAttachmentRepository)
    harnesses = HarnessService(world.ports, attachments)
    for harness_id in ("h1", "h2"):  # an administrator hands Alice the harnesses before their lists are written
        harnesses.set_owners(ADMIN, harness_id, [ALICE.principal])
    pins, placements = InMemoryPinRepository(memories), InMemoryPlacementRepository()
    prime = PrimeService(world.ports, world.memories, harnesses, pins, placements, words)
    return Setup(world, harnesses, prime, TurnService(world.ports, harnesses, make_observing(world).service, prime))


# -- pins ---------------------------------------------------------------------------------------------


def test_pinning_needs_delete_so_a_harness_that_writes_cannot_pin(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.harnesses.attach(ALICE, "h1", [Attachment(team, "write", default=True)])
    own = setup.remember(team, "obey me", who=HARNESS)
    with pytest.raises(MemoryForbidden):
        setup.prime.pin(HARNESS, team, [own])
    # Nor with a grant of delete: pinning is a person's act (§13), never a harness key's.
    setup.world.grants.create(ALICE, team, HARNESS.principal, ["delete"])
    with pytest.raises(MemoryForbidden) as refused:
        setup.prime.pin(HARNESS, team, [own])
    assert "a person's act" in refused.value.message
    assert setup.prime.pinned(HARNESS, team) == []


def test_pins_are_current_records_of_the_memory_at_most_max(setup: Setup) -> None:
    team, other = setup.memory("Team"), setup.memory("Other")
    elsewhere = setup.remember(other, "x")
    with pytest.raises(RecordNotFound):
        setup.prime.pin(ALICE, team, [elsewhere])
    record = setup.remember(team, "v1")
    revised = setup.world.records.revise(ALICE, team, record, {"content": "v2"}).record.id
    with pytest.raises(MemoryConflict) as refused:
        setup.prime.pin(ALICE, team, [record])
    assert refused.value.details["current_record_id"] == revised
    with pytest.raises(MemoryInvalid):
        setup.prime.pin(ALICE, team, [revised, revised])
    with pytest.raises(MemoryInvalid):
        setup.prime.pin(ALICE, team, [revised] * (MAX_PINS + 1))


# -- prime --------------------------------------------------------------------------------------------


def test_prime_places_headers_first_then_whole_records_within_the_budget(setup: Setup) -> None:
    a, b = setup.memory("A", description="first memory"), setup.memory("B")
    child = setup.memory("Kid", parent_id=a, description="below")
    small, big = setup.remember(a, "one two"), setup.remember(a, " ".join(["w"] * 50))
    in_b = setup.remember(b, "three")
    setup.prime.pin(ALICE, a, [big, small])
    setup.prime.pin(ALICE, b, [in_b])
    setup.harnesses.attach(ALICE, "h1", [Attachment(a, "read"), Attachment(b, "read")])
    answer = setup.prime.prime(HARNESS, "h1", budget=60)  # fenced headers take 30 of it (words)
    assert answer.tokens <= 60
    first, second = answer.memories
    assert [c.id for c in first.children] == [child]
    # What principals wrote about a memory is placed fenced, as data (§13), one block a memory, and counted.
    assert unwrap(first.header, answer.fence) == f"A\nfirst memory\n- Kid ({child}): below"
    assert first.header == answer_fence_wrap(answer.fence, header_text(first.memory, first.children))
    assert first.tokens == words(first.header) + first.records[0].tokens
    assert setup.contents(answer) == ["one two", "three"]  # the 50-word record does not fit whole
    assert (first.omitted, answer.omitted_records, answer.omitted_memories) == (1, 1, 0)
    assert answer.tokens == first.tokens + second.tokens
    recorded = setup.prime.placement(HARNESS, "h1", answer.prime_id)  # what the server placed, in tokens
    assert (recorded.budget, recorded.tokens) == (60, answer.tokens)
    assert recorded.memories == (
        PlacedMemory(a, first.tokens, (small,)),
        PlacedMemory(b, second.tokens, (in_b,)),
    )
    b_header = words(second.header)
    tiny = setup.prime.prime(HARNESS, "h1", budget=b_header)  # only B's short header fits
    assert [m.memory.id for m in tiny.memories] == [b]
    assert (tiny.tokens, tiny.omitted_memories, tiny.omitted_records) == (b_header, 1, 3)


def test_prime_shows_a_persons_revision_and_never_an_agents(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.harnesses.attach(ALICE, "h1", [Attachment(team, "write", default=True)])
    record = setup.remember(team, "be concise")
    setup.prime.pin(ALICE, team, [record])
    by_alice = setup.world.records.revise(ALICE, team, record, {"content": "be brief"}).record.id
    assert setup.contents(setup.prime.prime(HARNESS, "h1")) == ["be brief"]
    setup.world.records.revise(HARNESS, team, by_alice, {"content": "obey the agent"})
    assert setup.contents(setup.prime.prime(HARNESS, "h1")) == ["be brief"]
    setup.remember(team, "unpinned agent note", who=HARNESS)
    assert setup.contents(setup.prime.prime(HARNESS, "h1")) == ["be brief"]


def test_a_forgotten_pinned_record_leaves_prime(setup: Setup) -> None:
    team = setup.memory("Team")
    setup.harnesses.attach(ALICE, "h1", [Attachment(team, "read")])
    record = setup.remember(team, "old rule")
    setup.prime.pin(ALICE, team, [record])
    setup.world.records.forget(ALICE, team, record)
    assert setup.contents(setup.prime.prime(HARNESS, "h1")) == []
    assert setup.prime.pinned(ALICE, team)[0].shown is None


def test_prime_reads_only_what_the_caller_may_read_and_checks_the_budget(setup: Setup) -> None:
    with pytest.raises(MemoriesNotAttached):
        setup.prime.prime(HARNESS, "h1")
    team = setup.memory("Team")
    setup.harnesses.attach(ALICE, "h1", [Attachment(team, "read")])
    with pytest.raises(MemoryForbidden):
        setup.prime.prime(BOB, "h1")  # Bob does not own the harness
    setup.harnesses.set_owners(ALICE, "h1", ["user:alice", "user:bob"])
    with pytest.raises(MemoriesNotAttached):
        setup.prime.prime(BOB, "h1")  # an owner who may read none of its memories primes nothing
    for budget in (0, 20_001):
        with pytest.raises(MemoryInvalid):
            setup.prime.prime(HARNESS, "h1", budget=budget)


# -- turns --------------------------------------------------------------------------------------------


def test_a_turn_is_one_episode_per_part_in_the_default_memory(setup: Setup) -> None:
    inbox = setup.memory("Inbox")
    setup.harnesses.attach(ALICE, "h1", [Attachment(inbox, "write", default=True)])
    rule = setup.remember(inbox, "be brief")
    setup.prime.pin(ALICE, inbox, [rule])
    primed = setup.prime.prime(HARNESS, "h1")
    turn = Turn("asked?", "answered.", [ToolRun("memory_recall", {"query": "q"}, "found")], primed.prime_id)
    answer = setup.turns.observe_turn(HARNESS, "h1", turn)
    assert answer.memory_id == inbox
    parts = [(v.record.type, v.record.attributes["turn"]["part"], v.record.content) for v in answer.records]
    assert parts == [
        ("episode", "asked", "asked?"),
        ("episode", "answered", "answered."),
        ("episode", "tool", 'tool memory_recall\ninput: {"query": "q"}\noutput: found'),
    ]
    [placed] = primed.memories
    assert answer.records[0].record.attributes["turn"]["primed"] == {
        "prime_id": primed.prime_id,
        "budget": primed.budget,
        "tokens": primed.tokens,
        "memories": [{"memory_id": inbox, "tokens": placed.tokens, "record_ids": [rule]}],
    }
    assert "primed" not in answer.records[1].record.attributes["turn"]
    assert {v.record.attributes["turn"]["id"] for v in answer.records} == {answer.turn_id}
    assert {v.record.written_by["id"] for v in answer.records} == {"h1"}


def test_a_turn_needs_a_default_the_caller_may_see(setup: Setup) -> None:
    with pytest.raises(MemoriesNotAttached):  # a harness whose list nobody has written
        setup.turns.observe_turn(caller("harness:h3"), "h3", Turn("a", "b"))
    team, inbox = setup.memory("Team"), setup.memory("Inbox")
    setup.harnesses.attach(ALICE, "h1", [Attachment(team, "write")])
    with pytest.raises(MemoryInvalid, match="no default"):
        setup.turns.observe_turn(HARNESS, "h1", Turn("a", "b"))
    setup.harnesses.attach(ALICE, "h1", [Attachment(team, "write"), Attachment(inbox, "write", default=True)])
    with pytest.raises(MemoryForbidden):
        setup.turns.observe_turn(BOB, "h1", Turn("a", "b"))  # Bob does not own the harness
    setup.harnesses.set_owners(ALICE, "h1", ["user:alice", "user:bob"])
    with pytest.raises(MemoryInvalid, match="no default"):
        setup.turns.observe_turn(BOB, "h1", Turn("a", "b"))  # Bob cannot see the default: never told which
    setup.world.grants.create(ALICE, inbox, "user:bob", ["read"])
    with pytest.raises(MemoryForbidden):
        setup.turns.observe_turn(BOB, "h1", Turn("a", "b"))  # observe checks write
    setup.world.grants.create(ALICE, inbox, "user:bob", ["read", "write"])
    assert setup.turns.observe_turn(BOB, "h1", Turn("a", "b")).memory_id == inbox


def test_a_turn_names_only_a_placement_its_own_caller_primed_within_the_days_kept(setup: Setup) -> None:
    inbox = setup.memory("Inbox")
    setup.harnesses.attach(ALICE, "h1", [Attachment(inbox, "write", default=True)])
    by_alice = setup.prime.prime(ALICE, "h1").prime_id
    for named in (by_alice, "hprm_" + "0" * 32, "not an id"):
        with pytest.raises(MemoryInvalid, match="prime_id"):
            setup.turns.observe_turn(HARNESS, "h1", Turn("a", "b", prime_id=named))
    own = setup.prime.prime(HARNESS, "h1").prime_id
    assert setup.turns.observe_turn(HARNESS, "h1", Turn("a", "b", prime_id=own)).records
    setup.world.clock.now += PLACEMENT_DAYS * 86_400_000
    with pytest.raises(MemoryInvalid, match="prime_id"):
        setup.turns.observe_turn(HARNESS, "h1", Turn("a", "b", prime_id=own))
    assert len(setup.world.records.list(ALICE, inbox).items) == 2  # the refused turns wrote nothing


# -- outside providers (§9.1 last rule) ---------------------------------------------------------------


def test_attaching_a_memory_of_an_outside_provider_answers_with_the_notice(setup: Setup) -> None:
    team = setup.memory("Team")
    native = setup.harnesses.attach_with_notices(ALICE, "h1", [Attachment(team, "read")])
    assert native.notices == []
    outside = HarnessService(setup.world.ports, setup.world.ports.attachments, OneOutside())  # type: ignore[arg-type]
    attached = outside.attach_with_notices(ALICE, "h2", [Attachment(team, "write", default=True)])
    assert attached.memories == [Attachment(team, "write", default=True)]
    [notice] = attached.notices
    assert (notice.code, notice.memory_id, notice.provider) == (OUTSIDE_PROVIDER, team, "native")
    assert "every turn" in notice.message
