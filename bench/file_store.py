"""File memory latency: open_file_store through a local server against a13n-harness's DirectoryFileStore
on the same machine, as ratios (ours / directory).

Not a test. Each store gets the same 1,000 files (files/NNNN.md, a few lines each, one in ten naming
the word the grep looks for), then: create, read, a compare-and-swap write, changes after a cursor with
one change behind it, and a grep over every file (the server's for ours; for the directory store, the
harness's own scan, reading each file, as memory_file_grep does for a store that does not search).
Ours crosses HTTP, the local gateway, the deployed handlers and DynamoDB on moto, so its figures are
an upper bound of a deployed stage's, and its ratios say where the round trips go.

Usage: python bench/file_store.py [--files N] [--samples N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx2
import recall_locomo as locomo
from a13n_harness.providers.memory import DirectoryFileStore, FileStore, Origin, SearchableFileStore
from a13n_harness.toolsets.memory_files import _compile, _scan  # the tool's own scan, for stores without search

from uhp_memories.harness import open_file_store

NEEDLE = "oolong"
ORIGIN = Origin(run_id="bench")


def text_of(n: int) -> str:
    topic = NEEDLE if n % 10 == 0 else "green tea"
    return f"# note {n}\nprefers {topic} in the morning\nreplies in English\nlast seen on day {n % 365}\n"


@contextmanager
def local_server() -> Iterator[tuple[str, str]]:
    """The recall benchmark's local stage (gateway, handlers, moto, the model loaded), with one memory:
    its URL and memory id."""
    with locomo.local_server() as local:
        yield local.api.base_url, local.api.create_memory("bench files", "1,000 files for the file store bench")


async def timed(samples: list[float], call: Awaitable[Any]) -> Any:
    start = time.perf_counter()
    result = await call
    samples.append((time.perf_counter() - start) * 1000)
    return result


async def measure(store: FileStore, files: int, samples: int) -> dict[str, list[float]]:
    """Milliseconds per operation, each kind in its own list."""
    rng = random.Random(7)
    took: dict[str, list[float]] = {name: [] for name in ("create", "read", "write", "changes", "grep")}
    versions: dict[str, str] = {}
    for n in range(files):
        path = f"files/{n:04}.md"
        versions[path] = await timed(took["create"], store.write(path, text_of(n), expected=None, origin=ORIGIN))
    paths = sorted(versions)
    for path in rng.sample(paths, samples):
        await timed(took["read"], store.read(path))
    for path in rng.sample(paths, samples):
        versions[path] = await timed(
            took["write"], store.write(path, text_of(0) + "edited\n", expected=versions[path], origin=ORIGIN)
        )
    cursor = (await store.changes(None)).cursor
    for path in rng.sample(paths, samples):
        versions[path] = await store.write(path, text_of(1), expected=versions[path], origin=ORIGIN)
        cursor = (await timed(took["changes"], store.changes(cursor))).cursor
    for _ in range(max(3, samples // 10)):
        await timed(took["grep"], grep(store))
    return took


async def grep(store: FileStore) -> object:
    """memory_file_grep's default call: literal, ignoring case, every file, 50 lines."""
    if isinstance(store, SearchableFileStore):
        return await store.search(NEEDLE, regex=False, case_sensitive=False, path="", limit=50)
    return await _scan(store, _compile(NEEDLE, False, False), "", 50)


def report(ours: dict[str, list[float]], directory: dict[str, list[float]], files: int) -> None:
    print(f"File memory, {files} files: ms per operation, p50 (p95); ratio of p50s, ours / DirectoryFileStore")
    print("| operation | DirectoryFileStore | open_file_store (local server) | ratio |")
    print("|---|---|---|---|")
    for name in ours:
        base, mine = _p50(directory[name]), _p50(ours[name])
        print(
            f"| {name} | {base:.2f} ({_p95(directory[name]):.2f}) | {mine:.2f} ({_p95(ours[name]):.2f}) "
            f"| {mine / base:.1f}x |"
        )


def _p50(values: list[float]) -> float:
    return statistics.median(values)


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


async def run(files: int, samples: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        directory = await measure(DirectoryFileStore(root), files, samples)
    with local_server() as (url, memory_id):
        async with (
            httpx2.AsyncClient(timeout=60) as http,
            open_file_store(base_url=url, api_key=locomo.KEY, memory_id=memory_id, http=http) as store,
        ):
            ours = await measure(store, files, samples)
    report(ours, directory, files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=50)
    arguments = parser.parse_args()
    started = time.perf_counter()
    asyncio.run(run(arguments.files, min(arguments.samples, arguments.files)))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
