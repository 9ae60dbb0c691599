"""The server's clock and its id generator: the two ports every feature uses."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch, from the server's clock."""
        ...


class IdGenerator(Protocol):
    def new(self, prefix: str) -> str:
        """A new id: `prefix` + 32 hex characters."""
        ...
