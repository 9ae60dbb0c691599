"""Snapshots (§5): named instants of a memory, and `as_of` read as an instant."""

from __future__ import annotations

import re

from uhp_memories.domain import cursors
from uhp_memories.domain.errors import (
    AlreadyExists,
    MemoryConflict,
    MemoryInvalid,
    MemoryNotFound,
    TreeChanged,
)
from uhp_memories.domain.limits import (
    LIST_DEFAULT,
    LIST_MAX,
    MESSAGE_CHARS,
    SNAPSHOT_NAME_CHARS,
)
from uhp_memories.domain.model import Caller, Page
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records.model import (
    Snapshot,
)
from uhp_memories.domain.timefmt import format_ms, parse_instant


class SnapshotService:
    """A memory's named instants: made, listed, and read back as the instant an `as_of` names."""

    def __init__(self, ports: Ports) -> None:
        self._ports = ports

    def create_snapshot(self, caller: Caller, memory_id: str, name: str, message: str = "") -> Snapshot:
        """Name this instant of a memory, for `as_of` (§5)."""
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "write"), "snapshots")
        if not name or len(name) > SNAPSHOT_NAME_CHARS or _looks_like_time(name):
            raise MemoryInvalid(
                f"snapshot name must be 1 to {SNAPSHOT_NAME_CHARS} characters and must not read as a time"
            )
        if len(message) > MESSAGE_CHARS:
            raise MemoryInvalid(f"message is at most {MESSAGE_CHARS} characters")
        snapshot = Snapshot(
            tenant=caller.tenant,
            memory_id=memory_id,
            id=self._ports.ids.new("hsnp_"),
            name=name,
            message=message,
            time=format_ms(self._ports.clock.now_ms()),
            created_by=caller.principal,
        )
        try:
            self._ports.records.put_snapshot(snapshot)
        except AlreadyExists:
            raise MemoryConflict(f"this memory already has a snapshot named '{name}'") from None
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        return snapshot

    def list_snapshots(
        self, caller: Caller, memory_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page:
        """A memory's snapshots, oldest first."""
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "read"), "snapshots")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        found = sorted(self._ports.records.list_snapshots(caller.tenant, memory_id), key=lambda s: (s.time, s.id))
        after = cursors.decode("snapshots", cursor, (str, str), over=memory_id)
        if after is not None:
            found = [s for s in found if [s.time, s.id] > after]
        page = found[:size]
        next_cursor = (
            cursors.encode("snapshots", [page[-1].time, page[-1].id], over=memory_id) if len(found) > size else None
        )
        return Page(page, next_cursor)

    def resolve_as_of(self, caller: Caller, memory_id: str, as_of: str) -> str:
        """An RFC 3339 time, or the name of one of this memory's snapshots, as a canonical instant."""
        if _looks_like_time(as_of):
            return parse_instant(as_of, "as_of")
        snapshot = self._ports.records.get_snapshot(caller.tenant, memory_id, as_of)
        if snapshot is None:
            raise MemoryInvalid(f"as_of must be an RFC 3339 time or a snapshot of this memory; no snapshot '{as_of}'")
        return snapshot.time


def _looks_like_time(value: str) -> bool:
    return bool(re.match(r"^\d{4}-\d{2}-\d{2}", value))
