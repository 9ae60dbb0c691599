"""Erase (§5.2) and memory delete over the in-memory fakes. Each workflow step is a RemovalService method
that takes and returns domain values; the fake workflow runner runs the steps in the order the ASL
files do, carrying the targets through the workflow's state models as Step Functions carries them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.fakes import InMemoryCachedResponses, InMemoryJobRepository, InMemoryObjectStore, InMemoryWorkflowRunner
from tests.unit.conftest import World, caller
from uhp_memories.domain.errors import MemoryBusy, MemoryForbidden, MemoryInvalid, MemoryNotFound, RecordNotFound
from uhp_memories.domain.files.model import chain_key, upload_key
from uhp_memories.domain.memories.service import MemoryService
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.removal.model import ChainTarget, EraseTargets, Retention, VersionTarget
from uhp_memories.domain.removal.service import RemovalService
from uhp_memories.workflows import state as s

ALICE = caller("user:alice")
BOB = caller("user:bob")


@dataclass
class RecordingIndex:
    """The recall index as erase sees it: what it was told to drop."""

    erased: list[tuple[str, str, list[str]]] = field(default_factory=list)

    def erase(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        self.erased.append((tenant, memory_id, list(record_ids)))


@dataclass
class Setup:
    world: World
    removal: RemovalService
    jobs: InMemoryJobRepository
    workflows: InMemoryWorkflowRunner
    objects: InMemoryObjectStore
    cached: InMemoryCachedResponses
    index: RecordingIndex

    def memory(self, name: str, who: Any = ALICE) -> str:
        return self.world.memories.create(who, name=name).memory.id

    def remember(self, memory_id: str, content: str, who: Any = ALICE, **input: Any) -> Any:
        return self.world.records.remember(who, memory_id, RecordInput("fact", content, {}, **input)).record

    def stored(self, memory_id: str, record_id: str) -> bool:
        return self.world.ports.records.get(ALICE.tenant, memory_id, record_id) is not None


def run_erase(removal: RemovalService, payload: dict[str, Any]) -> None:
    """erase.asl.json: resolve the targets once (they land at $.targets), then each removal, then the
    report; a step that fails ends in RecordFailure with the targets known so far."""
    started = s.EraseStarted.model_validate(payload)
    targets: EraseTargets | None = None
    try:
        resolved = removal.resolve_erase_targets(started.tenant, started.memory_id, started.record_ids, started.filters)
        state = {**payload, "targets": s.TargetsState.of(resolved).model_dump(mode="json")}
        targets = s.EraseResolved.model_validate(state).targets.to_domain()
        removal.erase_from_index(started.tenant, targets.versions)
        removal.erase_files(started.tenant, targets)
        removal.erase_cached_responses(started.tenant, targets)
        swept = removal.erase_records(started.tenant, targets)
        removal.finish_erase(started.tenant, started.job_id, targets.versions + swept.versions)
    except Exception as error:
        versions = targets.versions if targets is not None else ()
        removal.record_failure(started.tenant, started.job_id, versions, type(error).__name__)
        raise


def run_delete(removal: RemovalService, payload: dict[str, Any]) -> None:
    """delete_memory.asl.json: purge the hidden subtree, then finish the job."""
    started = s.DeleteStarted.model_validate(payload)
    removal.purge_subtree(started.tenant, started.memory_id)
    removal.finish_delete(started.tenant, started.job_id)


def build(world: World, retention: Retention | None = None, run_workflows: bool = True) -> Setup:
    jobs = InMemoryJobRepository(world.ports.memories)  # type: ignore[arg-type]
    objects, cached, index = InMemoryObjectStore(), InMemoryCachedResponses(), RecordingIndex()
    workflows = InMemoryWorkflowRunner()
    memories = MemoryService(world.ports, objects)
    removal = RemovalService(
        world.ports, memories, jobs, workflows, objects, cached, retention or Retention(), 0, lambda: index
    )
    if run_workflows:
        workflows.handlers = {
            "erase": lambda payload: run_erase(removal, payload),
            "delete": lambda payload: run_delete(removal, payload),
        }
    return Setup(world, removal, jobs, workflows, objects, cached, index)


@pytest.fixture
def setup(world: World) -> Setup:
    return build(world)


# -- erase, through the API method -----------------------------------------------------------


def test_erase_removes_whole_chains_and_what_was_derived_from_them_in_other_memories(setup: Setup) -> None:
    private, summaries = setup.memory("Private"), setup.memory("Summaries")
    first = setup.remember(private, "Acme renews in March.")
    revised = setup.world.records.revise(ALICE, private, first.id, {"content": "Acme renews in May."}).record
    derived = setup.remember(summaries, "Acme renews in spring.",
                             references=({"rel": "derived_from", "memory_id": private, "record_id": revised.id},))
    kept = setup.remember(private, "Globex prefers email.")
    setup.cached.keep(ALICE.tenant, "answer-1", f'{{"id": "{revised.id}"}}')
    setup.cached.keep(ALICE.tenant, "answer-2", f'{{"id": "{kept.id}"}}')

    job = setup.removal.erase(ALICE, private, [first.id], None)

    assert job.status == "completed"
    assert job.result["erased"] == [
        {"id": first.id, "memory_id": private},
        {"id": revised.id, "memory_id": private},
        {"id": derived.id, "memory_id": summaries},
    ]
    assert job.result["erased_elsewhere"] == 0
    assert job.result["unreachable"] == []  # nothing kept beyond reach: an empty list is a guarantee
    for memory_id, record_id in ((private, first.id), (private, revised.id), (summaries, derived.id)):
        assert not setup.stored(memory_id, record_id)
    assert setup.stored(private, kept.id)
    assert sorted(setup.index.erased) == sorted([
        (ALICE.tenant, private, [first.id, revised.id]),
        (ALICE.tenant, summaries, [derived.id]),
    ])
    assert list(setup.cached.responses) == ["answer-2"]
    assert not setup.jobs.holds(ALICE.tenant, private), "the finished job releases the memory"


def test_erase_by_filter_takes_the_records_it_matches(setup: Setup) -> None:
    memory = setup.memory("Accounts")
    gone = setup.world.records.remember(ALICE, memory, RecordInput("fact", "renews", {"account": "acme"})).record
    stays = setup.world.records.remember(ALICE, memory, RecordInput("fact", "renews", {"account": "globex"})).record

    job = setup.removal.erase(ALICE, memory, None, {"field": "attributes.account", "op": "eq", "value": "acme"})

    assert [e["id"] for e in job.result["erased"]] == [gone.id]
    assert not setup.stored(memory, gone.id)
    assert setup.stored(memory, stays.id)


def test_erased_records_in_memories_the_caller_cannot_see_are_counted_not_named(setup: Setup) -> None:
    shared = setup.memory("Shared")
    source = setup.remember(shared, "source")
    setup.world.grants.create(ALICE, shared, BOB.principal, ["read"])
    bobs = setup.memory("Bob's notes", who=BOB)
    copy = setup.remember(bobs, "bob's copy", who=BOB,
                          references=({"rel": "derived_from", "memory_id": shared, "record_id": source.id},))

    job = setup.removal.erase(ALICE, shared, [source.id], None)

    assert job.result["erased"] == [{"id": source.id, "memory_id": shared}]
    assert job.result["erased_elsewhere"] == 1
    assert not setup.stored(bobs, copy.id)


def test_erase_takes_record_ids_or_a_filter_and_names_records_of_this_memory(setup: Setup) -> None:
    memory, other = setup.memory("M"), setup.memory("Other")
    elsewhere = setup.remember(other, "not in M")
    with pytest.raises(MemoryInvalid):
        setup.removal.erase(ALICE, memory, None, None)
    with pytest.raises(MemoryInvalid):
        setup.removal.erase(ALICE, memory, [elsewhere.id], {"field": "type", "op": "eq", "value": "fact"})
    with pytest.raises(MemoryInvalid):
        setup.removal.erase(ALICE, memory, [], None)
    with pytest.raises(RecordNotFound):
        setup.removal.erase(ALICE, memory, [elsewhere.id], None)
    with pytest.raises(RecordNotFound):
        setup.removal.erase(ALICE, memory, ["not-an-id"], None)
    assert setup.workflows.started("erase") == []


def test_erase_needs_delete(setup: Setup) -> None:
    memory = setup.memory("M")
    record = setup.remember(memory, "kept")
    setup.world.grants.create(ALICE, memory, BOB.principal, ["read", "write"])
    with pytest.raises(MemoryForbidden):
        setup.removal.erase(BOB, memory, [record.id], None)
    assert setup.stored(memory, record.id)


def test_an_erase_that_outlasts_the_request_answers_a_running_job_that_holds_the_memory(world: World) -> None:
    setup = build(world, run_workflows=False)
    memory = setup.memory("M")
    record = setup.remember(memory, "slow")

    job = setup.removal.erase(ALICE, memory, [record.id], None)

    assert job.status == "running"
    [execution] = setup.workflows.started("erase")
    assert execution.payload == {"tenant": ALICE.tenant, "memory_id": memory, "job_id": job.id,
                                 "record_ids": [record.id], "filters": None, "under": None}
    assert setup.removal.job(ALICE, memory, job.id).status == "running"
    with pytest.raises(MemoryBusy):
        setup.removal.delete_memory(ALICE, memory)


# -- the erase steps, one at a time ----------------------------------------------------------


def test_resolve_erase_targets_names_each_chain_its_versions_and_the_files_they_hold(setup: Setup) -> None:
    memory = setup.memory("M")
    record = setup.remember(memory, "v1")
    revised = setup.world.records.revise(ALICE, memory, record.id, {"content": "v2"}).record
    # A file record as RecordService writes it, put straight into the repository: no upload needed.
    with_file = record.evolve(id=setup.world.ports.ids.new("hrec_"), chain_id="chain-f", version=1,
                              content={"file": {"id": "file_1"}}, supersedes=None, superseded_by=None)
    setup.world.ports.records.append_first(with_file)

    targets = setup.removal.resolve_erase_targets(ALICE.tenant, memory, [revised.id, with_file.id], None)

    assert targets == EraseTargets(
        chains=(ChainTarget(memory, record.chain_id), ChainTarget(memory, "chain-f")),
        versions=(VersionTarget(record.id, memory), VersionTarget(revised.id, memory),
                  VersionTarget(with_file.id, memory)),
        files=("file_1",),
    )


def test_resolve_erase_targets_skips_records_already_gone(setup: Setup) -> None:
    """A retried step after EraseRecords ran, or an erase of what another erase took."""
    memory = setup.memory("M")
    assert setup.removal.resolve_erase_targets(ALICE.tenant, memory, ["hrec_" + "0" * 32], None) == EraseTargets()


def test_the_targets_cross_the_workflow_state_unchanged_in_the_shape_the_asl_carries(setup: Setup) -> None:
    targets = EraseTargets(
        chains=(ChainTarget("hmem_a", "chain-1"),),
        versions=(VersionTarget("hrec_1", "hmem_a"), VersionTarget("hrec_2", "hmem_a")),
        files=("file_1",),
    )
    carried = s.TargetsState.of(targets).model_dump(mode="json")
    assert carried == {
        "chains": [{"memory_id": "hmem_a", "chain_id": "chain-1"}],
        "versions": [{"id": "hrec_1", "memory_id": "hmem_a"}, {"id": "hrec_2", "memory_id": "hmem_a"}],
        "files": ["file_1"],
    }
    state = {"tenant": "acme", "memory_id": "hmem_a", "job_id": "hjob_1", "targets": carried,
             "index": {"index": "erased"}, "files": {"object_versions": 2}}  # earlier steps' results
    assert s.EraseResolved.model_validate(state).targets.to_domain() == targets


def test_erase_from_index_drops_each_memorys_documents_and_says_when_there_is_no_index(world: World) -> None:
    setup = build(world)
    versions = [VersionTarget("hrec_1", "hmem_a"), VersionTarget("hrec_2", "hmem_b"), VersionTarget("hrec_3", "hmem_a")]
    assert setup.removal.erase_from_index("acme", versions) is True
    assert setup.index.erased == [("acme", "hmem_a", ["hrec_1", "hrec_3"]), ("acme", "hmem_b", ["hrec_2"])]

    without = RemovalService(world.ports, world.memories, setup.jobs, setup.workflows, setup.objects, setup.cached,
                             Retention(), 0)
    assert without.erase_from_index("acme", versions) is False


def test_erase_files_removes_every_object_version_of_the_chains_and_of_the_uploads(setup: Setup) -> None:
    chain, upload, other = chain_key("acme", "hmem_a", "chain-1"), upload_key("acme", "file_1"), "t/acme/m/hmem_a/r/x"
    for key in (chain, chain, upload, other):
        setup.objects.put(key, b"bytes", "text/plain")
    targets = EraseTargets(chains=(ChainTarget("hmem_a", "chain-1"),), files=("file_1",))

    assert setup.removal.erase_files("acme", targets) == 3
    assert set(setup.objects.versions) - {chain, upload} == {other}
    assert setup.removal.erase_files("acme", targets) == 0, "a retried step finds nothing left"


def test_erase_cached_responses_purges_those_that_mention_a_version_or_a_file(setup: Setup) -> None:
    setup.cached.keep("acme", "a", '{"id": "hrec_1"}')
    setup.cached.keep("acme", "b", '{"file": {"id": "file_1"}}')
    setup.cached.keep("acme", "c", '{"id": "hrec_9"}')
    setup.cached.keep("globex", "d", '{"id": "hrec_1"}')  # another tenant's: never reached
    targets = EraseTargets(versions=(VersionTarget("hrec_1", "hmem_a"),), files=("file_1",))
    assert setup.removal.erase_cached_responses("acme", targets) == 2
    assert list(setup.cached.responses) == ["c", "d"]


def test_finish_erase_reports_what_the_deployment_keeps_beyond_reach(world: World) -> None:
    setup = build(world, Retention(pitr_enabled=True, pitr_retention_days=35), run_workflows=False)
    memory = setup.memory("M")
    record = setup.remember(memory, "x")
    job = setup.removal.erase(ALICE, memory, [record.id], None)

    finished = setup.removal.finish_erase(ALICE.tenant, job.id, [VersionTarget(record.id, memory)])

    assert finished.status == "completed"
    assert finished.result["erased"] == [{"id": record.id, "memory_id": memory}]
    [kept] = finished.result["unreachable"]
    assert (kept["record_id"], kept["memory_id"]) == (record.id, memory)
    assert kept["where"] == "dynamodb_point_in_time_recovery"
    assert not setup.jobs.holds(ALICE.tenant, memory)


def test_a_failed_erase_reports_every_known_target_unreachable(world: World) -> None:
    setup = build(world, run_workflows=False)
    memory = setup.memory("M")
    record = setup.remember(memory, "x")
    job = setup.removal.erase(ALICE, memory, [record.id], None)

    failed = setup.removal.record_failure(ALICE.tenant, job.id, [VersionTarget(record.id, memory)], "RuntimeError")

    assert failed.status == "failed"
    assert failed.result["erased"] == []
    assert failed.result["error"] == "RuntimeError"
    assert [(u["record_id"], u["where"]) for u in failed.result["unreachable"]] == [(record.id, "uhp_memories")]
    assert not setup.jobs.holds(ALICE.tenant, memory), "a failed job releases the memory too"


def test_an_erase_whose_step_keeps_failing_ends_in_a_failed_job(setup: Setup) -> None:
    memory = setup.memory("M")
    record = setup.remember(memory, "x")

    def broken(tenant: str, chains: Sequence[ChainTarget]) -> int:
        raise RuntimeError("DynamoDB did not answer")

    setup.removal.erase_records = broken  # type: ignore[method-assign]
    job = setup.removal.erase(ALICE, memory, [record.id], None)

    assert job.status == "failed"
    assert job.result["error"] == "RuntimeError"
    assert [u["record_id"] for u in job.result["unreachable"]] == [record.id]


def test_the_state_after_a_catch_names_the_error_or_the_default() -> None:
    caught = s.JobFailed.model_validate({"tenant": "acme", "job_id": "hjob_1",
                                         "error": {"Error": "RuntimeError", "Cause": "{...}"}})
    assert (caught.error_name, caught.targets) == ("RuntimeError", None)
    assert s.JobFailed.model_validate({"tenant": "acme", "job_id": "hjob_1"}).error_name == "States.TaskFailed"


# -- delete ----------------------------------------------------------------------------------


def test_delete_hides_the_subtree_at_once_and_the_workflow_removes_it(world: World) -> None:
    setup = build(world, run_workflows=False)
    root = setup.memory("Root")
    child = setup.world.memories.create(ALICE, name="Child", parent_id=root).memory.id
    record = setup.remember(child, "x")
    setup.objects.put(chain_key(ALICE.tenant, child, record.chain_id), b"bytes", "text/plain")

    job = setup.removal.delete_memory(ALICE, root)

    assert job.status == "running"
    for memory_id in (root, child):
        with pytest.raises(MemoryNotFound):
            setup.world.memories.get(ALICE, memory_id)
    assert setup.removal.job(ALICE, root, job.id).status == "running", "the asker still reads its job"

    assert setup.removal.purge_subtree(ALICE.tenant, root) == [root, child]
    finished = setup.removal.finish_delete(ALICE.tenant, job.id)
    assert (finished.status, finished.result) == ("completed", {"deleted": True})
    assert not setup.stored(child, record.id)
    assert setup.objects.versions.get(chain_key(ALICE.tenant, child, record.chain_id), []) == []
    assert setup.removal.purge_subtree(ALICE.tenant, root) == [], "a retried purge finds nothing left"


def test_a_delete_within_the_request_answers_the_finished_job(setup: Setup) -> None:
    memory = setup.memory("M")
    job = setup.removal.delete_memory(ALICE, memory)
    assert (job.status, job.result) == ("completed", {"deleted": True})
    assert setup.world.ports.memories.get(ALICE.tenant, memory) is None
