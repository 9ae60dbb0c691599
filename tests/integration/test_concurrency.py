"""Concurrent writers over HTTP: a revision is compare-and-swap on the current version, so racing
writers produce one linear chain (no fork, no lost update) and every loser is told the current id."""

from __future__ import annotations

import dataclasses
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import pytest
import requests

from tests.fakes.dynamodb_faults import TransactionConflicts
from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.adapters.dynamodb.table import CONFLICT_ATTEMPTS

pytestmark = pytest.mark.slow

THREADS = 8


@pytest.fixture(autouse=True)
def threads_switch_often() -> Iterator[None]:
    """Interleave the gateway's request threads at every chance (CPython hands the GIL over every
    5 ms by default): a race these tests look for then shows in every run, not in one of fifty."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def fresh_session(client: Client) -> Client:
    """The same key on its own connection: a requests.Session is not shared across threads."""
    return dataclasses.replace(client, session=requests.Session())


def race[T](client: Client, jobs: list[Callable[[Client], T]]) -> list[T]:
    """Run each job on its own thread and connection, all released at once by a barrier."""
    clients = [fresh_session(client) for _ in jobs]
    barrier = threading.Barrier(len(jobs))

    def run(index: int) -> T:
        barrier.wait(timeout=30)
        return jobs[index](clients[index])

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return list(pool.map(run, range(len(jobs))))


def path(memory_id: str, record_id: str | None = None) -> str:
    base = f"/v1/memories/{memory_id}/records"
    return f"{base}/{record_id}" if record_id else base


def full_history(client: Client, memory_id: str, record_id: str) -> list[dict[str, Any]]:
    versions: list[dict[str, Any]] = []
    cursor = None
    while True:
        answer = client.get(path(memory_id, record_id) + "/history", limit=100, cursor=cursor)
        assert answer.status_code == 200, answer.text
        versions.extend(answer.json()["data"])
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            return versions


def all_versions(client: Client, memory_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        answer = client.get(path(memory_id), include="all", limit=100, cursor=cursor)
        assert answer.status_code == 200, answer.text
        found.extend(answer.json()["data"])
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            return found


def assert_one_linear_chain(
    client: Client, memory_id: str, first_id: str, written: list[dict[str, Any]], last_status: str = "active"
) -> list[dict[str, Any]]:
    """The record's history is versions 1..k, each superseding the one before, with exactly one
    current version, and holds exactly the versions the successful writes answered."""
    chain = full_history(client, memory_id, first_id)
    k = len(chain)
    assert [v["version"] for v in chain] == list(range(1, k + 1))
    assert chain[0]["id"] == first_id
    assert chain[0]["supersedes"] is None
    ids = [v["id"] for v in chain]
    assert len(set(ids)) == k, "a version id appears twice"
    superseded = [v["supersedes"] for v in chain[1:]]
    assert len(set(superseded)) == len(superseded), "fork: one version superseded by two"
    for before, after in pairwise(chain):
        assert after["supersedes"] == before["id"]
        assert before["status"] == "superseded"
        assert before["time"]["invalidated_at"] == after["time"]["written_at"]
    assert chain[-1]["status"] == last_status
    assert [v["status"] for v in chain].count("superseded") == k - 1
    # No lost update: every answered revision is in the chain, and nothing else is.
    assert sorted(ids[1:]) == sorted(w["id"] for w in written)
    by_id = {v["id"]: v for v in chain}
    for answered in written:
        assert by_id[answered["id"]]["content"] == answered["content"]
        assert by_id[answered["id"]]["version"] == answered["version"]
    # The memory agrees: the chain's versions are all it holds, with one (or no) current one.
    everything = all_versions(client, memory_id)
    assert sorted(v["id"] for v in everything) == sorted(ids)
    active = client.get(path(memory_id), limit=100).json()["data"]
    assert [v["id"] for v in active] == ([chain[-1]["id"]] if last_status == "active" else [])
    return chain


def assert_conflict_or_success(answer: requests.Response) -> None:
    assert answer.status_code in (200, 409), answer.text
    if answer.status_code == 409:
        assert error_code(answer) == "memory_conflict"
        assert answer.json()["error"]["current_record_id"].startswith("hrec_")


def test_racing_revisions_of_one_version_make_one_winner(alice: Client) -> None:
    memory = alice.create_memory()
    first = alice.remember(memory["id"], "v1", attributes={"n": 0})

    def revise(n: int) -> Callable[[Client], requests.Response]:
        return lambda c: c.patch(path(memory["id"], first["id"]), {"content": f"writer {n}", "attributes": {"n": n}})

    answers = race(alice, [revise(n) for n in range(THREADS)])
    for answer in answers:
        assert_conflict_or_success(answer)
    winners = [a.json() for a in answers if a.status_code == 200]
    assert len(winners) == 1, [a.status_code for a in answers]
    winner = winners[0]
    assert winner["version"] == 2
    assert winner["supersedes"] == first["id"]
    for loser in (a for a in answers if a.status_code == 409):
        assert loser.json()["error"]["current_record_id"] == winner["id"]
    assert_one_linear_chain(alice, memory["id"], first["id"], winners)
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == 1


def test_rounds_of_writers_revising_what_they_last_saw(alice: Client) -> None:
    memory = alice.create_memory()
    first = alice.remember(memory["id"], "v1")
    rounds = 4
    known = [first["id"]] * THREADS
    written: list[dict[str, Any]] = []
    for r in range(rounds):

        def revise(n: int, r: int = r) -> Callable[[Client], requests.Response]:
            return lambda c: c.patch(path(memory["id"], known[n]), {"content": f"round {r} writer {n}"})

        answers = race(alice, [revise(n) for n in range(THREADS)])
        round_winners = []
        for n, answer in enumerate(answers):
            assert_conflict_or_success(answer)
            if answer.status_code == 200:
                body = answer.json()
                assert body["supersedes"] == known[n], "a revision supersedes the version it named"
                round_winners.append(body)
                known[n] = body["id"]
            else:
                known[n] = answer.json()["error"]["current_record_id"]
        # Whoever won the last round knows the current version, so each round has exactly one winner.
        assert len(round_winners) == 1, f"round {r}: {[a.status_code for a in answers]}"
        written.extend(round_winners)
        assert round_winners[0]["version"] == r + 2
        # Every writer now knows the current version.
        assert set(known) <= {w["id"] for w in written} | {first["id"]}
    chain = assert_one_linear_chain(alice, memory["id"], first["id"], written)
    assert len(chain) == rounds + 1


def test_free_running_writers_build_one_chain(alice: Client) -> None:
    """No rounds: each writer keeps revising the latest version it knows until it has landed two."""
    memory = alice.create_memory()
    first = alice.remember(memory["id"], "v1")
    wanted = 2

    def writer(n: int) -> Callable[[Client], list[dict[str, Any]]]:
        def run(client: Client) -> list[dict[str, Any]]:
            mine: list[dict[str, Any]] = []
            current = first["id"]
            attempts = 0
            while len(mine) < wanted:
                attempts += 1
                assert attempts < 200, "a writer starved"
                answer = client.patch(path(memory["id"], current), {"content": f"writer {n} #{len(mine)}"})
                assert_conflict_or_success(answer)
                if answer.status_code == 200:
                    mine.append(answer.json())
                    current = answer.json()["id"]
                else:
                    current = answer.json()["error"]["current_record_id"]
            return mine

        return run

    results = race(alice, [writer(n) for n in range(THREADS)])
    written = [w for mine in results for w in mine]
    assert len(written) == THREADS * wanted
    chain = assert_one_linear_chain(alice, memory["id"], first["id"], written)
    assert len(chain) == 1 + THREADS * wanted


def test_racing_forget_and_revise(alice: Client) -> None:
    memory = alice.create_memory()
    first = alice.remember(memory["id"], "v1")

    def act(n: int) -> Callable[[Client], requests.Response]:
        if n % 2:
            return lambda c: c.delete(path(memory["id"], first["id"]))
        return lambda c: c.patch(path(memory["id"], first["id"]), {"content": f"writer {n}"})

    answers = race(alice, [act(n) for n in range(THREADS)])
    for answer in answers:
        assert_conflict_or_success(answer)
    winners = [(n, a.json()) for n, a in enumerate(answers) if a.status_code == 200]
    assert len(winners) == 1, [a.status_code for a in answers]
    n, winner = winners[0]
    count = alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"]
    if n % 2:  # forget won
        assert winner["id"] == first["id"]
        assert winner["status"] == "forgotten"
        assert_one_linear_chain(alice, memory["id"], first["id"], [], last_status="forgotten")
        assert count == 0
        expected_current = first["id"]
    else:
        assert winner["supersedes"] == first["id"]
        assert_one_linear_chain(alice, memory["id"], first["id"], [winner])
        assert count == 1
        expected_current = winner["id"]
    for loser in (a for a in answers if a.status_code == 409):
        assert loser.json()["error"]["current_record_id"] == expected_current


def test_racing_forgets_count_once(alice: Client) -> None:
    memory = alice.create_memory()
    keep = alice.remember(memory["id"], "kept")
    doomed = alice.remember(memory["id"], "doomed")
    answers = race(alice, [lambda c: c.delete(path(memory["id"], doomed["id"]))] * THREADS)
    for answer in answers:
        assert_conflict_or_success(answer)
    assert [a.status_code for a in answers].count(200) == 1
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == 1
    assert [r["id"] for r in alice.get(path(memory["id"])).json()["data"]] == [keep["id"]]


def test_writers_of_different_records_do_not_conflict(alice: Client) -> None:
    memory = alice.create_memory()
    originals = [alice.remember(memory["id"], f"r{n}") for n in range(THREADS)]

    def revise(n: int) -> Callable[[Client], requests.Response]:
        return lambda c: c.patch(path(memory["id"], originals[n]["id"]), {"content": f"r{n} v2"})

    answers = race(alice, [revise(n) for n in range(THREADS)])
    assert [a.status_code for a in answers] == [200] * THREADS
    for n, answer in enumerate(answers):
        assert answer.json()["supersedes"] == originals[n]["id"]
        assert answer.json()["version"] == 2
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == THREADS


def test_concurrent_remembers_are_all_kept_and_counted(alice: Client) -> None:
    memory = alice.create_memory()
    per_thread = 4

    def writer(n: int) -> Callable[[Client], list[str]]:
        def run(client: Client) -> list[str]:
            ids = []
            for i in range(per_thread):
                answer = client.post(path(memory["id"]), {"type": "fact", "content": f"w{n} r{i}"})
                assert answer.status_code == 201, answer.text
                ids.append(answer.json()["id"])
            return ids

        return run

    written = [rid for ids in race(alice, [writer(n) for n in range(THREADS)]) for rid in ids]
    assert len(set(written)) == THREADS * per_thread
    listed = alice.get(path(memory["id"]), limit=100).json()
    assert sorted(r["id"] for r in listed["data"]) == sorted(written)
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == THREADS * per_thread


def test_racing_requests_with_one_idempotency_key_write_once(alice: Client) -> None:
    memory = alice.create_memory()
    key = "race-" + secrets.token_hex(8)
    body = {"type": "fact", "content": "written once"}

    answers = race(
        alice, [lambda c: c.post(path(memory["id"]), body, headers={"Idempotency-Key": key})] * THREADS
    )
    done = [a for a in answers if a.status_code == 201]
    assert done, [a.status_code for a in answers]
    for answer in answers:
        if answer.status_code != 201:
            # A request that arrives while the first is still running is told so, not run again.
            assert answer.status_code == 409, answer.text
            assert error_code(answer) == "idempotency_in_progress"
    assert len({a.json()["id"] for a in done}) == 1
    assert all(a.json() == done[0].json() for a in done)
    listed = alice.get(path(memory["id"])).json()["data"]
    assert [r["id"] for r in listed] == [done[0].json()["id"]]
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == 1
    # Once settled, the key replays.
    again = alice.post(path(memory["id"]), body, headers={"Idempotency-Key": key})
    assert again.status_code == 201
    assert again.json() == done[0].json()


def test_concurrent_callers_each_act_as_themselves(alice: Client, make_client: ClientFactory) -> None:
    """Every function runs in the local gateway's one process: a request must never read the event,
    and so the caller, of another request resolved at the same time."""
    other = make_client("user:mallory", tenant_name="t-" + secrets.token_hex(6))
    mine, theirs = alice.create_memory("alice's")["id"], other.create_memory("mallory's")["id"]

    def listing(client: Client) -> list[str]:
        answers = [client.get("/v1/memories") for _ in range(4)]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        return sorted({m["id"] for a in answers for m in a.json()["data"]})

    half = THREADS // 2  # alice's listings and mallory's, all released at once
    seen = race(alice, [listing] * half + [lambda _: listing(fresh_session(other))] * half)
    assert seen[:half] == [[mine]] * half
    assert seen[half:] == [[theirs]] * half


# -- transactions that lose a race (issue 35) ----------------------------------------------------------


def test_racing_observes_into_one_memory_all_land_once_though_each_transaction_loses_a_race(
    alice: Client, local_aws: Any
) -> None:
    """Every record write also updates its memory's item (the count), so writers into one memory meet there,
    and DynamoDB cancels the loser's transaction (TransactionConflict). observe's transaction was not sent
    again: racing observes answered 503. moto never raises it; the injector makes each transaction lose once."""
    memory = alice.create_memory("Busy")["id"]
    turns = [[f"user: writer {w} turn {t}." for t in range(3)] for w in range(THREADS)]

    def observe(writer: int) -> Callable[[Client], requests.Response]:
        headers = {"Idempotency-Key": f"observe-{writer}"} if writer % 2 else {}  # keyed writes carry a marker
        return lambda c: c.post(f"/v1/memories/{memory}/observe", {"episodes": [{"content": x} for x in turns[writer]]},
                                headers=headers)

    with TransactionConflicts(local_aws.container.dynamodb) as conflicts:
        answers = race(alice, [observe(w) for w in range(THREADS)])
    assert [a.status_code for a in answers] == [200] * THREADS, [a.text for a in answers if a.status_code != 200]
    assert conflicts.raised >= THREADS
    listed = alice.get(path(memory), limit=100).json()["data"]
    assert sorted(r["content"] for r in listed) == sorted(x for writer in turns for x in writer)  # none doubled
    assert alice.get(f"/v1/memories/{memory}").json()["records"] == {"count": THREADS * 3}


def test_a_race_lost_every_time_is_memory_unavailable_and_writes_nothing(alice: Client, local_aws: Any) -> None:
    memory = alice.create_memory("Never free")["id"]
    with TransactionConflicts(local_aws.container.dynamodb, times=None) as conflicts:
        observed = alice.post(f"/v1/memories/{memory}/observe", {"episodes": [{"content": "user: hello."}]})
        remembered = alice.post(path(memory), {"type": "fact", "content": "Never written."})
    for answer in (observed, remembered):
        assert (answer.status_code, error_code(answer)) == (503, "memory_unavailable"), answer.text
    assert conflicts.raised == 2 * CONFLICT_ATTEMPTS  # sent again a bounded number of times, then told
    assert alice.get(path(memory)).json()["data"] == []
