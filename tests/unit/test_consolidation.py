"""Consolidation revert (§9.2) over the in-memory fakes: what a run forgot or superseded is current
again, what it created is forgotten, and every version its change list names stays readable."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import InMemoryMemoryRepository, InMemoryRecordRepository, InMemoryRunRepository, ScanningNeighbours
from tests.unit.conftest import World, caller
from uhp_memories.domain.consolidation.model import Change, Run
from uhp_memories.domain.consolidation.service import ConsolidationService
from uhp_memories.domain.records.model import RecordInput

ALICE = caller("user:alice")


class InlineWorkflows:
    """Runs a pass at once, inside start, as a state machine that finished before the wait."""

    def __init__(self) -> None:
        self.service: ConsolidationService | None = None

    def start(self, workflow: str, execution_name: str, payload: dict[str, Any]) -> None:
        assert self.service is not None
        while True:  # as the state machine does: another step while the run answers running
            run = self.service.consolidate(payload["tenant"], payload["memory_id"], payload["run_id"])
            if run is None or run.status != "running":
                return

    def wait(self, execution_name: str, workflow: str, seconds: float) -> str:
        return "SUCCEEDED"


def neighbours_of(world: World) -> Any:
    records = world.ports.records
    assert isinstance(records, InMemoryRecordRepository)
    found = ScanningNeighbours(records)
    return lambda: found


@pytest.fixture
def runs(world: World) -> InMemoryRunRepository:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    return InMemoryRunRepository(memories)


@pytest.fixture
def consolidation(world: World, runs: InMemoryRunRepository) -> ConsolidationService:
    workflows = InlineWorkflows()
    service = ConsolidationService(world.ports, runs, workflows, wait_seconds=0, neighbours=neighbours_of(world))
    workflows.service = service
    return service


@pytest.fixture
def memory_id(world: World) -> str:
    return world.memories.create(ALICE, name="Facts").memory.id


def fact(content: str, **attributes: Any) -> RecordInput:
    return RecordInput("fact", content, attributes)


def active(world: World, memory_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """What the memory holds, whatever the ids of the versions holding it."""
    listed = world.records.list(ALICE, memory_id, limit=100).items
    return sorted((v.record.type, v.record.content, v.record.attributes) for v in listed)


def finished_run(world: World, runs: InMemoryRunRepository, memory_id: str, changes: list[Change]) -> Run:
    """A run that already made `changes` (the test made them, as the run's consolidator would)."""
    run = Run(
        tenant=ALICE.tenant, id=world.ports.ids.new("hcon_"), memory_id=memory_id, status="completed",
        trigger="manual", started_at=0, budget_limit=1_000, requested_by=ALICE.principal, changes=tuple(changes),
    )
    runs.start(run)
    return run


def test_revert_brings_back_what_a_pass_forgot_and_keeps_every_named_version_readable(
    world: World, consolidation: ConsolidationService, memory_id: str
) -> None:
    for text in ("Acme renews in March.", "acme renews in  march.", "Globex prefers email.", "ACME RENEWS IN MARCH."):
        world.records.remember(ALICE, memory_id, fact(text, account="acme"))
    before = active(world, memory_id)
    run = consolidation.start(ALICE, memory_id, None)
    assert [c.action for c in run.changes] == ["forgotten", "forgotten"]
    assert len(active(world, memory_id)) == 2

    consolidation.revert(ALICE, memory_id, run.id)
    assert active(world, memory_id) == before
    for change in run.changes:
        named = world.records.get(ALICE, memory_id, change.record_id).record
        assert named.status == "forgotten", "the version the run forgot, kept in its chain"
        chain = world.records.history(ALICE, memory_id, change.record_id).items
        assert [v.record.status for v in chain] == ["forgotten", "active"]
    assert world.memories.get(ALICE, memory_id).memory.record_count == 4


def test_revert_restores_what_a_run_superseded_and_forgets_what_it_created(
    world: World, runs: InMemoryRunRepository, consolidation: ConsolidationService, memory_id: str
) -> None:
    original = world.records.remember(ALICE, memory_id, fact("Acme renews in March.", account="acme")).record
    world.records.remember(ALICE, memory_id, fact("Globex prefers email."))
    before = active(world, memory_id)
    # What a run that rewrites would do: supersede one record, and write a new one.
    rewritten = world.records.revise(ALICE, memory_id, original.id, {"content": "Acme renews in spring."}).record
    created = world.records.remember(ALICE, memory_id, fact("Acme and Globex are both customers.")).record
    run = finished_run(world, runs, memory_id, [
        Change(original.id, "superseded", original.chain_id),
        Change(rewritten.id, "created", rewritten.chain_id),  # its successor, named as written by the run
        Change(created.id, "created", created.chain_id),
    ])

    reverted = consolidation.revert(ALICE, memory_id, run.id)
    assert (reverted.status, reverted.reverted_by) == (run.status, "user:alice")  # the run keeps its status
    assert active(world, memory_id) == before
    statuses = {c.record_id: world.records.get(ALICE, memory_id, c.record_id, include="all").record.status
                for c in run.changes}
    assert statuses == {original.id: "superseded", rewritten.id: "superseded", created.id: "forgotten"}
    chain = [v.record for v in world.records.history(ALICE, memory_id, original.id).items]
    assert [(v.content, v.status) for v in chain] == [
        ("Acme renews in March.", "superseded"),
        ("Acme renews in spring.", "superseded"),
        ("Acme renews in March.", "active"),
    ]
    # The reversal is the caller's act, stamped with it (§9.2: only what a run writes is the consolidator's).
    assert chain[-1].written_by == {"kind": "user", "id": "alice"}
    assert chain[-1].origin == {"reverts_run_id": run.id}  # so the next run leaves it as it is
    forgotten = world.records.get(ALICE, memory_id, created.id, include="all").record
    assert forgotten.forgotten_by == {"written_by": {"kind": "user", "id": "alice"},
                                      "origin": {"reverts_run_id": run.id}}
    assert chain[-1].attributes == {"account": "acme"}
    assert world.memories.get(ALICE, memory_id).memory.record_count == 2


def test_revert_leaves_a_record_changed_since_the_run(
    world: World, runs: InMemoryRunRepository, consolidation: ConsolidationService, memory_id: str
) -> None:
    original = world.records.remember(ALICE, memory_id, fact("v1")).record
    rewritten = world.records.revise(ALICE, memory_id, original.id, {"content": "by the run"}).record
    run = finished_run(world, runs, memory_id, [Change(original.id, "superseded", original.chain_id)])
    by_alice = world.records.revise(ALICE, memory_id, rewritten.id, {"content": "by alice"}).record

    consolidation.revert(ALICE, memory_id, run.id)
    assert active(world, memory_id) == [("fact", "by alice", {})]
    assert world.records.get(ALICE, memory_id, by_alice.id).record.status == "active"


# -- the workflow's steps, with domain values ------------------------------------------------


class PendingWorkflows:
    """A state machine that has not run yet when the request answers: the test runs the steps."""

    def start(self, workflow: str, execution_name: str, payload: dict[str, Any]) -> None:
        self.payload = payload

    def wait(self, execution_name: str, workflow: str, seconds: float) -> str:
        return "RUNNING"


@pytest.fixture
def pending(world: World, runs: InMemoryRunRepository) -> tuple[ConsolidationService, PendingWorkflows]:
    workflows = PendingWorkflows()
    service = ConsolidationService(world.ports, runs, workflows, wait_seconds=0, neighbours=neighbours_of(world))
    return service, workflows


def test_start_answers_a_running_run_and_starts_its_workflow_with_the_run_named(
    pending: tuple[ConsolidationService, PendingWorkflows], memory_id: str
) -> None:
    service, workflows = pending
    run = service.start(ALICE, memory_id, 10)
    assert (run.status, run.budget_limit) == ("running", 10)
    assert workflows.payload == {"tenant": ALICE.tenant, "memory_id": memory_id, "run_id": run.id}


def test_the_consolidate_step_answers_the_finished_run_and_a_retry_changes_nothing(
    world: World, pending: tuple[ConsolidationService, PendingWorkflows], memory_id: str
) -> None:
    service, _ = pending
    for text in ("Acme renews in March.", "acme renews in march.", "Globex prefers email."):
        world.records.remember(ALICE, memory_id, fact(text))
    run = service.start(ALICE, memory_id, None)

    finished = service.consolidate(ALICE.tenant, memory_id, run.id)
    assert finished is not None
    assert (finished.status, finished.records_read, len(finished.changes)) == ("completed", 3, 1)
    assert service.consolidate(ALICE.tenant, memory_id, run.id) == finished
    assert len(active(world, memory_id)) == 2
    assert service.consolidate(ALICE.tenant, memory_id, "hcon_" + "0" * 32) is None


def test_a_pass_out_of_budget_stops_and_the_next_resumes_after_what_it_read(
    world: World, pending: tuple[ConsolidationService, PendingWorkflows], memory_id: str
) -> None:
    service, _ = pending
    for text in ("a", "b", "A"):
        world.records.remember(ALICE, memory_id, fact(text))
    first = service.consolidate(ALICE.tenant, memory_id, service.start(ALICE, memory_id, 2).id)
    assert first is not None
    assert (first.status, first.budget_exhausted, first.records_read) == ("stopped", True, 2)
    second = service.consolidate(ALICE.tenant, memory_id, service.start(ALICE, memory_id, 2).id)
    assert second is not None
    assert (second.status, second.records_read, [c.action for c in second.changes]) == ("completed", 1, ["forgotten"])


def test_record_failure_fails_a_running_run_with_the_error_and_leaves_a_finished_one(
    pending: tuple[ConsolidationService, PendingWorkflows], runs: InMemoryRunRepository, memory_id: str
) -> None:
    service, _ = pending
    run = service.start(ALICE, memory_id, None)
    service.record_failure(ALICE.tenant, memory_id, run.id, "RuntimeError")
    failed = runs.get(ALICE.tenant, memory_id, run.id)
    assert failed is not None
    assert (failed.status, failed.error) == ("failed", "RuntimeError")
    assert failed.finished_at is not None

    done = service.consolidate(ALICE.tenant, memory_id, service.start(ALICE, memory_id, None).id)
    assert done is not None
    service.record_failure(ALICE.tenant, memory_id, done.id, "RuntimeError")
    assert runs.get(ALICE.tenant, memory_id, done.id) == done
