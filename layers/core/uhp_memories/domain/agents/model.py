"""Harnesses' values: attachments and lists, prime's pins and placements, turns; and who acts through a
harness's key, which is never a person (§13)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uhp_memories.domain.errors import MemoryForbidden
from uhp_memories.domain.jobs import Job
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.records.model import RecordVersion, RecordView
from uhp_memories.domain.types.model import TENANT_ADMIN_GROUP

# -- who acts: a person, or an agent through its harness's key (docs/decisions.md, "A person's acts") --------

AGENT_KIND = "harness"  # the principal kind of a key acting as a harness: `harness:<id>`


def acts_as_agent(caller: Caller) -> bool:
    """Whether the caller is a key acting as a harness (an agent), whatever its groups."""
    return caller.principal.partition(":")[0] == AGENT_KIND


def is_tenant_admin(caller: Caller) -> bool:
    """A tenant administrator: a key of the tenant in `group:admins`, never a harness's key whatever its
    groups, so nothing an agent does widens what it may do (registering types, a new harness list)."""
    return TENANT_ADMIN_GROUP in caller.groups and not acts_as_agent(caller)


def require_person(caller: Caller, act: str) -> None:
    """§13, "Erase is a person's act": refuse (403 memory_forbidden) an act no key acting as a harness
    may do, whatever privileges it holds. The one place this rule lives; its acts are erase, changing
    grants (creating, deleting, and the grant that attaching writes), pinning prime and setting a
    harness list's owners. Called by each of those services after the memory check, so a memory the
    caller cannot see is still not found."""
    if acts_as_agent(caller):
        raise MemoryForbidden(
            act,
            f"{act} is a person's act (§13): a key acting as {caller.principal} never does it, whatever it "
            "holds; ask with the key of a person (or a service) who may",
        )


@dataclass(frozen=True)
class Attachment:
    """One entry of a harness's list (§9): a memory it starts from, how it may use it, and whether it is
    where observe and an unaddressed remember go."""

    memory_id: str
    access: str  # read | write
    default: bool = False


@dataclass(frozen=True)
class HarnessList:
    """A harness's list as stored: its entries and who owns it beside the harness itself. `owners` is
    None on a list written before lists had owners: the next owner to write it claims it."""

    entries: list[Attachment]
    owners: tuple[str, ...] | None


class AttachmentsChanged(Exception):
    """Raised by an AttachmentRepository when the list changed since it was read; nothing was written."""


@dataclass(frozen=True)
class Notice:
    code: str
    message: str
    memory_id: str
    provider: str


OUTSIDE_PROVIDER = "outside_provider"


@dataclass(frozen=True)
class Attached:
    """A PUT's answer: the caller's view of the list, and what the person attaching must be told."""

    memories: list[Attachment]
    notices: list[Notice]


@dataclass(frozen=True)
class Listed:
    """A GET's answer: the entries on memories the caller can see, and how many others the list holds."""

    memories: list[Attachment]
    hidden: int


MAX_PINS = 20


BUDGET_DEFAULT = 2_000


BUDGET_MAX = 20_000


@dataclass(frozen=True)
class Pin:
    chain_id: str
    record_id: str  # the version the owner pinned
    pinned_by: str
    pinned_at: int


@dataclass(frozen=True)
class PlacedMemory:
    memory_id: str
    tokens: int  # the header's and the placed records' together
    record_ids: tuple[str, ...]  # the versions placed, in order


@dataclass(frozen=True)
class Placement:
    """What one prime placed, as the server recorded it."""

    prime_id: str
    harness_id: str
    primed_by: str  # the principal that asked for prime
    primed_at: int  # ms
    budget: int
    tokens: int
    expires_at: int  # epoch seconds: the TTL that removes it
    memories: tuple[PlacedMemory, ...]


@dataclass(frozen=True)
class PinnedRecord:
    pin: Pin
    shown: RecordVersion | None  # what prime shows of the chain now (None: forgotten or gone)


@dataclass(frozen=True)
class PlacedRecord:
    record: RecordVersion
    pinned_record_id: str
    content: str  # fenced
    tokens: int


@dataclass
class PrimedMemory:
    attachment: Attachment
    memory: Memory
    children: list[MemorySummary]
    # What principals wrote about the memory and its children, as one fenced block (header_text): one
    # fence a memory, not one a field, since each fence costs the agent tokens (about 40 here).
    header: str = ""
    tokens: int = 0
    placed: bool = False
    records: list[PlacedRecord] = field(default_factory=list)
    omitted: int = 0


@dataclass(frozen=True)
class PrimeAnswer:
    prime_id: str  # the server's record of this placement (Placement)
    harness_id: str
    budget: int
    tokens: int
    fence: str
    memories: list[PrimedMemory]  # those placed
    omitted_memories: int
    omitted_records: int


@dataclass(frozen=True)
class ToolRun:
    name: str
    input: Any
    output: Any


@dataclass(frozen=True)
class Turn:
    asked: str
    answered: str
    tools: Sequence[ToolRun] = ()
    prime_id: str | None = None


@dataclass(frozen=True)
class TurnAnswer:
    turn_id: str
    memory_id: str
    records: list[RecordView]
    job: Job | None = None  # the derivation from the turn's episodes, where the provider derives
