"""Consolidation runs (§9.2): background work that rewrites what a memory holds, made visible,
bounded and reversible.

The native consolidator derives nothing (derivation: none) and runs no model. Each pass reads the
memory's current records written since the last pass (`read.through`), oldest first, within a
budget counted in records, and forgets every record that repeats an earlier current one exactly
(same type, same text once whitespace and case are folded, same attributes). A pass whose budget
runs out stops; the next resumes after `read.through`. Revert appends: each record the run forgot
becomes current again as a new version, written by the consolidator.

A run executes in the consolidation state machine (uhp_memories/workflows/consolidate.asl.json) and
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
        """Append (§9.2): each record the run forgot or superseded is current again as a new version
        holding what it held before the run, and each record it created is forgotten, so the memory
        holds again what it held before the run. Every version the run's change list names stays in
        its chain (readable by its id, with its status). A record someone changed after the run is
        left as it is: undoing the run must not undo their change."""
        self._ports.access(caller).require(memory_id, "write")
        run = self.get(caller, memory_id, run_id)
        if run.status in ("queued", "running"):
            raise MemoryConflict("a run is reverted once it has finished")
        if run.reverted_by is not None:
            raise MemoryConflict(f"run {run_id} was reverted already")
        now = format_ms(self._ports.clock.now_ms())
        # A run that supersedes a record writes its successor in the same chain; restoring the
        # superseded version undoes both, so that successor is not forgotten on its own as well.
        restored_chains = {c.chain_id for c in run.changes if c.action == "superseded"}
        for change in run.changes:
            chain = self._ports.records.chain(caller.tenant, change.chain_id)
            if not chain:
                continue  # erased since: nothing to bring back
            latest = chain[-1]
            if not latest.is_current:
                continue
            if change.action == "forgotten" and latest.id == change.record_id and latest.status == "forgotten":
                self._bring_back(latest, now)
            elif change.action == "superseded" and latest.supersedes == change.record_id and latest.status == "active":
                before = next(v for v in chain if v.id == change.record_id)
                self._restore(before, latest, now)
            elif (change.action == "created" and change.chain_id not in restored_chains
                  and latest.id == change.record_id and latest.status == "active"):
                self._forget(latest, now)
        reversal = run.evolve(reverted_by=caller.principal, status="reverted")
        self._runs.save(reversal, release=False)
        return reversal

    def _bring_back(self, forgotten: RecordVersion, now: str) -> None:
        """A forgotten record current again: a new active version with the same content. The
        forgotten version keeps its status, so history shows it was forgotten and brought back."""
        revision = self._next_version(forgotten, forgotten, now)
        closed = forgotten.evolve(superseded_by=revision.id)
        try:
            self._ports.records.reopen(closed, revision)
        except StaleVersion:
            return  # changed since it was read: left alone
        index_after_commit(self._index, [closed, revision])

    def _restore(self, before: RecordVersion, successor: RecordVersion, now: str) -> None:
        """The version the run superseded current again: a new version over the run's successor,
        holding what `before` held."""
        revision = self._next_version(before, successor, now)
        closed = successor.evolve(status="superseded", superseded_by=revision.id, invalidated_at=now)
        try:
            self._ports.records.append_revision(closed, revision)
        except StaleVersion:
            return
        index_after_commit(self._index, [closed, revision])

    def _forget(self, created: RecordVersion, now: str) -> None:
        closed = created.evolve(status="forgotten", invalidated_at=now)
        try:
            self._ports.records.close(created, closed)
        except StaleVersion:
            return
        index_after_commit(self._index, [closed])

    def _next_version(self, holding: RecordVersion, latest: RecordVersion, now: str) -> RecordVersion:
        """The version after `latest` in its chain, holding what `holding` held, written by the
        consolidator."""
        return latest.evolve(
            id=self._ports.ids.new("hrec_"), version=latest.version + 1, status="active",
            content=holding.content, attributes=holding.attributes, valid_from=holding.valid_from,
            valid_to=holding.valid_to, references=holding.references,
            supersedes=latest.id, superseded_by=None, written_at=now, invalidated_at=None,
            written_by=CONSOLIDATOR,
        )

    # -- the workflow's steps ----------------------------------------------------------------

    def consolidate(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        """One pass of a started run; the run as the pass left it (None: no such run). A retried step
        after the pass finished changes nothing and answers the finished run."""
        run = self._runs.get(tenant, memory_id, run_id)
        if run is None or run.status not in ("queued", "running"):
            return run
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
            if version.path is not None:
                # A file is its writer's, kept compare-and-swap: two files with the same text at two
                # paths are two files, and a pass never forgets one (or has to bring one back).
                continue
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
        return finished

    def record_failure(self, tenant: str, memory_id: str, run_id: str, error: str) -> None:
        """The pass kept failing after its retries: the run fails with `error` and frees its memory.
        A run that finished meanwhile keeps its outcome."""
        run = self._runs.get(tenant, memory_id, run_id)
        if run is not None and run.status in ("queued", "running"):
            self._runs.save(
                run.evolve(status="failed", finished_at=self._ports.clock.now_ms() // 1000, error=error),
                release=True,
            )
