"""Records' values: a version and its chain, what a write carries, how a reader sees one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from uhp_memories.domain.files.model import PathCondition
from uhp_memories.domain.memories.model import MemorySummary
from uhp_memories.domain.model import Page

CORE_TYPES: dict[str, str] = {
    "episode": "Raw experience as it arrived: a turn, a transcript, an action and its result, a document. "
    "Append-only.",
    "fact": "One thing worth remembering, as it was said.",
    "note": "A document an agent or a person wrote and maintains.",
    "procedure": "A how-to with the situation it applies to.",
    "link": "A pointer to something kept elsewhere: an address and a description, no content of its own.",
}


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
class Snapshot:
    tenant: str
    memory_id: str
    id: str
    name: str
    message: str
    time: str  # RFC 3339
    created_by: str


TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_][a-z0-9_\-]*)*$")


ID_PATTERN = re.compile(r"^[a-z]+_[0-9a-f]{32}$")


INCLUDE_VALUES = ("active", "all")


# One transaction holds at most 100 items: the episodes and the memory's counter.
OBSERVE_MAX = 50


@dataclass(frozen=True)
class RecordView:
    """A record version as one reader sees it: references resolved with the reader's privileges.
    `withheld` names the fields the caller may not be shown (RECORD_FIELDS_BEYOND_STAMPS): a write
    answers a caller without read only what it sent and the server's stamps."""

    record: RecordVersion
    references: list[dict[str, Any]]
    withheld: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RecordRead(RecordView):
    """A version as get answers it (§6.1): with where a reader can go from its memory, the parent and
    the readable children, as list and recall name them (the one rule: MemoryNeighbours)."""

    parent: MemorySummary | None = None
    children: list[MemorySummary] = field(default_factory=list)


# What a version holds beyond the server's stamps (ids, version, status, write times): a caller with
# write and without read sees of these only what it sent itself, so it can change a record without
# reading it through the answer.
RECORD_FIELDS_BEYOND_STAMPS = frozenset(
    {"type", "content", "attributes", "valid_from", "valid_to", "references", "path", "origin", "written_by"}
)


# What a refusal of a revision says to a caller without read, when the check looked at the record as
# revised: the fields it did not send are not told (a record's type, its valid time, its content).
UNREADABLE_REFUSAL = (
    "this revision is refused: the record as revised would not be valid, and what it holds beyond the "
    "fields you sent is shown only to a caller with read on the memory"
)


@dataclass(frozen=True)
class RecordInput:
    type: str
    content: Any
    attributes: dict[str, Any]
    valid_from: str | None = None
    valid_to: str | None = None
    references: tuple[dict[str, str], ...] = ()
    path: str | None = None  # a file of the memory (docs/file-memory.md)


@dataclass(frozen=True)
class WriteTerms:
    """What a write carries beyond its record: the read set it must still hold at commit, and who
    it is attributed to beyond the key (docs/file-memory.md)."""

    conditions: tuple[PathCondition, ...] = ()
    origin: dict[str, str] | None = None


NO_TERMS = WriteTerms()


@dataclass(frozen=True)
class RecordPage(Page):
    """A page of a memory's records, with where a reader can go from the memory (§6.1), as recall
    names them."""

    parent: MemorySummary | None = None
    children: list[MemorySummary] = field(default_factory=list)
