"""Consolidation runs (§9.2): background work that rewrites what a memory holds, made visible,
bounded and reversible.

A run reads the memory's current records written since the last run (`read.through`, resumed at the
exact record), oldest first, a step at a time (at most STEP_RECORDS records per step, so no step reads
the whole memory and each fits a Lambda), within a budget in tokens: the MiniLM tokenizer's count of
each record's text read, and the tokens a model reports for what it was asked and answered (`usage`).
For each record it asks the search index for its neighbours in the memory (never a scan of the memory)
and applies the rules of domain/merging.py, which need no model:
- a repeat or a near duplicate of an older current record is forgotten (the older one stays);
- a restatement of an older record's `attributes.key` with a later `valid_from` supersedes it: the
  older chain takes the newer statement as its next version, and the newer record is forgotten;
and, each step, it forgets current records whose `valid_to` has passed (found by the index's filter).

Where the stage has a model (domain/derivation.py), each step also asks it two things:
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

import builtins
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from uhp_memories.domain import cursors
from uhp_memories.domain.consolidation import merging
from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import (
    AlreadyExists,
    DomainError,
    MemoryConflict,
    MemoryInvalid,
    SourceGone,
    StaleVersion,
    TreeChanged,
)
from uhp_memories.domain.jobs.service import WorkflowRunner
from uhp_memories.domain.limits import LIST_DEFAULT, LIST_MAX
from uhp_memories.domain.models import Caller, Page, RecordVersion
from uhp_memories.domain.observing.derivation import (
    DerivationError,
    DerivationUsage,
    Deriver,
    EpisodeText,
    Statement,
    references_for,
)
from uhp_memories.domain.records.service import ID_PATTERN, VersionIndex, index_after_commit
from uhp_memories.domain.timefmt import format_ms

logger = logging.getLogger(__name__)

CONSOLIDATOR = {"kind": "consolidator", "id": "native"}
# A revert's versions carry the caller who reverted as writer and this key in their origin, naming the run
# they undo (a client's origin has only run_id, principal_id and tool_call_id: api/schemas.OriginIn).
REVERTS = "reverts_run_id"


def settled(record: RecordVersion) -> bool:
    """Whether a run leaves the record as it is: the consolidator's own conclusion, or a revert's
    restoration (a person undid a run; the next run must not redo it)."""
    return record.written_by == CONSOLIDATOR or bool((record.origin or {}).get(REVERTS))
DEFAULT_BUDGET = 250_000  # tokens
MAX_BUDGET = 10_000_000
STEP_RECORDS = 200  # new records one step reads: a step's work is bounded whatever the memory's size
EXPIRED_PER_STEP = 100
NEIGHBOURS = 5  # the most similar records a new record is compared with
SUBJECT_PEERS = 10  # the records of the same attributes.key a new record is compared with
# With a model: a new record and its closest older record of the same type are judged from this cosine up
# (below the near-duplicate rule's 0.92, where "March" and "April" sit; far below it, two records are
# about different things and a judgement only costs tokens).
JUDGE_SIMILARITY = 0.65
JUDGE_BATCH = 50  # pairs in one request (derivation/prompts.py MAX_PAIRS)
SUMMARY_BATCH = 50  # episodes in one request


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
    status: str  # queued | running | completed | stopped | failed (a revert keeps it; reverted_by says so)
    trigger: str
    started_at: int  # epoch seconds (§9.2)
    budget_limit: int
    requested_by: str
    finished_at: int | None = None
    episodes_read: int = 0
    records_read: int = 0
    read_through: str | None = None
    read_position: str | None = None  # the last record read, exactly ("<written_at>#<id>"): where to resume
    tokens_read: int = 0
    model_input_tokens: int = 0  # what a model was sent, as it counted it
    model_output_tokens: int = 0
    budget_exhausted: bool = False
    changes: tuple[Change, ...] = ()
    reverted_by: str | None = None
    error: str = ""

    def evolve(self, **changes: Any) -> Run:
        return replace(self, **changes)

    @property
    def tokens_spent(self) -> int:
        return self.tokens_read + self.model_input_tokens + self.model_output_tokens


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


class Neighbours(Protocol):
    """What a pass asks the search index instead of reading the memory (search/neighbours.py)."""

    def similar(self, record: RecordVersion, limit: int) -> list[tuple[str, float]]:
        """Current records of the record's memory and type most like it: (record_id, cosine similarity)."""
        ...

    def same_subject(self, record: RecordVersion, key: str, limit: int) -> list[str]:
        """Current records of the record's memory and type whose attributes.key is `key`."""
        ...

    def expired(self, tenant: str, memory_id: str, now: str, limit: int) -> list[str]:
        """Current records of the memory whose valid_to is before `now`."""
        ...


@dataclass
class _Step:
    """What one step decided, before it writes anything."""

    forget: list[RecordVersion] = field(default_factory=list)
    supersede: list[tuple[RecordVersion, RecordVersion]] = field(default_factory=list)  # (older, newer)
    touched: set[str] = field(default_factory=set)  # chains this step changes: each at most once
    to_judge: list[tuple[RecordVersion, RecordVersion]] = field(default_factory=list)  # (older, newer), for a model
    episodes: list[RecordVersion] = field(default_factory=list)  # read this step: a model may summarise them
    create: list[tuple[RecordVersion, tuple[str, ...]]] = field(default_factory=list)  # (record, its sources)
    usage: DerivationUsage = field(default_factory=lambda: DerivationUsage(0, 0))

    def taken(self, record: RecordVersion) -> bool:
        return record.chain_id in self.touched

    def take(self, *records: RecordVersion) -> None:
        self.touched.update(r.chain_id for r in records)

    def spent(self, usage: DerivationUsage | None) -> None:
        if usage is not None:
            self.usage = DerivationUsage(
                self.usage.input_tokens + usage.input_tokens, self.usage.output_tokens + usage.output_tokens
            )


class ConsolidationService:
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
        self._index = index
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
        """A run its memory's schedule starts (domain/schedules.py), without waiting for it; None when one
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
                self._bring_back(latest, now, caller, run.id)
            elif change.action == "superseded" and latest.supersedes == change.record_id and latest.status == "active":
                before = next(v for v in chain if v.id == change.record_id)
                self._restore(before, latest, now, caller, run.id)
            elif (change.action == "created" and change.chain_id not in restored_chains
                  and latest.id == change.record_id and latest.status == "active"):
                self._forget(latest, now, caller, run.id)
        reversal = run.evolve(reverted_by=caller.principal)
        self._runs.save(reversal, release=False)
        return reversal

    def _bring_back(self, forgotten: RecordVersion, now: str, caller: Caller, run_id: str) -> None:
        """A forgotten record current again: a new active version with the same content. The
        forgotten version keeps its status, so history shows it was forgotten and brought back."""
        revision = self._next_version(forgotten, forgotten, now, caller, run_id)
        closed = forgotten.evolve(superseded_by=revision.id)
        try:
            self._ports.records.reopen(closed, revision)
        except StaleVersion:
            return  # changed since it was read: left alone
        index_after_commit(self._index, [closed, revision])

    def _restore(
        self, before: RecordVersion, successor: RecordVersion, now: str, caller: Caller, run_id: str
    ) -> None:
        """The version the run superseded current again: a new version over the run's successor,
        holding what `before` held."""
        revision = self._next_version(before, successor, now, caller, run_id)
        closed = successor.evolve(status="superseded", superseded_by=revision.id, invalidated_at=now)
        try:
            self._ports.records.append_revision(closed, revision)
        except StaleVersion:
            return
        index_after_commit(self._index, [closed, revision])

    def _forget(self, created: RecordVersion, now: str, caller: Caller, run_id: str) -> None:
        closed = created.evolve(
            status="forgotten", invalidated_at=now,
            forgotten_by={"written_by": caller.written_by, "origin": {REVERTS: run_id}},
        )
        try:
            self._ports.records.close(created, closed)
        except StaleVersion:
            return
        index_after_commit(self._index, [closed])

    def _next_version(
        self, holding: RecordVersion, latest: RecordVersion, now: str, caller: Caller, run_id: str
    ) -> RecordVersion:
        """The version after `latest` in its chain, holding what `holding` held, written by the
        caller who reverts, its origin naming the run it undoes."""
        return latest.evolve(
            id=self._ports.ids.new("hrec_"), version=latest.version + 1, status="active",
            content=holding.content, attributes=holding.attributes, valid_from=holding.valid_from,
            valid_to=holding.valid_to, references=holding.references,
            supersedes=latest.id, superseded_by=None, written_at=now, invalidated_at=None,
            written_by=caller.written_by, origin={REVERTS: run_id},
        )

    # -- the workflow's steps ----------------------------------------------------------------

    def consolidate(self, tenant: str, memory_id: str, run_id: str) -> Run | None:
        """One step of a started run; the run as the step left it (None: no such run). `running` asks
        for another step. A retried step after the run finished changes nothing and answers it."""
        run = self._runs.get(tenant, memory_id, run_id)
        if run is None or run.status not in ("queued", "running"):
            return run
        position = run.read_position if run.read_position is not None else self._resume_point(run)
        neighbours = self._neighbours()
        deriver = self._deriver()
        step = _Step()
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
            ours = settled(record)
            if record.type == "episode" and not ours:
                step.episodes.append(record)
            if neighbours is not None and not ours and merging.eligible(record) and not step.taken(record):
                self._decide(record, neighbours, step, judging=deriver is not None)
        if deriver is not None and not exhausted:
            exhausted = self._ask_model(run, deriver, step, tokens_left - tokens)
        if neighbours is not None and not exhausted:
            more = self._expire(tenant, memory_id, neighbours, step) or more
        run = run.evolve(
            records_read=run.records_read + read,
            episodes_read=run.episodes_read + episodes,
            tokens_read=run.tokens_read + tokens,
            model_input_tokens=run.model_input_tokens + step.usage.input_tokens,
            model_output_tokens=run.model_output_tokens + step.usage.output_tokens,
            read_through=through,
            read_position=position,
        )
        run = self._apply(run, step)
        if exhausted or not more:
            run = run.evolve(
                status="stopped" if exhausted else "completed",
                finished_at=self._ports.clock.now_ms() // 1000,
                budget_exhausted=exhausted,
            )
        self._runs.save(run, release=run.status != "running")
        return run

    def _expire(self, tenant: str, memory_id: str, neighbours: Neighbours, step: _Step) -> bool:
        """Forget current records whose valid_to has passed, up to EXPIRED_PER_STEP; whether there may be
        more. Only a step that forgot something asks for another: expired records no rule applies to (an
        episode, a file) must not keep a run going."""
        now = format_ms(self._ports.clock.now_ms())
        expired_ids = neighbours.expired(tenant, memory_id, now, EXPIRED_PER_STEP)
        found = self._ports.records.get_many(tenant, memory_id, expired_ids)
        forgotten = 0
        for record in (found[i] for i in expired_ids if i in found):
            expired = record.valid_to is not None and record.valid_to < now
            ours = settled(record)
            if expired and not ours and merging.eligible(record) and not step.taken(record):
                step.forget.append(record)
                step.take(record)
                forgotten += 1
        return forgotten > 0 and len(expired_ids) == EXPIRED_PER_STEP

    def _ask_model(self, run: Run, deriver: Deriver, step: _Step, tokens_left: int) -> bool:
        """Ask the model to judge the step's candidate pairs, then to summarise its episodes that nothing
        was derived from yet, while the budget lasts; whether it ran out."""
        pairs = [(older, newer) for older, newer in step.to_judge if not step.taken(older) and not step.taken(newer)]
        for batch in _chunks(pairs, JUDGE_BATCH):
            if self._out_of_budget(step, tokens_left):
                return True
            try:
                judged = deriver.judge([(Statement.of(older), Statement.of(newer)) for older, newer in batch])
            except DerivationError as error:
                if self._given_up(error, step):
                    break
                raise
            step.spent(judged.usage)
            for (older, newer), relation in zip(batch, judged.relations, strict=True):
                if step.taken(older) or step.taken(newer):
                    continue
                if relation == "updates":
                    step.supersede.append((older, newer))
                    step.take(older, newer)
                elif relation == "same":
                    step.forget.append(newer)
                    step.take(newer)
        records = self._ports.records
        unsummarised = [e for e in step.episodes if not records.derived_from(e.tenant, [e.id])]
        for episodes in _chunks(unsummarised, SUMMARY_BATCH):
            if self._out_of_budget(step, tokens_left):
                return True
            texts = [EpisodeText.of(e) for e in episodes]
            try:
                derived = deriver.derive(texts)
            except DerivationError as error:
                if self._given_up(error, step):
                    break
                raise
            step.spent(derived.usage)
            origin = {"run_id": run.id, "model": derived.model, "prompt_version": derived.prompt_version}
            written_at = format_ms(self._ports.clock.now_ms())
            for fact in derived.facts:
                record_id = self._ports.ids.new("hrec_")
                record = RecordVersion(
                    tenant=run.tenant, memory_id=run.memory_id, id=record_id, chain_id=record_id, version=1,
                    type=fact.type, content=fact.content, attributes=fact.attributes, status="active",
                    supersedes=None, superseded_by=None, valid_from=fact.valid_from, valid_to=None,
                    written_at=written_at, invalidated_at=None, written_by=CONSOLIDATOR,
                    references=references_for(fact, texts), origin=origin,
                )
                step.create.append((record, fact.sources))
        return self._out_of_budget(step, tokens_left)

    @staticmethod
    def _out_of_budget(step: _Step, tokens_left: int) -> bool:
        return step.usage.input_tokens + step.usage.output_tokens >= tokens_left

    @staticmethod
    def _given_up(error: DerivationError, step: _Step) -> bool:
        """A refused or malformed answer: the step goes on with the rules alone (it is paid for). An
        error worth retrying is the workflow's to retry."""
        if error.retryable:
            return False
        step.spent(error.usage)
        logger.warning("consolidation's model answer was not used", extra={"reason": error.reason})
        return True

    def _resume_point(self, run: Run) -> str | None:
        """Where the last finished run stopped reading."""
        earlier = [r for r in self._runs.list(run.tenant, run.memory_id)
                   if r.id != run.id and r.status in ("completed", "stopped") and r.read_position]
        return max((r.read_position for r in earlier if r.read_position), default=None)

    def _decide(self, record: RecordVersion, neighbours: Neighbours, step: _Step, judging: bool = False) -> None:
        """Compare a new record with older current ones its neighbours name (read back from the table). A
        record that names its subject is first compared with that subject's records: "March" then
        "April" is a restatement, however alike the two sentences are."""
        key = merging.subject(record)
        if key is not None:
            ids = neighbours.same_subject(record, key, SUBJECT_PEERS)
            peers = [p for p, _ in self._older_peers(record, [(i, 0.0) for i in ids], step)]
            if any(merging.repeats(record, p) for p in peers):
                step.forget.append(record)
                step.touched.add(record.chain_id)
                return
            restated = [p for p in peers if merging.restates(record, p)]
            if restated:
                latest = max(restated, key=lambda p: (p.valid_from or p.written_at, p.written_at))
                step.supersede.append((latest, record))
                step.touched.update({latest.chain_id, record.chain_id})
            return
        similar = self._older_peers(record, neighbours.similar(record, NEIGHBOURS), step)
        for peer, similarity in similar:
            if merging.repeats(record, peer) or merging.near_duplicate(record, peer, similarity):
                step.forget.append(record)
                step.touched.add(record.chain_id)
                return
        if judging:
            # No rule settles it: the closest older record of its type is the model's to judge.
            close = [(p, sim) for p, sim in similar if p.type == record.type and sim >= JUDGE_SIMILARITY]
            if close:
                step.to_judge.append((max(close, key=lambda hit: hit[1])[0], record))

    def _older_peers(
        self, record: RecordVersion, hits: Sequence[tuple[str, float]], step: _Step
    ) -> builtins.list[tuple[RecordVersion, float]]:
        """The hits that are current records written before this one, not changed by this step."""
        found = self._ports.records.get_many(record.tenant, record.memory_id, [i for i, _ in hits if i != record.id])
        peers = []
        for record_id, similarity in hits:
            peer = found.get(record_id)
            if peer is None or not merging.eligible(peer) or step.taken(peer):
                continue
            if (peer.written_at, peer.id) < (record.written_at, record.id):
                peers.append((peer, similarity))
        return peers

    def _apply(self, run: Run, step: _Step) -> Run:
        """Write ahead (the run names every change before making it, so a step cut short can still be
        reverted: revert skips a named change never made), then make the changes."""
        now = format_ms(self._ports.clock.now_ms())
        origin = {"run_id": run.id}
        revisions = {older.id: self._ports.ids.new("hrec_") for older, _ in step.supersede}
        planned: dict[str, Change] = {c.record_id: c for c in run.changes}
        for older, newer in step.supersede:
            planned[older.id] = Change(older.id, "superseded", older.chain_id)
            planned[revisions[older.id]] = Change(revisions[older.id], "created", older.chain_id)
            planned[newer.id] = Change(newer.id, "forgotten", newer.chain_id)
        for record in step.forget:
            planned[record.id] = Change(record.id, "forgotten", record.chain_id)
        for record, _ in step.create:
            planned[record.id] = Change(record.id, "created", record.chain_id)
        self._runs.save(run.evolve(changes=tuple(planned.values())), release=False)
        written: builtins.list[RecordVersion] = []
        for older, newer in step.supersede:
            revision = older.evolve(
                id=revisions[older.id], version=older.version + 1, status="active", content=newer.content,
                attributes=newer.attributes, valid_from=newer.valid_from, valid_to=newer.valid_to,
                references=newer.references, projection=newer.projection, supersedes=older.id,
                superseded_by=None, written_at=now, invalidated_at=None, written_by=CONSOLIDATOR, origin=origin,
            )
            closed = older.evolve(status="superseded", superseded_by=revision.id, invalidated_at=now)
            try:
                self._ports.records.append_revision(closed, revision)
            except StaleVersion:  # changed by someone since it was read: left alone
                for dropped in (older.id, revision.id, newer.id):
                    planned.pop(dropped, None)
                continue
            written += [closed, revision]
            written += self._forget_one(newer, now, origin, planned)
        for record in step.forget:
            written += self._forget_one(record, now, origin, planned)
        for record, sources in step.create:
            try:
                self._ports.records.append_derived(record, sources)
            except AlreadyExists:
                continue  # written by the attempt before: indexed then
            except (SourceGone, TreeChanged):
                planned.pop(record.id, None)  # its episodes were erased, or the memory is going
                continue
            written.append(record)
        index_after_commit(self._index, written)
        return run.evolve(changes=tuple(planned.values()))

    def _forget_one(
        self, record: RecordVersion, now: str, origin: dict[str, str], planned: dict[str, Change]
    ) -> builtins.list[RecordVersion]:
        closed = record.evolve(
            status="forgotten", invalidated_at=now, forgotten_by={"written_by": CONSOLIDATOR, "origin": origin}
        )
        try:
            self._ports.records.close(record, closed)
        except StaleVersion:
            planned.pop(record.id, None)
            return []
        return [closed]

    def record_failure(self, tenant: str, memory_id: str, run_id: str, error: str) -> None:
        """The pass kept failing after its retries: the run fails with `error` and frees its memory.
        A run that finished meanwhile keeps its outcome."""
        run = self._runs.get(tenant, memory_id, run_id)
        if run is not None and run.status in ("queued", "running"):
            self._runs.save(
                run.evolve(status="failed", finished_at=self._ports.clock.now_ms() // 1000, error=error),
                release=True,
            )


def _chunks[T](items: Sequence[T], size: int) -> builtins.list[Sequence[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
