"""Consolidation runs (§9.2): background work that rewrites what a memory holds, made visible,
bounded and reversible.

The native consolidator derives nothing (derivation: none) and runs no model. Each pass reads the
memory's current records written since the last pass (`read.through`), oldest first, within a
budget counted in records, and forgets every record that repeats an earlier current one exactly
(same type, same text once whitespace and case are folded, same attributes). A pass whose budget
runs out stops; the next resumes after `read.through`. Revert appends: each record the run forgot
becomes current again as a new version, written by the consolidator.

A run executes in the consolidation state machine (functions/workflows/consolidate.asl.json) and
holds its memory while it runs: a move or a delete answers memory_busy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from uhp_memories.domain import cursors
from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import DomainError, MemoryConflict, MemoryInvalid, StaleVersion
from uhp_memories.domain.jobs import WorkflowRunner
from uhp_memories.domain.limits import LIST_DEFAULT, LIST_MAX
from uhp_memories.domain.models import Caller, Page, RecordVersion
from uhp_memories.domain.records import ID_PATTERN, VersionIndex, index_after_commit
from uhp_memories.domain.timefmt import format_ms

CONSOLIDATOR = {"kind": "consolidator", "id": "native"}
DEFAULT_BUDGET = 1_000
MAX_BUDGET = 10_000


class RunNotFound(DomainError):
    code = "memory_consolidation_not_found"
    status = 404

    def __init__(self, run_id: str) -> None:
        super().__init__(f"consolidation run {run_id} not found")


@dataclass(frozen=True)
class Change:
    record_id: str  # the version the run wrote, superseded or forgot
    action: str  # created | superseded | forgotten
    chain_id: str


@dataclass(frozen=True)
class Run:
    tenant: str
    id: str
    memory_id: str
    status: str  # queued | running | completed | stopped | failed | reverted
    trigger: str
    started_at: int  # epoch seconds (§9.2)
    budget_limit: int
    requested_by: str
    finished_at: int | None = None
    episodes_read: int = 0
    records_read: int = 0
    read_through: str | None = None
    budget_exhausted: bool = False
    changes: tuple[Change, ...] = ()
    reverted_by: str | None = None
    error: str = ""

    def evolve(self, **changes: Any) -> Run:
        return replace(self, **changes)


class RunRepository(Protocol):
    def start(self, run: Run) -> None:
        """Write the run and hold the memory, in one transaction."""
        ...

    def save(self, run: Run, release: bool) -> None:
        """Replace the run; with `release`, also stop holding the memory, in one transaction."""
        ...

    def get(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        ...

    def list(self, tenant: str, memory_id: str) -> list[Run]:
        ...


@dataclass
class _Pass:
    kept: dict[tuple[str, str, str], RecordVersion] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)


def identity(record: RecordVersion) -> tuple[str, str, str]:
    """What makes two records say the same thing, for the duplicate rule."""
    content = record.content
    text = re.sub(r"\s+", " ", content).strip().casefold() if isinstance(content, str) else json.dumps(content)
    return record.type, text, json.dumps(record.attributes, sort_keys=True)


class ConsolidationService:
    def __init__(
        self,
        ports: Ports,
        runs: RunRepository,
        workflows: WorkflowRunner,
        wait_seconds: float,
        index: Callable[[], VersionIndex | None] | None = None,
    ) -> None:
        self._ports = ports
        self._runs = runs
        self._workflows = workflows
        self.wait_seconds = wait_seconds
        self._index = index

    # -- API ---------------------------------------------------------------------------------

    def start(self, caller: Caller, memory_id: str, budget: int | None) -> Run:
        """Start a pass now. It rewrites the memory, so it needs write."""
        self._ports.access(caller).require(memory_id, "write")
        limit = DEFAULT_BUDGET if budget is None else budget
        if not 1 <= limit <= MAX_BUDGET:
            raise MemoryInvalid(f"budget.limit is 1 to {MAX_BUDGET} records")
        if any(r.status in ("queued", "running") for r in self._runs.list(caller.tenant, memory_id)):
            raise MemoryConflict("a consolidation run of this memory is already running")
        run = Run(
            tenant=caller.tenant,
            id=self._ports.ids.new("hcon_"),
            memory_id=memory_id,
            status="running",
            trigger="manual",
            started_at=self._ports.clock.now_ms() // 1000,
            budget_limit=limit,
            requested_by=caller.principal,
        )
        self._runs.start(run)
        self._workflows.start("consolidate", run.id, {"tenant": caller.tenant, "memory_id": memory_id,
                                                      "run_id": run.id})
        self._workflows.wait(run.id, "consolidate", self.wait_seconds)
        return self._runs.get(caller.tenant, memory_id, run.id) or run

    def list(self, caller: Caller, memory_id: str, limit: int | None = None, cursor: str | None = None) -> Page:
        self._ports.access(caller).require(memory_id, "read")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        runs = sorted(self._runs.list(caller.tenant, memory_id), key=lambda r: (r.started_at, r.id), reverse=True)
        after = cursors.decode("consolidations", cursor, shape=(int, str))
        if after is not None:
            runs = [r for r in runs if [r.started_at, r.id] < after]
        page = runs[:size]
        more = len(runs) > size
        return Page(page, cursors.encode("consolidations", [page[-1].started_at, page[-1].id]) if more else None)

    def get(self, caller: Caller, memory_id: str, run_id: str) -> Run:
        self._ports.access(caller).require(memory_id, "read")
        run = self._runs.get(caller.tenant, memory_id, run_id) if ID_PATTERN.match(run_id) else None
        if run is None:
            raise RunNotFound(run_id)
        return run

    def revert(self, caller: Caller, memory_id: str, run_id: str) -> Run:
        """Append: each record the run forgot or superseded is current again as a new version."""
        self._ports.access(caller).require(memory_id, "write")
        run = self.get(caller, memory_id, run_id)
        if run.status in ("queued", "running"):
            raise MemoryConflict("a run is reverted once it has finished")
        if run.reverted_by is not None:
            raise MemoryConflict(f"run {run_id} was reverted already")
        records = self._ports.records
        now = format_ms(self._ports.clock.now_ms())
        reverted: list[Change] = []
        for change in run.changes:
            chain = records.chain(caller.tenant, change.chain_id)
            latest = chain[-1] if chain else None
            if latest is None:
                continue  # erased since: nothing to bring back
            undo = latest.id == change.record_id and latest.is_current
            if change.action in ("forgotten", "superseded") and undo and latest.status == "forgotten":
                revision = latest.evolve(
                    id=self._ports.ids.new("hrec_"), version=latest.version + 1, status="active",
                    supersedes=latest.id, superseded_by=None, written_at=now, invalidated_at=None,
                    written_by=CONSOLIDATOR,
                )
                closed = latest.evolve(superseded_by=revision.id)
                try:
                    records.reopen(closed, revision)
                except StaleVersion:
                    continue
                index_after_commit(self._index, [closed, revision])
                reverted.append(Change(revision.id, "created", revision.chain_id))
            elif change.action == "created" and undo and latest.status == "active":
                closed = latest.evolve(status="forgotten", invalidated_at=now)
                try:
                    records.close(latest, closed)
                except StaleVersion:
                    continue
                index_after_commit(self._index, [closed])
                reverted.append(Change(latest.id, "forgotten", latest.chain_id))
        reversal = run.evolve(reverted_by=caller.principal, status="reverted")
        self._runs.save(reversal, release=False)
        return reversal

    # -- the workflow's steps ----------------------------------------------------------------

    def consolidate(self, state: dict[str, Any]) -> dict[str, Any]:
        tenant, memory_id = state["tenant"], state["memory_id"]
        run = self._runs.get(tenant, memory_id, state["run_id"])
        if run is None or run.status not in ("queued", "running"):
            return {"status": run.status if run else "missing"}  # a retried step after the finish
        earlier = [r for r in self._runs.list(tenant, memory_id)
                   if r.id != run.id and r.status in ("completed", "stopped") and r.read_through]
        through = max((r.read_through for r in earlier if r.read_through), default=None)
        oldest_first = sorted(
            (v for _, v in self._ports.records.scan_active(tenant, memory_id, None)),
            key=lambda v: (v.written_at, v.id),
        )
        work = _Pass()
        read = episodes = 0
        last_read = through
        exhausted = False
        doomed: list[RecordVersion] = []
        for version in oldest_first:
            key = identity(version)
            if through is not None and version.written_at <= through:
                work.kept.setdefault(key, version)
                continue
            if read >= run.budget_limit:
                exhausted = True
                break
            read += 1
            episodes += version.type == "episode"
            last_read = version.written_at
            if key in work.kept:
                doomed.append(version)
            else:
                work.kept[key] = version
        # Write ahead: the run names every change before making it, so a pass cut short can still be
        # reverted (revert skips a named record that was never forgotten).
        planned = {c.record_id: c for c in run.changes}
        planned.update({v.id: Change(v.id, "forgotten", v.chain_id) for v in doomed})
        run = run.evolve(changes=tuple(planned.values()))
        self._runs.save(run, release=False)
        closed_versions = []
        for version in doomed:
            closed = version.evolve(status="forgotten", invalidated_at=format_ms(self._ports.clock.now_ms()))
            try:
                self._ports.records.close(version, closed)
            except StaleVersion:
                planned.pop(version.id, None)  # changed by someone since it was read: left alone
                continue
            closed_versions.append(closed)
        index_after_commit(self._index, closed_versions)
        work.changes = list(planned.values())
        finished = run.evolve(
            status="stopped" if exhausted else "completed",
            finished_at=self._ports.clock.now_ms() // 1000,
            records_read=read,
            episodes_read=episodes,
            read_through=last_read,
            budget_exhausted=exhausted,
            changes=tuple(work.changes),
        )
        self._runs.save(finished, release=True)
        return {"status": finished.status}

    def record_failure(self, state: dict[str, Any]) -> dict[str, Any]:
        run = self._runs.get(state["tenant"], state["memory_id"], state["run_id"])
        if run is not None and run.status in ("queued", "running"):
            error = state.get("error") or {}
            self._runs.save(
                run.evolve(status="failed", finished_at=self._ports.clock.now_ms() // 1000,
                           error=str(error.get("Error", "States.TaskFailed"))),
                release=True,
            )
        return {"status": "failed"}
