"""In-memory fake of a memory's files (docs/file-memory.md): the path items, one per current file, and
the change journal. The same contract as DynamoPathRepository and the file half of
DynamoRecordRepository's writes (tests/contract/test_path_repository.py holds both to it).

Everything is kept under the memory (InMemoryMemoryRepository.keep), as the items live in the memory's
partition in DynamoDB. `commit` is what a record write adds to its transaction; the record repository
calls it under the tree's lock after its own conditions held and before it writes anything, so a
write lands whole or not at all."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING

from uhp_memories.domain.errors import WriteContended
from uhp_memories.domain.files.model import (
    FIRST_EPOCH,
    Conflict,
    JournalHead,
    PathChange,
    PathCondition,
    PathConflict,
    PathEntry,
    describe,
)
from uhp_memories.domain.records.model import RecordVersion

if TYPE_CHECKING:
    from tests.fakes.tree import InMemoryMemoryRepository

PATH = "path"
CHANGE = "change"
HEAD = "changes"


def entry_of(record: RecordVersion) -> PathEntry:
    """The path item a current file keeps beside its record (adapters/dynamodb/paths.py path_item)."""
    assert record.path is not None
    assert isinstance(record.content, str)
    return PathEntry(
        path=record.path,
        record_id=record.id,
        chain_id=record.chain_id,
        bytes=len(record.content.encode()),
        description=describe(record.content),
        written_at=record.written_at,
        written_by=dict(record.written_by),
    )


def _seq_key(seq: int) -> str:
    return f"{seq:012d}"  # sorts as the journal's sort keys do


class InMemoryPathRepository:
    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories

    # -- what a record write adds to its transaction -------------------------------------------

    def explain(
        self,
        before: RecordVersion | None,
        after: RecordVersion | None,
        conditions: Sequence[PathCondition],
    ) -> list[Conflict]:
        """Why a write from `before` to `after` would be refused, as the paths stand now: each
        condition that does not hold, in the order given, then the claimed path if another record
        holds it. Empty: it may commit."""
        record = after or before
        if record is None:
            return []
        old_path = before.path if before is not None else None
        claimed = after.path if after is not None and after.path != old_path else None
        wanted = [c.path for c in conditions] + ([claimed] if claimed else [])
        holders = self.holders(record.tenant, record.memory_id, wanted)
        conflicts = [
            Conflict(c.path, "condition", holders.get(c.path))
            for c in conditions
            if holders.get(c.path) != c.record_id
        ]
        if claimed is not None and holders.get(claimed) is not None:
            conflicts.append(Conflict(claimed, "path_taken", holders[claimed]))
        return conflicts

    def commit(
        self,
        before: RecordVersion | None,
        after: RecordVersion | None,
        conditions: Sequence[PathCondition] = (),
    ) -> None:
        """Check a write's file conditions and apply its file changes, or raise and change nothing.
        The caller holds the tree's lock."""
        record = after or before
        if record is None:
            return
        conflicts = self.explain(before, after, conditions)
        if conflicts:
            raise PathConflict(conflicts)
        tenant, memory_id = record.tenant, record.memory_id
        old_path = before.path if before is not None else None
        new_path = after.path if after is not None else None
        if old_path is not None:
            # The version a write replaces holds its path (DynamoDB's `record_id = :held`); when it
            # does not, DynamoDB's transaction fails with nothing to explain, and is retried until
            # the adapter gives up.
            held = self.holders(tenant, memory_id, [old_path]).get(old_path)
            if before is None or held != before.id:
                raise WriteContended(f"writes to the files of memory {memory_id} kept colliding")
        changes: list[tuple[str, str | None]] = []
        if old_path is not None and old_path != new_path:
            self.memories.drop(tenant, memory_id, PATH, old_path)
            changes.append((old_path, None))
        if new_path is not None:
            assert after is not None
            self.memories.keep(tenant, memory_id, PATH, new_path, entry_of(after))
            changes.append((new_path, after.id))
        if changes:
            head = self.head(tenant, memory_id)
            for offset, (path, record_id) in enumerate(changes, start=1):
                seq = head.seq + offset
                self.memories.keep(tenant, memory_id, CHANGE, _seq_key(seq), PathChange(seq, path, record_id))
            self.memories.keep(tenant, memory_id, HEAD, "", JournalHead(head.epoch, head.seq + len(changes)))

    # -- reads ---------------------------------------------------------------------------------

    def holders(self, tenant: str, memory_id: str, paths: Sequence[str]) -> dict[str, str]:
        """The record holding each of these paths now, for those held."""
        found: dict[str, PathEntry] = self.memories.kept_under(tenant, memory_id, PATH)
        return {path: found[path].record_id for path in dict.fromkeys(paths) if path in found}

    def at(self, tenant: str, memory_id: str, path: str) -> PathEntry | None:
        found: PathEntry | None = self.memories.kept_under(tenant, memory_id, PATH).get(path)
        return found

    def entries(
        self, tenant: str, memory_id: str, under: str, after: str | None, limit: int
    ) -> tuple[list[PathEntry], bool]:
        """Current files under a directory in path order (UTF-8 byte order, as DynamoDB sorts: the
        same as code point order), after the path `after`, at most `limit`; and whether more follow."""
        found = [
            entry
            for path, entry in sorted(self.memories.kept_under(tenant, memory_id, PATH).items())
            if path.startswith(under) and (after is None or path > after)
        ]
        return found[:limit], len(found) > limit

    def head(self, tenant: str, memory_id: str) -> JournalHead:
        found: JournalHead | None = self.memories.kept_under(tenant, memory_id, HEAD).get("")
        return found if found is not None else JournalHead(FIRST_EPOCH, 0)

    def changes(self, tenant: str, memory_id: str, after: int, up_to: int) -> list[PathChange]:
        """The journal's entries after `after` up to `up_to`, in order (a gap means they expired)."""
        kept: dict[str, PathChange] = self.memories.kept_under(tenant, memory_id, CHANGE)
        return [change for change in kept.values() if after < change.seq <= up_to]

    # -- erase and purge -----------------------------------------------------------------------

    def clear_journal(self, tenant: str, memory_id: str) -> None:
        """A new epoch (the sequence carries on), and no entries: every cursor given before answers
        full_resync."""
        with self.memories.lock:
            head = self.head(tenant, memory_id)
            self.memories.keep(tenant, memory_id, HEAD, "", JournalHead(secrets.token_hex(8), head.seq))
            for key in list(self.memories.kept_under(tenant, memory_id, CHANGE)):
                self.memories.drop(tenant, memory_id, CHANGE, key)

    def release(self, tenant: str, memory_id: str, chain_id: str, paths: Sequence[str]) -> None:
        """Free the paths a chain's versions hold (erase), leaving a path another chain holds."""
        with self.memories.lock:
            found: dict[str, PathEntry] = self.memories.kept_under(tenant, memory_id, PATH)
            for path in dict.fromkeys(paths):
                if path in found and found[path].chain_id == chain_id:
                    self.memories.drop(tenant, memory_id, PATH, path)

    def purge(self, tenant: str, memory_id: str) -> None:
        """Every path item, journal entry and the journal head of a memory."""
        with self.memories.lock:
            for kind in (PATH, CHANGE, HEAD):
                for key in list(self.memories.kept_under(tenant, memory_id, kind)):
                    self.memories.drop(tenant, memory_id, kind, key)

    def expire(self, tenant: str, memory_id: str, seq: int) -> None:
        """Drop one journal entry, as DynamoDB's TTL does once it is older than the retention."""
        self.memories.drop(tenant, memory_id, CHANGE, _seq_key(seq))
