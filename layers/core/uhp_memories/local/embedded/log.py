"""The episode log of the embedded engine: one memory's documents of the context types, in write
order (written_at, then record id, which grows in the order ids were made: the order of an observe
call's episodes). The order is the records' own, so a reindex rebuilds the same log.

Kept in memory beside the vector block: loaded on first use, appended to as episodes are indexed,
and dropped (to be read again in order) after anything else: an erase, a write older than the last.
A document closed since keeps its place, with its active flag down."""

from __future__ import annotations

from collections.abc import Callable
from sys import intern
from typing import Any

import numpy as np

from uhp_memories.local.embedded.sql import PROBE_MAX

Admitted = Callable[[np.ndarray], np.ndarray]  # positions of the log -> whether the request admits each


class EpisodeLog:
    """One memory's documents of `types` in write order, with each one's document id, record id,
    chain id, type, write time and active flag, and the position of each record id."""

    def __init__(self, types: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """From the store's log rows: (id, record id, chain id, status, written_at, type), in order."""
        self.types = types
        self.n = len(rows)
        capacity = max(64, 2 * self.n)
        self.doc_ids = np.zeros(capacity, dtype=np.int64)
        self.active = np.zeros(capacity, dtype=bool)
        self.doc_ids[: self.n] = [r[0] for r in rows]
        self.active[: self.n] = [r[3] == "active" for r in rows]
        self.record_ids: list[str] = [r[1] for r in rows]
        self.chain_ids: list[str] = [r[2] for r in rows]
        # Interned: a memory has a few types and far fewer write times than episodes (an observe
        # call writes them all at once), and a recall reads a thousand entries that share them.
        self.written: list[str] = [intern(r[4]) for r in rows]
        self.kinds: list[str] = [intern(r[5]) for r in rows]
        self.position: dict[str, int] = {rid: at for at, rid in enumerate(self.record_ids)}

    def put(self, record_id: str, doc_id: int, chain_id: str, type_: str, written: str, active: bool) -> bool:
        """Keep the log in step with one document written; False when it can no longer be (the log is
        to be dropped and read again)."""
        at = self.position.get(record_id)
        if at is not None:
            if (self.written[at], self.kinds[at]) != (written, type_):
                return False
            self.chain_ids[at] = chain_id
            self.active[at] = active
            return True
        if type_ not in self.types:
            return True
        if self.n and (written, record_id) < (self.written[-1], self.record_ids[-1]):
            return False
        if self.n == len(self.doc_ids):
            self.doc_ids = np.concatenate([self.doc_ids, np.zeros(self.n, dtype=np.int64)])
            self.active = np.concatenate([self.active, np.zeros(self.n, dtype=bool)])
        self.doc_ids[self.n] = doc_id
        self.active[self.n] = active
        self.record_ids.append(record_id)
        self.chain_ids.append(chain_id)
        self.written.append(intern(written))
        self.kinds.append(intern(type_))
        self.position[record_id] = self.n
        self.n += 1
        return True

    def around(self, positions: np.ndarray, reach: int, admitted: Admitted | None) -> tuple[np.ndarray, list[int]]:
        """The positions of the admitted documents within `reach` admitted places of these (admitted)
        positions, with them, in order, and where each run of consecutive admitted entries starts
        (ports.SearchIndex.log_around).
        `admitted` None: the request admits the current active versions (their flags tell).
        Otherwise the documents around the positions are checked, as far out as it takes to find
        `reach` admitted on either side; past a quarter of the log, or a few hundred documents, all
        of it is. Vectorised: a few hundred positions cost what a few do."""
        n = self.n
        if positions.size == 0:
            return np.empty(0, dtype=np.int64), []
        known = self.active[:n].astype(np.int8) if admitted is None else np.full(n, -1, dtype=np.int8)
        width, pending = max(reach, 1), positions
        while True:
            if admitted is not None:
                unknown = self._unknown_within(known, pending, width)
                if unknown.size:
                    known[unknown] = admitted(unknown)
            admitted_at = np.flatnonzero(known == 1)
            if not (known < 0).any():
                break  # every admission known: exact for every position
            pending = pending[~_has_reach(admitted_at, pending, width, reach, n)]
            if not pending.size:
                break
            width *= 4
        return _runs(admitted_at, positions, reach)

    def _unknown_within(self, known: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
        """The positions within `width` of these whose admission is still unknown; all the unknown
        ones, once those are more than a quarter of the log or more than a probe checks one by one
        (sql.PROBE_MAX): the admitted are then listed once, for the whole log."""
        n = self.n
        if positions.size * (2 * width + 1) > n // 4:
            return np.flatnonzero(known < 0)
        spread = np.unique((positions[:, None] + np.arange(-width, width + 1)[None, :]).reshape(-1))
        spread = spread[(spread >= 0) & (spread < n)]
        unknown = spread[known[spread] < 0]
        return np.flatnonzero(known < 0) if unknown.size > PROBE_MAX else unknown


def _has_reach(admitted_at: np.ndarray, positions: np.ndarray, width: int, reach: int, n: int) -> np.ndarray:
    """Whether the documents within `width` of each position (all known) hold `reach` admitted ones on
    either side, or reach the end of the log there."""
    low, high = np.maximum(positions - width, 0), np.minimum(positions + width, n - 1)
    before = np.searchsorted(admitted_at, positions) - np.searchsorted(admitted_at, low)
    after = np.searchsorted(admitted_at, high, side="right") - np.searchsorted(admitted_at, positions, side="right")
    return ((before >= reach) | (low == 0)) & ((after >= reach) | (high == n - 1))


def _runs(admitted_at: np.ndarray, positions: np.ndarray, reach: int) -> tuple[np.ndarray, list[int]]:
    """The admitted positions within `reach` admitted places of these, and where each run starts
    (admitted_at: every admitted position known, sorted)."""
    rank = np.searchsorted(admitted_at, positions)
    inside = rank < admitted_at.size
    rank = rank[inside][admitted_at[rank[inside]] == positions[inside]]  # the positions admitted
    if rank.size == 0:
        return np.empty(0, dtype=np.int64), []
    cover = np.zeros(admitted_at.size + 1, dtype=np.int64)
    np.add.at(cover, np.maximum(rank - reach, 0), 1)
    np.add.at(cover, np.minimum(rank + reach + 1, admitted_at.size), -1)
    covered = np.flatnonzero(np.cumsum(cover[:-1]) > 0)
    starts = [0, *(np.flatnonzero(np.diff(covered) > 1) + 1).tolist()]
    return admitted_at[covered], starts
