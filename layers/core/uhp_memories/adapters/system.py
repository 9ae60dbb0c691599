"""The real clock and id generator."""

from __future__ import annotations

import secrets
import threading
import time

_RANDOM_BITS = 80
_RANDOM_LIMIT = 1 << _RANDOM_BITS


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class RandomIds:
    """prefix + 32 hex (DESIGN: ids): 12 hex of Unix milliseconds, then 20 hex drawn at random and
    counted up within the same millisecond, as ULIDs do. Ids made one after another in a process sort
    in the order they were made, so the episodes of one observe call, which share their written_at,
    keep the order the caller listed them in: in DynamoDB's timeline, in every search index and
    after a reindex. 80 random bits a millisecond keep ids from colliding across processes; an id
    says when it was made, which its record says anyway (time.written_at)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def new(self, prefix: str) -> str:
        with self._lock:
            now = max(time.time_ns() // 1_000_000, self._last_ms)
            if now == self._last_ms and self._last_random + 1 < _RANDOM_LIMIT:
                self._last_random += 1 + secrets.randbelow(1 << 16)
                self._last_random = min(self._last_random, _RANDOM_LIMIT - 1)
            else:
                if now == self._last_ms:
                    now += 1  # 2**80 ids in one millisecond: borrow the next one
                self._last_random = secrets.randbits(_RANDOM_BITS - 1)  # room to count up
            self._last_ms = now
            return f"{prefix}{now:012x}{self._last_random:020x}"
