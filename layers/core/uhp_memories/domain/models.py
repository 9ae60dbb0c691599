"""Domain entities. Plain dataclasses: the API schemas and the persistence items are kept apart."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

PRIVILEGES: tuple[str, ...] = ("read", "write", "create", "delete")
CORE_TYPES: dict[str, str] = {
    "episode": "Raw experience as it arrived: a turn, a transcript, an action and its result, a document. "
    "Append-only.",
    "fact": "One thing worth remembering, as it was said.",
    "note": "A document an agent or a person wrote and maintains.",
    "procedure": "A how-to with the situation it applies to.",
    "link": "A pointer to something kept elsewhere: an address and a description, no content of its own.",
}
NATIVE_PROVIDER = "native"


@dataclass(frozen=True)
class Caller:
    """The authenticated caller: one API key is one tenant and one principal, with optional groups."""

    tenant: str
    principal: str
    groups: tuple[str, ...] = ()
    # The one more memory a harness's session names (§9 `metadata.memory`; `x-uhp-memory` over MCP),
    # already checked to be one the caller can see. It widens nothing: a harness writes there only
    # with a grant to write it (domain/access.py, HarnessReach).
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
class Attachment:
    """One entry of a harness's list (§9): a memory it starts from, how it may use it, and whether it is
    where observe and an unaddressed remember go."""

    memory_id: str
    access: str  # read | write
    default: bool = False


@dataclass(frozen=True)
class Memory:
    tenant: str
    id: str
    name: str
    description: str
    parent_id: str | None
    restricted: bool
    provider: str
    created_by: str
    created_at: int  # epoch ms
    updated_at: int  # epoch ms
    record_count: int = 0
    deleting: bool = False
    # Who last set the name or description (None: its creator). Both reach agents (§2: the description is
    # content), so an agent is shown them fenced, with this writer (§13).
    described_by: str | None = None
    # The memory's ancestors, root first, down to its parent (() on a root), kept on the item so the
    # access check reads the whole chain in one batch whatever its depth (domain/access.py). None: an
    # item written before they were kept; the check then walks the parents one read each. Never
    # trusted over the parent links: the walk decides, these only say what to read ahead.
    ancestors: tuple[str, ...] | None = None

    @property
    def describer(self) -> str:
        return self.described_by or self.created_by

    def evolve(self, **changes: Any) -> Memory:
        return replace(self, **changes)


@dataclass(frozen=True)
class Grant:
    tenant: str
    id: str
    memory_id: str
    principal: str
    privileges: tuple[str, ...]
    created_at: int  # epoch ms
    created_by: str
    implicit: bool = False


@dataclass(frozen=True)
class RecordVersion:
    """One version of a record. Every version has its own id; `chain_id` ties a record's versions."""

    tenant: str
    memory_id: str
    id: str
    chain_id: str
    version: int
    type: str
    content: Any
    attributes: dict[str, Any]
    status: str  # active | superseded | forgotten
    supersedes: str | None
    superseded_by: str | None
    valid_from: str | None
    valid_to: str | None
    written_at: str  # RFC 3339, server clock
    invalidated_at: str | None
    written_by: dict[str, str]
    references: tuple[dict[str, str], ...] = field(default_factory=tuple)
    path: str | None = None  # a file of its memory (docs/file-memory.md)
    origin: dict[str, str] | None = None  # the run and tool call that wrote this version, beyond the key
    forgotten_by: dict[str, Any] | None = None  # on a forgotten version: {written_by, origin} of the forget
    projection: str | None = None  # an extension type's text projection (§8): what recall searches it by

    @property
    def is_current(self) -> bool:
        return self.superseded_by is None

    def evolve(self, **changes: Any) -> RecordVersion:
        return replace(self, **changes)

    def as_of(self, instant: str) -> RecordVersion:
        """This version as it stood at `instant`: a close that came later is not yet visible."""
        if self.invalidated_at is not None and self.invalidated_at > instant:
            return replace(self, status="active", invalidated_at=None, superseded_by=None, forgotten_by=None)
        return self

    def held_at(self, instant: str) -> bool:
        """Whether the memory held this version, open, at `instant`."""
        return self.written_at <= instant and (self.invalidated_at is None or self.invalidated_at > instant)


@dataclass(frozen=True)
class Checked:
    """A version's attributes as its type has them (validated, times in one form), and its text
    projection (None: a core type, or one the server does not know), from domain/types.py."""

    attributes: dict[str, Any]
    projection: str | None


@dataclass(frozen=True)
class Snapshot:
    tenant: str
    memory_id: str
    id: str
    name: str
    message: str
    time: str  # RFC 3339
    created_by: str


@dataclass(frozen=True)
class Page:
    """One page of a listing; `next_cursor` is opaque to everything above the adapter that made it."""

    items: list[Any]
    next_cursor: str | None
