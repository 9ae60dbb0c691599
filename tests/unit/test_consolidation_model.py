"""Consolidation with a model (§9.2, domain/consolidation/service.py): contradictions judged and resolved,
episodes summarised into facts, the model's tokens in the budget and in `usage`, and revert undoing it
all; over the in-memory fakes, with a scripted model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from tests.fakes import InMemoryRunRepository
from tests.unit.conftest import World, caller
from tests.unit.test_consolidation import InlineWorkflows, fact, neighbours_of
from uhp_memories.domain.consolidation.model import CONSOLIDATOR
from uhp_memories.domain.consolidation.service import ConsolidationService
from uhp_memories.domain.observing.model import (
    DerivationRefused,
    DerivationThrottled,
    DerivationUsage,
    Derived,
    DerivedFact,
    EpisodeText,
    Judged,
    Relation,
    Statement,
)
from uhp_memories.domain.records.model import RecordInput

ALICE = caller("user:alice")
USAGE = DerivationUsage(100, 10)


@dataclass
class ScriptedModel:
    """Judges with `relation(older, newer)`; summarises each episode into one fact quoting it."""

    relation: Callable[[str, str], Relation] = lambda older, newer: "compatible"
    fail_judging: Exception | None = None
    judged: list[list[tuple[str, str]]] = field(default_factory=list)
    summarised: list[list[str]] = field(default_factory=list)

    def judge(self, pairs: Sequence[tuple[Statement, Statement]]) -> Judged:
        self.judged.append([(older.content, newer.content) for older, newer in pairs])
        if self.fail_judging is not None:
            raise self.fail_judging
        return Judged([self.relation(o.content, n.content) for o, n in pairs], USAGE, "scripted", "judge-v1")

    def derive(self, episodes: Sequence[EpisodeText]) -> Derived:
        self.summarised.append([e.content for e in episodes])
        facts = [DerivedFact(f"Summary: {e.content}", "fact", {}, (e.record_id,)) for e in episodes]
        return Derived(facts, USAGE, "scripted", "derive-v1")


def service(world: World, model: ScriptedModel) -> tuple[ConsolidationService, InMemoryRunRepository]:
    runs = InMemoryRunRepository(world.ports.memories)  # type: ignore[arg-type]
    workflows = InlineWorkflows()
    consolidation = ConsolidationService(
        world.ports, runs, workflows, wait_seconds=0, neighbours=neighbours_of(world), deriver=lambda: model
    )
    workflows.service = consolidation
    return consolidation, runs


def current(world: World, memory_id: str) -> list[str]:
    return sorted(v.record.content for v in world.records.list(ALICE, memory_id, limit=100).items)


def updates_when_same_subject(older: str, newer: str) -> Relation:
    """The scripted model's view: two statements about the renewal contradict; anything else is compatible."""
    return "updates" if "renews" in older and "renews" in newer else "compatible"


def test_a_contradiction_the_model_finds_supersedes_the_older_record_and_revert_restores_it(world: World) -> None:
    memory = world.memories.create(ALICE, name="Facts").memory.id
    march = world.records.remember(ALICE, memory, fact("Acme renews in March")).record
    world.records.remember(ALICE, memory, fact("Acme renews in April"))
    world.records.remember(ALICE, memory, fact("Globex pays by card"))
    model = ScriptedModel(updates_when_same_subject)
    consolidation, _ = service(world, model)

    run = consolidation.start(ALICE, memory, None)
    assert run.status == "completed"
    assert model.judged == [[("Acme renews in March", "Acme renews in April")]]
    assert current(world, memory) == ["Acme renews in April", "Globex pays by card"]
    (latest,) = [v for v in world.ports.records.chain("acme", march.chain_id) if v.is_current]
    assert (latest.content, latest.written_by, latest.origin) == ("Acme renews in April", CONSOLIDATOR,
                                                                  {"run_id": run.id})
    assert (run.model_input_tokens, run.model_output_tokens) == (100, 10)
    assert run.tokens_spent == run.tokens_read + 110

    consolidation.revert(ALICE, memory, run.id)
    assert current(world, memory) == ["Acme renews in April", "Acme renews in March", "Globex pays by card"]


@pytest.mark.parametrize(("relation", "kept"), [
    ("compatible", ["Acme renews in April", "Acme renews in March"]),
    ("unrelated", ["Acme renews in April", "Acme renews in March"]),
    ("same", ["Acme renews in March"]),
])
def test_what_the_model_says_of_a_pair_decides_what_stays(world: World, relation: Relation, kept: list[str]) -> None:
    memory = world.memories.create(ALICE, name="Facts").memory.id
    world.records.remember(ALICE, memory, fact("Acme renews in March"))
    world.records.remember(ALICE, memory, fact("Acme renews in April"))
    consolidation, _ = service(world, ScriptedModel(lambda older, newer: relation))
    consolidation.start(ALICE, memory, None)
    assert current(world, memory) == kept


def test_records_far_apart_are_never_sent_to_the_model(world: World) -> None:
    memory = world.memories.create(ALICE, name="Facts").memory.id
    world.records.remember(ALICE, memory, fact("Acme renews in March"))
    world.records.remember(ALICE, memory, fact("Globex ships from Rotterdam"))
    model = ScriptedModel(lambda older, newer: "updates")
    consolidation, _ = service(world, model)
    consolidation.start(ALICE, memory, None)
    assert model.judged == []
    assert current(world, memory) == ["Acme renews in March", "Globex ships from Rotterdam"]


def test_episodes_nothing_was_derived_from_are_summarised_into_facts_the_run_created(world: World) -> None:
    memory = world.memories.create(ALICE, name="Sessions").memory.id
    observed = world.records.observe(ALICE, memory, [RecordInput("episode", "user: I moved to Lisbon", {})])
    already = world.records.observe(ALICE, memory, [RecordInput("episode", "user: I like jazz", {})])
    derived_before = RecordInput("fact", "The user likes jazz.", {}, references=(
        {"rel": "derived_from", "memory_id": memory, "record_id": already[0].record.id},))
    world.records.remember(ALICE, memory, derived_before)
    model = ScriptedModel()
    consolidation, _ = service(world, model)

    run = consolidation.start(ALICE, memory, None)
    assert model.summarised == [["user: I moved to Lisbon"]]  # the jazz episode has its fact already
    (created,) = [c for c in run.changes if c.action == "created"]
    summary = world.ports.records.get("acme", memory, created.record_id)
    assert summary is not None
    assert (summary.content, summary.written_by) == ("Summary: user: I moved to Lisbon", CONSOLIDATOR)
    assert summary.references == ({"rel": "derived_from", "memory_id": memory, "record_id": observed[0].record.id},)
    assert summary.origin == {"run_id": run.id, "model": "scripted", "prompt_version": "derive-v1"}

    consolidation.revert(ALICE, memory, run.id)
    assert "Summary: user: I moved to Lisbon" not in current(world, memory)
    again = consolidation.start(ALICE, memory, None)  # the next run reads only what is new
    assert model.summarised == [["user: I moved to Lisbon"]]
    assert again.status == "completed"


def test_the_models_tokens_count_against_the_budget(world: World) -> None:
    memory = world.memories.create(ALICE, name="Sessions").memory.id
    world.records.observe(ALICE, memory, [RecordInput("episode", f"user: note {i}", {}) for i in range(3)])
    consolidation, _ = service(world, ScriptedModel())
    run = consolidation.start(ALICE, memory, 50)  # enough to read, not to pay for a model's 110 tokens
    assert run.status == "stopped"
    assert run.budget_exhausted


def test_a_refused_judgement_leaves_the_step_to_the_rules(world: World) -> None:
    memory = world.memories.create(ALICE, name="Facts").memory.id
    world.records.remember(ALICE, memory, fact("Acme renews in March"))
    world.records.remember(ALICE, memory, fact("Acme renews in April"))
    world.records.remember(ALICE, memory, fact("Acme renews in April"))  # an exact repeat: the rules forget it
    consolidation, _ = service(world, ScriptedModel(fail_judging=DerivationRefused("refused")))
    run = consolidation.start(ALICE, memory, None)
    assert run.status == "completed"
    assert current(world, memory) == ["Acme renews in April", "Acme renews in March"]


def test_throttling_fails_the_step_for_the_workflow_to_retry(world: World) -> None:
    memory = world.memories.create(ALICE, name="Facts").memory.id
    world.records.remember(ALICE, memory, fact("Acme renews in March"))
    world.records.remember(ALICE, memory, fact("Acme renews in April"))
    consolidation, runs = service(world, ScriptedModel(fail_judging=DerivationThrottled("throttled")))
    with pytest.raises(DerivationThrottled):
        consolidation.start(ALICE, memory, None)
    (run,) = runs.list("acme", memory)
    assert run.status == "running"  # nothing saved by the failed step: the retry starts it again
    assert run.records_read == 0
