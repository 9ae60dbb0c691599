"""File memory on DynamoDB (docs/file-memory.md): the path items, one per current file, and the
change journal, in the memory's partition.

`FilePlan` is what one record write adds to its own transaction: the path item it claims, revises
or frees (each on the condition that says the write saw the path as it is), a ConditionCheck per
entry of the read set, and the journal's next entries with the head advanced on the condition that
it is where this write read it. `DynamoPathRepository` reads what those writes left."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import ConditionFailed, DynamoTable
from uhp_memories.domain.files.model import (
    FIRST_EPOCH,
    JOURNAL_RETENTION_SECONDS,
    Conflict,
    JournalHead,
    PathChange,
    PathCondition,
    PathConflict,
    PathEntry,
    describe,
)
from uhp_memories.domain.records.model import RecordVersion

_ABSENT = "attribute_not_exists(PK)"


@dataclass
class FilePlan:
    """The file operations of one record write, and what explains a refusal of them."""

    operations: list[dict[str, Any]] = field(default_factory=list)
    claimed: str | None = None  # a path this write takes that its record did not hold
    conditions: tuple[PathCondition, ...] = ()

    def paths(self) -> list[str]:
        """Every path whose holder explains a refusal: the read set's, and the one claimed."""
        return [c.path for c in self.conditions] + ([self.claimed] if self.claimed else [])

    def add(self, operation: dict[str, Any]) -> None:
        self.operations.append(operation)


def path_item(record: RecordVersion) -> dict[str, Any]:
    assert record.path is not None
    assert isinstance(record.content, str)
    return {
        "PK": keys.memory_pk(record.tenant, record.memory_id),
        "SK": keys.path_sk(record.path),
        "entity": "path",
        "tenant": record.tenant,
        "memory_id": record.memory_id,
        "path": record.path,
        "record_id": record.id,
        "chain_id": record.chain_id,
        "bytes": len(record.content.encode()),
        "description": describe(record.content),
        "written_at": record.written_at,
        "written_by": record.written_by,
    }


def path_from(item: dict[str, Any]) -> PathEntry:
    return PathEntry(
        path=str(item["path"]),
        record_id=str(item["record_id"]),
        chain_id=str(item["chain_id"]),
        bytes=int(item["bytes"]),
        description=item.get("description"),
        written_at=str(item["written_at"]),
        written_by=dict(item["written_by"]),
    )


class DynamoPathRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    # -- what a write adds to its transaction ------------------------------------------------

    def plan(
        self,
        before: RecordVersion | None,
        after: RecordVersion | None,
        conditions: Sequence[PathCondition],
        now_ms: int,
    ) -> FilePlan:
        """The file operations of a write that takes a record from `before` to `after` (None: no
        version before, as a create, or none current after, as a forget).

        The read set is checked against the path items as they stand at the journal head this plan
        reads first, and the transaction carries the condition that the head has not moved: every
        change of a path moves the head, so if the write commits, nothing it depends on changed in
        between. One condition holds a read set of any size (a harness sends up to 2,048), where a
        ConditionCheck per path would stop at DynamoDB's 100 items a transaction. Raises
        PathConflict, before anything is sent, when the read set or the path claimed fails now."""
        record = after or before
        plan = FilePlan(conditions=tuple(conditions))
        if record is None:
            return plan
        pk = keys.memory_pk(record.tenant, record.memory_id)
        old_path = before.path if before is not None else None
        new_path = after.path if after is not None else None
        changes: list[tuple[str, str | None]] = []
        if old_path is not None and old_path != new_path:
            assert before is not None
            plan.add(self._table.delete_op(pk, keys.path_sk(old_path), "record_id = :held",
                                                   {":held": before.id}))
            changes.append((old_path, None))
        if new_path is not None:
            assert after is not None
            if old_path == new_path:
                assert before is not None
                put = self._table.put_op(path_item(after), "record_id = :held", {":held": before.id})
            else:
                plan.claimed = new_path
                put = self._table.put_op(path_item(after), _ABSENT)
            plan.add(put)
            changes.append((new_path, after.id))
        if not changes and not conditions:
            return plan
        head = self.head(record.tenant, record.memory_id)
        if conditions:
            conflicts = self._conflicts(record, plan, self.holders(record.tenant, record.memory_id, plan.paths()))
            if conflicts:
                raise PathConflict(conflicts)
        if changes:
            self._journal(plan, record, head, changes, now_ms)
        else:  # a write that changes no file but depends on some: the head must not move either
            plan.add(self._head_check(pk, head))
        return plan

    def _head_check(self, pk: str, head: JournalHead) -> dict[str, Any]:
        if head == JournalHead(FIRST_EPOCH, 0):
            return self._table.check_op(pk, keys.JOURNAL_HEAD_SK, _ABSENT)
        return self._table.check_op(pk, keys.JOURNAL_HEAD_SK, "seq = :seq AND epoch = :epoch",
                                    {":seq": head.seq, ":epoch": head.epoch})

    def _journal(
        self, plan: FilePlan, record: RecordVersion, head: JournalHead, changes: list[tuple[str, str | None]],
        now_ms: int,
    ) -> None:
        pk = keys.memory_pk(record.tenant, record.memory_id)
        seq = head.seq + len(changes)
        if head == JournalHead(FIRST_EPOCH, 0):  # the memory's first file write: no head yet
            plan.add(self._table.put_op(
                {"PK": pk, "SK": keys.JOURNAL_HEAD_SK, "entity": "changes", "tenant": record.tenant,
                 "seq": seq, "epoch": head.epoch},
                _ABSENT,
            ))
        else:
            plan.add(self._table.update_op(
                pk, keys.JOURNAL_HEAD_SK, "SET seq = :seq", condition="seq = :old AND epoch = :epoch",
                values={":seq": seq, ":old": head.seq, ":epoch": head.epoch},
            ))
        expires = now_ms // 1000 + JOURNAL_RETENTION_SECONDS
        for offset, (path, record_id) in enumerate(changes, start=1):
            plan.add(self._table.put_op({
                "PK": pk, "SK": keys.journal_sk(head.seq + offset), "entity": "change", "tenant": record.tenant,
                "seq": head.seq + offset, "path": path, "record_id": record_id, "at": now_ms,
                "expires_at": expires,
            }))

    def explain(self, record: RecordVersion, plan: FilePlan) -> list[Conflict]:
        """Why a write's file operations failed, as the paths stand now; empty when they hold again
        (the write raced another on the journal head and may be sent again)."""
        return self._conflicts(record, plan, self.holders(record.tenant, record.memory_id, plan.paths()))

    @staticmethod
    def _conflicts(record: RecordVersion, plan: FilePlan, holders: dict[str, str]) -> list[Conflict]:
        """The read set's entries that do not hold, then the claimed path if another record holds it."""
        conflicts = [
            Conflict(c.path, "condition", holders.get(c.path))
            for c in plan.conditions
            if holders.get(c.path) != c.record_id
        ]
        if plan.claimed is not None and holders.get(plan.claimed) not in (None, record.id):
            conflicts.append(Conflict(plan.claimed, "path_taken", holders[plan.claimed]))
        return conflicts

    # -- reads -------------------------------------------------------------------------------

    def holders(self, tenant: str, memory_id: str, paths: Sequence[str]) -> dict[str, str]:
        """The record holding each of these paths now, for those held."""
        pk = keys.memory_pk(tenant, memory_id)
        items = self._table.get_many([(pk, keys.path_sk(p)) for p in dict.fromkeys(paths)])
        return {str(i["path"]): str(i["record_id"]) for i in items if i.get("tenant") == tenant}

    def at(self, tenant: str, memory_id: str, path: str) -> PathEntry | None:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.path_sk(path))
        return path_from(item) if item and item.get("tenant") == tenant else None

    def entries(
        self, tenant: str, memory_id: str, under: str, after: str | None, limit: int
    ) -> tuple[list[PathEntry], bool]:
        """Current files under a directory in path order, after the path `after`, at most `limit`;
        and whether more follow."""
        pk = keys.memory_pk(tenant, memory_id)
        start = {"PK": pk, "SK": keys.path_sk(after)} if after is not None else None
        found: list[PathEntry] = []
        for item in self._table.query(
            "PK = :pk AND begins_with(SK, :prefix)",
            {":pk": pk, ":prefix": keys.path_sk(under)},
            start_key=start,
            page_size=min(limit + 1, 1000),
        ):
            if item.get("tenant") != tenant:
                continue
            if len(found) == limit:
                return found, True
            found.append(path_from(item))
        return found, False

    def head(self, tenant: str, memory_id: str) -> JournalHead:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.JOURNAL_HEAD_SK)
        if not item or item.get("tenant") != tenant:
            return JournalHead(FIRST_EPOCH, 0)
        return JournalHead(str(item["epoch"]), int(item["seq"]))

    def changes(self, tenant: str, memory_id: str, after: int, up_to: int) -> list[PathChange]:
        """The journal's entries after `after` up to `up_to`, in order (a gap means they expired)."""
        if up_to <= after:
            return []
        pk = keys.memory_pk(tenant, memory_id)
        items = self._table.query(
            "PK = :pk AND SK BETWEEN :low AND :high",
            {":pk": pk, ":low": keys.journal_sk(after + 1), ":high": keys.journal_sk(up_to)},
        )
        return [
            PathChange(int(i["seq"]), str(i["path"]), i.get("record_id"))
            for i in items
            if i.get("tenant") == tenant
        ]

    def clear_journal(self, tenant: str, memory_id: str) -> None:
        """Forget every journal entry: a new epoch first, so every cursor given before answers
        full_resync, then the entries. Writes racing this one fail on the epoch and read it again."""
        pk = keys.memory_pk(tenant, memory_id)
        self._table.transact([self._table.update_op(
            pk, keys.JOURNAL_HEAD_SK,
            "SET epoch = :epoch, tenant = :tenant, entity = :entity, seq = if_not_exists(seq, :zero)",
            values={":epoch": secrets.token_hex(8), ":tenant": tenant, ":entity": "changes", ":zero": 0},
        )])
        doomed = [
            (str(i["PK"]), str(i["SK"]))
            for i in self._table.query(
                "PK = :pk AND begins_with(SK, :prefix)", {":pk": pk, ":prefix": keys.JOURNAL_ENTRY_PREFIX}
            )
        ]
        self._table.delete_many(doomed)

    def release(self, tenant: str, memory_id: str, chain_id: str, paths: Sequence[str]) -> None:
        """Free the paths a chain's versions hold (erase), leaving a path another chain holds."""
        pk = keys.memory_pk(tenant, memory_id)
        for path in dict.fromkeys(paths):
            with contextlib.suppress(ConditionFailed):  # another chain holds it now, or nobody does
                self._table.delete(pk, keys.path_sk(path), "chain_id = :chain", {":chain": chain_id})

