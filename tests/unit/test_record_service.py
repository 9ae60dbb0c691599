"""Records (§4, §5): remember, revise, forget, get and list with filters and as_of, history, snapshots."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.unit.conftest import World, attach, caller
from uhp_memories.domain import cursors
from uhp_memories.domain.errors import (
    MemoryConflict,
    MemoryForbidden,
    MemoryInvalid,
    MemoryNotFound,
    MemoryUnsupported,
    RecordNotFound,
)
from uhp_memories.domain.limits import ATTRIBUTES_JSON_BYTES, CONTENT_BYTES, REFERENCES_MAX
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.timefmt import format_ms

ALICE = caller("user:alice")
BOB = caller("harness:chrn_41c0")


@pytest.fixture
def memory_id(world: World) -> str:
    return world.memories.create(ALICE, name="Sales").memory.id


def let_bob_write(world: World, memory_id: str) -> None:
    world.grants.create(ALICE, memory_id, BOB.principal, ["read", "write"])
    attach(world, BOB, memory_id)  # a harness writes where its list lets it


def fact(content: str, **attributes: Any) -> RecordInput:
    return RecordInput("fact", content, attributes)


def contents(page) -> list[str]:
    return [view.record.content for view in page.items]


def now(world: World) -> str:
    """An instant after every write so far and before every write to come."""
    instant = format_ms(world.clock.now)
    world.clock.advance(1000)
    return instant


# -- remember ------------------------------------------------------------------------------------


def test_remember_writes_a_first_version_stamped_by_the_server(world: World, memory_id: str) -> None:
    world.clock.advance(5000)
    expected_time = format_ms(world.clock.now + 1)
    view = world.records.remember(
        ALICE, memory_id, RecordInput("fact", "Acme renews in March.", {"account": "acme"},
                                      valid_from="2026-09-30T00:00:00.000Z")
    )
    record = view.record
    assert record.id.startswith("hrec_")
    assert len(record.id) == 37
    assert record.chain_id == record.id
    assert (record.version, record.status, record.supersedes, record.superseded_by) == (1, "active", None, None)
    assert record.written_at == expected_time
    assert record.invalidated_at is None
    assert record.written_by == {"kind": "user", "id": "alice"}
    assert record.memory_id == memory_id
    assert record.valid_from == "2026-09-30T00:00:00.000Z"
    assert world.records.get(ALICE, memory_id, record.id).record == record
    assert world.memories.get(ALICE, memory_id).memory.record_count == 1


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (RecordInput("Fact", "x", {}), MemoryInvalid),
        (RecordInput("", "x", {}), MemoryInvalid),
        (RecordInput("x.calendar.", "x", {}), MemoryInvalid),
        (RecordInput("x" * 101, "x", {}), MemoryInvalid),
        (RecordInput("fact", {"text": "x"}, {}), MemoryInvalid),
        (RecordInput("fact", 42, {}), MemoryInvalid),
        (RecordInput("fact", {"file": {"id": "file_1"}}, {}), MemoryUnsupported),
        (RecordInput("fact", "x" * (CONTENT_BYTES + 1), {}), MemoryInvalid),
        (RecordInput("fact", "é" * (CONTENT_BYTES // 2 + 1), {}), MemoryInvalid),
        (RecordInput("fact", "x", {"blob": "x" * ATTRIBUTES_JSON_BYTES}), MemoryInvalid),
        (RecordInput("fact", "x", {}, valid_from="2026-10-02T00:00:00.000Z", valid_to="2026-10-01T00:00:00.000Z"),
         MemoryInvalid),
        (RecordInput("fact", "x", {}, references=({"memory_id": "hmem_1", "record_id": "hrec_" + "0" * 32},)),
         MemoryInvalid),
        (RecordInput("fact", "x", {}, references=({"memory_id": "hmem_" + "0" * 32},)), MemoryInvalid),
        (RecordInput("fact", "x", {}, references=tuple(
            {"memory_id": "hmem_" + "0" * 32, "record_id": "hrec_" + f"{i:032x}"} for i in range(REFERENCES_MAX + 1)
        )), MemoryInvalid),
    ],
)
def test_remember_refuses_what_it_cannot_keep(world: World, memory_id: str, given: RecordInput,
                                             error: type[Exception]) -> None:
    with pytest.raises(error):
        world.records.remember(ALICE, memory_id, given)
    assert world.records.list(ALICE, memory_id, include="all").items == []
    assert world.memories.get(ALICE, memory_id).memory.record_count == 0


def test_extension_types_and_content_at_the_limit_are_kept(world: World, memory_id: str) -> None:
    event = world.records.remember(ALICE, memory_id, RecordInput("x.calendar.event", "Standup", {"room": 4}))
    assert event.record.type == "x.calendar.event"
    big = world.records.remember(ALICE, memory_id, RecordInput("note", "x" * CONTENT_BYTES, {}))
    assert len(big.record.content) == CONTENT_BYTES


def test_remember_in_an_unknown_memory_is_not_found(world: World) -> None:
    with pytest.raises(MemoryNotFound):
        world.records.remember(ALICE, "hmem_" + "0" * 32, fact("x"))


# -- revise --------------------------------------------------------------------------------------


def test_revise_appends_a_version_with_a_new_id_and_closes_the_old(world: World, memory_id: str) -> None:
    let_bob_write(world, memory_id)
    first = world.records.remember(ALICE, memory_id, RecordInput(
        "fact", "Acme renews in March.", {"account": "acme"}, valid_from="2026-09-30T00:00:00.000Z",
        references=({"memory_id": memory_id, "record_id": "hrec_" + "0" * 32},))).record
    second = world.records.revise(BOB, memory_id, first.id, {"content": "Acme renews in April."}).record

    assert second.id != first.id
    assert second.chain_id == first.chain_id
    assert (second.version, second.status, second.supersedes, second.superseded_by) == (2, "active", first.id, None)
    assert second.written_by == {"kind": "harness", "id": "chrn_41c0"}
    # Fields the revision did not send carry over.
    assert second.attributes == {"account": "acme"}
    assert second.valid_from == "2026-09-30T00:00:00.000Z"
    assert second.references == first.references
    assert second.written_at > first.written_at

    old = world.records.get(ALICE, memory_id, first.id).record
    assert (old.status, old.superseded_by, old.invalidated_at) == ("superseded", second.id, second.written_at)
    assert old.content == "Acme renews in March."
    assert old.written_by == {"kind": "user", "id": "alice"}
    assert world.memories.get(ALICE, memory_id).memory.record_count == 1
    assert contents(world.records.list(ALICE, memory_id)) == ["Acme renews in April."]


def test_revise_replaces_only_the_fields_sent(world: World, memory_id: str) -> None:
    first = world.records.remember(ALICE, memory_id, RecordInput("note", "draft", {"a": 1})).record
    second = world.records.revise(ALICE, memory_id, first.id, {"attributes": {"b": 2}, "valid_to": None}).record
    assert (second.content, second.attributes) == ("draft", {"b": 2})
    third = world.records.revise(ALICE, memory_id, second.id, {"type": "note", "content": "final"}).record
    assert (third.type, third.content, third.attributes, third.version) == ("note", "final", {"b": 2}, 3)


def test_a_revision_is_checked_like_a_new_record(world: World, memory_id: str) -> None:
    first = world.records.remember(ALICE, memory_id, fact("x")).record
    with pytest.raises(MemoryInvalid):
        world.records.revise(ALICE, memory_id, first.id, {"content": "x" * (CONTENT_BYTES + 1)})
    with pytest.raises(MemoryInvalid):
        world.records.revise(ALICE, memory_id, first.id, {"valid_from": "2027-01-01T00:00:00.000Z",
                                                          "valid_to": "2026-01-01T00:00:00.000Z"})
    assert world.records.get(ALICE, memory_id, first.id).record.status == "active"
    assert len(world.records.history(ALICE, memory_id, first.id).items) == 1


def test_a_record_type_cannot_change_and_episodes_cannot_be_revised(world: World, memory_id: str) -> None:
    note = world.records.remember(ALICE, memory_id, RecordInput("note", "x", {})).record
    with pytest.raises(MemoryInvalid):
        world.records.revise(ALICE, memory_id, note.id, {"type": "fact"})
    episode = world.records.remember(ALICE, memory_id, RecordInput("episode", "turn 1", {})).record
    with pytest.raises(MemoryInvalid):
        world.records.revise(ALICE, memory_id, episode.id, {"content": "turn 1, edited"})
    assert world.records.get(ALICE, memory_id, episode.id).record.status == "active"
    assert world.records.forget(ALICE, memory_id, episode.id).record.status == "forgotten"


def test_revising_a_superseded_version_conflicts_naming_the_current_one(world: World, memory_id: str) -> None:
    v1 = world.records.remember(ALICE, memory_id, fact("one")).record
    v2 = world.records.revise(ALICE, memory_id, v1.id, {"content": "two"}).record
    v3 = world.records.revise(ALICE, memory_id, v2.id, {"content": "three"}).record
    for stale in (v1.id, v2.id):
        with pytest.raises(MemoryConflict) as caught:
            world.records.revise(ALICE, memory_id, stale, {"content": "lost update"})
        assert caught.value.details == {"current_record_id": v3.id}
        with pytest.raises(MemoryConflict) as caught:
            world.records.forget(ALICE, memory_id, stale)
        assert caught.value.details == {"current_record_id": v3.id}
    assert [v.record.id for v in world.records.history(ALICE, memory_id, v1.id).items] == [v1.id, v2.id, v3.id]


def test_a_concurrent_revision_turns_the_losing_write_into_a_conflict(world: World, memory_id: str) -> None:
    """Two writers read the same current version; the repository refuses the second (StaleVersion)."""
    let_bob_write(world, memory_id)
    first = world.records.remember(ALICE, memory_id, fact("one")).record
    repo = world.ports.records
    original = repo.append_revision
    winner: list[str] = []

    def racing_append_revision(previous, revision, conditions=()):
        repo.append_revision = original  # type: ignore[method-assign]
        winner.append(world.records.revise(BOB, memory_id, first.id, {"content": "bob's"}).record.id)
        return original(previous, revision, conditions)

    repo.append_revision = racing_append_revision  # type: ignore[method-assign]
    with pytest.raises(MemoryConflict) as caught:
        world.records.revise(ALICE, memory_id, first.id, {"content": "alice's"})
    assert caught.value.details == {"current_record_id": winner[0]}
    chain = repo.chain("acme", first.chain_id)
    assert [v.content for v in chain] == ["one", "bob's"]
    assert [v.status for v in chain] == ["superseded", "active"]


def test_a_concurrent_forget_turns_the_losing_forget_into_a_conflict(world: World, memory_id: str) -> None:
    let_bob_write(world, memory_id)
    first = world.records.remember(ALICE, memory_id, fact("one")).record
    repo = world.ports.records
    original = repo.close
    winner: list[str] = []

    def racing_close(current, closed, conditions=()):
        repo.close = original  # type: ignore[method-assign]
        winner.append(world.records.revise(BOB, memory_id, first.id, {"content": "two"}).record.id)
        return original(current, closed, conditions)

    repo.close = racing_close  # type: ignore[method-assign]
    with pytest.raises(MemoryConflict) as caught:
        world.records.forget(ALICE, memory_id, first.id)
    assert caught.value.details == {"current_record_id": winner[0]}
    assert world.records.get(ALICE, memory_id, winner[0]).record.status == "active"
    assert world.memories.get(ALICE, memory_id).memory.record_count == 1


# -- forget --------------------------------------------------------------------------------------


def test_forget_closes_the_record_and_keeps_its_trace(world: World, memory_id: str) -> None:
    let_bob_write(world, memory_id)
    v1 = world.records.remember(ALICE, memory_id, fact("one")).record
    v2 = world.records.revise(ALICE, memory_id, v1.id, {"content": "two"}).record
    forgotten = world.records.forget(BOB, memory_id, v2.id).record
    assert forgotten.id == v2.id
    assert forgotten.status == "forgotten"
    assert forgotten.invalidated_at is not None
    assert forgotten.invalidated_at > v2.written_at
    assert forgotten.superseded_by is None
    # Gone from every read that does not ask for history (§5.2), get by id included; include=all asks.
    for version_id in (v1.id, v2.id):
        with pytest.raises(RecordNotFound):
            world.records.get(ALICE, memory_id, version_id)
    assert world.records.get(ALICE, memory_id, v2.id, include="all").record == forgotten
    assert world.records.get(ALICE, memory_id, v1.id, include="all").record.status == "superseded"

    assert world.records.list(ALICE, memory_id).items == []
    assert {v.record.status for v in world.records.list(ALICE, memory_id, include="all").items} == {
        "superseded", "forgotten"
    }
    assert world.memories.get(ALICE, memory_id).memory.record_count == 0
    assert [v.record.id for v in world.records.history(ALICE, memory_id, v2.id).items] == [v1.id, v2.id]


def test_a_forgotten_record_can_no_longer_change(world: World, memory_id: str) -> None:
    v1 = world.records.remember(ALICE, memory_id, fact("one")).record
    world.records.forget(ALICE, memory_id, v1.id)
    for attempt in (
        lambda: world.records.forget(ALICE, memory_id, v1.id),
        lambda: world.records.revise(ALICE, memory_id, v1.id, {"content": "back"}),
    ):
        with pytest.raises(MemoryConflict) as caught:
            attempt()
        assert caught.value.details == {"current_record_id": v1.id}
    assert world.memories.get(ALICE, memory_id).memory.record_count == 0


# -- get -----------------------------------------------------------------------------------------


def test_a_record_is_found_only_through_its_own_memory(world: World, memory_id: str) -> None:
    other = world.memories.create(ALICE, name="Other").memory.id
    record = world.records.remember(ALICE, memory_id, fact("x")).record
    with pytest.raises(RecordNotFound):
        world.records.get(ALICE, other, record.id)
    with pytest.raises(RecordNotFound):
        world.records.revise(ALICE, other, record.id, {"content": "y"})
    with pytest.raises(RecordNotFound):
        world.records.forget(ALICE, other, record.id)
    with pytest.raises(RecordNotFound):
        world.records.history(ALICE, other, record.id)
    for unknown in ("hrec_" + "0" * 32, "nonsense", record.id.upper()):
        with pytest.raises(RecordNotFound):
            world.records.get(ALICE, memory_id, unknown)


def test_another_tenant_never_reads_a_record(world: World, memory_id: str) -> None:
    record = world.records.remember(ALICE, memory_id, fact("x")).record
    with pytest.raises(MemoryNotFound):
        world.records.get(caller("user:alice", tenant="globex"), memory_id, record.id)


# -- list ----------------------------------------------------------------------------------------


def test_list_is_newest_first(world: World, memory_id: str) -> None:
    for content in ("one", "two", "three"):
        world.records.remember(ALICE, memory_id, fact(content))
    page = world.records.list(ALICE, memory_id)
    assert contents(page) == ["three", "two", "one"]
    assert page.next_cursor is None


def test_list_by_type(world: World, memory_id: str) -> None:
    world.records.remember(ALICE, memory_id, RecordInput("fact", "f", {}))
    world.records.remember(ALICE, memory_id, RecordInput("note", "n", {}))
    world.records.remember(ALICE, memory_id, RecordInput("x.calendar.event", "e", {}))
    assert contents(world.records.list(ALICE, memory_id, types=["note", "x.calendar.event"])) == ["e", "n"]
    assert contents(world.records.list(ALICE, memory_id, types=["procedure"])) == []


def test_list_with_filters(world: World, memory_id: str) -> None:
    world.records.remember(ALICE, memory_id, RecordInput("fact", "acme small", {"account": "acme", "amount": 5}))
    world.records.remember(ALICE, memory_id, RecordInput("fact", "acme big", {"account": "acme", "amount": 50},
                                                         valid_from="2026-06-01T00:00:00.000Z"))
    world.records.remember(ALICE, memory_id, RecordInput("note", "globex", {"account": "globex"},
                                                         valid_from="2025-01-01T00:00:00.000Z"))

    def listed(flt: Any) -> set[str]:
        return set(contents(world.records.list(ALICE, memory_id, filters=flt)))

    assert listed({"field": "attributes.account", "op": "eq", "value": "acme"}) == {"acme small", "acme big"}
    assert listed({"and": [{"field": "attributes.account", "value": "acme"},
                           {"field": "attributes.amount", "op": "gt", "value": 10}]}) == {"acme big"}
    assert listed({"or": [{"field": "type", "value": "note"},
                          {"field": "attributes.amount", "op": "lt", "value": 10}]}) == {"globex", "acme small"}
    assert listed({"not": {"field": "attributes.account", "value": "acme"}}) == {"globex"}
    assert listed({"field": "time.valid_from", "op": "gte", "value": "2026-01-01T00:00:00Z"}) == {"acme big"}
    assert listed({"field": "time.valid_from", "op": "exists", "value": False}) == {"acme small"}
    assert listed({"field": "type", "op": "in", "value": ["note", "procedure"]}) == {"globex"}


def test_list_filters_on_written_at(world: World, memory_id: str) -> None:
    world.records.remember(ALICE, memory_id, fact("early"))
    between = now(world)
    world.records.remember(ALICE, memory_id, fact("late"))
    assert contents(world.records.list(
        ALICE, memory_id, filters={"field": "time.written_at", "op": "gt", "value": between})) == ["late"]
    assert contents(world.records.list(
        ALICE, memory_id, filters={"field": "time.written_at", "op": "lte", "value": between})) == ["early"]


def test_invalid_list_requests_are_refused(world: World, memory_id: str) -> None:
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, memory_id, filters={"field": "content", "value": "x"})
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, memory_id, include="superseded")
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, memory_id, limit=0)
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, memory_id, as_of="no such snapshot")
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, memory_id, as_of="2026-13-45T00:00:00Z")


def test_include_all_adds_superseded_and_forgotten_versions(world: World, memory_id: str) -> None:
    a1 = world.records.remember(ALICE, memory_id, fact("a1")).record
    world.records.revise(ALICE, memory_id, a1.id, {"content": "a2"})
    b1 = world.records.remember(ALICE, memory_id, fact("b1")).record
    world.records.forget(ALICE, memory_id, b1.id)
    world.records.remember(ALICE, memory_id, fact("c1"))

    assert contents(world.records.list(ALICE, memory_id)) == ["c1", "a2"]
    every = world.records.list(ALICE, memory_id, include="all")
    assert contents(every) == ["c1", "b1", "a2", "a1"]
    assert [v.record.status for v in every.items] == ["active", "forgotten", "active", "superseded"]
    closed = world.records.list(ALICE, memory_id, include="all",
                                filters={"field": "time.invalidated_at", "op": "exists", "value": True})
    assert contents(closed) == ["b1", "a1"]


@pytest.mark.parametrize("include", ["active", "all"])
def test_list_paginates_over_filtered_results_without_gaps_or_repeats(world: World, memory_id: str,
                                                                      include: str) -> None:
    expected = []
    for i in range(11):
        record = world.records.remember(ALICE, memory_id, fact(f"r{i}", keep=i % 3 != 0)).record
        if i % 4 == 0:
            world.records.revise(ALICE, memory_id, record.id, {"attributes": {"keep": False}})
    every = world.records.list(ALICE, memory_id, include=include, limit=100,
                               filters={"field": "attributes.keep", "value": True})
    expected = [v.record.id for v in every.items]
    assert len(expected) >= 5

    seen: list[str] = []
    cursor = None
    while True:
        page = world.records.list(ALICE, memory_id, include=include, limit=2, cursor=cursor,
                                  filters={"field": "attributes.keep", "value": True})
        assert len(page.items) <= 2
        seen.extend(v.record.id for v in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == expected


def test_a_records_cursor_is_tied_to_its_listing(world: World, memory_id: str) -> None:
    for i in range(3):
        world.records.remember(ALICE, memory_id, fact(f"r{i}"))
    active_cursor = world.records.list(ALICE, memory_id, limit=1).next_cursor
    assert active_cursor is not None
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, memory_id, include="all", cursor=active_cursor)
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, memory_id, as_of=now(world), cursor=active_cursor)
    for tampered in ("garbage", cursors.encode("records:active:", 5, over=memory_id),
                     cursors.encode("records:active:", ["x"], over=memory_id),
                     cursors.encode("records:active:", None, over=memory_id),
                     cursors.encode("children", [0, "x"], over=memory_id)):
        with pytest.raises(MemoryInvalid):
            world.records.list(ALICE, memory_id, cursor=tampered)


def test_reading_records_needs_read_and_listing_an_unseen_memory_is_not_found(world: World,
                                                                              memory_id: str) -> None:
    with pytest.raises(MemoryNotFound):
        world.records.list(BOB, memory_id)
    world.grants.create(ALICE, memory_id, "harness:chrn_41c0", ["write"])
    with pytest.raises(MemoryForbidden):
        world.records.list(BOB, memory_id)


# -- as_of ---------------------------------------------------------------------------------------


def test_as_of_a_time_reads_the_memory_as_it_stood(world: World, memory_id: str) -> None:
    before_anything = now(world)
    a1 = world.records.remember(ALICE, memory_id, fact("a1")).record
    b1 = world.records.remember(ALICE, memory_id, fact("b1")).record
    t1 = now(world)
    a2 = world.records.revise(ALICE, memory_id, a1.id, {"content": "a2"}).record
    t2 = now(world)
    world.records.forget(ALICE, memory_id, b1.id)
    t3 = now(world)

    assert contents(world.records.list(ALICE, memory_id, as_of=before_anything)) == []
    at_t1 = world.records.list(ALICE, memory_id, as_of=t1)
    assert contents(at_t1) == ["b1", "a1"]
    # Closed later, so as of then it was open: the later close is not yet visible.
    assert all(v.record.status == "active" and v.record.invalidated_at is None and v.record.superseded_by is None
               for v in at_t1.items)
    assert contents(world.records.list(ALICE, memory_id, as_of=t2)) == ["a2", "b1"]
    assert contents(world.records.list(ALICE, memory_id, as_of=t3)) == ["a2"]
    assert contents(world.records.list(ALICE, memory_id)) == ["a2"]

    # get as_of answers the version named, as it stood then; one written later did not exist yet.
    with pytest.raises(RecordNotFound):
        world.records.get(ALICE, memory_id, a2.id, as_of=t1)
    for version_id in (a1.id, b1.id):
        with pytest.raises(RecordNotFound):
            world.records.get(ALICE, memory_id, version_id, as_of=before_anything)
    assert world.records.get(ALICE, memory_id, a1.id, as_of=t1).record == a1
    assert world.records.get(ALICE, memory_id, a1.id, as_of=t2).record.status == "superseded"
    assert world.records.get(ALICE, memory_id, a2.id, as_of=t2).record == a2
    assert world.records.get(ALICE, memory_id, b1.id, as_of=t2).record == b1
    with pytest.raises(RecordNotFound):  # forgotten by then: out of every read but history's
        world.records.get(ALICE, memory_id, b1.id, as_of=t3)
    assert world.records.get(ALICE, memory_id, b1.id, as_of=t3, include="all").record.status == "forgotten"


def test_as_of_the_instant_of_a_revision_sees_exactly_one_version(world: World, memory_id: str) -> None:
    a1 = world.records.remember(ALICE, memory_id, fact("a1")).record
    a2 = world.records.revise(ALICE, memory_id, a1.id, {"content": "a2"}).record
    assert contents(world.records.list(ALICE, memory_id, as_of=a2.written_at)) == ["a2"]
    assert contents(world.records.list(ALICE, memory_id, as_of=a1.written_at)) == ["a1"]


def test_as_of_accepts_any_offset_for_the_same_instant(world: World, memory_id: str) -> None:
    world.records.remember(ALICE, memory_id, fact("a1"))
    world.clock.advance(3_600_000)
    later = world.clock.now
    world.clock.advance(3_600_000)
    world.records.remember(ALICE, memory_id, fact("b1"))
    shifted = datetime.fromtimestamp(later / 1000, tz=timezone(timedelta(hours=2))).isoformat(timespec="milliseconds")
    assert shifted.endswith("+02:00")
    in_utc = world.records.list(ALICE, memory_id, as_of=format_ms(later))
    assert contents(in_utc) == ["a1"]
    assert world.records.list(ALICE, memory_id, as_of=shifted) == in_utc


def test_as_of_with_include_all_shows_every_version_written_by_then(world: World, memory_id: str) -> None:
    a1 = world.records.remember(ALICE, memory_id, fact("a1")).record
    a2 = world.records.revise(ALICE, memory_id, a1.id, {"content": "a2"}).record
    t = now(world)
    world.records.revise(ALICE, memory_id, a2.id, {"content": "a3"})
    every = world.records.list(ALICE, memory_id, include="all", as_of=t)
    assert contents(every) == ["a2", "a1"]
    assert [v.record.status for v in every.items] == ["active", "superseded"]


def test_as_of_a_snapshot_is_the_same_read_as_its_time(world: World, memory_id: str) -> None:
    a1 = world.records.remember(ALICE, memory_id, fact("a1")).record
    world.records.remember(ALICE, memory_id, fact("b1"))
    snapshot = world.records.create_snapshot(ALICE, memory_id, "before-cleanup", "pre consolidation")
    assert snapshot.id.startswith("hsnp_")
    assert snapshot.created_by == "user:alice"
    world.records.revise(ALICE, memory_id, a1.id, {"content": "a2"})
    world.records.remember(ALICE, memory_id, fact("c1"))

    by_name = world.records.list(ALICE, memory_id, as_of="before-cleanup")
    assert contents(by_name) == ["b1", "a1"]
    assert by_name == world.records.list(ALICE, memory_id, as_of=snapshot.time)
    assert world.records.get(ALICE, memory_id, a1.id, as_of="before-cleanup").record.content == "a1"


def test_a_snapshot_name_belongs_to_one_memory(world: World, memory_id: str) -> None:
    other = world.memories.create(ALICE, name="Other").memory.id
    world.records.create_snapshot(ALICE, memory_id, "v1")
    with pytest.raises(MemoryConflict):
        world.records.create_snapshot(ALICE, memory_id, "v1")
    world.records.create_snapshot(ALICE, other, "v1")
    with pytest.raises(MemoryInvalid):
        world.records.list(ALICE, other, as_of="v2")


def test_a_snapshot_racing_a_delete_is_not_found(world: World, memory_id: str) -> None:
    repo = world.ports.records
    original = repo.put_snapshot

    def put_after_a_delete_began(snapshot):
        world.ports.memories.mark_deleting("acme", [memory_id])
        return original(snapshot)

    repo.put_snapshot = put_after_a_delete_began  # type: ignore[method-assign]
    with pytest.raises(MemoryNotFound):
        world.records.create_snapshot(ALICE, memory_id, "late")
    assert repo.get_snapshot("acme", memory_id, "late") is None


@pytest.mark.parametrize("name", ["", "2026-10-01", "2026-10-01T00:00:00Z", "x" * 101])
def test_a_snapshot_name_must_not_read_as_a_time(world: World, memory_id: str, name: str) -> None:
    with pytest.raises(MemoryInvalid):
        world.records.create_snapshot(ALICE, memory_id, name)


def test_snapshots_need_write_and_list_in_time_order(world: World, memory_id: str) -> None:
    world.grants.create(ALICE, memory_id, "harness:chrn_41c0", ["read"])
    with pytest.raises(MemoryForbidden):
        world.records.create_snapshot(BOB, memory_id, "mine")
    names = ["zeta", "alpha", "mid", "beta", "omega"]
    for name in names:
        world.records.create_snapshot(ALICE, memory_id, name)
    seen: list[str] = []
    cursor = None
    while True:
        page = world.records.list_snapshots(BOB, memory_id, limit=2, cursor=cursor)
        seen.extend(s.name for s in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == names
    with pytest.raises(MemoryInvalid):
        world.records.list_snapshots(BOB, memory_id, cursor=cursors.encode("snapshots", "zeta", over=memory_id))


# -- history -------------------------------------------------------------------------------------


def test_history_is_the_whole_chain_oldest_first_from_any_version(world: World, memory_id: str) -> None:
    let_bob_write(world, memory_id)
    v1 = world.records.remember(ALICE, memory_id, fact("one")).record
    v2 = world.records.revise(BOB, memory_id, v1.id, {"content": "two"}).record
    v3 = world.records.revise(ALICE, memory_id, v2.id, {"content": "three"}).record
    world.records.forget(BOB, memory_id, v3.id)
    world.records.remember(ALICE, memory_id, fact("unrelated"))

    for any_version in (v1.id, v2.id, v3.id):
        history = world.records.history(ALICE, memory_id, any_version)
        assert [v.record.id for v in history.items] == [v1.id, v2.id, v3.id]
    history = world.records.history(ALICE, memory_id, v1.id).items
    assert [v.record.written_by["id"] for v in history] == ["alice", "chrn_41c0", "alice"]
    assert [v.record.status for v in history] == ["superseded", "superseded", "forgotten"]
    assert [v.record.version for v in history] == [1, 2, 3]
    assert [v.record.supersedes for v in history] == [None, v1.id, v2.id]


def test_history_paginates(world: World, memory_id: str) -> None:
    current = world.records.remember(ALICE, memory_id, fact("v1")).record
    for i in range(2, 8):
        current = world.records.revise(ALICE, memory_id, current.id, {"content": f"v{i}"}).record
    seen: list[int] = []
    cursor = None
    while True:
        page = world.records.history(ALICE, memory_id, current.id, limit=3, cursor=cursor)
        seen.extend(v.record.version for v in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == list(range(1, 8))
    over = f"{memory_id}/{current.chain_id}"
    for tampered in (cursors.encode("history", "2", over=over), cursors.encode("history", True, over=over),
                     cursors.encode("history", [2], over=over)):
        with pytest.raises(MemoryInvalid):
            world.records.history(ALICE, memory_id, current.id, cursor=tampered)
