"""Request schemas to domain inputs, shared by the functions that write records."""

from __future__ import annotations

from typing import Any

from uhp_memories.api import schemas
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.files.model import check_conditions, check_origin
from uhp_memories.domain.recall.model import RecallInput
from uhp_memories.domain.records.model import NO_TERMS, RecordInput, WriteTerms
from uhp_memories.domain.timefmt import parse_instant


def validity(time: schemas.TimeIn | None) -> dict[str, str | None]:
    """The validity fields the client sent, as canonical instants (null clears one on revise)."""
    if time is None:
        return {}
    return {
        field: (parse_instant(value, f"time.{field}") if value else None)
        for field, value in ((f, getattr(time, f)) for f in time.model_fields_set)
    }


def references(refs: list[schemas.ReferenceIn]) -> tuple[dict[str, str], ...]:
    return tuple(ref.model_dump() for ref in refs)


def record_input(
    type: str,
    content: str | dict,
    attributes: dict,
    time: schemas.TimeIn | None,
    refs: list[schemas.ReferenceIn],
    path: str | None = None,
) -> RecordInput:
    given = validity(time)
    return RecordInput(
        type=type,
        content=content,
        attributes=attributes,
        valid_from=given.get("valid_from"),
        valid_to=given.get("valid_to"),
        references=references(refs),
        path=path,
    )


def revision(body: schemas.RecordRevise) -> dict[str, Any]:
    """A revision's changes: only the fields the caller sent, each replacing the current version's
    (PATCH /records/{id} and the memory_revise tool alike). Null is not a value a field can take."""
    changes: dict[str, Any] = {}
    for field in body.model_fields_set - {"time", "references", "conditions", "origin"}:
        value = getattr(body, field)
        if value is None:
            raise MemoryInvalid(f"{field} cannot be null")
        changes[field] = value
    changes.update(validity(body.time))
    if "references" in body.model_fields_set:
        changes["references"] = references(body.references or [])
    return changes


def recall_input(body: schemas.RecallIn) -> RecallInput:
    """A recall request (POST /recall and the memory_recall tool alike)."""
    return RecallInput(
        query=body.query,
        text=body.text,
        filters=body.filters,
        types=tuple(body.types),
        as_of=body.as_of,
        include=body.include,
        limit=body.limit,
        depth=body.depth,
        query_words=body.query_words,
    )


def write_terms(body: schemas.WriteTermsIn | None) -> WriteTerms:
    """A write's read set and origin, checked by the one set of file rules (domain/files/model.py)."""
    if body is None:
        return NO_TERMS
    conditions = [c.model_dump() for c in body.conditions] if body.conditions is not None else None
    origin = body.origin.model_dump() if body.origin is not None else None
    return WriteTerms(check_conditions(conditions), check_origin(origin))
