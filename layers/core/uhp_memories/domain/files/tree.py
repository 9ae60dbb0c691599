"""A memory's files as a tree (docs/file-memory.md): the listing without content, the change journal,
and grep. The writes are records' (RecordService with a `path`); this reads what they left."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from uhp_memories.domain import cursors
from uhp_memories.domain.files.grep import FileText, GrepResult, compile_pattern, grep
from uhp_memories.domain.files.model import (
    CHANGES_MAX,
    JOURNAL_RETENTION_SECONDS,
    ChangeList,
    JournalCursor,
    JournalHead,
    PathChange,
    PathEntry,
    check_directory,
    decode_cursor,
    encode_cursor,
)
from uhp_memories.domain.files.ports import PathRepository
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports

PATHS_DEFAULT = 100
PATHS_MAX = 1000
GREP_BATCH = 100  # files whose text one read fetches






class TreeService:
    """A memory's files as a tree: the paths it holds, the change journal, and grep."""
    def __init__(self, ports: Ports, paths: PathRepository) -> None:
        self._ports = ports
        self._paths = paths

    def paths(
        self, caller: Caller, memory_id: str, under: str = "", limit: int | None = None, cursor: str | None = None
    ) -> tuple[list[PathEntry], str | None]:
        """A page of the paths held under a directory, with the cursor to the next one."""
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "read"), "files")
        check_directory(under)
        size = cursors.check_limit(limit, PATHS_DEFAULT, PATHS_MAX)
        after = cursors.decode(f"paths:{under}", cursor, str, over=memory_id)
        found, more = self._paths.entries(caller.tenant, memory_id, under, after, size)
        next_cursor = cursors.encode(f"paths:{under}", found[-1].path, over=memory_id) if more and found else None
        return found, next_cursor

    def changes(self, caller: Caller, memory_id: str, cursor: str | None, limit: int | None = None) -> ChangeList:
        """The paths changed after a cursor. The head is read first and bounds what is listed, so a
        change that commits meanwhile comes after the cursor given back: listed next time, never
        skipped."""
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "read"), "files")
        size = cursors.check_limit(limit, CHANGES_MAX, CHANGES_MAX)
        since = decode_cursor(memory_id, cursor) if cursor is not None else None
        head = self._paths.head(caller.tenant, memory_id)
        now = self._ports.clock.now_ms()
        if since is None or not self._answerable(since, head, now):
            return ChangeList([], self._cursor(memory_id, head.epoch, head.seq, now), False, True)
        up_to = min(head.seq, since.seq + size)
        entries = self._paths.changes(caller.tenant, memory_id, since.seq, up_to)
        if [e.seq for e in entries] != list(range(since.seq + 1, up_to + 1)):
            # An entry expired (the journal keeps 30 days): what happened then cannot be listed.
            return ChangeList([], self._cursor(memory_id, head.epoch, head.seq, now), False, True)
        latest: dict[str, PathChange] = {}
        for entry in entries:
            latest.pop(entry.path, None)
            latest[entry.path] = entry
        return ChangeList(list(latest.values()), self._cursor(memory_id, head.epoch, up_to, now), up_to < head.seq,
                          False)

    @staticmethod
    def _answerable(since: JournalCursor, head: JournalHead, now_ms: int) -> bool:
        return (
            since.epoch == head.epoch
            and since.seq <= head.seq
            and now_ms - since.at_ms < JOURNAL_RETENTION_SECONDS * 1000
        )

    @staticmethod
    def _cursor(memory_id: str, epoch: str, seq: int, now_ms: int) -> str:
        return encode_cursor(JournalCursor(memory_id, epoch, seq, now_ms))

    def grep(
        self,
        caller: Caller,
        memory_id: str,
        pattern: str,
        *,
        regex: bool = False,
        case_sensitive: bool = False,
        under: str = "",
        limit: int = 50,
    ) -> GrepResult:
        """Matching lines of the current files under a directory, in path then line order."""
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "read"), "files")
        check_directory(under)
        matcher = compile_pattern(pattern, regex=regex, case_sensitive=case_sensitive)
        return grep(self._texts(caller.tenant, memory_id, under), matcher, limit=limit)

    def _texts(self, tenant: str, memory_id: str, under: str) -> Iterator[FileText]:
        """Every current file's text under a directory, read a batch at a time, only as far as grep reads."""
        after: str | None = None
        while True:
            entries, more = self._paths.entries(tenant, memory_id, under, after, GREP_BATCH)
            yield from self._read(tenant, memory_id, entries)
            if not more or not entries:
                return
            after = entries[-1].path

    def _read(self, tenant: str, memory_id: str, entries: Sequence[PathEntry]) -> Iterator[FileText]:
        records = self._ports.records.get_many(tenant, memory_id, [e.record_id for e in entries])
        for entry in entries:
            record = records.get(entry.record_id)
            if record is not None and isinstance(record.content, str):
                yield FileText(entry.path, entry.record_id, record.content)
