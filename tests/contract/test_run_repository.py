"""The RunRepository contract (domain/consolidation/service.py): consolidation runs kept under their memory,
holding it while they run. Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

import pytest

from tests.contract.builders import ACME, GLOBEX, add, at, mid, rid
from tests.contract.conftest import Repositories
from uhp_memories.domain.consolidation.model import Change, Run
from uhp_memories.domain.errors import MemoryBusy, TreeChanged
from uhp_memories.domain.jobs import Job


def cid(n: int) -> str:
    return f"hcon_{n:032x}"


def run(n: int, memory_id: str, *, tenant: str = ACME, status: str = "running") -> Run:
    return Run(tenant, cid(n), memory_id, status, "manual", 1_790_000_000 + n, 1_000, "user:alice")


def finished(started: Run) -> Run:
    return started.evolve(
        status="completed",
        finished_at=started.started_at + 5,
        episodes_read=3,
        records_read=12,
        read_through=at(40),
        budget_exhausted=True,
        changes=(Change(rid(2), "forgotten", rid(2)), Change(rid(5), "superseded", rid(4))),
        error="",
    )


def test_start_then_get_and_list_return_the_run_as_written(repos: Repositories) -> None:
    m = add(repos, 1)
    started = run(1, m.id)
    repos.runs.start(started)
    assert repos.runs.get(ACME, m.id, started.id) == started
    assert repos.runs.list(ACME, m.id) == [started]
    assert repos.runs.get(ACME, m.id, cid(99)) is None


def test_a_started_run_holds_its_memory_until_saved_with_release(repos: Repositories) -> None:
    """The hold is the marker jobs read: a move or a delete answers memory_busy while a run holds it."""
    m = add(repos, 1)
    started = run(1, m.id)
    repos.runs.start(started)
    assert repos.jobs.holds(ACME, m.id) is True
    progress = started.evolve(records_read=4, read_through=at(10))
    repos.runs.save(progress, release=False)
    assert repos.jobs.holds(ACME, m.id) is True
    done = finished(progress)
    repos.runs.save(done, release=True)
    assert repos.jobs.holds(ACME, m.id) is False
    assert repos.runs.get(ACME, m.id, started.id) == done


def test_save_replaces_the_run(repos: Repositories) -> None:
    m = add(repos, 1)
    started = run(1, m.id)
    repos.runs.start(started)
    done = finished(started)
    repos.runs.save(done, release=True)
    reverted = done.evolve(status="reverted", reverted_by=cid(2))
    repos.runs.save(reverted, release=False)
    assert repos.runs.get(ACME, m.id, started.id) == reverted
    assert repos.runs.list(ACME, m.id) == [reverted]
    assert repos.jobs.holds(ACME, m.id) is False


@pytest.mark.slow
def test_list_is_the_memorys_runs_by_id(repos: Repositories) -> None:
    m, other = add(repos, 1), add(repos, 2)
    for n in (3, 1, 2):
        repos.runs.start(run(n, m.id))
    repos.runs.start(run(9, other.id))
    assert [r.id for r in repos.runs.list(ACME, m.id)] == [cid(1), cid(2), cid(3)]
    assert [r.id for r in repos.runs.list(ACME, other.id)] == [cid(9)]
    assert repos.runs.list(ACME, mid(99)) == []


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_start_on_a_memory_going_or_gone_raises_tree_changed_and_writes_nothing(
    repos: Repositories, fate: str
) -> None:
    if fate == "deleting":
        add(repos, 1)
        repos.memories.mark_deleting(ACME, [mid(1)])
    with pytest.raises(TreeChanged):
        repos.runs.start(run(1, mid(1)))
    assert repos.runs.get(ACME, mid(1), cid(1)) is None
    assert repos.runs.list(ACME, mid(1)) == []
    assert repos.jobs.holds(ACME, mid(1)) is False


@pytest.mark.slow
def test_a_memorys_purge_removes_its_runs(repos: Repositories) -> None:
    m, keep = add(repos, 1), add(repos, 2)
    done = run(1, m.id)
    repos.runs.start(done)
    repos.runs.save(finished(done), release=True)
    kept = run(2, keep.id)
    repos.runs.start(kept)
    repos.memories.mark_deleting(ACME, [m.id])
    repos.memories.purge(ACME, m.id)
    assert repos.runs.list(ACME, m.id) == []
    assert repos.jobs.holds(ACME, m.id) is False
    assert repos.runs.list(ACME, keep.id) == [kept]
    assert repos.jobs.holds(ACME, keep.id) is True


def test_a_held_memory_is_never_hidden_nor_is_one_above_it(repos: Repositories) -> None:
    """The write decides memory_busy (issue 36): a delete whose look at the subtree came before a run
    started still cannot hide it. Nothing of the subtree is hidden, the root included."""
    top, held = add(repos, 1), add(repos, 2, parent=1)
    repos.runs.start(run(1, held.id))
    with pytest.raises(MemoryBusy) as refused:
        repos.memories.mark_deleting(ACME, [top.id, held.id])
    assert held.id not in str(refused.value)  # names only the memory acted on
    assert repos.memories.get(ACME, top.id) == top
    assert repos.memories.get(ACME, held.id) == held
    repos.runs.save(finished(run(1, held.id)), release=True)
    repos.memories.mark_deleting(ACME, [top.id, held.id])
    assert repos.memories.get(ACME, top.id).deleting is True


def test_a_held_memory_never_moves_nor_does_one_above_it(repos: Repositories) -> None:
    top, held, elsewhere = add(repos, 1), add(repos, 2, parent=1), add(repos, 3)
    repos.runs.start(run(1, held.id))
    with pytest.raises(MemoryBusy):
        repos.memories.update(top.evolve(parent_id=elsewhere.id), None, [elsewhere],
                              [held.evolve(ancestors=(elsewhere.id, top.id))])
    with pytest.raises(MemoryBusy):
        repos.memories.update(held.evolve(parent_id=elsewhere.id), top.id, [elsewhere])
    assert repos.memories.get(ACME, top.id) == top
    repos.memories.update(held.evolve(name="renamed"), top.id, [])  # a rename is no move
    assert repos.memories.get(ACME, held.id).name == "renamed"


def test_a_run_never_starts_on_a_memory_being_deleted(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.memories.mark_deleting(ACME, [m.id])
    with pytest.raises(TreeChanged):
        repos.runs.start(run(1, m.id))
    with pytest.raises(TreeChanged):
        repos.jobs.start(Job(ACME, "hjob_" + "0" * 31 + "1", "erase", m.id, "running", "user:alice", 1), True)
    assert repos.jobs.holds(ACME, m.id) is False


@pytest.mark.slow
def test_tenants_are_isolated_even_with_the_same_ids(repos: Repositories) -> None:
    add(repos, 1)
    ours = run(1, mid(1))
    repos.runs.start(ours)
    assert repos.runs.get(GLOBEX, mid(1), ours.id) is None
    assert repos.runs.list(GLOBEX, mid(1)) == []
    with pytest.raises(TreeChanged):
        repos.runs.start(run(1, mid(1), tenant=GLOBEX))
    add(repos, 1, tenant=GLOBEX)
    theirs = run(1, mid(1), tenant=GLOBEX)
    repos.runs.start(theirs)
    repos.runs.save(finished(theirs), release=True)
    assert repos.runs.get(ACME, mid(1), ours.id) == ours
    assert repos.jobs.holds(ACME, mid(1)) is True
    assert repos.runs.list(GLOBEX, mid(1)) == [finished(theirs)]
