"""The real clock and id generator."""

from __future__ import annotations

import secrets
import time


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class RandomIds:
    def new(self, prefix: str) -> str:
        return prefix + secrets.token_hex(16)
