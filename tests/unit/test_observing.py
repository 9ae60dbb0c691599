"""Observe and the derivation after it (domain/observing/service.py), over the in-memory fakes, with a scripted
deriver standing in for a model (the adapters have their own tests: test_derivation_*.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from tests.unit.conftest import Observing, World, caller, make_observing
from uhp_memories import workflows
from uhp_memories.api import presenters
from uhp_memories.domain.errors import MemoryForbidden, MemoryNotFound
from uhp_memories.domain.observing.model import (
    DERIVE_RETRIES,
    DERIVER,
    DerivationError,
    DerivationMalformed,
    DerivationRefused,
    DerivationThrottled,
    DerivationUnavailable,
    DerivationUsage,
    Derived,
    DerivedFact,
    EpisodeText,
)
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.removal.model import JobNotFound
from uhp_memories.domain.removal.service import RemovalService

ALICE = caller("user:alice")
BOB = caller("user:bob")
MALLORY = caller("user:mallory", tenant="evil")


@dataclass
class ScriptedDeriver:
    """Answers each call with the next of `answers`: a list of (content, indexes of the episodes it came
    from), or an error to raise. Keeps what each call was given."""

    answers: list[list[tuple[str, Sequence[int]]] | DerivationError]
    calls: list[list[EpisodeText]] = field(default_factory=list)

    def derive(self, episodes: Sequence[EpisodeText]) -> Derived:
        self.calls.append(list(episodes))
        answer = self.answers.pop(0)
        if isinstance(answer, DerivationError):
            raise answer
        facts = [
            DerivedFact(content, "fact", {"about": "acme"}, tuple(episodes[i].record_id for i in sources))
            for content, sources in answer
        ]
        return Derived(facts, DerivationUsage(120, 30), "scripted-model", "derive-v1", "end_turn")


def episodes(*texts: str) -> list[RecordInput]:
    return [RecordInput("episode", text, {}) for text in texts]


def setup(world: World, deriver: ScriptedDeriver | None, run: bool = True) -> tuple[Observing, str]:
    memory = world.memories.create(ALICE, name="Sales").memory.id
    return make_observing(world, deriver, run_workflows=run), memory


def test_without_a_deriver_observe_writes_the_episodes_and_starts_nothing(world: World) -> None:
    observing, memory = setup(world, None)
    observed = observing.service.observe(ALICE, memory, episodes("Acme called."))
    assert observed.job is None
    assert [v.record.content for v in observed.records] == ["Acme called."]
    assert observing.workflows.executions == {}
    assert observing.service.derives is False


def test_a_derivation_writes_facts_that_point_at_their_episodes_stamped_with_the_deriver(world: World) -> None:
    deriver = ScriptedDeriver([[("Acme renews in March.", [0, 1]), ("Bob leads the Acme account.", [1])]])
    observing, memory = setup(world, deriver)
    observed = observing.service.observe(ALICE, memory, episodes("Acme: renewal is in March.", "Bob: I lead Acme."))
    assert observed.job is not None
    assert observed.job.status == "pending"
    first, second = (v.record for v in observed.records)
    assert [e.record_id for e in deriver.calls[0]] == [first.id, second.id]

    view = observing.service.job(ALICE, memory, observed.job.id)
    assert view.job.status == "completed"
    produced = [v.record for v in view.records]
    assert [r.id for r in produced[:2]] == [first.id, second.id]  # the episodes, then what came from them
    renewal, lead = produced[2:]
    assert (renewal.type, renewal.content, renewal.attributes) == ("fact", "Acme renews in March.", {"about": "acme"})
    assert renewal.references == (
        {"rel": "derived_from", "memory_id": memory, "record_id": first.id},
        {"rel": "derived_from", "memory_id": memory, "record_id": second.id},
    )
    assert lead.references == ({"rel": "derived_from", "memory_id": memory, "record_id": second.id},)
    assert renewal.written_by == DERIVER
    assert renewal.origin == {"job_id": observed.job.id, "model": "scripted-model", "prompt_version": "derive-v1"}
    assert view.job.result["usage"] == {"input_tokens": 120, "output_tokens": 30}
    assert "plan" not in view.job.result  # the finished job keeps ids, never the derived text
    assert world.ports.memories.get("acme", memory).record_count == 4


def test_a_refused_or_malformed_answer_fails_the_job_and_keeps_the_episodes(world: World) -> None:
    deriver = ScriptedDeriver([DerivationRefused("refused"), DerivationMalformed("schema")])
    observing, memory = setup(world, deriver)
    for reason in ("refused", "schema"):
        observed = observing.service.observe(ALICE, memory, episodes(f"episode before {reason}"))
        assert observed.job is not None
        job = observing.service.job(ALICE, memory, observed.job.id)
        assert (job.job.status, job.job.result["error"]) == ("failed", reason)
        assert [v.record.content for v in job.records] == [f"episode before {reason}"]
    assert len(deriver.calls) == 2  # neither is worth asking again


def test_throttling_is_left_to_the_workflows_retries_and_then_fails_the_job(world: World) -> None:
    deriver = ScriptedDeriver([DerivationThrottled("throttled")])
    observing, memory = setup(world, deriver)
    observed = observing.service.observe(ALICE, memory, episodes("Acme called."))
    assert observed.job is not None
    (execution,) = observing.workflows.started("derive")
    assert isinstance(execution.error, DerivationThrottled)  # raised for derive.asl.json's Retry
    job = observing.service.job(ALICE, memory, observed.job.id).job
    assert (job.status, job.result["error"]) == ("failed", "DerivationThrottled")
    assert world.ports.records.get("acme", memory, observed.records[0].record.id) is not None


def test_a_retried_step_writes_the_planned_records_once_and_asks_the_model_once(world: World) -> None:
    deriver = ScriptedDeriver([[("Acme renews in March.", [0]), ("Acme pays by card.", [0])]])
    observing, memory = setup(world, deriver, run=False)
    observed = observing.service.observe(ALICE, memory, episodes("Acme: March, by card."))
    assert observed.job is not None
    records = world.ports.records
    real_append = records.append_derived
    appended: list[str] = []

    def crash_after_one(record, sources):  # the step dies after its first write
        if appended:
            raise RuntimeError("the Lambda timed out")
        real_append(record, sources)
        appended.append(record.id)

    records.append_derived = crash_after_one  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        observing.service.derive("acme", memory, observed.job.id)
    records.append_derived = real_append  # type: ignore[method-assign]
    done = observing.service.derive("acme", memory, observed.job.id)  # the workflow's retry

    assert done is not None
    assert done.status == "completed"
    assert len(deriver.calls) == 1
    derived = [r for r in records.versions.values() if r.written_by == DERIVER]  # type: ignore[attr-defined]
    assert sorted(r.content for r in derived) == ["Acme pays by card.", "Acme renews in March."]
    assert set(done.result["records"]) == {r.id for r in derived}
    assert observing.service.derive("acme", memory, observed.job.id) == done  # finished: nothing more


def test_nothing_is_derived_from_an_episode_erased_before_the_write(world: World) -> None:
    deriver = ScriptedDeriver([[("From the kept one.", [0]), ("From both.", [0, 1])]])
    observing, memory = setup(world, deriver, run=False)
    observed = observing.service.observe(ALICE, memory, episodes("kept", "erased"))
    assert observed.job is not None
    erased = observed.records[1].record
    records = world.ports.records
    real_append = records.append_derived

    def erase_first(record, sources):  # an erase lands while the model answers
        records.erase_chain("acme", memory, erased.chain_id)
        real_append(record, sources)

    records.append_derived = erase_first  # type: ignore[method-assign]
    done = observing.service.derive("acme", memory, observed.job.id)
    assert done is not None
    assert done.status == "completed"
    written = [records.get("acme", memory, i) for i in done.result["records"]]
    assert [r.content for r in written if r is not None] == ["From the kept one."]


def test_an_erase_sweeps_what_a_derivation_wrote_after_it_resolved_its_targets(world: World) -> None:
    deriver = ScriptedDeriver([[("Acme renews in March.", [0])]])
    observing, memory = setup(world, deriver, run=False)
    observed = observing.service.observe(ALICE, memory, episodes("Acme: March."))
    assert observed.job is not None
    removal: RemovalService = observing.service._removal
    targets = removal.resolve_erase_targets("acme", memory, [observed.records[0].record.id], None)
    done = observing.service.derive("acme", memory, observed.job.id)  # writes between resolve and erase
    assert done is not None
    (fact_id,) = done.result["records"]
    swept = removal.erase_records("acme", targets)
    assert [v.id for v in swept.versions] == [fact_id]
    assert world.ports.records.get("acme", memory, fact_id) is None


def test_a_derive_job_is_read_with_read_on_its_memory_and_is_unknown_elsewhere(world: World) -> None:
    deriver = ScriptedDeriver([[("Acme renews in March.", [0])]])
    observing, memory = setup(world, deriver)
    other = world.memories.create(ALICE, name="Other").memory.id
    observed = observing.service.observe(ALICE, memory, episodes("Acme: March."))
    assert observed.job is not None
    world.grants.create(ALICE, memory, "user:bob", ["write"])
    with pytest.raises(MemoryForbidden):
        observing.service.job(BOB, memory, observed.job.id)
    with pytest.raises(MemoryNotFound):
        observing.service.job(MALLORY, memory, observed.job.id)
    with pytest.raises(JobNotFound):
        observing.service.job(ALICE, other, observed.job.id)


def test_a_job_being_retried_says_its_last_error_and_when_it_is_tried_next(world: World) -> None:
    """A derive job whose model is down sat `pending`, `error: null`, through minutes of the workflow's
    retries (issue 37): it now says how many times it failed, why, and when the next attempt is due."""
    deriver = ScriptedDeriver([DerivationUnavailable("unavailable")] * 6)
    observing, memory = setup(world, deriver, run=False)
    observed = observing.service.observe(ALICE, memory, episodes("Acme called."))
    assert observed.job is not None
    pauses = []
    for failures in range(1, DERIVE_RETRIES.max_attempts + 2):
        with pytest.raises(DerivationUnavailable):
            observing.service.derive("acme", memory, observed.job.id)
        job = observing.service.job(ALICE, memory, observed.job.id).job
        assert job.status == "pending"
        retrying = job.result["retrying"]
        assert (retrying["failures"], retrying["last_error"]) == (failures, "unavailable")
        due = retrying["next_attempt_at"]
        now = world.clock.now  # the fake clock's last instant: the failure's, within a few ms
        pauses.append(None if due is None else round((datetime.fromisoformat(due).timestamp() * 1000 - now) / 1000))
    assert pauses == [10, 20, 40, 80, 160, None]  # derive.asl.json's backoff; none left after the fifth retry
    shown = presenters.job(job).model_dump()  # GET .../jobs/{id}
    assert (shown["status"], shown["error"], shown["retrying"]) == ("pending", None, {
        "failures": 6, "last_error": "unavailable", "next_attempt_at": None})
    failed = observing.service.record_failure("acme", observed.job.id, "DerivationUnavailable")
    assert failed is not None
    assert (failed.status, failed.result["error"], presenters.job(failed).retrying) == (
        "failed", "DerivationUnavailable", None)


def test_the_retry_policy_the_job_states_is_the_workflows() -> None:
    definition = json.loads((Path(workflows.__file__).parent / "derive.asl.json").read_text())
    [retry] = [r for r in definition["States"]["Derive"]["Retry"] if "DerivationUnavailable" in r["ErrorEquals"]]
    assert set(retry["ErrorEquals"]) == {"DerivationThrottled", "DerivationUnavailable"}
    assert (retry["IntervalSeconds"], retry["BackoffRate"], retry["MaxAttempts"]) == (
        DERIVE_RETRIES.interval_s, DERIVE_RETRIES.backoff, DERIVE_RETRIES.max_attempts)
