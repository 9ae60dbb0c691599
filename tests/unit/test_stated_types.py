"""The type a new record states (§4.1, §8; domain/types/service.py check_stated_type): a core type or an `x.`
extension, registered or not; an unprefixed name that is neither is refused. A record stored with such
a type before the rule existed is still read, listed, revised and forgotten as it is (§4.1: a server
carries a type it does not understand unchanged and never refuses a read because of it)."""

from __future__ import annotations

import pytest

from tests.unit.conftest import World, caller
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.records import writes as records_module
from uhp_memories.domain.records.model import CORE_TYPES, RecordInput

ALICE = caller("user:alice")


@pytest.fixture
def memory_id(world: World) -> str:
    return world.memories.create(ALICE, name="Sales").memory.id


@pytest.mark.parametrize("type_name", sorted(CORE_TYPES))
def test_every_core_type_is_remembered(world: World, memory_id: str, type_name: str) -> None:
    assert world.records.remember(ALICE, memory_id, RecordInput(type_name, "x", {})).record.type == type_name


def test_an_extension_is_remembered_registered_or_not(world: World, memory_id: str) -> None:
    attributes = {"anything": [1, "two"]}
    view = world.records.remember(ALICE, memory_id, RecordInput("x.team.preference", "Green tea.", attributes))
    assert (view.record.type, view.record.attributes) == ("x.team.preference", attributes)


@pytest.mark.parametrize(("type_name", "hint"), [("facts", "did you mean 'fact'?"), ("preference", None)])
def test_an_unprefixed_unknown_type_is_refused_naming_the_core_types(
    world: World, memory_id: str, type_name: str, hint: str | None
) -> None:
    with pytest.raises(MemoryInvalid) as refused:
        world.records.remember(ALICE, memory_id, RecordInput(type_name, "Green tea.", {}))
    assert "episode, fact, note, procedure, link" in str(refused.value)
    assert (hint in str(refused.value)) if hint else ("did you mean" not in str(refused.value))
    assert world.records.list(ALICE, memory_id).items == []


def test_a_record_stored_with_an_unknown_type_before_the_rule_is_read_revised_and_forgotten(
    world: World, memory_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as before_the_rule:
        before_the_rule.setattr(records_module, "check_stated_type", lambda type_name: None)
        stored = world.records.remember(ALICE, memory_id, RecordInput("facts", "Acme renews in March.", {"a": 1}))

    read = world.records.get(ALICE, memory_id, stored.record.id).record
    assert (read.type, read.content, read.attributes) == ("facts", "Acme renews in March.", {"a": 1})
    assert [v.record.type for v in world.records.list(ALICE, memory_id).items] == ["facts"]
    revised = world.records.revise(ALICE, memory_id, stored.record.id, {"content": "Acme renews in April."})
    assert (revised.record.type, revised.record.version) == ("facts", 2)
    forgotten = world.records.forget(ALICE, memory_id, revised.record.id)
    assert forgotten.record.status == "forgotten"
