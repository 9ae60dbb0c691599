"""Unit tests: the domain over in-memory fakes, with a clock the test moves by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.fakes import InMemoryMemoryRepository, InMemoryRecordRepository
from uhp_memories.domain.context import Ports
from uhp_memories.domain.grants import GrantService
from uhp_memories.domain.memories import MemoryService
from uhp_memories.domain.models import Caller
from uhp_memories.domain.records import RecordService


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


def make_world() -> World:
    memory_repo = InMemoryMemoryRepository()
    clock = FakeClock()
    ports = Ports(memories=memory_repo, records=InMemoryRecordRepository(memory_repo), clock=clock, ids=SequentialIds())
    memories = MemoryService(ports)
    return World(ports, clock, memories, GrantService(ports), RecordService(ports, memories))


@pytest.fixture
def world() -> World:
    return make_world()


def caller(principal: str = "user:alice", tenant: str = "acme", groups: tuple[str, ...] = ()) -> Caller:
    return Caller(tenant=tenant, principal=principal, groups=groups)
