"""The ScheduleRepository contract (domain/consolidation/schedules.py): a memory's consolidation schedule, an item
under the memory. Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

import pytest

from tests.contract.builders import ACME, GLOBEX, T0, add, mid
from tests.contract.conftest import Repositories
from uhp_memories.domain.consolidation.model import Schedule
from uhp_memories.domain.errors import TreeChanged


def schedule(memory_id: str, every: int = 60, budget: int | None = None, tenant: str = ACME) -> Schedule:
    return Schedule(tenant, memory_id, every, budget, "user:alice", T0)


def test_put_then_get_answers_the_schedule_and_put_replaces_it(repos: Repositories) -> None:
    m = add(repos, 1)
    assert repos.schedules.get(ACME, m.id) is None
    repos.schedules.put(schedule(m.id))
    assert repos.schedules.get(ACME, m.id) == schedule(m.id)
    repos.schedules.put(schedule(m.id, every=1440, budget=2**40))
    assert repos.schedules.get(ACME, m.id) == schedule(m.id, every=1440, budget=2**40)


def test_delete_removes_it_and_deleting_nothing_is_fine(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.schedules.put(schedule(m.id))
    repos.schedules.delete(ACME, m.id)
    assert repos.schedules.get(ACME, m.id) is None
    repos.schedules.delete(ACME, m.id)


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_a_memory_going_or_gone_takes_no_schedule(repos: Repositories, fate: str) -> None:
    if fate == "deleting":
        add(repos, 1)
        repos.memories.mark_deleting(ACME, [mid(1)])
    with pytest.raises(TreeChanged):
        repos.schedules.put(schedule(mid(1)))
    assert repos.schedules.get(ACME, mid(1)) is None


def test_a_memorys_purge_removes_its_schedule_and_tenants_never_meet(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.schedules.put(schedule(m.id))
    assert repos.schedules.get(GLOBEX, m.id) is None
    repos.memories.purge(ACME, m.id)
    assert repos.schedules.get(ACME, m.id) is None
