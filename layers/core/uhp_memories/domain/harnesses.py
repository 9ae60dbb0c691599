"""Attaching memories to a harness (§9): attaching is granting, and access only narrows.

An entry the harness already holds is attached as it is; one it does not hold is granted by the
same call when the caller may change that memory's grants (delete), and refused otherwise. The list
and any grants it needs are written in one transaction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import (
    DomainError,
    MemoryForbidden,
    MemoryInvalid,
    MemoryNotFound,
    TreeChanged,
)
from uhp_memories.domain.models import Caller, Grant

HARNESS_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
ACCESS_PRIVILEGES = {"read": ("read",), "write": ("read", "write")}
MAX_ATTACHED = 50


class MemoriesNotAttached(DomainError):
    code = "memories_not_attached"
    status = 404

    def __init__(self, harness_id: str) -> None:
        super().__init__(f"harness {harness_id} has no memories attached")


@dataclass(frozen=True)
class Attachment:
    memory_id: str
    access: str  # read | write
    default: bool = False


class AttachmentRepository(Protocol):
    def get(self, tenant: str, harness_id: str) -> list[Attachment] | None:
        ...

    def replace(self, tenant: str, harness_id: str, attachments: Sequence[Attachment], grants: Sequence[Grant]) -> None:
        """Replace the list and write the grants it needs, in one transaction.

        Raises TreeChanged when a memory to be granted on is missing or being deleted."""
        ...


class HarnessService:
    def __init__(self, ports: Ports, attachments: AttachmentRepository) -> None:
        self._ports = ports
        self._attachments = attachments

    def attach(self, caller: Caller, harness_id: str, entries: Sequence[Attachment]) -> list[Attachment]:
        harness = _harness_caller(caller, harness_id)
        if len(entries) > MAX_ATTACHED:
            raise MemoryInvalid(f"a harness has at most {MAX_ATTACHED} memories attached")
        if sum(1 for e in entries if e.default) > 1:
            raise MemoryInvalid("at most one entry may be the default")
        if len({e.memory_id for e in entries}) != len(entries):
            raise MemoryInvalid("a memory is attached at most once")
        mine = self._ports.access(caller)
        theirs = self._ports.access(harness)
        grants: list[Grant] = []
        for entry in entries:
            if entry.access not in ACCESS_PRIVILEGES:
                raise MemoryInvalid("access is read or write")
            if entry.default and entry.access != "write":
                raise MemoryInvalid("the default memory is where the harness writes: its access must be write")
            mine.visible(entry.memory_id)
            needed = ACCESS_PRIVILEGES[entry.access]
            missing = [p for p in needed if p not in theirs.privileges(entry.memory_id)]
            if not missing:
                continue
            if "delete" not in mine.privileges(entry.memory_id):
                raise MemoryForbidden("delete")
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
        try:
            self._attachments.replace(caller.tenant, harness_id, list(entries), grants)
        except TreeChanged as changed:
            raise MemoryNotFound(str(changed)) from None
        return list(entries)

    def attached(self, caller: Caller, harness_id: str) -> list[Attachment]:
        """The harness's memories, as far as the caller may see them."""
        _harness_caller(caller, harness_id)
        found = self._attachments.get(caller.tenant, harness_id)
        access = self._ports.access(caller)
        visible = [a for a in found or [] if access.can_see(a.memory_id)]
        if not visible:
            raise MemoriesNotAttached(harness_id)
        return visible


def _harness_caller(caller: Caller, harness_id: str) -> Caller:
    if not HARNESS_ID.match(harness_id):
        raise MemoryInvalid("a harness id is 1 to 128 letters, digits, '_', '.' or '-'")
    return Caller(tenant=caller.tenant, principal=f"harness:{harness_id}")
