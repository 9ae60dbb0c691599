"""Progress of an operator's long command, on stderr: a tqdm bar on a terminal, otherwise a plain
line now and then (a log file or CI keeps no carriage returns). Then the command prints its summary."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol


class ReindexReport(Protocol):
    """What progress shows of a reindex's running report (uhp_memories.admin.reindex.ReindexReport)."""

    @property
    def pages(self) -> int: ...

    @property
    def scanned_items(self) -> int: ...

    @property
    def indexed_versions(self) -> int: ...

LINE_EVERY_PAGES = 10  # without a terminal: one line per this many pages scanned


@contextmanager
def reindex_progress(what: str, total_items: int | None = None) -> Iterator[Callable[[ReindexReport], None]]:
    """A callback for `reindex(progress=...)`: items scanned of `total_items` (the table's count, if
    known), versions indexed."""
    if not sys.stderr.isatty():

        def line(report: ReindexReport) -> None:
            if report.pages % LINE_EVERY_PAGES == 0:
                of = f" of ~{total_items}" if total_items else ""
                print(
                    f"{what}: {report.scanned_items}{of} items scanned, {report.indexed_versions} versions indexed",
                    file=sys.stderr, flush=True,
                )

        yield line
        return
    from tqdm import tqdm

    with tqdm(desc=what, total=total_items or None, unit=" items", file=sys.stderr, leave=False) as bar:

        def update(report: ReindexReport) -> None:
            bar.update(report.scanned_items - bar.n)
            bar.set_postfix(indexed=report.indexed_versions, refresh=False)

        yield update


@contextmanager
def step(what: str) -> Iterator[None]:
    """One step of an admin command, said before it runs (a spinner on a terminal) and when done."""
    if not sys.stderr.isatty():
        print(f"{what} ...", file=sys.stderr, flush=True)
        yield
        return
    from tqdm import tqdm

    with tqdm(desc=what, total=1, file=sys.stderr, bar_format="{desc} ... {elapsed}", leave=True) as bar:
        yield
        bar.update(1)
