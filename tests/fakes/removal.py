"""In-memory fake of the kept idempotent responses: the contract of DynamoCachedResponses."""

from __future__ import annotations

from collections.abc import Sequence


class InMemoryCachedResponses:
    def __init__(self) -> None:
        self.responses: dict[str, str] = {}
        self._tenants: dict[str, str] = {}

    def keep(self, tenant: str, key: str, data: str) -> None:
        """A response kept for a tenant by the idempotency layer (the test's stand-in for a request answered)."""
        self.responses[key] = data
        self._tenants[key] = tenant

    def purge_mentioning(self, tenant: str, needles: Sequence[str]) -> int:
        wanted = [n for n in dict.fromkeys(needles) if n]
        doomed = [key for key, data in self.responses.items()
                  if self._tenants[key] == tenant and any(n in data for n in wanted)]
        for key in doomed:
            del self.responses[key]
        return len(doomed)
