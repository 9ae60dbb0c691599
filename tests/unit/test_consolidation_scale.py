"""A consolidation run over a large memory is many bounded steps (§9.2; domain/consolidation/service.py): no step
reads more than STEP_RECORDS new records or asks the index more than a fixed number of questions per
record, whatever the memory's size, so each step fits a Lambda and the run's cost grows with what is new.
(docs/benchmarks.md has the same run through the local server at 100,000 records, with its step times.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import InMemoryRecordRepository, InMemoryRunRepository
from tests.unit.conftest import World, caller
from uhp_memories.domain.consolidation.service import NEIGHBOURS, STEP_RECORDS, ConsolidationService
from uhp_memories.domain.records.model import RecordVersion

pytestmark = pytest.mark.slow

ALICE = caller("user:alice")
SIZE = 10_000


class CountingNeighbours:
    """The index's answers, counted: nothing similar, nothing expired (so every record is read and kept)."""

    def __init__(self) -> None:
        self.questions = 0

    def similar(self, record: RecordVersion, limit: int) -> list[tuple[str, float]]:
        assert limit <= NEIGHBOURS
        self.questions += 1
        return []

    def same_subject(self, record: RecordVersion, key: str, limit: int) -> list[str]:
        self.questions += 1
        return []

    def expired(self, tenant: str, memory_id: str, now: str, limit: int) -> list[str]:
        self.questions += 1
        return []


class StepByStep:
    """The state machine: one step per call, counting what each step read."""

    def __init__(self) -> None:
        self.service: ConsolidationService | None = None
        self.steps: list[int] = []

    def start(self, workflow: str, execution_name: str, payload: dict[str, Any]) -> None:
        assert self.service is not None
        read = 0
        while True:
            run = self.service.consolidate(payload["tenant"], payload["memory_id"], payload["run_id"])
            assert run is not None
            self.steps.append(run.records_read - read)
            read = run.records_read
            if run.status != "running":
                return

    def wait(self, execution_name: str, workflow: str, seconds: float) -> str:
        return "SUCCEEDED"


def test_a_run_over_a_large_memory_is_bounded_steps_each_reading_only_whats_new(world: World) -> None:
    memory = world.memories.create(ALICE, name="Big").memory.id
    records = world.ports.records
    assert isinstance(records, InMemoryRecordRepository)
    written_at = "2026-10-01T00:00:00.000Z"
    for n in range(SIZE):
        record_id = f"hrec_{n:032x}"
        records.versions[("acme", memory, record_id)] = RecordVersion(
            tenant="acme", memory_id=memory, id=record_id, chain_id=record_id, version=1, type="fact",
            content=f"fact number {n}", attributes={}, status="active", supersedes=None, superseded_by=None,
            valid_from=None, valid_to=None, written_at=written_at, invalidated_at=None,
            written_by={"kind": "user", "id": "alice"},
        )
    neighbours, workflows = CountingNeighbours(), StepByStep()
    runs = InMemoryRunRepository(world.ports.memories)  # type: ignore[arg-type]
    service = ConsolidationService(world.ports, runs, workflows, 0, neighbours=lambda: neighbours)
    workflows.service = service
    reads: list[int] = []
    real_get_many = records.get_many

    def counting_get_many(tenant: str, memory_id: str, ids: Any) -> Any:
        reads.append(len(list(ids)))
        return real_get_many(tenant, memory_id, ids)

    records.get_many = counting_get_many  # type: ignore[method-assign]

    run = service.start(ALICE, memory, 10_000_000)

    assert run.status == "completed"
    assert run.records_read == SIZE
    assert max(workflows.steps) == STEP_RECORDS
    assert len(workflows.steps) == -(-SIZE // STEP_RECORDS)  # every step full, none wasted
    assert neighbours.questions <= SIZE + len(workflows.steps)  # one question per record, one expiry per step
    assert max(reads) <= NEIGHBOURS + 1  # each read back is one record's few neighbours, never the memory

    again = service.start(ALICE, memory, 10_000_000)  # nothing new: one step that reads nothing
    assert again.records_read == 0
    assert workflows.steps[-1] == 0


