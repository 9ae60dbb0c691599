"""Attaching memories to a harness (§9): attaching is granting, and access only narrows.

Who owns a harness's list (docs/decisions.md, "Harness ownership"): the harness itself (a key acting as
`harness:<id>`) and the principals on its `owners` list (a person, a service or a group). A list has an
owner before its first write: the tenant's administrators (`is_tenant_admin`: a key in group:admins,
never a harness's). Only one of them writes a list nobody has written yet (or one written before lists
had owners), and becomes its owner (`PUT .../memories`) or names its owners (`PUT .../owners`); any
other principal, the harness included, is refused. An owner adds or removes owners
(`PUT /v1/harnesses/{id}/owners`); the harness never does (a person's act, `require_person`), so no
harness locks its owners out. Everyone else in the tenant is refused (403 memory_forbidden) on every
operation that names the harness: its list, its owners, its prime and its turns. So no principal can
claim a harness it was never given, make another's harness write where it reads, pin what another's
harness is primed with, or plant entries in a list it does not own.

What an owner does with the list:
- Reading: the entries on memories it can see, and how many others there are (`hidden`), never which.
- Changing: a PUT replaces the whole list, as §9 says ("an empty list detaches every memory"), the
  entries it cannot see included: nothing survives a replacement unseen. An entry added or changed
  needs the memory visible to the caller and, where the harness lacks the privileges the entry's access
  needs, delete on it (the grant is written with the list, in one transaction). Removing an entry needs
  no privilege on its memory: detaching narrows, and leaves the grant where grants are revoked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from uhp_memories.domain.access.model import AccessView, Grant
from uhp_memories.domain.agents.model import (
    OUTSIDE_PROVIDER,
    Attached,
    Attachment,
    AttachmentsChanged,
    HarnessList,
    Listed,
    Notice,
    is_tenant_admin,
    require_person,
)
from uhp_memories.domain.agents.ports import AttachmentRepository, ProviderRegistry
from uhp_memories.domain.errors import (
    MemoriesNotAttached,
    MemoryConflict,
    MemoryForbidden,
    MemoryInvalid,
    MemoryNotFound,
    TreeChanged,
)
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.types.model import TENANT_ADMIN_GROUP

__all__ = ["Attachment", "HarnessList", "HarnessService", "MemoriesNotAttached"]

MEMORY_ID = re.compile(r"^hmem_[0-9A-Za-z]{1,64}$")
HARNESS_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
OWNER = re.compile(r"^[a-z][a-z0-9_-]{0,31}:[^\s]{1,200}$")
ACCESS_PRIVILEGES = {"read": ("read",), "write": ("read", "write")}
MAX_ATTACHED = 50
MAX_OWNERS = 20
ATTACH_ATTEMPTS = 3  # reads and merges of a list that others change at the same time, before a 409
# Attaching a memory the harness does not hold yet is granting, so it takes what changing grants takes.
GRANT_PRIVILEGE = "delete"










class NativeProviders:
    """This server's registry: only the native provider, which runs inside it."""

    def is_outside(self, provider: str) -> bool:
        return False










class HarnessService:
    """Harnesses (§9): the memories attached to each, its owners, and the session's memory."""
    def __init__(
        self, ports: Ports, attachments: AttachmentRepository, providers: ProviderRegistry | None = None
    ) -> None:
        self._ports = ports
        self._attachments = attachments
        self._providers = providers or NativeProviders()

    # -- the session's memory (§9 metadata.memory) ------------------------------------------------------

    def session_caller(self, caller: Caller, memory_id: str | None, harness_id: str | None = None) -> Caller:
        """The caller with the one more memory its request names for the session, checked as an attached
        memory is, with the harness's privileges: memory_not_found when the caller holds nothing on it (or
        the id is malformed, which is never echoed), and then, for an owner naming it for the harness
        `harness_id`, when that harness holds nothing on it (told only to an owner of the harness). Over
        MCP the `x-uhp-memory` header names it, for the caller's own key; over REST prime's `memory` and a
        turn's `memory`, for the harness the path names."""
        if memory_id is None:
            return caller
        if not MEMORY_ID.match(memory_id):
            raise MemoryNotFound()
        with_session = replace(caller, session_memory=memory_id)
        self._ports.access(with_session).visible(memory_id)
        if harness_id is not None and caller.harness_id != harness_id:  # an owner, for the harness
            self.owned(caller, harness_id)
            self._ports.access(self._session_harness(with_session, harness_id)).visible(memory_id)
        return with_session

    def _session_harness(self, caller: Caller, harness_id: str | None) -> Caller:
        """Whose privileges a session's memory is checked with: the harness the request names (its key,
        with the session's memory, so its list narrows them: HarnessReach), never an owner's; the caller
        itself when it is that harness or names none (an MCP key)."""
        if harness_id is None or caller.harness_id == harness_id:
            return caller
        return replace(harness_caller(caller, harness_id), session_memory=caller.session_memory)

    def session_writes(self, caller: Caller, harness_id: str | None) -> bool:
        """Whether the session writes its memory: the harness's grants there, narrowed by its list, where
        the session's memory takes the access of the nearest attachment on its chain (HarnessReach), so
        it is read-only under a memory attached read and widens nothing."""
        session = caller.session_memory
        if session is None:
            return False
        return "write" in self._ports.access(self._session_harness(caller, harness_id)).privileges(session)

    # -- ownership -----------------------------------------------------------------------------------

    def owned(self, caller: Caller, harness_id: str) -> HarnessList:
        """The harness's list, to its harness or an owner: memories_not_attached when it has none,
        memory_forbidden to anyone else."""
        harness_caller(caller, harness_id)
        stored = self._attachments.get_list(caller.tenant, harness_id)
        if stored is None:
            raise MemoriesNotAttached(harness_id, _nothing_attached(harness_id))
        _require_owner(caller, harness_id, stored)
        return stored

    def owners(self, caller: Caller, harness_id: str) -> tuple[str, ...]:
        """Who owns the harness beside itself (to the harness or an owner)."""
        return self.owned(caller, harness_id).owners or ()

    def set_owners(self, caller: Caller, harness_id: str, owners: Sequence[str]) -> tuple[str, ...]:
        """Replace the owners (the harness always owns itself), an owner's act and never a harness's; on a
        list nobody has written yet, an administrator's, and it gets an empty list of entries."""
        require_person(caller, "setting a harness's owners")
        harness = harness_caller(caller, harness_id)
        wanted = _checked_owners(harness, owners)
        for _ in range(ATTACH_ATTEMPTS):
            stored = self._attachments.get_list(caller.tenant, harness_id)
            _require_writer(caller, harness_id, stored)
            entries = stored.entries if stored is not None else []
            try:
                self._attachments.replace(caller.tenant, harness_id, entries, [], owners=wanted, as_read=stored)
            except AttachmentsChanged:
                continue
            return wanted
        raise MemoryConflict(f"harness {harness_id} kept changing meanwhile; send the owners again")

    # -- the list --------------------------------------------------------------------------------------

    def attach_with_notices(self, caller: Caller, harness_id: str, entries: Sequence[Attachment]) -> Attached:
        """`attach`, with a notice for each named memory whose provider is outside the server: every
        turn of the harness will be sent to it (§9.1), and the person attaching is told so."""
        attached = self.attach(caller, harness_id, entries)
        access = self._ports.access(caller)
        notices = [self._outside(access.memory(entry.memory_id), harness_id) for entry in entries]
        return Attached(attached, [n for n in notices if n is not None])

    def session_notices(self, caller: Caller, harness_id: str | None) -> list[Notice]:
        """What the one who names a session's memory (§9 `metadata.memory`: prime's and a turn's `memory`,
        MCP's `x-uhp-memory`) is told, as the person attaching a memory is (§9.1): that it lives in a
        provider outside this server, so what the session sends it leaves the server."""
        if caller.session_memory is None:
            return []
        notice = self._outside(self._ports.access(caller).memory(caller.session_memory), harness_id)
        return [] if notice is None else [notice]

    def _outside(self, memory: Memory | None, harness_id: str | None) -> Notice | None:
        """The notice for a memory whose provider is outside the server (None for one inside): every turn
        of the harness goes to it, and everything a session without a harness writes there."""
        if memory is None or not self._providers.is_outside(memory.provider):
            return None
        sent = f"every turn of harness {harness_id}" if harness_id else "everything this session writes there"
        return Notice(
            OUTSIDE_PROVIDER,
            f"memory {memory.id} lives in provider {memory.provider!r}, outside this server: {sent} will be sent to it",
            memory.id,
            memory.provider,
        )

    def attach(self, caller: Caller, harness_id: str, entries: Sequence[Attachment]) -> list[Attachment]:
        """Replace the whole list with `entries` (the harness or an owner; a list nobody has written yet,
        an administrator, who then owns it); answer the entries."""
        harness = harness_caller(caller, harness_id)  # a valid harness id, before anything is read
        _check_shape(entries)
        mine = self._ports.access(caller)
        for entry in entries:
            mine.visible(entry.memory_id)  # 404 for a memory it cannot see, before anything is compared
        for _ in range(ATTACH_ATTEMPTS):
            stored = self._attachments.get_list(caller.tenant, harness_id)
            _require_writer(caller, harness_id, stored)
            owners = (caller.principal,) if stored is None or stored.owners is None else stored.owners
            before = {e.memory_id: e for e in (stored.entries if stored is not None else [])}
            changed = [e for e in entries if before.get(e.memory_id) != e]
            grants = self._grants_for(caller, harness, mine, changed)
            try:
                self._attachments.replace(
                    caller.tenant, harness_id, list(entries), grants, owners=owners, as_read=stored
                )
            except AttachmentsChanged:
                continue
            except TreeChanged as changed_tree:
                raise MemoryNotFound(str(changed_tree)) from None
            return list(entries)
        raise MemoryConflict(f"the memories of harness {harness_id} kept changing meanwhile; send the list again")

    def listed(self, caller: Caller, harness_id: str) -> Listed:
        """The list as the harness or an owner reads it: the entries on memories it can see, the rest counted."""
        stored = self.owned(caller, harness_id)
        if not stored.entries:
            raise MemoriesNotAttached(harness_id, _nothing_attached(harness_id))
        access = self._ports.access(caller)
        seen = [e for e in stored.entries if access.can_see(e.memory_id)]
        return Listed(seen, len(stored.entries) - len(seen))

    def attached(self, caller: Caller, harness_id: str) -> list[Attachment]:
        """The entries the harness or an owner can see; none is indistinguishable from none attached."""
        readable = self.listed(caller, harness_id).memories
        if not readable:
            raise MemoriesNotAttached(harness_id, _nothing_attached(harness_id))
        return readable

    def starting(self, caller: Caller, harness_id: str | None) -> list[Attachment]:
        """Where a session starts (§9), for its prime, its tools and its turns alike: the harness's entries
        the caller can see (none for a key that is no harness, or a harness with none), then the
        session's memory (`caller.session_memory`, §9 `metadata.memory`), with `write` where the harness
        may write it (`session_writes`), and then the default in place of the list's. An attached memory
        keeps its access: a session's memory never widens one the list narrows."""
        attached: list[Attachment] = []
        if harness_id is not None:
            harness_caller(caller, harness_id)
            stored = self._attachments.get_list(caller.tenant, harness_id)
            if stored is not None:
                _require_owner(caller, harness_id, stored)
                access = self._ports.access(caller)
                attached = [e for e in stored.entries if access.can_see(e.memory_id)]
            elif caller.harness_id != harness_id:
                raise MemoriesNotAttached(harness_id, _nothing_attached(harness_id))
        session = caller.session_memory
        if session is None:
            return attached
        same = next((a for a in attached if a.memory_id == session), None)
        writes = self.session_writes(caller, harness_id)
        listed = attached if same is not None else [*attached, Attachment(session, "write" if writes else "read")]
        if (same or listed[-1]).access != "write":
            return listed
        return [Attachment(a.memory_id, a.access, a.memory_id == session) for a in listed]

    def _grants_for(
        self, caller: Caller, harness: Caller, mine: AccessView, changed: Sequence[Attachment]
    ) -> list[Grant]:
        """Grants for what the harness lacks on the entries added or changed; the caller must hold
        delete where it grants. An unchanged entry gets none: re-sending it must not undo a grant
        revoked since."""
        theirs = self._ports.granted(harness)
        grants: list[Grant] = []
        for entry in changed:
            needed = ACCESS_PRIVILEGES[entry.access]
            if all(p in theirs.privileges(entry.memory_id) for p in needed):
                continue
            if GRANT_PRIVILEGE not in mine.privileges(entry.memory_id):
                raise MemoryForbidden(
                    GRANT_PRIVILEGE,
                    f"harness {harness.principal} does not hold {entry.access} on memory {entry.memory_id}, and "
                    f"granting it takes the '{GRANT_PRIVILEGE}' privilege there",
                )
            require_person(caller, f"granting harness {harness.principal} {entry.access} on memory {entry.memory_id}")
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


def _nothing_attached(harness_id: str) -> str:
    return (
        f"harness {harness_id} has no memories attached: attach one with PUT /v1/harnesses/{harness_id}/memories "
        '{"memories": [{"memory_id": "hmem_...", "access": "write", "default": true}]}'
    )


def _is_owner(caller: Caller, harness_id: str, stored: HarnessList) -> bool:
    if caller.harness_id == harness_id:
        return True  # the harness itself
    if stored.owners is None:
        return is_tenant_admin(caller)  # a list from before owners: its administrators' until one writes it
    return any(p in stored.owners for p in caller.principal_ids)


def _require_writer(caller: Caller, harness_id: str, stored: HarnessList | None) -> None:
    """Who may write the list (its entries or its owners): an owner of one that has owners; an
    administrator of one nobody has written yet, or one written before lists had owners."""
    if stored is not None and stored.owners is not None:
        _require_owner(caller, harness_id, stored)
    elif not is_tenant_admin(caller):
        raise MemoryForbidden(
            "own",
            f"harness {harness_id}'s list has never been written, so it is its administrators': only a key in "
            f"{TENANT_ADMIN_GROUP} writes it first, and names its owners with PUT /v1/harnesses/{harness_id}/owners",
        )


def _require_owner(caller: Caller, harness_id: str, stored: HarnessList) -> None:
    if not _is_owner(caller, harness_id, stored):
        raise MemoryForbidden(
            "own",
            f"harness {harness_id} is owned by other principals: only the harness and its owners may read or "
            f"change its memories, prime and turns (an owner adds owners with PUT /v1/harnesses/{harness_id}/owners)",
        )


def _checked_owners(harness: Caller, owners: Sequence[str]) -> tuple[str, ...]:
    if len(owners) > MAX_OWNERS:
        raise MemoryInvalid(f"a harness has at most {MAX_OWNERS} owners")
    if len(set(owners)) != len(owners):
        raise MemoryInvalid("an owner is named at most once")
    for owner in owners:
        if not OWNER.match(owner):
            raise MemoryInvalid("an owner is a principal such as user:alice, service:etl or group:sales")
        if owner == harness.principal:
            raise MemoryInvalid("a harness always owns itself: name only other principals")
    return tuple(owners)


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


def harness_caller(caller: Caller, harness_id: str) -> Caller:
    """The harness a request names, as a caller of the caller's tenant."""
    if not HARNESS_ID.match(harness_id):
        raise MemoryInvalid("a harness id is 1 to 128 letters, digits, '_', '.' or '-'")
    return Caller(tenant=caller.tenant, principal=f"harness:{harness_id}")
