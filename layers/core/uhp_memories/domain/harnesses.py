"""Attaching memories to a harness (§9): attaching is granting, and access only narrows.

Who may do what with a harness's list (the server decides, never the client):

- Reading: the harness itself reads every entry on a memory it can see. Anyone else reads the entries
  on memories where it holds delete, the privilege that changes grants: listing grants already needs
  it, and attaching is granting. Reading nothing is memories_not_attached, as when nothing is attached.
- Changing: a PUT replaces the caller's view of the list, which is the entries on memories it can see.
  An entry added, removed or changed needs delete on its memory; an unchanged one needs only
  visibility. An entry on a memory the caller cannot see is kept as it is and never named to it.

Grants the harness lacks for an entry the caller adds or changes are written with the list, in one
transaction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from uhp_memories.domain.access import AccessView
from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import (
    DomainError,
    MemoryConflict,
    MemoryForbidden,
    MemoryInvalid,
    MemoryNotFound,
    TreeChanged,
)
from uhp_memories.domain.models import Caller, Grant

HARNESS_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
ACCESS_PRIVILEGES = {"read": ("read",), "write": ("read", "write")}
MAX_ATTACHED = 50
ATTACH_ATTEMPTS = 3  # reads and merges of a list that others change at the same time, before a 409
# Changing an entry is granting (or ungranting a starting point), so it takes what changing grants takes.
CHANGE_PRIVILEGE = "delete"


class MemoriesNotAttached(DomainError):
    code = "memories_not_attached"

    def __init__(self, harness_id: str) -> None:
        super().__init__(f"harness {harness_id} has no memories attached")


class HiddenDefault(MemoryForbidden):
    """The harness's default sits on a memory the caller cannot see, and the caller names another.

    The message names no memory: it tells only that there is a default the caller may not change."""

    def __init__(self) -> None:
        DomainError.__init__(self, "the harness's default is a memory you may not change")


@dataclass(frozen=True)
class Attachment:
    memory_id: str
    access: str  # read | write
    default: bool = False


class AttachmentRepository(Protocol):
    def get(self, tenant: str, harness_id: str) -> list[Attachment] | None:
        ...

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        as_read: Sequence[Attachment] | None,
    ) -> None:
        """Replace the list and write the grants it needs, in one transaction, only if the list is still
        `as_read` (None: no list yet): compare-and-swap, so two concurrent changes never lose one.

        Raises AttachmentsChanged when the list is no longer as read, TreeChanged when a memory to be
        granted on is missing or being deleted; either way nothing is written."""
        ...


class AttachmentsChanged(Exception):
    """Raised by an AttachmentRepository when the list changed since it was read; nothing was written."""


class ProviderRegistry(Protocol):
    """Which providers a memory may live in, and which of them run outside this server (§9.1 last rule)."""

    def is_outside(self, provider: str) -> bool:
        ...


class NativeProviders:
    """This server's registry: only the native provider, which runs inside it."""

    def is_outside(self, provider: str) -> bool:
        return False


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


class HarnessService:
    def __init__(
        self, ports: Ports, attachments: AttachmentRepository, providers: ProviderRegistry | None = None
    ) -> None:
        self._ports = ports
        self._attachments = attachments
        self._providers = providers or NativeProviders()

    def attach_with_notices(self, caller: Caller, harness_id: str, entries: Sequence[Attachment]) -> Attached:
        """`attach`, with a notice for each named memory whose provider is outside the server: every
        turn of the harness will be sent to it (§9.1), and the person attaching is told so."""
        attached = self.attach(caller, harness_id, entries)
        access = self._ports.access(caller)
        notices = []
        for entry in entries:
            memory = access.memory(entry.memory_id)
            if memory is not None and self._providers.is_outside(memory.provider):
                notices.append(
                    Notice(
                        OUTSIDE_PROVIDER,
                        f"memory {memory.id} lives in provider {memory.provider!r}, outside this server: every "
                        f"turn of harness {harness_id} will be sent to it",
                        memory.id,
                        memory.provider,
                    )
                )
        return Attached(attached, notices)

    def attach(self, caller: Caller, harness_id: str, entries: Sequence[Attachment]) -> list[Attachment]:
        """Replace the caller's view of the list with `entries`; answer what the caller may read of the
        result (possibly nothing: an empty answer, not memories_not_attached)."""
        _harness_caller(caller, harness_id)  # a valid harness id, before anything is read
        _check_shape(entries)
        mine = self._ports.access(caller)
        for entry in entries:
            mine.visible(entry.memory_id)  # 404 for a memory it cannot see, before anything is compared
        # The merge with what the caller cannot see is made on the list as read and written only if it is
        # still that list; a change that landed meanwhile is merged again, so neither is lost.
        for _ in range(ATTACH_ATTEMPTS):
            stored = self._attachments.get(caller.tenant, harness_id)
            try:
                return self._attach_over(caller, harness_id, mine, entries, stored)
            except AttachmentsChanged:
                continue
        raise MemoryConflict(f"the memories of harness {harness_id} kept changing meanwhile; send the list again")

    def _attach_over(
        self,
        caller: Caller,
        harness_id: str,
        mine: AccessView,
        entries: Sequence[Attachment],
        stored: list[Attachment] | None,
    ) -> list[Attachment]:
        harness = _harness_caller(caller, harness_id)
        seen, hidden = self._split(mine, stored or [])
        named = {e.memory_id for e in entries}
        changed = [e for e in entries if seen.get(e.memory_id) != e]
        removed = [s for s in seen.values() if s.memory_id not in named]
        for entry in (*changed, *removed):
            if CHANGE_PRIVILEGE not in mine.privileges(entry.memory_id):
                raise MemoryForbidden(CHANGE_PRIVILEGE)
        if any(e.default for e in entries) and any(h.default for h in hidden):
            raise HiddenDefault()
        result = [*entries, *hidden]
        if len(result) > MAX_ATTACHED:
            # Counts the entries kept out of the caller's view too: this refusal tells that some exist.
            raise MemoryInvalid(f"a harness has at most {MAX_ATTACHED} memories attached")
        grants = self._grants_for(caller, harness, changed)
        try:
            self._attachments.replace(caller.tenant, harness_id, result, grants, as_read=stored)
        except TreeChanged as changed_tree:
            raise MemoryNotFound(str(changed_tree)) from None
        return _readable(caller, harness, mine, result)

    def attached(self, caller: Caller, harness_id: str) -> list[Attachment]:
        """The harness's entries the caller may read; none is indistinguishable from none attached."""
        harness = _harness_caller(caller, harness_id)
        found = self._attachments.get(caller.tenant, harness_id) or []
        readable = _readable(caller, harness, self._ports.access(caller), found)
        if not readable:
            raise MemoriesNotAttached(harness_id)
        return readable

    @staticmethod
    def _split(mine: AccessView, stored: Sequence[Attachment]) -> tuple[dict[str, Attachment], list[Attachment]]:
        """The stored entries the caller can see (by memory), and those it cannot, which stay as they are.

        An entry on a memory that no longer exists is neither: it is dropped, or a deleted default
        would block every later default and dead entries would fill the list forever."""
        seen: dict[str, Attachment] = {}
        hidden: list[Attachment] = []
        for entry in stored:
            if mine.memory(entry.memory_id) is None:
                continue
            if mine.can_see(entry.memory_id):
                seen[entry.memory_id] = entry
            else:
                hidden.append(entry)
        return seen, hidden

    def _grants_for(self, caller: Caller, harness: Caller, changed: Sequence[Attachment]) -> list[Grant]:
        """Grants for what the harness lacks on the entries the caller adds or changes (it holds delete on
        each). An unchanged entry gets none: re-sending it must not undo a grant revoked since."""
        theirs = self._ports.access(harness)
        grants: list[Grant] = []
        for entry in changed:
            needed = ACCESS_PRIVILEGES[entry.access]
            if all(p in theirs.privileges(entry.memory_id) for p in needed):
                continue
            grants.append(
                Grant(
                    tenant=caller.tenant,
                    id=self._ports.ids.new("hgrt_"),
                    memory_id=entry.memory_id,
                    principal=harness.principal,
                    privileges=needed,
                    created_at=self._ports.clock.now_ms(),
                    created_by=caller.principal,
                )
            )
        return grants


def _check_shape(entries: Sequence[Attachment]) -> None:
    if len(entries) > MAX_ATTACHED:
        raise MemoryInvalid(f"a harness has at most {MAX_ATTACHED} memories attached")
    if sum(1 for e in entries if e.default) > 1:
        raise MemoryInvalid("at most one entry may be the default")
    if len({e.memory_id for e in entries}) != len(entries):
        raise MemoryInvalid("a memory is attached at most once")
    for entry in entries:
        if entry.access not in ACCESS_PRIVILEGES:
            raise MemoryInvalid("access is read or write")
        if entry.default and entry.access != "write":
            raise MemoryInvalid("the default memory is where the harness writes: its access must be write")


def _readable(caller: Caller, harness: Caller, access: AccessView, entries: Sequence[Attachment]) -> list[Attachment]:
    """The harness reads the entries on memories it can see; anyone else those where it holds delete."""
    if caller.principal == harness.principal:
        return [e for e in entries if access.can_see(e.memory_id)]
    return [e for e in entries if CHANGE_PRIVILEGE in access.privileges(e.memory_id)]


def _harness_caller(caller: Caller, harness_id: str) -> Caller:
    if not HARNESS_ID.match(harness_id):
        raise MemoryInvalid("a harness id is 1 to 128 letters, digits, '_', '.' or '-'")
    return Caller(tenant=caller.tenant, principal=f"harness:{harness_id}")


harness_caller = _harness_caller  # the harness a request names, as a caller of the caller's tenant
