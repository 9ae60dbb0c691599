"""Values every feature shares: the caller, a page of a listing, the privileges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PRIVILEGES: tuple[str, ...] = ("read", "write", "create", "delete")


NATIVE_PROVIDER = "native"


@dataclass(frozen=True)
class Caller:
    """The authenticated caller: one API key is one tenant and one principal, with optional groups."""

    tenant: str
    principal: str
    groups: tuple[str, ...] = ()
    # The one more memory a harness's session names (§9 `metadata.memory`; `x-uhp-memory` over MCP),
    # already checked to be one the caller (and the harness it is named for) can see. It widens nothing:
    # it takes the access of the nearest attachment on its chain, and a harness writes there only with a
    # grant to write it (domain/access/model.py, HarnessReach).
    session_memory: str | None = None

    @property
    def harness_id(self) -> str | None:
        """The harness this key acts as (`harness:<id>`), None for any other principal."""
        kind, _, ident = self.principal.partition(":")
        return ident if kind == "harness" and ident else None

    @property
    def principal_ids(self) -> tuple[str, ...]:
        return (self.principal, *self.groups)

    @property
    def written_by(self) -> dict[str, str]:
        kind, _, ident = self.principal.partition(":")
        return {"kind": kind, "id": ident} if ident else {"kind": "key", "id": kind}


@dataclass(frozen=True)
class Page:
    """One page of a listing; `next_cursor` is opaque to everything above the adapter that made it."""

    items: list[Any]
    next_cursor: str | None
