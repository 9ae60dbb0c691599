"""Several OS processes writing one memory's files through open_file_store, against the one local
server: compare-and-swap holds across processes because the server checks it in each write's own
transaction, not because the clients share anything.

The workers run in spawned processes (a fresh interpreter each, as separate hosts would be), so this
module imports only what a worker needs."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

import httpx2
from a13n_harness.providers.memory import MemoryStoreError, Origin

from uhp_memories.harness import open_file_store

pytestmark = pytest.mark.slow

if TYPE_CHECKING:
    from tests.harness.conftest import Stage
    from tests.integration.conftest import Client

WORKERS = 4
RACES = 4
LINES_PER_WORKER = 6
# A worker's retries of one append before it gives up: far above what four writers need.
ATTEMPTS = 200
LOG = "log.md"


@dataclass(frozen=True)
class Target:
    base_url: str
    api_key: str
    memory_id: str


# -- the workers (run in their own processes) -----------------------------------------------------


def create_races(target: Target, worker: int, start: Any) -> list[tuple[str, str | None]]:
    """Create race-N.md for each N at once with the others: per race ("won", version) or the refusal's code
    and the text of the file it reported."""
    return asyncio.run(_create_races(target, worker, start))


async def _create_races(target: Target, worker: int, start: Any) -> list[tuple[str, str | None]]:
    outcomes: list[tuple[str, str | None]] = []
    async with _store(target) as store:
        for race in range(RACES):
            await asyncio.to_thread(start.wait)
            try:
                version = await store.write(
                    f"race-{race}.md", f"worker {worker}\n", expected=None, origin=Origin(run_id=f"worker-{worker}")
                )
            except MemoryStoreError as error:
                outcomes.append((error.code, error.current.text if error.current else None))
            else:
                outcomes.append(("won", version))
    return outcomes


def append_lines(target: Target, worker: int, start: Any) -> dict[str, Any]:
    """Append this worker's lines to log.md, one compare-and-swap each, retrying a lost race: the lines the
    store acknowledged, and those whose write it could not confirm."""
    return asyncio.run(_append_lines(target, worker, start))


async def _append_lines(target: Target, worker: int, start: Any) -> dict[str, Any]:
    acknowledged: list[str] = []
    unconfirmed: list[str] = []
    missing_reads = 0
    async with _store(target) as store:
        await asyncio.to_thread(start.wait)
        for number in range(LINES_PER_WORKER):
            line = f"worker {worker} line {number}"
            for _ in range(ATTEMPTS):
                try:
                    current = await store.read(LOG)
                except MemoryStoreError as error:
                    if error.code != "not_found":
                        raise
                    # log.md exists throughout: counted, so the other checks still run, and failed on at the end.
                    missing_reads += 1
                    continue
                if line in current.text.splitlines():
                    # An earlier attempt whose outcome was unknown did land.
                    unconfirmed.remove(line)
                    acknowledged.append(line)
                    break
                try:
                    await store.write(LOG, f"{current.text}{line}\n", expected=current.version, origin=Origin())
                except MemoryStoreError as error:
                    if error.code == "write_unconfirmed" and line not in unconfirmed:
                        unconfirmed.append(line)
                    elif error.code not in ("version_mismatch", "write_unconfirmed", "unavailable"):
                        raise
                    continue
                if line in unconfirmed:
                    unconfirmed.remove(line)
                acknowledged.append(line)
                break
            else:
                raise AssertionError(f"worker {worker} never appended line {number}")
    return {"acknowledged": acknowledged, "unconfirmed": unconfirmed, "missing_reads": missing_reads}


def _store(target: Target) -> Any:
    return _opened(target)


class _opened:
    """open_file_store over a client of the worker's own (the local server speaks plain HTTP)."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._http = httpx2.AsyncClient(timeout=30)
        self._store: Any = None

    async def __aenter__(self) -> Any:
        target = self._target
        self._store = open_file_store(
            base_url=target.base_url, api_key=target.api_key, memory_id=target.memory_id, http=self._http
        )
        return await self._store.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        await self._store.__aexit__(*exc)
        await self._http.aclose()


# -- the tests ------------------------------------------------------------------------------------


def run_workers(work: Callable[..., Any], target: Target) -> list[Any]:
    """Each worker's result, in worker order; the workers start each step together, at a barrier."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WORKERS, timeout=120)
    results = context.Queue()
    processes = [
        context.Process(target=_report, args=(work, target, worker, start, results)) for worker in range(WORKERS)
    ]
    for process in processes:
        process.start()
    try:
        reported = dict(results.get(timeout=300) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=30)
    failures = [value for value in reported.values() if isinstance(value, str)]
    assert not failures, failures
    return [reported[worker] for worker in range(WORKERS)]


def _report(work: Callable[..., Any], target: Target, worker: int, start: Any, results: Any) -> None:
    try:
        results.put((worker, work(target, worker, start)))
    except BaseException as error:  # reported to the test, which fails with it
        results.put((worker, f"worker {worker}: {error!r}"))


def current_paths(client: Client, memory_id: str) -> list[str]:
    """The path of every current record with one, over all pages of GET /records?under=."""
    paths: list[str] = []
    cursor = None
    while True:
        answer = client.get(f"/v1/memories/{memory_id}/records", under="", limit=100, cursor=cursor)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        paths.extend(record["path"] for record in page["data"])
        cursor = page["next_cursor"]
        if cursor is None:
            return paths


@pytest.fixture
def target(stage: Stage, alice: Client, memory: str) -> Target:
    return Target(stage.url, alice.key, memory)


def test_concurrent_creates_of_one_path_give_one_file(target: Target, alice: Client, memory: str) -> None:
    outcomes = run_workers(create_races, target)

    for race in range(RACES):
        results = [worker_outcomes[race] for worker_outcomes in outcomes]
        winners = [worker for worker, (code, _) in enumerate(results) if code == "won"]
        assert len(winners) == 1, results
        # Every loser was refused as a create of an existing path, shown the winner's file.
        (winner,) = winners
        losers = [result for worker, result in enumerate(results) if worker != winner]
        assert losers == [("version_mismatch", f"worker {winner}\n")] * (WORKERS - 1)
    # No path has two current files: one current record per race, each at its own path.
    paths = current_paths(alice, memory)
    assert len(paths) == len(set(paths))
    assert sorted(paths) == [f"race-{race}.md" for race in range(RACES)]


def test_concurrent_appends_with_retries_lose_no_acknowledged_line(
    target: Target, alice: Client, memory: str
) -> None:
    created = alice.post(
        f"/v1/memories/{memory}/records", {"type": "note", "path": LOG, "content": "# log\n"}
    )
    assert created.status_code == 201, created.text

    reports = run_workers(append_lines, target)

    # Client.get names its own argument `path`: the query's goes through the session.
    answer = alice.session.get(
        f"{alice.base_url}/v1/memories/{memory}/records", params={"path": LOG}, headers={"x-api-key": alice.key},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    (log,) = answer.json()["data"]
    lines = log["content"].splitlines()
    acknowledged = [line for report in reports for line in report["acknowledged"]]
    unconfirmed = [line for report in reports for line in report["unconfirmed"]]
    assert len(acknowledged) + len(unconfirmed) == WORKERS * LINES_PER_WORKER
    assert lines[0] == "# log"
    # Every acknowledged line is there exactly once; an unconfirmed one at most once; nothing else.
    assert sorted(lines[1:]) == sorted(acknowledged + [line for line in unconfirmed if line in lines])
    assert len(lines) == len(set(lines))
    # Each worker's own lines in the order it wrote them.
    for worker in range(WORKERS):
        own = [line for line in lines if line.startswith(f"worker {worker} ")]
        assert own == sorted(own, key=lambda line: int(line.rsplit(" ", 1)[1]))
    assert current_paths(alice, memory) == [LOG]
    # The file existed throughout, so no read may have answered that it did not.
    missing = sum(report["missing_reads"] for report in reports)
    assert missing == 0, f"{missing} reads of {LOG} answered no file while writers revised it"
