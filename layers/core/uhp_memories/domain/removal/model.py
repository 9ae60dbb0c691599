"""Erase's and delete's values: targets, what outlives an erase (retention)."""

from __future__ import annotations

from dataclasses import dataclass

from uhp_memories.domain.errors import DomainError
from uhp_memories.domain.timefmt import format_ms

MAX_CHAINS = 2_000  # the targets travel in the workflow's state (256 KB)


DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class ChainTarget:
    """One version chain an erase removes, in the memory that holds it."""

    memory_id: str
    chain_id: str


@dataclass(frozen=True)
class VersionTarget:
    """One record version an erase removes: the report names it."""

    id: str
    memory_id: str


@dataclass(frozen=True)
class EraseTargets:
    """Everything one erase removes, resolved once by its first step and carried by the workflow to
    the others (so a retried step removes exactly what the first attempt meant to)."""

    chains: tuple[ChainTarget, ...] = ()
    versions: tuple[VersionTarget, ...] = ()
    files: tuple[str, ...] = ()  # uploaded files the versions name, by id


@dataclass(frozen=True)
class Retention:
    """What the deployment keeps beyond this service's reach, from the stage's own settings."""

    pitr_enabled: bool = False
    pitr_retention_days: int = 35
    stream_enabled: bool = False
    stream_retention_hours: int = 24
    search_snapshot_retention_days: int = 0
    # A search domain holds the index: a deleted document stays in its segment files until a merge.
    search_segments: bool = False

    def places(self, now_ms: int) -> list[tuple[str, str, str]]:
        """(where, why, until) of every place the deployment keeps copies beyond erase's reach."""
        places = []
        if self.pitr_enabled:
            places.append((
                "dynamodb_point_in_time_recovery",
                "continuous backups of the table keep earlier item images for the recovery window",
                format_ms(now_ms + self.pitr_retention_days * DAY_MS),
            ))
        if self.stream_enabled:
            places.append((
                "dynamodb_stream",
                "the table's change stream keeps item images until they age out",
                format_ms(now_ms + self.stream_retention_hours * 3600 * 1000),
            ))
        if self.search_snapshot_retention_days:
            places.append((
                "opensearch_snapshots",
                "automated snapshots of the search domain keep indexed text for their retention",
                format_ms(now_ms + self.search_snapshot_retention_days * DAY_MS),
            ))
        if self.search_segments:
            places.append((
                "opensearch_segments",
                "a deleted document stays in the search index's segment files, unsearchable, until a merge "
                "rewrites them",
                "the next segment merge",
            ))
        return places

    def unreachable(self, record_id: str, memory_id: str, now_ms: int) -> list[dict[str, str]]:
        """What still holds a copy of one erased record version. `memory_id` is kept for the
        visibility filter and never shown."""
        return [
            {"record_id": record_id, "memory_id": memory_id, "where": where, "reason": reason, "until": until}
            for where, reason, until in self.places(now_ms)
        ]


class JobNotFound(DomainError):
    code = "memory_job_not_found"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found")
