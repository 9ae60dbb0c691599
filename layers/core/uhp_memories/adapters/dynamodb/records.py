"""Record versions, chains and snapshots on DynamoDB. A revision is one transaction: close the old
version (on condition that it is still current), put the new one, check the memory is live."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.items import (
    derived_items,
    forgotten_by_json,
    record_from,
    record_item,
    snapshot_from,
    snapshot_item,
)
from uhp_memories.adapters.dynamodb.paths import DynamoPathRepository
from uhp_memories.adapters.dynamodb.schema import ACTIVE_INDEX, CHAIN_INDEX, TIMELINE_INDEX
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, DynamoTable
from uhp_memories.domain.errors import AlreadyExists, SourceGone, StaleVersion, TreeChanged, WriteContended
from uhp_memories.domain.files.model import PathCondition, PathConflict
from uhp_memories.domain.records.model import RecordVersion, Snapshot

# Still the version a change may act on: nothing superseded it and nobody forgot it.
CURRENT_ACTIVE = "attribute_exists(PK) AND attribute_not_exists(superseded_by) AND #status = :active"
SCAN_PAGE = 100
# A file write that loses the race for its memory's journal head reads the head again and retries.
FILE_WRITE_ATTEMPTS = 12


class DynamoRecordRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table
        self._paths = DynamoPathRepository(table)

    def get(self, tenant: str, memory_id: str, record_id: str) -> RecordVersion | None:
        return _record_of(tenant, self._table.get(keys.memory_pk(tenant, memory_id), keys.record_sk(record_id)))

    def get_many(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> dict[str, RecordVersion]:
        pk = keys.memory_pk(tenant, memory_id)
        items = self._table.get_many([(pk, keys.record_sk(rid)) for rid in record_ids])
        found = (_record_of(tenant, item) for item in items)
        return {record.id: record for record in found if record is not None}

    def _count(self, record: RecordVersion, delta: int) -> dict:
        return self._table.update_op(
            keys.memory_pk(record.tenant, record.memory_id),
            keys.META_SK,
            "ADD record_count :delta",
            condition=LIVE_MEMORY,
            values={":delta": delta, ":false": False},
        )

    def append_first(self, record: RecordVersion, conditions: Sequence[PathCondition] = ()) -> None:
        operations = [*self._put_ops(record), self._count(record, 1)]
        self._commit(operations, None, record, conditions, on_failure=TreeChanged(record.memory_id))

    def _put_ops(self, record: RecordVersion) -> list[dict]:
        return [self._table.put_op(record_item(record), "attribute_not_exists(PK)")] + [
            self._table.put_op(item) for item in derived_items(record)
        ]

    def append_many(self, records: Sequence[RecordVersion]) -> None:
        operations = [op for r in records for op in self._put_ops(r)]
        operations.append(self._count(records[0], len(records)))
        try:
            self._table.transact(operations)
        except ConditionFailed:
            raise TreeChanged(records[0].memory_id) from None

    def append_derived(self, record: RecordVersion, sources: Sequence[str]) -> None:
        pk = keys.memory_pk(record.tenant, record.memory_id)
        own = [*self._put_ops(record), self._count(record, 1)]
        checks = [self._table.check_op(pk, keys.record_sk(source), "attribute_exists(PK)") for source in sources]
        try:
            self._table.transact(own + checks)
        except ConditionFailed as failure:
            if 0 in failure.failed:
                raise AlreadyExists(record.id) from None
            if failure.failed and min(failure.failed) >= len(own):
                raise SourceGone(record.id) from None
            raise TreeChanged(record.memory_id) from None

    def _close_op(self, closed: RecordVersion) -> dict:
        assignments = "SET #status = :status, invalidated_at = :at"
        values: dict[str, object] = {":status": closed.status, ":at": closed.invalidated_at, ":active": "active"}
        if closed.superseded_by:
            assignments += ", superseded_by = :by"
            values[":by"] = closed.superseded_by
        if closed.forgotten_by:
            assignments += ", forgotten_by = :forgotten_by"
            values[":forgotten_by"] = forgotten_by_json(closed)
        return self._table.update_op(
            keys.memory_pk(closed.tenant, closed.memory_id),
            keys.record_sk(closed.id),
            assignments + " REMOVE GSI5PK, GSI5SK",
            condition=CURRENT_ACTIVE,
            values=values,
            names={"#status": "status"},
        )

    def append_revision(
        self, previous: RecordVersion, revision: RecordVersion, conditions: Sequence[PathCondition] = ()
    ) -> None:
        operations = [
            self._close_op(previous),
            *self._put_ops(revision),
            self._table.check_op(
                keys.memory_pk(revision.tenant, revision.memory_id), keys.META_SK, LIVE_MEMORY, {":false": False}
            ),
        ]
        self._commit(operations, previous, revision, conditions, on_failure=StaleVersion(previous.id))

    def reopen(self, forgotten: RecordVersion, revision: RecordVersion) -> None:
        operations = [
            self._table.update_op(
                keys.memory_pk(forgotten.tenant, forgotten.memory_id),
                keys.record_sk(forgotten.id),
                "SET superseded_by = :by",
                condition="attribute_exists(PK) AND attribute_not_exists(superseded_by) AND #status = :forgotten",
                values={":by": revision.id, ":forgotten": "forgotten"},
                names={"#status": "status"},
            ),
            *self._put_ops(revision),
            self._count(revision, +1),
        ]
        self._commit(operations, None, revision, (), on_failure=StaleVersion(forgotten.id))

    def close(self, current: RecordVersion, closed: RecordVersion, conditions: Sequence[PathCondition] = ()) -> None:
        operations = [self._close_op(closed), self._count(closed, -1)]
        self._commit(operations, current, None, conditions, on_failure=StaleVersion(current.id))

    def _commit(
        self,
        operations: list[dict],
        before: RecordVersion | None,
        after: RecordVersion | None,
        conditions: Sequence[PathCondition],
        on_failure: Exception,
    ) -> None:
        """One transaction: the record's own operations and, when a file is involved, its path item,
        read set and journal entries (adapters/dynamodb/paths.py). `on_failure` is raised when the
        record's own conditions fail; PathConflict when the file's do."""
        touches_files = bool(conditions) or any(v is not None and v.path is not None for v in (before, after))
        for attempt in range(FILE_WRITE_ATTEMPTS):
            try:
                plan = self._paths.plan(before, after, conditions, int(time.time() * 1000)) if touches_files else None
            except PathConflict:
                # A version no longer current is refused as such, whatever its read set says.
                if before is not None and not self._still_current(before):
                    raise on_failure from None
                raise
            try:
                # A race lost to another transaction is sent again by the table itself (retrying_conflicts).
                self._table.transact(operations + (plan.operations if plan else []))
                return
            except ConditionFailed as failure:
                own = {i for i in failure.failed if i < len(operations)}
                if plan is None or own or not failure.failed:
                    raise on_failure from None
                conflicts = self._paths.explain(after or before, plan)  # type: ignore[arg-type]
                if conflicts:
                    raise PathConflict(conflicts) from None
            # Another write of this memory's files committed first (the journal head moved): read again.
            time.sleep(random.uniform(0, 0.005 * (attempt + 1)))  # noqa: S311 (jitter, not a secret)
        raise WriteContended(f"writes to the files of memory {(after or before).memory_id} kept colliding")  # type: ignore[union-attr]

    def _still_current(self, version: RecordVersion) -> bool:
        stored = self.get(version.tenant, version.memory_id, version.id)
        return stored is not None and stored.is_current and stored.status == "active"

    def chain(self, tenant: str, chain_id: str) -> list[RecordVersion]:
        items = self._table.query("GSI3PK = :pk", {":pk": keys.chain_pk(tenant, chain_id)}, index=CHAIN_INDEX.name)
        return [record_from(item) for item in items if item.get("tenant") == tenant]

    def scan_active(self, tenant: str, memory_id: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        pk = keys.active_pk(tenant, memory_id)
        start = self._start_key(tenant, memory_id, "GSI5", pk, after)
        items = self._table.query(
            "GSI5PK = :pk", {":pk": pk}, index=ACTIVE_INDEX.name, forward=False, start_key=start, page_size=SCAN_PAGE
        )
        for item in items:
            yield item["GSI5SK"], record_from(item)

    def active_after(self, tenant: str, memory_id: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        pk = keys.active_pk(tenant, memory_id)
        condition, values = "GSI5PK = :pk", {":pk": pk}
        if after is not None:
            condition += " AND GSI5SK > :after"
            values[":after"] = after
        items = self._table.query(condition, values, index=ACTIVE_INDEX.name, forward=True, page_size=SCAN_PAGE)
        for item in items:
            yield item["GSI5SK"], record_from(item)

    def scan_versions(
        self, tenant: str, memory_id: str, after: str | None, written_up_to: str | None
    ) -> Iterator[tuple[str, RecordVersion]]:
        pk = keys.timeline_pk(tenant, memory_id)
        condition, values = "GSI4PK = :pk", {":pk": pk}
        if written_up_to is not None:
            # Sort keys are "<written_at>#<id>"; '$' sorts just after '#', so this keeps every
            # version written at or before the instant.
            condition += " AND GSI4SK < :upper"
            values[":upper"] = written_up_to + "$"
        start = self._start_key(tenant, memory_id, "GSI4", pk, after)
        items = self._table.query(
            condition, values, index=TIMELINE_INDEX.name, forward=False, start_key=start, page_size=SCAN_PAGE
        )
        for item in items:
            yield item["GSI4SK"], record_from(item)

    @staticmethod
    def _start_key(tenant: str, memory_id: str, index: str, pk: str, after: str | None) -> dict | None:
        if after is None:
            return None
        record_id = after.rsplit("#", 1)[-1]
        return {
            "PK": keys.memory_pk(tenant, memory_id),
            "SK": keys.record_sk(record_id),
            f"{index}PK": pk,
            f"{index}SK": after,
        }

    def put_snapshot(self, snapshot: Snapshot) -> None:
        try:
            self._table.transact(
                [
                    self._table.put_op(snapshot_item(snapshot), "attribute_not_exists(PK)"),
                    self._table.check_op(
                        keys.memory_pk(snapshot.tenant, snapshot.memory_id),
                        keys.META_SK,
                        LIVE_MEMORY,
                        {":false": False},
                    ),
                ]
            )
        except ConditionFailed:
            if self.get_snapshot(snapshot.tenant, snapshot.memory_id, snapshot.name) is not None:
                raise AlreadyExists(snapshot.name) from None
            raise TreeChanged(snapshot.memory_id) from None

    def get_snapshot(self, tenant: str, memory_id: str, name: str) -> Snapshot | None:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.snapshot_sk(name))
        return snapshot_from(item) if item and item.get("tenant") == tenant else None

    def list_snapshots(self, tenant: str, memory_id: str) -> list[Snapshot]:
        items = self._table.query(
            "PK = :pk AND begins_with(SK, :s)",
            {":pk": keys.memory_pk(tenant, memory_id), ":s": keys.SNAPSHOT_SK_PREFIX},
        )
        return [snapshot_from(item) for item in items]

    def purge_memory(self, tenant: str, memory_id: str) -> None:
        pk = keys.memory_pk(tenant, memory_id)
        doomed: list[tuple[str, str]] = []
        prefixes = (keys.RECORD_SK_PREFIX, keys.SNAPSHOT_SK_PREFIX, keys.PATH_SK_PREFIX, keys.JOURNAL_ENTRY_PREFIX)
        doomed.append((pk, keys.JOURNAL_HEAD_SK))
        for prefix in prefixes:
            items = self._table.query("PK = :pk AND begins_with(SK, :p)", {":pk": pk, ":p": prefix})
            for item in items:
                if item.get("entity") == "record":
                    doomed.extend((d["PK"], d["SK"]) for d in derived_items(record_from(item)))
                doomed.append((item["PK"], item["SK"]))
        self._table.delete_many(doomed)

    def derived_from(self, tenant: str, record_ids: Sequence[str]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for record_id in dict.fromkeys(record_ids):
            items = self._table.query("PK = :pk", {":pk": keys.derived_pk(tenant, record_id)})
            found.extend((str(item["memory_id"]), str(item["chain_id"])) for item in items)
        return found

    def erase_chain(self, tenant: str, memory_id: str, chain_id: str) -> list[str]:
        versions = [v for v in self.chain(tenant, chain_id) if v.memory_id == memory_id]
        erased: list[str] = []
        paths = [v.path for v in versions if v.path is not None]
        if paths:
            # A file's path and the change journal that names it go first: a retried step that
            # finds the versions gone has nothing of the file left to miss.
            self._paths.clear_journal(tenant, memory_id)
            self._paths.release(tenant, memory_id, chain_id, paths)
            # Once more after the paths are freed: a write that read the journal head before it
            # checked its read set against them commits on that head, or not at all.
            self._paths.clear_journal(tenant, memory_id)
        # Older versions first, in batches; the current version goes last, in one transaction with
        # the memory's counter, so a retried step never uncounts twice.
        for version in versions:
            operations = [self._table.delete_op(keys.memory_pk(tenant, memory_id), keys.record_sk(version.id),
                                                "attribute_exists(PK)")]
            operations += [self._table.delete_op(d["PK"], d["SK"]) for d in derived_items(version)]
            if version.is_current and version.status == "active":
                operations.append(
                    self._table.update_op(
                        keys.memory_pk(tenant, memory_id), keys.META_SK, "ADD record_count :minus",
                        condition="attribute_exists(PK)", values={":minus": -1},
                    )
                )
            try:
                self._table.transact(operations)
            except ConditionFailed:
                # Already erased by an earlier attempt (or the memory itself is gone): delete
                # whatever is left without touching the counter.
                self._table.delete_many([(d["PK"], d["SK"]) for d in derived_items(version)])
                self._table.delete_many([(keys.memory_pk(tenant, memory_id), keys.record_sk(version.id))])
            erased.append(version.id)
        return erased


def _record_of(tenant: str, item: dict | None) -> RecordVersion | None:
    """The record version an item read by key holds, if it is one of this tenant's."""
    if not item or item.get("entity") != "record" or item.get("tenant") != tenant:
        return None
    return record_from(item)
