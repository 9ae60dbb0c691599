"""Reading records (§4, §6.1): get, list, history, as_of; a version as one reader sees it."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import Any

from uhp_memories.domain import cursors
from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.errors import (
    MemoryConflict,
    MemoryInvalid,
    RecordNotFound,
    WriteContended,
)
from uhp_memories.domain.files.model import check_directory, check_path
from uhp_memories.domain.filters import matches, parse_filter
from uhp_memories.domain.limits import (
    LIST_DEFAULT,
    LIST_MAX,
)
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller, Page
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.recall.model import MemoryUnavailable
from uhp_memories.domain.records.model import (
    ID_PATTERN,
    INCLUDE_VALUES,
    RecordPage,
    RecordRead,
    RecordVersion,
    RecordView,
)
from uhp_memories.domain.records.ports import MemoryNeighbours, PathLookup
from uhp_memories.domain.records.snapshots import SnapshotService

# Reading a file is two reads (its path item, then the record it names); a revision between them is
# read again.
PATH_READ_ATTEMPTS = 5


class RecordReads:
    """A memory's records as a reader sees them."""

    def __init__(
        self, ports: Ports, memories: MemoryNeighbours, snapshots: SnapshotService, paths: PathLookup | None = None
    ) -> None:
        self._ports = ports
        self._memories = memories
        self._snapshots = snapshots
        self._paths = paths

    def get(
        self, caller: Caller, memory_id: str, record_id: str, as_of: str | None = None, include: str = "active"
    ) -> RecordRead:
        """The version this id names, with its status, and where the reader can go from its memory
        (§6.1: its parent and its direct children that the caller may read, as list names them).

        Naming one version's id asks for that version, so a superseded version of a live record
        answers as such, and every id a history names stays readable. A forgotten record leaves this
        read as it leaves list and recall (§5.2: "it leaves every read that does not ask for
        history"): a version of a chain whose current version is forgotten is not found unless
        `include=all` asks for history.

        With as_of, the memory as it stood then: the version with its status at that instant, or
        not found if it was written later (or forgotten by then, unless include=all). Never another
        version of its chain, which would answer under an id the caller did not ask for."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        if include not in INCLUDE_VALUES:
            raise MemoryInvalid(f"include must be one of {list(INCLUDE_VALUES)}")
        record = self.find(caller, memory_id, record_id, memory)
        if as_of is not None:
            self._ports.providers.require_native(memory, "as_of (reading a memory as it stood)")
            instant = self._snapshots.resolve_as_of(caller, memory_id, as_of)
            if record.written_at > instant:
                raise RecordNotFound(record_id)
            record = record.as_of(instant)
            if include == "active" and record.status == "forgotten":
                raise RecordNotFound(record_id)
        elif include == "active" and self._chain_forgotten(caller, record):
            raise RecordNotFound(record_id)
        view = self.view(access, record)
        parent, children = self._memories.neighbours(access, memory)
        return RecordRead(view.record, view.references, view.withheld, parent, children)

    def _chain_forgotten(self, caller: Caller, record: RecordVersion) -> bool:
        if record.is_current:  # every version another provider answers is its record's current one
            return record.status == "forgotten"
        return self._ports.records.chain(caller.tenant, record.chain_id)[-1].status == "forgotten"

    def list(
        self,
        caller: Caller,
        memory_id: str,
        *,
        types: list[str] | None = None,
        filters: Any = None,
        include: str = "active",
        as_of: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        path: str | None = None,
        under: str | None = None,
    ) -> RecordPage:
        """A page of the memory's records, newest first; `path` keeps the file at that path, `under`
        the files under a directory."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        if path is not None:
            check_path(path)
        if under is not None:
            check_directory(under)
        provider = self._ports.providers.of(memory)
        if provider is not None and (path is not None or under is not None):
            self._ports.providers.require_native(memory, "files (path, under)")
        if provider is not None and as_of is not None:
            self._ports.providers.require_native(memory, "as_of (reading a memory as it stood)")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        if include not in INCLUDE_VALUES:
            raise MemoryInvalid(f"include must be one of {list(INCLUDE_VALUES)}")
        flt = parse_filter(filters)
        wanted_types = set(types or [])
        instant = self._snapshots.resolve_as_of(caller, memory_id, as_of) if as_of is not None else None
        kind = f"records:{include}:{instant or ''}"
        after = cursors.decode(kind, cursor, str, over=memory_id)
        candidates = (
            provider.scan(memory, include, after) if provider is not None
            else self._candidates(caller, memory_id, include, instant, after)
        )
        if path is not None and instant is None and include == "active" and self._paths is not None:
            candidates = self._at_path(caller, memory_id, path)

        page: list[RecordVersion] = []
        next_position: str | None = None
        last_position: str | None = None
        for position, version in candidates:
            if wanted_types and version.type not in wanted_types:
                continue
            if not matches(flt, version):
                continue
            if path is not None and version.path != path:
                continue
            if under is not None and (version.path is None or not version.path.startswith(under)):
                continue
            if len(page) == size:
                next_position = last_position
                break
            page.append(version)
            last_position = position
        next_cursor = cursors.encode(kind, next_position, over=memory_id) if next_position is not None else None
        parent, children = self._memories.neighbours(access, memory)
        return RecordPage([self.view(access, v) for v in page], next_cursor, parent, children)

    def history(
        self, caller: Caller, memory_id: str, record_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page:
        """Every version of the record, oldest first, each with its writer and time."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        record = self.find(caller, memory_id, record_id, memory)
        provider = self._ports.providers.of(memory)
        chain = (
            provider.history(memory, record) if provider is not None
            else [v for v in self._ports.records.chain(caller.tenant, record.chain_id) if v.memory_id == memory_id]
        )
        after = cursors.decode("history", cursor, int, over=f"{memory_id}/{record.chain_id}")
        if after is not None:
            chain = [v for v in chain if v.version > after]
        page = chain[:size]
        over = f"{memory_id}/{record.chain_id}"
        next_cursor = cursors.encode("history", page[-1].version, over=over) if len(chain) > size else None
        return Page([self.view(access, v) for v in page], next_cursor)

    def _candidates(
        self, caller: Caller, memory_id: str, include: str, instant: str | None, after: str | None
    ) -> Iterator[tuple[str, RecordVersion]]:
        records = self._ports.records
        if instant is None and include == "active":
            yield from records.scan_active(caller.tenant, memory_id, after)
            return
        for position, version in records.scan_versions(caller.tenant, memory_id, after, instant):
            if instant is not None:
                if include == "active" and not version.held_at(instant):
                    continue
                version = version.as_of(instant)
            yield position, version

    def _at_path(self, caller: Caller, memory_id: str, path: str) -> Iterator[tuple[str, RecordVersion]]:
        """The current file at a path, read by its path item rather than by scanning the memory."""
        assert self._paths is not None
        for _ in range(PATH_READ_ATTEMPTS):
            entry = self._paths.at(caller.tenant, memory_id, path)
            if entry is None:
                return
            record = self._ports.records.get(caller.tenant, memory_id, entry.record_id)
            if record is not None and record.is_current and record.status == "active":
                yield record.written_at + "#" + record.id, record
                return
            # A revision committed between the two reads: the path item names its successor now.
        raise WriteContended(f"the file at {path} kept changing while it was read; read it again")

    def find(self, caller: Caller, memory_id: str, record_id: str, memory: Memory | None = None) -> RecordVersion:
        """The version this id names in this memory, from the provider that keeps it (`memory`: the
        memory as the access check read it; None: the native store's)."""
        record = None
        provider = self._ports.providers.of(memory) if memory is not None else None
        if ID_PATTERN.match(record_id):
            record = (provider.get(memory, record_id) if provider is not None and memory is not None
                      else self._ports.records.get(caller.tenant, memory_id, record_id))
        if record is None:
            raise RecordNotFound(record_id)
        return record

    def current_or_conflict(
        self, caller: Caller, memory_id: str, record_id: str, memory: Memory | None = None
    ) -> RecordVersion:
        record = self.find(caller, memory_id, record_id, memory)
        if not record.is_current or record.status != "active":
            raise self.conflict(caller, memory_id, record_id, memory)
        return record

    def conflict(
        self, caller: Caller, memory_id: str, record_id: str, memory: Memory | None = None
    ) -> MemoryConflict:
        record = self.find(caller, memory_id, record_id, memory)
        if "read" not in self._ports.access(caller).privileges(memory_id):
            # The current version's id is what a reader would fetch next; a caller that may not
            # read the memory is told only that this version can no longer change.
            return MemoryConflict(f"record {record_id} is not the current version; it can no longer change")
        provider = self._ports.providers.of(memory) if memory is not None else None
        latest = record if provider is not None else self._ports.records.chain(caller.tenant, record.chain_id)[-1]
        if latest.status == "forgotten":
            return MemoryConflict(
                f"record {record_id} was forgotten; it can no longer change", current_record_id=latest.id
            )
        return MemoryConflict(
            f"record {record_id} is not the current version; revise {latest.id} instead",
            current_record_id=latest.id,
        )

    def find_view(self, caller: Caller, memory_id: str, record_id: str) -> RecordView | None:
        """A version of this memory as the caller sees it (read needed), or None when it is gone."""
        access = self._ports.access(caller)
        access.require(memory_id, "read")
        record = self._ports.records.get(caller.tenant, memory_id, record_id)
        return self.view(access, record) if record is not None else None

    def views(self, caller: Caller, memory_id: str, versions: Sequence[RecordVersion]) -> builtins.list[RecordView]:
        """Versions of a memory as a reader of it sees them (read needed), in a read that does not ask
        for history: the versions of a forgotten record are left out, as get by id leaves them (§5.2)."""
        access = self._ports.access(caller)
        access.require(memory_id, "read")
        return [self.view(access, v) for v in versions if not self._chain_forgotten(caller, v)]

    def _resolve(self, access: AccessView, ref: dict[str, str]) -> dict[str, Any]:
        """A reference as this reader may see it: followable only with read on the target memory,
        and otherwise indistinguishable from a reference to nothing (§4.2, §13)."""
        memory_id, record_id = ref["memory_id"], ref["record_id"]
        if "read" in access.privileges(memory_id) and self._target(access, memory_id, record_id) is not None:
            return {"rel": ref.get("rel", "related"), "memory_id": memory_id, "record_id": record_id,
                    "available": True}
        return {"memory_id": memory_id, "record_id": record_id, "available": False}

    def _target(self, access: AccessView, memory_id: str, record_id: str) -> RecordVersion | None:
        """A reference's target, from the provider that keeps its memory (§10: a mem0 record is as
        followable as a native one). A provider that does not answer leaves the reference unavailable
        rather than failing the read of the record that holds it (docs/decisions.md)."""
        memory = access.memory(memory_id)
        try:
            provider = self._ports.providers.of(memory) if memory is not None else None
            if provider is not None and memory is not None:
                return provider.get(memory, record_id) if ID_PATTERN.match(record_id) else None
        except MemoryUnavailable:
            return None
        return self._ports.records.get(access.caller.tenant, memory_id, record_id)

    def view(self, access: AccessView, record: RecordVersion, withheld: frozenset[str] = frozenset()) -> RecordView:
        """A version as this reader sees it: references resolved with its privileges, and the fields a
        write's answer may not show (`withheld`) left out."""
        references = [] if "references" in withheld else [self._resolve(access, ref) for ref in record.references]
        return RecordView(record, references, withheld)
