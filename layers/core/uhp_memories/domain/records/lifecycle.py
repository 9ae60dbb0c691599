"""A record chain's transitions, written once: every writer (remember, observe, revise, forget, derive,
consolidation and its revert) builds its versions here, and only here.

Nothing is overwritten: a chain grows by a new version with its own id, and the version before it is
closed (superseded, or forgotten in place). These are pure functions; committing the versions they
build, then indexing them, is the writer's (records/writer.py).
"""

from __future__ import annotations

from typing import Any

from uhp_memories.domain.records.model import RecordVersion


def first(
    *,
    tenant: str,
    memory_id: str,
    record_id: str,
    type: str,
    content: Any,
    attributes: dict[str, Any],
    written_at: str,
    written_by: dict[str, str],
    valid_from: str | None = None,
    valid_to: str | None = None,
    references: tuple[dict[str, str], ...] = (),
    path: str | None = None,
    origin: dict[str, str] | None = None,
) -> RecordVersion:
    """The first version of a new record: its id is its chain's id, and it is current and active."""
    return RecordVersion(
        tenant=tenant,
        memory_id=memory_id,
        id=record_id,
        chain_id=record_id,
        version=1,
        type=type,
        content=content,
        attributes=attributes,
        status="active",
        supersedes=None,
        superseded_by=None,
        valid_from=valid_from,
        valid_to=valid_to,
        written_at=written_at,
        invalidated_at=None,
        written_by=written_by,
        references=references,
        path=path,
        origin=origin,
    )


def revised(
    current: RecordVersion,
    *,
    revision_id: str,
    written_at: str,
    written_by: dict[str, str],
    origin: dict[str, str] | None,
    **holding: Any,
) -> tuple[RecordVersion, RecordVersion]:
    """(`current` closed as superseded, the version after it) for a revision: the new version holds
    `holding` (the fields that change: content, attributes, valid time, references, path,
    projection) and everything else of `current`; both carry the same instant."""
    revision = current.evolve(
        id=revision_id,
        version=current.version + 1,
        status="active",
        supersedes=current.id,
        superseded_by=None,
        written_at=written_at,
        invalidated_at=None,
        written_by=written_by,
        origin=origin,
        **holding,
    )
    closed = current.evolve(status="superseded", superseded_by=revision.id, invalidated_at=written_at)
    return closed, revision


def reopened(
    forgotten_version: RecordVersion,
    *,
    revision_id: str,
    written_at: str,
    written_by: dict[str, str],
    origin: dict[str, str] | None,
) -> tuple[RecordVersion, RecordVersion]:
    """(the forgotten version pointing at its successor, the successor) that make a forgotten record
    current again with the same content. The forgotten version keeps its status, so history shows
    that it was forgotten, then brought back."""
    _, revision = revised(
        forgotten_version, revision_id=revision_id, written_at=written_at, written_by=written_by, origin=origin
    )
    return forgotten_version.evolve(superseded_by=revision.id), revision


def forgotten(
    current: RecordVersion, *, at: str, written_by: dict[str, str], origin: dict[str, str] | None
) -> RecordVersion:
    """`current` closed in place by a forget (§5.2): it keeps its place in the chain, and says who
    forgot it and when."""
    return current.evolve(
        status="forgotten", invalidated_at=at, forgotten_by={"written_by": written_by, "origin": origin}
    )
