"""The JobRepository contract (domain/jobs.py): a workflow's job, and the marker that holds its memory
while it runs (memory_busy). Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

import pytest

from tests.contract.builders import ACME, GLOBEX, T0, add, mid
from tests.contract.conftest import Repositories
from uhp_memories.domain.errors import MemoryBusy
from uhp_memories.domain.jobs import Job


def jid(n: int) -> str:
    return f"hjob_{n:032x}"


def job(n: int, memory_id: str, *, tenant: str = ACME, kind: str = "erase") -> Job:
    return Job(tenant, jid(n), kind, memory_id, "running", "user:alice", T0 + n)


def test_start_then_get_returns_the_job_as_written(repos: Repositories) -> None:
    m = add(repos, 1)
    started = job(1, m.id, kind="delete")
    repos.jobs.start(started, hold_memory=True)
    assert repos.jobs.get(ACME, started.id) == started
    assert (started.finished_at, started.result) == (None, {})
    assert repos.jobs.get(ACME, jid(99)) is None


def test_a_job_holds_its_memory_only_when_asked_to(repos: Repositories) -> None:
    held, free = add(repos, 1), add(repos, 2)
    repos.jobs.start(job(1, held.id), hold_memory=True)
    repos.jobs.start(job(2, free.id), hold_memory=False)
    assert repos.jobs.holds(ACME, held.id) is True
    assert repos.jobs.holds(ACME, free.id) is False
    assert repos.jobs.holds(ACME, mid(99)) is False


def test_finish_records_the_outcome_releases_the_memory_and_answers_the_job(repos: Repositories) -> None:
    m = add(repos, 1)
    started = job(1, m.id)
    repos.jobs.start(started, hold_memory=True)
    outcome = {"erased": ["hrec_" + "1" * 32], "unreachable": [{"where": "dynamodb_stream", "until": None}],
               "count": 2**40, "ratio": 0.5}
    done = repos.jobs.finish(ACME, started.id, "completed", outcome, T0 + 100)
    expected = Job(ACME, started.id, "erase", m.id, "completed", "user:alice", started.created_at, T0 + 100, outcome)
    assert done == expected
    assert repos.jobs.get(ACME, started.id) == expected
    assert repos.jobs.holds(ACME, m.id) is False


@pytest.mark.slow
def test_finish_is_idempotent(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.jobs.start(job(1, m.id), hold_memory=True)
    first = repos.jobs.finish(ACME, jid(1), "failed", {"error": "boom"}, T0 + 100)
    again = repos.jobs.finish(ACME, jid(1), "failed", {"error": "boom"}, T0 + 100)
    assert again == first
    assert repos.jobs.holds(ACME, m.id) is False


def test_progress_replaces_an_unfinished_jobs_result_and_never_a_finished_one(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.jobs.start(job(1, m.id, kind="derive"), hold_memory=False)
    assert repos.jobs.progress(ACME, jid(1), {"plan": [{"id": "x", "n": 2**40}]}) is True
    assert repos.jobs.get(ACME, jid(1)).result == {"plan": [{"id": "x", "n": 2**40}]}
    repos.jobs.finish(ACME, jid(1), "completed", {"records": ["x"]}, T0 + 100)
    assert repos.jobs.progress(ACME, jid(1), {"plan": []}) is False
    assert repos.jobs.get(ACME, jid(1)).result == {"records": ["x"]}
    assert repos.jobs.progress(ACME, jid(99), {}) is False
    assert repos.jobs.progress(GLOBEX, jid(1), {}) is False


def test_finish_of_an_unknown_job_raises_lookup_error(repos: Repositories) -> None:
    with pytest.raises(LookupError):
        repos.jobs.finish(ACME, jid(1), "completed", {}, T0)


def test_a_memory_held_by_two_jobs_stays_held_until_both_finish(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.jobs.start(job(1, m.id), hold_memory=True)
    repos.jobs.start(job(2, m.id), hold_memory=True)
    repos.jobs.finish(ACME, jid(1), "completed", {}, T0 + 10)
    assert repos.jobs.holds(ACME, m.id) is True
    repos.jobs.finish(ACME, jid(2), "completed", {}, T0 + 20)
    assert repos.jobs.holds(ACME, m.id) is False


def test_a_memorys_purge_releases_it(repos: Repositories) -> None:
    """A memory a running job holds is never hidden (memory_busy); once the job has finished, the
    purge leaves nothing of the hold behind, and the job outlives its memory."""
    m = add(repos, 1)
    repos.jobs.start(job(1, m.id, kind="erase"), hold_memory=True)
    with pytest.raises(MemoryBusy):
        repos.memories.mark_deleting(ACME, [m.id])
    repos.jobs.finish(ACME, jid(1), "completed", {}, 2)
    repos.memories.mark_deleting(ACME, [m.id])
    repos.memories.purge(ACME, m.id)
    assert repos.jobs.holds(ACME, m.id) is False
    assert repos.jobs.get(ACME, jid(1)) is not None  # the job outlives its memory, for the client to poll


def test_tenants_are_isolated_even_with_the_same_ids(repos: Repositories) -> None:
    add(repos, 1)
    ours = job(1, mid(1))
    repos.jobs.start(ours, hold_memory=True)
    assert repos.jobs.get(GLOBEX, ours.id) is None
    assert repos.jobs.holds(GLOBEX, mid(1)) is False
    with pytest.raises(LookupError):
        repos.jobs.finish(GLOBEX, ours.id, "completed", {}, T0)
    theirs = job(1, mid(1), tenant=GLOBEX, kind="delete")
    repos.jobs.start(theirs, hold_memory=False)
    repos.jobs.finish(GLOBEX, theirs.id, "completed", {}, T0 + 5)
    assert repos.jobs.get(ACME, ours.id) == ours
    assert repos.jobs.holds(ACME, mid(1)) is True
