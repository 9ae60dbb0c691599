"""Consolidation schedules (domain/consolidation/schedules.py) over the in-memory fakes; the EventBridge Scheduler
timer and the local ticker on moto's Scheduler."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes import InMemoryRunRepository, InMemoryScheduleRepository, InMemoryTimer
from tests.unit.conftest import World, caller
from tests.unit.test_consolidation import InlineWorkflows, fact, neighbours_of
from uhp_memories.adapters.scheduler import EventBridgeTimer, schedule_name
from uhp_memories.domain.consolidation.model import Run, ScheduleNotFound
from uhp_memories.domain.consolidation.schedules import ScheduleService
from uhp_memories.domain.consolidation.service import ConsolidationService
from uhp_memories.domain.errors import MemoryForbidden, MemoryInvalid, MemoryNotFound, MemoryUnsupported
from uhp_memories.local.schedules import LocalTicker

ALICE, BOB, MALLORY = caller("user:alice"), caller("user:bob"), caller("user:mallory", tenant="evil")


class Setup:
    def __init__(self, world: World, timer: InMemoryTimer | None) -> None:
        self.world = world
        self.runs = InMemoryRunRepository(world.ports.memories)  # type: ignore[arg-type]
        self.workflows = InlineWorkflows()
        self.consolidation = ConsolidationService(world.ports, self.runs, self.workflows, 0,
                                                  neighbours=neighbours_of(world))
        self.workflows.service = self.consolidation
        self.items = InMemoryScheduleRepository(world.ports.memories)  # type: ignore[arg-type]
        self.timer = timer
        self.schedules = ScheduleService(world.ports, self.items, timer, self.consolidation)
        self.memory = world.memories.create(ALICE, name="Notes").memory.id


@pytest.fixture
def setup(world: World) -> Setup:
    return Setup(world, InMemoryTimer())


def test_a_writer_sets_reads_and_clears_a_schedule_and_the_timer_follows(setup: Setup) -> None:
    setup.world.grants.create(ALICE, setup.memory, "user:bob", ["write"])
    schedule = setup.schedules.set(BOB, setup.memory, 60, 5_000)
    assert (schedule.every_minutes, schedule.budget_limit, schedule.set_by) == (60, 5_000, "user:bob")
    assert setup.timer is not None
    assert setup.timer.timers == {("acme", setup.memory): 60}
    assert setup.schedules.get(ALICE, setup.memory) == schedule
    setup.schedules.set(ALICE, setup.memory, 1440, None)
    assert setup.timer.timers == {("acme", setup.memory): 1440}
    setup.schedules.clear(BOB, setup.memory)
    assert setup.timer.timers == {}
    with pytest.raises(ScheduleNotFound):
        setup.schedules.get(ALICE, setup.memory)
    with pytest.raises(ScheduleNotFound):
        setup.schedules.clear(ALICE, setup.memory)


def test_a_reader_may_not_and_a_stranger_cannot_tell(setup: Setup) -> None:
    setup.world.grants.create(ALICE, setup.memory, "user:bob", ["read"])
    with pytest.raises(MemoryForbidden):
        setup.schedules.set(BOB, setup.memory, 60, None)
    with pytest.raises(MemoryNotFound):
        setup.schedules.set(MALLORY, setup.memory, 60, None)
    assert setup.timer is not None
    assert setup.timer.timers == {}


@pytest.mark.parametrize(("every", "budget"), [(14, None), (10_081, None), (60, 0), (60, 10_000_001)])
def test_an_interval_or_budget_out_of_bounds_is_refused_and_nothing_is_set(
    setup: Setup, every: int, budget: int | None
) -> None:
    with pytest.raises(MemoryInvalid):
        setup.schedules.set(ALICE, setup.memory, every, budget)
    assert setup.items.get("acme", setup.memory) is None
    assert setup.timer is not None
    assert setup.timer.timers == {}


def test_firing_starts_a_scheduled_run_with_the_schedules_budget(setup: Setup) -> None:
    setup.world.records.remember(ALICE, setup.memory, fact("Acme renews in March"))
    setup.schedules.set(ALICE, setup.memory, 60, 5_000)
    run = setup.schedules.fire("acme", setup.memory)
    assert run is not None
    stored = setup.runs.get("acme", setup.memory, run.id)
    assert stored is not None
    assert (stored.trigger, stored.budget_limit, stored.requested_by, stored.status) == (
        "schedule", 5_000, "schedule", "completed")
    assert stored.records_read == 1


def test_a_tick_while_a_run_is_running_is_skipped(setup: Setup) -> None:
    setup.schedules.set(ALICE, setup.memory, 60, None)
    running = Run(tenant="acme", id="hcon_" + "1" * 32, memory_id=setup.memory, status="running",
                  trigger="manual", started_at=0, budget_limit=100, requested_by="user:alice")
    setup.runs.start(running)
    assert setup.schedules.fire("acme", setup.memory) is None
    assert [r.id for r in setup.runs.list("acme", setup.memory)] == [running.id]


def test_a_timer_whose_memory_or_schedule_is_gone_clears_itself(setup: Setup) -> None:
    assert setup.timer is not None
    setup.timer.set("acme", setup.memory, 60)  # a timer left behind: its schedule item was never written
    assert setup.schedules.fire("acme", setup.memory) is None
    assert setup.timer.timers == {}
    setup.schedules.set(ALICE, setup.memory, 60, None)
    setup.world.ports.memories.mark_deleting("acme", [setup.memory])
    assert setup.schedules.fire("acme", setup.memory) is None
    assert setup.timer.timers == {}
    assert setup.runs.list("acme", setup.memory) == []


def test_without_a_timer_schedules_are_unsupported(world: World) -> None:
    setup = Setup(world, None)
    with pytest.raises(MemoryUnsupported):
        setup.schedules.set(ALICE, setup.memory, 60, None)


# -- EventBridge Scheduler and the local ticker, on moto ------------------------------------------------


@pytest.fixture
def scheduler(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    credentials = (("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "x"), ("AWS_DEFAULT_REGION", "us-east-1"))
    for name, value in credentials:
        monkeypatch.setenv(name, value)
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name="uhp-memories-test")
        yield client


TARGET = "arn:aws:lambda:us-east-1:123456789012:function:uhp-memories-test-ConsolidationTimer"
ROLE = "arn:aws:iam::123456789012:role/uhp-memories-test-scheduler"


def test_the_eventbridge_timer_keeps_one_schedule_per_memory_invoking_the_timer_function(scheduler: Any) -> None:
    timer = EventBridgeTimer(lambda: scheduler, "uhp-memories-test", TARGET, ROLE)
    timer.set("acme", "hmem_" + "1" * 32, 60)
    timer.set("acme", "hmem_" + "1" * 32, 240)  # replaces
    timer.set("globex", "hmem_" + "1" * 32, 15)  # another tenant's memory of the same id: its own schedule
    name = schedule_name("acme", "hmem_" + "1" * 32)
    assert len(name) <= 64
    assert "acme" not in name
    stored = scheduler.get_schedule(Name=name, GroupName="uhp-memories-test")
    assert stored["ScheduleExpression"] == "rate(240 minutes)"
    assert stored["FlexibleTimeWindow"] == {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15}
    assert (stored["Target"]["Arn"], stored["Target"]["RoleArn"]) == (TARGET, ROLE)
    assert json.loads(stored["Target"]["Input"]) == {"tenant": "acme", "memory_id": "hmem_" + "1" * 32}
    assert len(scheduler.list_schedules(GroupName="uhp-memories-test")["Schedules"]) == 2
    timer.clear("acme", "hmem_" + "1" * 32)
    timer.clear("acme", "hmem_" + "1" * 32)  # absent is fine
    (left,) = scheduler.list_schedules(GroupName="uhp-memories-test")["Schedules"]
    assert left["Name"] == schedule_name("globex", "hmem_" + "1" * 32)


def test_the_local_ticker_fires_each_schedule_once_per_interval(scheduler: Any) -> None:
    timer = EventBridgeTimer(lambda: scheduler, "uhp-memories-test", TARGET, ROLE)
    timer.set("acme", "hmem_" + "1" * 32, 60)
    timer.set("acme", "hmem_" + "2" * 32, 120)
    fired: list[dict[str, Any]] = []
    ticker = LocalTicker(scheduler, "uhp-memories-test", fired.append)
    set_at = scheduler.get_schedule(Name=schedule_name("acme", "hmem_" + "1" * 32),
                                    GroupName="uhp-memories-test")["LastModificationDate"].timestamp()
    assert ticker.tick(set_at + 59 * 60) == 0  # not yet an interval since it was set
    assert ticker.tick(set_at + 61 * 60) == 1
    assert fired == [{"tenant": "acme", "memory_id": "hmem_" + "1" * 32}]
    assert ticker.tick(set_at + 62 * 60) == 0  # fired a minute ago
    assert ticker.tick(set_at + 121 * 60) == 2  # both due
    assert ticker.tick(set_at + 122 * 60) == 0


def test_a_failing_firing_does_not_stop_the_others_and_is_fired_again(scheduler: Any) -> None:
    timer = EventBridgeTimer(lambda: scheduler, "uhp-memories-test", TARGET, ROLE)
    for n in (1, 2):
        timer.set("acme", f"hmem_{n:032x}", 60)
    fired: list[str] = []

    def fire(event: dict[str, Any]) -> None:
        if event["memory_id"].endswith("1") and "failed once" not in fired:
            fired.append("failed once")
            raise RuntimeError("the memory's table was busy")
        fired.append(event["memory_id"])

    ticker = LocalTicker(scheduler, "uhp-memories-test", fire)
    later = 10**10
    assert ticker.tick(later) == 1
    assert ticker.tick(later + 1) == 1  # the failed one again
    assert sorted(fired) == sorted(["failed once", f"hmem_{2:032x}", f"hmem_{1:032x}"])
