"""Domain views to API schemas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uhp_memories.api import schemas
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.agents.model import Notice, PinnedRecord, PrimeAnswer, TurnAnswer
from uhp_memories.domain.consolidation.model import CONSOLIDATOR, Run, Schedule
from uhp_memories.domain.jobs import Job
from uhp_memories.domain.memories.model import MemorySummary, MemoryView
from uhp_memories.domain.model import Page
from uhp_memories.domain.recall.model import RecallAnswer
from uhp_memories.domain.records.model import CORE_TYPES, RecordPage, RecordRead, RecordView, Snapshot
from uhp_memories.domain.timefmt import format_ms
from uhp_memories.domain.types.model import TypeDefinition
from uhp_memories.domain.types.operations import OperationAnswer
from uhp_memories.domain.types.service import operation_json


def memory(view: MemoryView) -> schemas.MemoryOut:
    m = view.memory
    return schemas.MemoryOut(
        id=m.id,
        name=m.name,
        description=m.description,
        parent_id=view.parent_id,
        ancestors=view.ancestors,
        restricted=m.restricted,
        provider=m.provider,
        privileges=view.privileges,
        records=schemas.Count(count=m.record_count),
        children=schemas.Count(count=view.children_count),
        createdAt=m.created_at,
        updatedAt=m.updated_at,
    )


def memory_page(page: Page) -> schemas.MemoryList:
    return schemas.MemoryList(data=[memory(v) for v in page.items], next_cursor=page.next_cursor)


def grant(g: Grant) -> schemas.GrantOut:
    return schemas.GrantOut(
        id=g.id,
        memory_id=g.memory_id,
        principal=g.principal,
        privileges=list(g.privileges),
        implicit=g.implicit,
        createdAt=g.created_at,
        created_by=g.created_by,
    )


def record(view: RecordView) -> schemas.RecordOut:
    r = view.record
    return schemas.RecordOut(
        id=r.id,
        memory_id=r.memory_id,
        type=r.type,
        content=r.content,
        attributes=r.attributes,
        version=r.version,
        status=r.status,  # type: ignore[arg-type]
        supersedes=r.supersedes,
        time=schemas.RecordTime(
            valid_from=r.valid_from, valid_to=r.valid_to, written_at=r.written_at, invalidated_at=r.invalidated_at
        ),
        written_by=schemas.WrittenBy(kind=r.written_by["kind"], id=r.written_by["id"]),
        references=view.references,
        path=r.path,
        origin=r.origin,
        forgotten_by=r.forgotten_by,
    )


def record_read(view: RecordRead) -> dict[str, Any]:
    """A record as get answers it, with where the reader can go (§6.1), `parent` absent as in recall."""
    out = schemas.RecordRead(
        **record(view).model_dump(),
        parent=summary(view.parent) if view.parent else None,
        children=[summary(c) for c in view.children],
    )
    return _without_absent_parent(out.model_dump(mode="json"))


def written_record(view: RecordView) -> dict[str, Any]:
    """A write's answer (revise, forget, an operation): the record, less what `view.withheld` names (a
    caller without read is answered what it sent and the server's stamps, as schemas.RecordWritten
    describes; the rule is domain/records/ `withheld_from`, MCP applies the same)."""
    out = record(view).model_dump(mode="json")
    for name in view.withheld:
        if name in ("valid_from", "valid_to"):
            out["time"].pop(name, None)
        else:
            out.pop(name, None)
    return out


def record_page(page: Page) -> schemas.RecordList:
    return schemas.RecordList(data=[record(v) for v in page.items], next_cursor=page.next_cursor)


def record_listing(page: RecordPage) -> dict[str, Any]:
    """A records listing with where the reader can go (§6.1), `parent` absent as in recall."""
    return _without_absent_parent(
        schemas.RecordListing(
            data=[record(v) for v in page.items],
            next_cursor=page.next_cursor,
            parent=summary(page.parent) if page.parent else None,
            children=[summary(c) for c in page.children],
        ).model_dump(mode="json")
    )


def _without_absent_parent(out: dict[str, Any]) -> dict[str, Any]:
    """§6.3: `parent` is absent on a root and where the caller may not read it (the two look alike)."""
    if out["parent"] is None:
        del out["parent"]
    return out


def snapshot(s: Snapshot) -> schemas.SnapshotOut:
    return schemas.SnapshotOut(
        id=s.id, memory_id=s.memory_id, name=s.name, message=s.message, time=s.time, created_by=s.created_by
    )


def job(j: Job, records: Sequence[RecordView] = ()) -> schemas.JobOut:
    """A job; `records`, what a derive job produced, as its reader may see them."""
    result = j.result
    return schemas.JobOut(
        id=j.id,
        kind=j.kind,
        memory_id=j.memory_id,
        status=j.status,  # type: ignore[arg-type]
        erased=[e["id"] for e in result["erased"]] if "erased" in result else None,
        erased_elsewhere=result.get("erased_elsewhere"),
        erased_files=result.get("erased_files", []) if "erased" in result else None,
        unreachable=[schemas.UnreachableOut(**u) for u in result["unreachable"]] if "unreachable" in result else None,
        error=result.get("error"),
        records=[record(v) for v in records],
        usage=result.get("usage") if j.kind == "derive" else None,
        model=result.get("model") if j.kind == "derive" else None,
        retrying=schemas.RetryingOut(**result["retrying"]) if j.status == "pending" and "retrying" in result else None,
    )


def accepted(j: Job) -> schemas.JobAccepted:
    return schemas.JobAccepted(job={"id": j.id, "status": j.status})


def summary(s: MemorySummary) -> schemas.MemorySummaryOut:
    return schemas.MemorySummaryOut(
        id=s.id,
        name=s.name,
        description=s.description,
        records=schemas.Count(count=s.records_count),
        children=schemas.Count(count=s.children_count),
    )


def recall(answer: RecallAnswer) -> dict[str, Any]:
    """§6.3, with `parent` absent (not null) where there is none the caller may read."""
    out = schemas.RecallOut(
        results=[
            schemas.RecallResultOut(record=record(r.record), score=r.score, why=list(r.why)) for r in answer.results
        ],
        parent=summary(answer.parent) if answer.parent else None,
        children=[summary(c) for c in answer.children],
        degraded=answer.degraded,
        abstain=answer.abstain,
    ).model_dump(mode="json")
    return _without_absent_parent(out)


def consolidation(run: Run) -> schemas.ConsolidationOut:
    counts = {"created": 0, "superseded": 0, "forgotten": 0}
    for change in run.changes:
        counts[change.action] += 1
    return schemas.ConsolidationOut(
        id=run.id,
        memory_id=run.memory_id,
        status=run.status,  # type: ignore[arg-type]
        trigger=run.trigger,
        started_at=run.started_at,
        finished_at=run.finished_at,
        read={"episodes": run.episodes_read, "records": run.records_read, "through": run.read_through},
        changes=counts,
        usage={"input_tokens": run.tokens_read + run.model_input_tokens, "output_tokens": run.model_output_tokens},
        budget={"limit": run.budget_limit, "unit": "tokens", "exhausted": run.budget_exhausted},
        written_by=dict(CONSOLIDATOR),
        reverted_by=run.reverted_by,
        error=run.error,
    )


def schedule(s: Schedule) -> schemas.ScheduleOut:
    return schemas.ScheduleOut(
        memory_id=s.memory_id, every_minutes=s.every_minutes, budget={"limit": s.budget_limit, "unit": "tokens"},
        set_by=s.set_by, set_at=s.set_at,
    )


def pins(memory_id: str, pinned: list[PinnedRecord]) -> schemas.PinsOut:
    return schemas.PinsOut(
        memory_id=memory_id,
        pins=[
            schemas.PinOut(
                record_id=p.pin.record_id,
                pinned_by=p.pin.pinned_by,
                pinned_at=format_ms(p.pin.pinned_at),
                shown=schemas.PinShownOut(
                    id=p.shown.id,
                    type=p.shown.type,
                    content=p.shown.content,
                    written_by=schemas.WrittenBy(kind=p.shown.written_by["kind"], id=p.shown.written_by["id"]),
                    written_at=p.shown.written_at,
                )
                if p.shown is not None
                else None,
            )
            for p in pinned
        ],
    )


def notices(given: Sequence[Notice]) -> list[schemas.NoticeOut]:
    """What the person attaching, or naming a session's memory, is told (§9.1)."""
    return [
        schemas.NoticeOut(code=n.code, message=n.message, memory_id=n.memory_id, provider=n.provider) for n in given
    ]


def prime(answer: PrimeAnswer, tokenizer: str, told: Sequence[Notice] = ()) -> schemas.PrimeOut:
    """Prime's answer; `told`, the notices of the session's memory (HarnessService.session_notices)."""
    memories = [
        schemas.PrimeMemoryOut(
            memory_id=m.memory.id,
            header=m.header,
            described_by=m.memory.describer,
            access=m.attachment.access,
            default=m.attachment.default,
            children=[schemas.PrimeChildOut(id=c.id, described_by=c.described_by) for c in m.children],
            records=[
                schemas.PrimeRecordOut(
                    id=r.record.id,
                    pinned_record_id=r.pinned_record_id,
                    type=r.record.type,
                    content=r.content,
                    written_by=schemas.WrittenBy(kind=r.record.written_by["kind"], id=r.record.written_by["id"]),
                    written_at=r.record.written_at,
                    tokens=r.tokens,
                )
                for r in m.records
            ],
            omitted=m.omitted,
            tokens=m.tokens,
        )
        for m in answer.memories
    ]
    return schemas.PrimeOut(
        prime_id=answer.prime_id,
        harness_id=answer.harness_id,
        budget=answer.budget,
        tokens=answer.tokens,
        tokenizer=tokenizer,
        fence=answer.fence,
        memories=memories,
        placed=[schemas.PlacedOut(memory_id=m.memory_id, tokens=m.tokens, records=len(m.records)) for m in memories],
        omitted=answer.omitted_records,
        omitted_memories=answer.omitted_memories,
        notices=notices(told),
    )


def turn(answer: TurnAnswer, harness_id: str, told: Sequence[Notice] = ()) -> schemas.TurnOut:
    """A turn's answer; `told`, the notices of the session's memory (HarnessService.session_notices)."""
    return schemas.TurnOut(
        turn_id=answer.turn_id,
        harness_id=harness_id,
        memory_id=answer.memory_id,
        records=[record(v) for v in answer.records],
        job=schemas.JobRef(id=answer.job.id, status=answer.job.status) if answer.job is not None else None,  # type: ignore[arg-type]
        notices=notices(told),
    )


def core_type(name: str, description: str) -> schemas.TypeOut:
    return schemas.TypeOut(
        type=name, description=description, core=True, builtin=True, schema={"type": "object"}, text=None,
        operations=[],
    )


def extension_type(definition: TypeDefinition) -> schemas.TypeOut:
    return schemas.TypeOut(
        type=definition.type,
        description=definition.description,
        core=False,
        builtin=definition.builtin,
        schema=definition.schema,
        text=definition.text,
        operations=[schemas.OperationOut(**operation_json(o)) for o in definition.operations],
        version=None if definition.builtin else definition.version,
        registered_by=definition.registered_by,
        registered_at=format_ms(definition.registered_at) if definition.registered_at is not None else None,
    )


def types(definitions: list[TypeDefinition]) -> dict[str, Any]:
    listed = [core_type(n, d) for n, d in CORE_TYPES.items()] + [extension_type(d) for d in definitions]
    return schemas.TypeList(data=listed).model_dump(mode="json", by_alias=True)


def operation(answer: OperationAnswer) -> dict[str, Any]:
    """A write's appended version under `record`; a read's records in §6.3's shape; else its `result`."""
    head = {"object": "memory.operation", "operation": answer.operation}
    if answer.record is not None:
        return {**head, "record": written_record(answer.record)}
    if answer.recall is not None:
        return {**head, **recall(answer.recall)}
    return {**head, "result": answer.result}
