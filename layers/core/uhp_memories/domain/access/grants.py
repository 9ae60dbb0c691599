"""Grants (§3.1): who holds what. Reading and changing them needs delete on the memory; changing them is
a person's act, never a harness key's (§13, domain/agents/model.py `require_person`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from uhp_memories.domain import cursors
from uhp_memories.domain.access.model import Grant, ordered
from uhp_memories.domain.agents.model import require_person
from uhp_memories.domain.errors import GrantNotFound, MemoryInvalid, MemoryNotFound, TreeChanged
from uhp_memories.domain.limits import LIST_DEFAULT, LIST_MAX
from uhp_memories.domain.model import PRIVILEGES, Caller, Page
from uhp_memories.domain.ports import Ports

# The principal kinds this server accepts (DESIGN.md): a person, a harness, a service, a key, a group.
PRINCIPAL_PATTERN = re.compile(r"^(user|harness|service|key|group):[A-Za-z0-9._@+\-:]{1,128}$")


def check_principal(principal: str) -> str:
    if not PRINCIPAL_PATTERN.match(principal):
        raise MemoryInvalid(
            "principal must be kind:id with kind one of user, harness, service, key, group "
            "(for example user:alice or group:sales)"
        )
    return principal


def check_privileges(privileges: Sequence[str]) -> tuple[str, ...]:
    unknown = [p for p in privileges if p not in PRIVILEGES]
    if unknown or not privileges:
        raise MemoryInvalid(f"privileges must be a non-empty list drawn from {list(PRIVILEGES)}")
    return tuple(ordered(privileges))


class GrantService:
    """Grants on a memory (§3.1): list, create and delete, by those who may delete it."""
    def __init__(self, ports: Ports) -> None:
        self._ports = ports

    def list(self, caller: Caller, memory_id: str) -> list[Grant]:
        """The grants that reach this memory: its own and those inherited from ancestors above it up
        to the restricted cutoff, each naming the node it sits on. Grants on an ancestor the caller
        cannot see are left out, since naming them would reveal that node."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "delete")
        tenant = caller.tenant
        found = list(self._ports.memories.grants_on(tenant, memory.id))
        node = memory
        while not node.restricted and node.parent_id is not None:
            parent = access.memory(node.parent_id)
            if parent is None:
                break
            if access.can_see(parent.id):
                found.extend(self._ports.memories.grants_on(tenant, parent.id))
            node = parent
        return found

    def page(self, caller: Caller, memory_id: str, limit: int | None = None, cursor: str | None = None) -> Page:
        """`list` a page at a time, in id order (ids sort by creation), as every listing pages."""
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        after = cursors.decode("grants", cursor, str, over=memory_id)
        found = sorted(self.list(caller, memory_id), key=lambda g: g.id)
        if after is not None:
            found = [g for g in found if g.id > after]
        page = found[:size]
        more = len(found) > size
        return Page(page, cursors.encode("grants", page[-1].id, over=memory_id) if more else None)

    def create(self, caller: Caller, memory_id: str, principal: str, privileges: Sequence[str]) -> Grant:
        """Grant a principal privileges on this memory (the caller needs delete on it, and is a person)."""
        access = self._ports.access(caller)
        access.require(memory_id, "delete")
        require_person(caller, "changing grants")
        grant = Grant(
            tenant=caller.tenant,
            id=self._ports.ids.new("hgrt_"),
            memory_id=memory_id,
            principal=check_principal(principal),
            privileges=check_privileges(privileges),
            created_at=self._ports.clock.now_ms(),
            created_by=caller.principal,
        )
        try:
            self._ports.memories.put_grant(grant)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        return grant

    def delete(self, caller: Caller, memory_id: str, grant_id: str) -> None:
        """Remove a grant of this memory (the caller needs delete on it, and is a person)."""
        access = self._ports.access(caller)
        access.require(memory_id, "delete")
        require_person(caller, "changing grants")
        if not self._ports.memories.delete_grant(caller.tenant, memory_id, grant_id):
            raise GrantNotFound(grant_id)
