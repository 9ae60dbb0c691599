"""Request schemas to domain inputs, shared by the functions that write records."""

from __future__ import annotations

from uhp_memories.api import schemas
from uhp_memories.domain.records import RecordInput
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
    type: str, content: str | dict, attributes: dict, time: schemas.TimeIn | None, refs: list[schemas.ReferenceIn]
) -> RecordInput:
    given = validity(time)
    return RecordInput(
        type=type,
        content=content,
        attributes=attributes,
        valid_from=given.get("valid_from"),
        valid_to=given.get("valid_to"),
        references=references(refs),
    )
