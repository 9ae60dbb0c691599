"""Consolidation runs (§9.2): background work that rewrites what a memory holds, made visible,
bounded and reversible.

A run reads the memory's current records written since the last run (`read.through`, resumed at the
exact record), oldest first, a step at a time (at most STEP_RECORDS records per step, so no step reads
the whole memory and each fits a Lambda), within a budget in tokens: the MiniLM tokenizer's count of
each record's text read, and the tokens a model reports for what it was asked and answered (`usage`).
For each record it asks the search index for its neighbours in the memory (never a scan of the memory)
and applies the rules of domain/consolidation/merging.py, which need no model:
- a repeat or a near duplicate of an older current record is forgotten (the older one stays);
- a restatement of an older record's `attributes.key` with a later `valid_from` supersedes it: the
  older chain takes the newer statement as its next version, and the newer record is forgotten;
and, each step, it forgets current records whose `valid_to` has passed (found by the index's filter).

Where the stage has a model (domain/observing/model.py), each step also asks it two things:
- which of its new records update or contradict an older similar one (the closest current record of the
  same type with a cosine of at least JUDGE_SIMILARITY that no rule settled): an update supersedes the
  older record with the newer statement, as a restatement does; a record that says the same thing in
  other words is forgotten;
- what is worth keeping in the episodes it read that nothing was derived from yet (observed before the
  stage derived, or whose derivation failed): facts and notes, written as the run's own records,
  `derived_from` their episodes.
A model answer that is refused or malformed leaves the step to the rules alone; throttling fails the
step, for the workflow to retry.
Every record a run writes or forgets is stamped with the consolidator and `origin.run_id`. A run
whose budget runs out stops; the next resumes after `read.through`. Revert appends: each record the
run forgot or superseded is current again as a new version, each one it created is forgotten.

A run executes in the consolidation state machine (uhp_memories/workflows/consolidate.asl.json),
which runs the consolidate step again while it answers `running`, and holds its memory while it
runs: a move or a delete answers memory_busy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from uhp_memories.domain import cursors
from uhp_memories.domain.consolidation import merging
from uhp_memories.domain.consolidation.model import (
    DEFAULT_BUDGET,
    MAX_BUDGET,
    Run,
    RunNotFound,
    run_leaves_alone,
)
from uhp_memories.domain.consolidation.ports import Neighbours, RunRepository
from uhp_memories.domain.consolidation.revert import RunReversal
from uhp_memories.domain.consolidation.steps import NEIGHBOURS as NEIGHBOURS  # re-exported: a step's bound
from uhp_memories.domain.consolidation.steps import ConsolidationStep, Step
from uhp_memories.domain.errors import MemoryConflict, MemoryInvalid, TreeChanged
from uhp_memories.domain.jobs import WorkflowRunner
from uhp_memories.domain.limits import LIST_DEFAULT, LIST_MAX
from uhp_memories.domain.model import Caller, Page
from uhp_memories.domain.observing.ports import Deriver
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records.model import ID_PATTERN, RecordVersion
from uhp_memories.domain.records.ports import VersionIndex
from uhp_memories.domain.records.writer import RecordWriter

logger = logging.getLogger(__name__)

STEP_RECORDS = 200  # new records one step reads: a step's work is bounded whatever the memory's size


class ConsolidationService:
    """Starts, lists, reverts and runs the steps of a memory's consolidation runs (§9.2)."""

    def __init__(
        self,
        ports: Ports,
        runs: RunRepository,
        workflows: WorkflowRunner,
        wait_seconds: float,
        index: Callable[[], VersionIndex | None] | None = None,
        neighbours: Callable[[], Neighbours | None] | None = None,
        count_tokens: Callable[[str], int] | None = None,
        text_of: Callable[[RecordVersion], str] | None = None,
        deriver: Callable[[], Deriver | None] | None = None,
    ) -> None:
        self._ports = ports
        self._runs = runs
        self._workflows = workflows
        self.wait_seconds = wait_seconds
        self._writer = RecordWriter(ports.records, index)
        self._step = ConsolidationStep(ports, runs, self._writer)
        self._reversal = RunReversal(ports, self._writer)
        self._neighbours = neighbours or (lambda: None)
        self._count = count_tokens or (lambda text: len(text.split()))
        self._text = text_of or (lambda r: r.content if isinstance(r.content, str) else "")
        self._deriver = deriver or (lambda: None)

    # -- API ---------------------------------------------------------------------------------

    def start(self, caller: Caller, memory_id: str, budget: int | None) -> Run:
        """Start a pass now. It rewrites the memory, so it needs write."""
        memory = self._ports.access(caller).require(memory_id, "write")
        self._ports.providers.require_native(memory, "consolidation runs")
        limit = DEFAULT_BUDGET if budget is None else budget
        if not 1 <= limit <= MAX_BUDGET:
            raise MemoryInvalid(f"budget.limit is 1 to {MAX_BUDGET} tokens")
        if self._running(caller.tenant, memory_id):
            raise MemoryConflict("a consolidation run of this memory is already running")
        run = self._launch(caller.tenant, memory_id, "manual", limit, caller.principal)
        self._workflows.wait(run.id, "consolidate", self.wait_seconds)
        return self._runs.get(caller.tenant, memory_id, run.id) or run

    def start_scheduled(self, tenant: str, memory_id: str, budget: int | None) -> Run | None:
        """A run its memory's schedule starts (domain/consolidation/schedules.py), without waiting for it; None when one
        is running already (this tick is skipped: the next run resumes where that one stops)."""
        if self._running(tenant, memory_id):
            return None
        try:
            return self._launch(tenant, memory_id, "schedule", budget or DEFAULT_BUDGET, "schedule")
        except TreeChanged:
            return None  # the memory went (or another tick won the race for the same run id)

    def _running(self, tenant: str, memory_id: str) -> bool:
        return any(r.status in ("queued", "running") for r in self._runs.list(tenant, memory_id))

    def _launch(self, tenant: str, memory_id: str, trigger: str, limit: int, requested_by: str) -> Run:
        run = Run(
            tenant=tenant,
            id=self._ports.ids.new("hcon_"),
            memory_id=memory_id,
            status="running",
            trigger=trigger,
            started_at=self._ports.clock.now_ms() // 1000,
            budget_limit=limit,
            requested_by=requested_by,
        )
        self._runs.start(run)
        self._workflows.start("consolidate", run.id, {"tenant": tenant, "memory_id": memory_id, "run_id": run.id})
        return run

    def list(self, caller: Caller, memory_id: str, limit: int | None = None, cursor: str | None = None) -> Page:
        """A page of the memory's runs, newest first; needs read."""
        self._ports.access(caller).require(memory_id, "read")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        runs = sorted(self._runs.list(caller.tenant, memory_id), key=lambda r: (r.started_at, r.id), reverse=True)
        after = cursors.decode("consolidations", cursor, shape=(int, str), over=memory_id)
        if after is not None:
            runs = [r for r in runs if [r.started_at, r.id] < after]
        page = runs[:size]
        more = len(runs) > size
        position = [page[-1].started_at, page[-1].id] if more else None
        return Page(page, cursors.encode("consolidations", position, over=memory_id) if more else None)

    def get(self, caller: Caller, memory_id: str, run_id: str) -> Run:
        """One run of the memory, by its id; needs read."""
        self._ports.access(caller).require(memory_id, "read")
        return self._run(caller, memory_id, run_id)

    def _run(self, caller: Caller, memory_id: str, run_id: str) -> Run:
        run = self._runs.get(caller.tenant, memory_id, run_id) if ID_PATTERN.match(run_id) else None
        if run is None:
            raise RunNotFound(run_id)
        return run

    def revert(self, caller: Caller, memory_id: str, run_id: str) -> Run:
        """Append (§9.2): each record the run forgot or superseded is current again as a new version
        holding what it held before the run, and each record it created is forgotten, so the memory
        holds again what it held before the run. Every version the run's change list names stays in
        its chain (readable by its id, with its status). A record someone changed after the run is
        left as it is: undoing the run must not undo their change.

        Needs write, as starting a run does, and not read: the answer is the run (counts, never
        content or record ids), and what it restores a writer could have written back itself. The
        versions a reversal writes are the caller's act, stamped with the caller (§9.2: only what a run
        writes carries the consolidator), and the run keeps its own status (§9.2's list has no
        "reverted"): `reverted_by` says it was undone."""
        self._ports.access(caller).require(memory_id, "write")
        run = self._run(caller, memory_id, run_id)
        if run.status in ("queued", "running"):
            raise MemoryConflict("a run is reverted once it has finished")
        if run.reverted_by is not None:
            raise MemoryConflict(f"run {run_id} was reverted already")
        self._reversal.undo(caller, run)
        reversal = run.evolve(reverted_by=caller.principal)
        self._runs.save(reversal, release=False)
        return reversal

    # -- the workflow's steps ----------------------------------------------------------------

    def consolidate(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        """One step of a started run; the run as the step left it (None: no such run). `running` asks
        for another step. A retried step after the run finished changes nothing and answers it."""
        run = self._runs.get(tenant, memory_id, run_id)
        if run is None or run.status not in ("queued", "running"):
            return run
        position = run.read_position if run.read_position is not None else self._step.resume_point(run)
        neighbours = self._neighbours()
        deriver = self._deriver()
        step = Step()
        tokens_left = run.budget_limit - run.tokens_spent
        read = episodes = tokens = 0
        through, exhausted, more = run.read_through, False, False
        for seen, record in self._ports.records.active_after(tenant, memory_id, position):
            if read == STEP_RECORDS:
                more = True
                break
            cost = self._count(self._text(record))
            if cost > tokens_left - tokens:
                exhausted = True
                break
            read, tokens, position, through = read + 1, tokens + cost, seen, record.written_at
            episodes += record.type == "episode"
            # The consolidator's own versions (a run's conclusions) and a revert's restorations are
            # compared with, never reconsidered: a revert must not be undone by the next run.
            ours = run_leaves_alone(record)
            if record.type == "episode" and not ours:
                step.episodes.append(record)
            if neighbours is not None and not ours and merging.eligible(record) and not step.taken(record):
                self._step.decide(record, neighbours, step, judging=deriver is not None)
        if deriver is not None and not exhausted:
            exhausted = self._step.ask_model(run, deriver, step, tokens_left - tokens)
        if neighbours is not None and not exhausted:
            more = self._step.expire(tenant, memory_id, neighbours, step) or more
        run = run.evolve(
            records_read=run.records_read + read,
            episodes_read=run.episodes_read + episodes,
            tokens_read=run.tokens_read + tokens,
            model_input_tokens=run.model_input_tokens + step.usage.input_tokens,
            model_output_tokens=run.model_output_tokens + step.usage.output_tokens,
            read_through=through,
            read_position=position,
        )
        run = self._step.apply(run, step)
        if exhausted or not more:
            run = run.evolve(
                status="stopped" if exhausted else "completed",
                finished_at=self._ports.clock.now_ms() // 1000,
                budget_exhausted=exhausted,
            )
        self._runs.save(run, release=run.status != "running")
        return run

    def record_failure(self, tenant: str, memory_id: str, run_id: str, error: str) -> None:
        """The pass kept failing after its retries: the run fails with `error` and frees its memory.
        A run that finished meanwhile keeps its outcome."""
        run = self._runs.get(tenant, memory_id, run_id)
        if run is not None and run.status in ("queued", "running"):
            self._runs.save(
                run.evolve(status="failed", finished_at=self._ports.clock.now_ms() // 1000, error=error),
                release=True,
            )

