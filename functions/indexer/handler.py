"""The search indexer: the DynamoDB Streams backstop of the recall index (a worker Lambda).

RecordService indexes every record version right after its DynamoDB commit, best effort; when that
fails (the domain was busy, the function timed out after the commit), the index would lag. This
function consumes the main table's stream and brings the index in step with every change of a record
item:

- INSERT or MODIFY: the new image is indexed. Vectors the index already holds for the same text are
  reused (`reuse_all`), so a replay or a change already indexed after its commit embeds nothing.
- REMOVE (erase, memory delete): the version's document is removed. Erase removes documents before it
  deletes the items, so a late INSERT or MODIFY that put a document back is undone by the REMOVE that
  follows it on the same shard.

Other items (memories, grants, jobs, ...) are skipped. Within one batch only the last change of each
item counts (the stream orders the changes of one item), and every version to index goes to the
engine in one call.

Failures are reported per stream record (`batchItemFailures`; the event source sets
ReportBatchItemFailures): Lambda retries from the first failed record, and after its retries sends
the batch's position to the on-failure queue, which alarms; `uhp-memories reindex` then catches the
index up. A text the model refuses (more than Titan takes, say) is no failure: the engine indexes
its record by words alone, so no record stalls its shard. Each call to the domain and the model
ends before the function's timeout (uhp_memories.deadlines), so a slow domain fails the records it
did not index, reported as above, instead of timing out the whole batch. Nothing here logs content:
event ids, counts and error types only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from uhp_memories import bootstrap, deadlines
from uhp_memories.adapters.dynamodb.items import RECORD_ENTITY, from_dynamo, record_from
from uhp_memories.adapters.dynamodb.keys import parse_record_key
from uhp_memories.api import observability
from uhp_memories.domain.records.model import RecordVersion

logger = Logger(service="uhp-memories-indexer")


class UnreadableChange(ValueError):
    """A stream record this function cannot read (no image where one is needed, a malformed item)."""


class UnidentifiedFailure(RuntimeError):
    """A stream record failed and carries no sequence number to report: the whole batch is retried."""


@dataclass
class Change:
    """The last change of one item in a batch, and every stream record that changed it."""

    action: str  # "index" | "erase"
    tenant: str
    memory_id: str
    record_id: str
    version: RecordVersion | None = None
    sequence_numbers: list[str] = field(default_factory=list)


def sequence_number(record: Mapping[str, Any]) -> str:
    """What identifies a stream record in `batchItemFailures`: its sequence number."""
    return str((record.get("dynamodb") or {}).get("SequenceNumber") or "")


def read_change(record: Mapping[str, Any]) -> Change | None:
    """The change one stream record makes to the index, or None when it is not a record item's."""
    event = record.get("eventName")
    data = record.get("dynamodb") or {}
    if event in ("INSERT", "MODIFY"):
        image = data.get("NewImage")
        if not image:
            raise UnreadableChange(f"{event} without a new image (the stream must keep new images)")
        item = from_dynamo(image)
        if item.get("entity") != RECORD_ENTITY:
            return None
        try:
            version = record_from(item)
        except (KeyError, TypeError, ValueError) as error:
            raise UnreadableChange(f"a record item that does not read: {type(error).__name__}") from None
        return Change("index", version.tenant, version.memory_id, version.id, version)
    if event == "REMOVE":
        # A removed record item is known by its keys (the old image holds them too, when it is kept).
        old = data.get("OldImage")
        if old:
            item = from_dynamo(old)
            if item.get("entity") != RECORD_ENTITY:
                return None
            change = _removed_by_keys(item)
            if change is None:
                raise UnreadableChange("a removed record item whose keys do not read")
            return change
        return _removed_by_keys(from_dynamo(data.get("Keys") or {}))
    return None


def _removed_by_keys(keys: Mapping[str, Any]) -> Change | None:
    record = parse_record_key(str(keys.get("PK", "")), str(keys.get("SK", "")))
    if record is None:
        return None
    return Change("erase", record.tenant, record.memory_id, record.record_id)


class Indexer:
    """Applies one batch of stream records to a RecallEngine; answers the sequence numbers that failed."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def apply(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        failed: list[str] = []
        last: dict[tuple[str, str, str], Change] = {}
        for record in records:
            try:
                change = read_change(record)
            except UnreadableChange as error:
                logger.error(
                    "unreadable stream record",
                    extra={"event_id": record.get("eventID"), "error": str(error)},
                )
                failed.append(sequence_number(record))
                continue
            if change is None:
                continue
            key = (change.tenant, change.memory_id, change.record_id)
            earlier = last.pop(key, None)
            # Re-inserted at the end: the dict keeps the order of each item's last change.
            change.sequence_numbers = [*(earlier.sequence_numbers if earlier else []), sequence_number(record)]
            last[key] = change
        changes = list(last.values())
        failed += self._index([c for c in changes if c.action == "index"])
        failed += self._erase([c for c in changes if c.action == "erase"])
        return failed

    def _index(self, changes: list[Change]) -> list[str]:
        if not changes:
            return []
        try:
            self._engine.index_versions([c.version for c in changes], reuse_all=True)
            return []
        except Exception as error:
            logger.warning("batch indexing failed; indexing one by one", extra={"error_type": type(error).__name__})
        failed = []
        for change in changes:
            try:
                self._engine.index_versions([change.version], reuse_all=True)
            except Exception as error:
                logger.error(
                    "indexing failed",
                    extra={"record_id": change.record_id, "error_type": type(error).__name__},
                )
                failed += change.sequence_numbers
        return failed

    def _erase(self, changes: list[Change]) -> list[str]:
        by_memory: dict[tuple[str, str], list[Change]] = {}
        for change in changes:
            by_memory.setdefault((change.tenant, change.memory_id), []).append(change)
        failed = []
        for (tenant, memory_id), group in by_memory.items():
            try:
                self._engine.erase(tenant, memory_id, [c.record_id for c in group])
            except Exception as error:
                logger.error(
                    "removing from the index failed",
                    extra={"memory_id": memory_id, "error_type": type(error).__name__},
                )
                failed += [n for c in group for n in c.sequence_numbers]
        return failed


@observability.observed(log=logger)  # traced, metrics flushed, log lines correlated
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    deadlines.start(context)
    records = event.get("Records") or []
    engine = bootstrap.container().recall_engine()
    if engine is None:
        # A stage without a search domain has no index to keep in step.
        logger.warning("no search index configured; stream records skipped", extra={"records": len(records)})
        return {"batchItemFailures": []}
    failed = Indexer(engine).apply(records)
    if failed:
        logger.warning("stream records failed", extra={"records": len(records), "failed": len(failed)})
    if not all(failed):
        raise UnidentifiedFailure("a stream record without a sequence number failed")
    # Lambda retries from the lowest sequence number reported, so one failure keeps what follows it.
    return {"batchItemFailures": [{"itemIdentifier": n} for n in dict.fromkeys(failed)]}
