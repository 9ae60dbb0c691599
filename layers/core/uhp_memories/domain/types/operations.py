"""Running a type's operation on a record (§8): `POST /v1/memories/{id}/records/{rid}/operations/{name}`.

The order of checks keeps §3's rule that a caller never learns what it cannot see: the memory must be
visible (else memory_not_found), the record must be one of its versions (memory_record_not_found),
then the operation is looked up on the record's type (an unknown type: memory_unsupported; no such
operation: memory_invalid), then the privilege the operation states is required (403), then its
input is validated against its schema (422). A write operation is a revise of the record the
caller named: it appends a version stamped with the caller, and a stale version is 409
memory_conflict with current_record_id, as for PATCH. A read operation answers in §6.3's shape where
its result is records, and as its own object otherwise (free_slots).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid, MemoryUnsupported, RecordNotFound
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.queries.model import recall_input, substitute
from uhp_memories.domain.recall.model import RecallAnswer, RecallInput, RecallResult
from uhp_memories.domain.records.model import CORE_TYPES, ID_PATTERN, RecordVersion, RecordView
from uhp_memories.domain.timefmt import parse_instant
from uhp_memories.domain.types import calendar
from uhp_memories.domain.types.builtin import CALENDAR_EVENT, DONE, TASK
from uhp_memories.domain.types.model import Operation
from uhp_memories.domain.types.ports import MemoryNeighbours, OperationRecords, RecallRunner
from uhp_memories.domain.types.service import TypeService, check_value

# A read operation walks its memory's records of one type a page at a time; past this many it stops and
# says so in `degraded` rather than run past a Lambda's time.
SCAN_MAX = 2_000
PAGE = 100
WHY = ("operation",)


@dataclass(frozen=True)
class OperationAnswer:
    """One of: the version a write operation appended, a §6.3 answer, or an operation's own result."""

    operation: str
    record: RecordView | None = None
    recall: RecallAnswer | None = None
    result: dict[str, Any] | None = None


@dataclass(frozen=True)
class Prepared:
    """An operation found on a record the caller may reach, before its privilege is required."""

    memory_id: str
    record: RecordVersion
    operation: Operation


@dataclass(frozen=True)
class Run:
    caller: Caller
    memory_id: str
    record: RecordVersion
    operation: Operation
    input: dict[str, Any]


class OperationService:
    """Operations of extension types (§8), run on a record."""
    def __init__(
        self,
        ports: Ports,
        types: TypeService,
        records: OperationRecords,
        recall: RecallRunner,
        memories: MemoryNeighbours,
    ) -> None:
        self._ports = ports
        self._types = types
        self._records = records
        self._recall = recall
        self._memories = memories
        self._builtin: dict[tuple[str, str], Callable[[Run], OperationAnswer]] = {
            (CALENDAR_EVENT, "reschedule"): self._reschedule,
            (CALENDAR_EVENT, "free_slots"): self._free_slots,
            (TASK, "blocked"): self._blocked,
        }

    def run(self, caller: Caller, memory_id: str, record_id: str, name: str, given: Any) -> OperationAnswer:
        """Run the operation `name` on a record: found, privilege checked, input validated."""
        return self.run_prepared(caller, self.prepare(caller, memory_id, record_id, name), given)

    def prepare(self, caller: Caller, memory_id: str, record_id: str, name: str) -> Prepared:
        """The operation `name` of the record's type (what it requires says whether it writes)."""
        access = self._ports.access(caller)
        memory = access.visible(memory_id)
        self._ports.providers.require_native(memory, "extension types and their operations (§8)")
        record = self._ports.records.get(caller.tenant, memory_id, record_id) if ID_PATTERN.match(record_id) else None
        if record is None:
            raise RecordNotFound(record_id)
        # A caller without read is not told the record's type (what write answers withhold, refusals do too).
        reader = "read" in access.privileges(memory_id)
        definition = self._types.definition(caller.tenant, record.type)
        if definition is None and record.type in CORE_TYPES:
            raise MemoryInvalid(
                f"records of the core type {record.type} have no operations" if reader
                else f"this record has no operation '{name}'"
            )
        if definition is None:  # a type this server does not know (§4.1): carried, not operated on
            raise MemoryUnsupported(
                f"records of type {record.type} have no operations on this server" if reader
                else "this record has no operations on this server"
            )
        operation = definition.operation(name)
        if operation is None:
            offered = [o.name for o in definition.operations]
            raise MemoryInvalid(
                f"type {record.type} has no operation '{name}'; it has {offered}" if reader
                else f"this record has no operation '{name}'"
            )
        return Prepared(memory_id, record, operation)

    def run_prepared(self, caller: Caller, prepared: Prepared, given: Any) -> OperationAnswer:
        """Run a prepared operation once its privilege is required and its input validated."""
        memory_id, record, operation = prepared.memory_id, prepared.record, prepared.operation
        name = operation.name
        self._ports.access(caller).require(memory_id, operation.requires)
        values = _input(operation, given)
        run = Run(caller, memory_id, record, operation, values)
        builtin = self._builtin.get((record.type, operation.name))
        if builtin is not None:
            return builtin(run)
        if operation.set is not None:
            return self._set(run, substitute(operation.set, values))
        assert operation.recall is not None
        request = recall_input(substitute(operation.recall, values))
        # The record's own memory only, whatever the template says, and the record's type unless it names others.
        request = _confined(request, record.type)
        return OperationAnswer(name, recall=self._recall.recall(caller, memory_id, request))

    # -- writes -------------------------------------------------------------------------------------

    def _set(self, run: Run, fields: dict[str, Any]) -> OperationAnswer:
        """A revise of the record named, with these attributes changed (validated by the type on revise)."""
        attributes = {**run.record.attributes, **fields}
        # The caller sent an operation's input, not a record's fields: a caller without read is answered
        # none of the record's fields (the merged attributes hold what it could not read).
        view = self._records.revise(run.caller, run.memory_id, run.record.id, {"attributes": attributes}, sent=())
        return OperationAnswer(run.operation.name, record=view)

    def _reschedule(self, run: Run) -> OperationAnswer:
        starts = _instant(run.input["starts_at"])
        if "ends_at" in run.input:
            ends = _instant(run.input["ends_at"])
        else:  # keeps its length
            length = _instant(run.record.attributes["ends_at"]) - _instant(run.record.attributes["starts_at"])
            ends = starts + length
        if ends < starts:
            raise MemoryInvalid("input.ends_at: is before input.starts_at")
        return self._set(run, {"starts_at": _rfc3339(starts), "ends_at": _rfc3339(ends)})

    # -- reads --------------------------------------------------------------------------------------

    def _free_slots(self, run: Run) -> OperationAnswer:
        tz = calendar.zone(run.input["time_zone"])
        starts, ends = calendar.clock(run.input["day_starts"]), calendar.clock(run.input["day_ends"])
        first_day = _instant(run.record.attributes["starts_at"]).astimezone(tz).date()
        windows = calendar.working_windows(first_day, run.input["days"], tz, starts, ends)
        degraded: list[str] = []
        busy: list[calendar.Interval] = []
        if windows:
            opens, closes = windows[0][0], windows[-1][1]
            overlapping = {
                "and": [
                    {"field": "attributes.starts_at", "op": "lt", "value": _rfc3339(closes)},
                    {"field": "attributes.ends_at", "op": "gt", "value": _rfc3339(opens)},
                ]
            }
            events = self._scan(run, CALENDAR_EVENT, overlapping, degraded)
            busy = [(_instant(e.attributes["starts_at"]), _instant(e.attributes["ends_at"])) for e in events]
        slots = calendar.free_slots(windows, busy, run.input["min_minutes"])
        result = {
            "time_zone": run.input["time_zone"],
            "slots": [
                {"starts_at": s.astimezone(tz).isoformat(), "ends_at": e.astimezone(tz).isoformat()} for s, e in slots
            ],
            "busy": len(busy),
            "degraded": degraded,
        }
        return OperationAnswer(run.operation.name, result=result)

    def _blocked(self, run: Run) -> OperationAnswer:
        degraded: list[str] = []
        tasks = self._scan(run, TASK, None, degraded)
        by_chain = {t.chain_id: t for t in tasks}
        open_chains = {t.chain_id for t in tasks if t.attributes.get("status") != DONE}
        access = self._ports.access(run.caller)
        results = []
        for task in tasks:
            if task.attributes.get("status") == DONE:
                continue
            waiting_on = [self._chain_of(run, dep, by_chain) for dep in task.attributes.get("depends_on", [])]
            if any(chain in open_chains for chain in waiting_on if chain is not None):
                results.append(RecallResult(self._records.view(access, task), 1.0, WHY))
        memory = access.require(run.memory_id, "read")
        parent, children = self._memories.neighbours(access, memory)
        answer = RecallAnswer(results, parent, children, degraded=degraded, abstain=False)
        return OperationAnswer(run.operation.name, recall=answer)

    def _chain_of(self, run: Run, record_id: str, known: dict[str, RecordVersion]) -> str | None:
        """The chain a dependency names (by any of its versions' ids), in the same memory only."""
        if record_id in known:
            return record_id
        found = self._ports.records.get(run.caller.tenant, run.memory_id, record_id)
        return found.chain_id if found is not None else None

    def _scan(self, run: Run, type_name: str, filters: Any, degraded: list[str]) -> list[RecordVersion]:
        """The memory's current active records of a type (matching `filters`), page by page, at most SCAN_MAX."""
        found: list[RecordVersion] = []
        for record in self._pages(run, type_name, filters):
            if len(found) == SCAN_MAX:
                degraded.append(f"records:capped_at_{SCAN_MAX}")
                break
            found.append(record)
        return found

    def _pages(self, run: Run, type_name: str, filters: Any) -> Iterator[RecordVersion]:
        cursor = None
        while True:
            page = self._records.list(
                run.caller, run.memory_id, types=[type_name], filters=filters, limit=PAGE, cursor=cursor
            )
            for view in page.items:
                yield view.record
            cursor = page.next_cursor
            if cursor is None:
                return


def _input(operation: Operation, given: Any) -> dict[str, Any]:
    """The operation's input, validated against its schema, with the schema's top-level defaults."""
    given = {} if given is None else given
    check_value(operation.input, given, "input")
    properties = operation.input.get("properties") or {}
    defaults = {k: spec["default"] for k, spec in properties.items() if isinstance(spec, dict) and "default" in spec}
    return {**defaults, **given}


def _confined(request: RecallInput, type_name: str) -> RecallInput:
    return replace(request, depth=0, types=request.types or (type_name,))


def _instant(text: str) -> datetime:
    """An RFC 3339 time (as the API reads them) as an aware datetime."""
    return datetime.fromisoformat(parse_instant(text))


def _rfc3339(moment: datetime) -> str:
    return parse_instant(moment.isoformat())
