"""The real clock and id generator."""

from __future__ import annotations

import secrets
import threading
import time

_ORDER_BITS = 16
_ORDER_LIMIT = 1 << _ORDER_BITS
_RANDOM_BITS = 64


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


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
