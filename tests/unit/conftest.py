"""Unit tests: the domain over in-memory fakes, with a clock the test moves by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.fakes import (
    InMemoryAttachmentRepository,
    InMemoryCachedResponses,
    InMemoryJobRepository,
    InMemoryMemoryRepository,
    InMemoryObjectStore,
    InMemoryRecordRepository,
    InMemoryWorkflowRunner,
)
from uhp_memories.domain.access.grants import GrantService
from uhp_memories.domain.agents.model import Attachment, HarnessList
from uhp_memories.domain.memories.service import MemoryService
from uhp_memories.domain.model import Caller
from uhp_memories.domain.observing.ports import Deriver
from uhp_memories.domain.observing.service import ObserveService
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.providers.ports import NATIVE_ONLY, Providers
from uhp_memories.domain.records.service import RecordService
from uhp_memories.domain.removal.model import Retention
from uhp_memories.domain.removal.service import RemovalService


class FakeClock:
    def __init__(self, start_ms: int = 1_790_000_000_000) -> None:
        self.now = start_ms

    def now_ms(self) -> int:
        self.now += 1  # every call is a distinct instant, as on a real clock between writes
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class SequentialIds:
    def __init__(self) -> None:
        self.counter = 0

    def new(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter:032x}"


@dataclass
class World:
    ports: Ports
    clock: FakeClock
    memories: MemoryService
    grants: GrantService
    records: RecordService


def attach(world: World, harness: Caller, memory_id: str, access: str = "write") -> None:
    """Put a memory on a harness's list, as its owner would: a harness writes only at or below a memory
    it attached with write (domain/access/model.py, HarnessReach). Grants are the test's to make."""
    lists = world.ports.attachments
    assert isinstance(lists, InMemoryAttachmentRepository)
    assert harness.harness_id is not None
    stored = lists.get_list(harness.tenant, harness.harness_id)
    entries = [e for e in (stored.entries if stored else []) if e.memory_id != memory_id]
    lists.lists[(harness.tenant, harness.harness_id)] = HarnessList([*entries, Attachment(memory_id, access)], ())


def make_world(providers: Providers = NATIVE_ONLY) -> World:
    memory_repo = InMemoryMemoryRepository()
    clock = FakeClock()
    ports = Ports(
        memories=memory_repo,
        records=InMemoryRecordRepository(memory_repo),
        clock=clock,
        ids=SequentialIds(),
        attachments=InMemoryAttachmentRepository(memory_repo),
        providers=providers,
    )
    memories = MemoryService(ports)
    return World(ports, clock, memories, GrantService(ports), RecordService(ports, memories))


@dataclass
class Observing:
    """Observe and its derivation over the fakes: `workflows` runs the derive workflow at once, as
    derive.asl.json does (the step; then, when it raises, the failure step)."""

    service: ObserveService
    jobs: InMemoryJobRepository
    workflows: InMemoryWorkflowRunner


def make_observing(world: World, deriver: Deriver | None = None, run_workflows: bool = True) -> Observing:
    jobs = InMemoryJobRepository(world.ports.memories)  # type: ignore[arg-type]
    workflows = InMemoryWorkflowRunner()
    objects = InMemoryObjectStore()
    removal = RemovalService(
        world.ports, world.memories, jobs, workflows, objects, InMemoryCachedResponses(), Retention(), 0
    )
    factory = (lambda: deriver) if deriver is not None else None
    service = ObserveService(world.ports, world.records, removal, jobs, workflows, factory)

    def derive(payload: dict) -> None:
        try:
            service.derive(payload["tenant"], payload["memory_id"], payload["job_id"])
        except Exception as error:
            service.record_failure(payload["tenant"], payload["job_id"], type(error).__name__)
            raise

    if run_workflows:
        workflows.handlers = {"derive": derive}
    return Observing(service, jobs, workflows)


@pytest.fixture
def world() -> World:
    return make_world()


def caller(principal: str = "user:alice", tenant: str = "acme", groups: tuple[str, ...] = ()) -> Caller:
    return Caller(tenant=tenant, principal=principal, groups=groups)
