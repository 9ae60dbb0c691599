"""The real clock and id generator."""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_ORDER_BITS = 16
_ORDER_LIMIT = 1 << _ORDER_BITS
_RANDOM_BITS = 64


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class MeasuredCheckTiming:
    """How long deciding whether a caller sees a memory it named usually takes in this process, and a
    hold that makes a not-found answer take that long (domain/access/model.py, CheckTiming): the reads are the same
    whether the memory exists or not, but what the process does with an item found and with none
    differs by a little, and the hold leaves that little nothing to show in."""

    WINDOW = 100  # the latest checks, so the pace follows the load the process is under
    # The share of checks that take no longer: near all, since the two kinds of not found differ by
    # less than checks vary, and a hold short of one kind's usual time would still tell it.
    USUAL = 0.98
    MAX_HOLD_SECONDS = 0.05  # an outlier in the window never holds an answer long
    LEAST = 8  # checks seen before any answer is held

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._took: deque[float] = deque(maxlen=self.WINDOW)

    def now(self) -> float:
        return time.perf_counter()

    def decided(self, since: float) -> None:
        with self._lock:
            self._took.append(time.perf_counter() - since)

    def hold(self, since: float) -> None:
        with self._lock:
            if len(self._took) < self.LEAST:
                return
            ordered = sorted(self._took)
        usual = ordered[int(self.USUAL * (len(ordered) - 1))]
        remaining = min(usual - (time.perf_counter() - since), self.MAX_HOLD_SECONDS)
        if remaining > 0:
            time.sleep(remaining)


class RandomIds:
    """prefix + 32 hex (DESIGN: ids): 12 hex of Unix milliseconds, 4 hex counting the ids this process
    made in that millisecond (from a random start), then 16 hex (64 bits) drawn afresh from `secrets`
    for every id. Ids made one after another in a process sort in the order they were made, so the
    episodes of one observe call, which share their written_at, keep the order the caller listed them
    in: in DynamoDB's timeline, in every search index and after a reindex (positions are written_at,
    then id). An id says when it was made, which its record says anyway (time.written_at), but never
    what the next one is: the random part used to be counted up by 1..65,536 within a millisecond, so
    one id named its neighbours."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._order = 0

    def new(self, prefix: str) -> str:
        with self._lock:
            now = max(time.time_ns() // 1_000_000, self._last_ms)
            if now == self._last_ms and self._order + 1 < _ORDER_LIMIT:
                self._order += 1
            else:
                if now == self._last_ms:
                    now += 1  # 65,536 ids in one millisecond: borrow the next one
                self._order = secrets.randbelow(_ORDER_LIMIT // 2)  # room to count up
            self._last_ms = now
            order = self._order
        return f"{prefix}{now:012x}{order:04x}{secrets.randbits(_RANDOM_BITS):016x}"


class ThreadOverlap:
    """Work beside a request on a small pool of threads (domain/overlap.py): a Lambda runs one request at a
    time, the local server one a thread, so a few threads are enough for what requests start beside them."""

    def __init__(self, threads: int = 4, name: str = "beside-request") -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    def start[T](self, work: Callable[..., T], *args: Any) -> Future[T]:
        """Start `work(*args)` on the pool."""
        return self._pool.submit(work, *args)
