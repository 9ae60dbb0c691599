"""In-memory fake of the kept idempotent responses: the contract of DynamoCachedResponses."""

from __future__ import annotations

from collections.abc import Sequence


class InMemoryCachedResponses:
    def __init__(self) -> None:
        self.responses: dict[str, str] = {}

    def keep(self, key: str, data: str) -> None:
        """A response kept by the idempotency layer (the test's stand-in for a request answered)."""
        self.responses[key] = data

    def purge_mentioning(self, needles: Sequence[str]) -> int:
        wanted = [n for n in dict.fromkeys(needles) if n]
        doomed = [key for key, data in self.responses.items() if any(n in data for n in wanted)]
        for key in doomed:
            del self.responses[key]
        return len(doomed)
