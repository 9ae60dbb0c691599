"""The machinery of one consolidation step (domain/consolidation/service.py): what a step decides for
the records it read (the rules of domain/consolidation/merging.py, expired records, a model's judgements
and summaries), and how it writes that down, naming every change in the run before making it.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from uhp_memories.domain.consolidation import merging
from uhp_memories.domain.consolidation.model import CONSOLIDATOR, Change, Run, run_leaves_alone
from uhp_memories.domain.consolidation.ports import Neighbours, RunRepository
from uhp_memories.domain.errors import StaleVersion, TreeChanged
from uhp_memories.domain.observing.model import DerivationError, DerivationUsage, EpisodeText, Statement, references_for
from uhp_memories.domain.observing.ports import Deriver
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records import lifecycle
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.domain.records.writer import Derived, RecordWriter, WriteBatch
from uhp_memories.domain.timefmt import format_ms

logger = logging.getLogger(__name__)

EXPIRED_PER_STEP = 100
NEIGHBOURS = 5  # the most similar records a new record is compared with
SUBJECT_PEERS = 10  # the records of the same attributes.key a new record is compared with
# With a model: a new record and its closest older record of the same type are judged from this cosine up
# (below the near-duplicate rule's 0.92, where "March" and "April" sit; far below it, two records are
# about different things and a judgement only costs tokens).
JUDGE_SIMILARITY = 0.65
JUDGE_BATCH = 50  # pairs in one request (adapters/prompts.py MAX_PAIRS)
SUMMARY_BATCH = 50  # episodes in one request


@dataclass
class Step:
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


class ConsolidationStep:
    """Decides and applies what one step of a run does; ConsolidationService.consolidate drives it."""

    def __init__(self, ports: Ports, runs: RunRepository, writer: RecordWriter) -> None:
        self._ports = ports
        self._runs = runs
        self._writer = writer

    def expire(self, tenant: str, memory_id: str, neighbours: Neighbours, step: Step) -> bool:
        """Forget current records whose valid_to has passed, up to EXPIRED_PER_STEP; whether there may be
        more. Only a step that forgot something asks for another: expired records no rule applies to (an
        episode, a file) must not keep a run going."""
        now = format_ms(self._ports.clock.now_ms())
        expired_ids = neighbours.expired(tenant, memory_id, now, EXPIRED_PER_STEP)
        found = self._ports.records.get_many(tenant, memory_id, expired_ids)
        forgotten = 0
        for record in (found[i] for i in expired_ids if i in found):
            expired = record.valid_to is not None and record.valid_to < now
            ours = run_leaves_alone(record)
            if expired and not ours and merging.eligible(record) and not step.taken(record):
                step.forget.append(record)
                step.take(record)
                forgotten += 1
        return forgotten > 0 and len(expired_ids) == EXPIRED_PER_STEP

    def ask_model(self, run: Run, deriver: Deriver, step: Step, tokens_left: int) -> bool:
        """Ask the model to judge the step's candidate pairs, then to summarise its episodes that nothing
        was derived from yet, while the budget lasts; whether it ran out."""
        pairs = [(older, newer) for older, newer in step.to_judge if not step.taken(older) and not step.taken(newer)]
        for batch in chunks(pairs, JUDGE_BATCH):
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
        for episodes in chunks(unsummarised, SUMMARY_BATCH):
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
                record = lifecycle.first(
                    tenant=run.tenant, memory_id=run.memory_id, record_id=self._ports.ids.new("hrec_"),
                    type=fact.type, content=fact.content, attributes=fact.attributes, written_at=written_at,
                    written_by=CONSOLIDATOR, valid_from=fact.valid_from, references=references_for(fact, texts),
                    origin=origin,
                )
                step.create.append((record, tuple(dict.fromkeys(fact.sources))))  # each source once
        return self._out_of_budget(step, tokens_left)

    @staticmethod
    def _out_of_budget(step: Step, tokens_left: int) -> bool:
        return step.usage.input_tokens + step.usage.output_tokens >= tokens_left

    @staticmethod
    def _given_up(error: DerivationError, step: Step) -> bool:
        """A refused or malformed answer: the step goes on with the rules alone (it is paid for). An
        error worth retrying is the workflow's to retry."""
        if error.retryable:
            return False
        step.spent(error.usage)
        logger.warning("consolidation's model answer was not used", extra={"reason": error.reason})
        return True

    def resume_point(self, run: Run) -> str | None:
        """Where the last finished run stopped reading."""
        earlier = [r for r in self._runs.list(run.tenant, run.memory_id)
                   if r.id != run.id and r.status in ("completed", "stopped") and r.read_position]
        return max((r.read_position for r in earlier if r.read_position), default=None)

    def decide(self, record: RecordVersion, neighbours: Neighbours, step: Step, judging: bool = False) -> None:
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
        self, record: RecordVersion, hits: Sequence[tuple[str, float]], step: Step
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

    def apply(self, run: Run, step: Step) -> Run:
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
        batch = self._writer.batch()
        for older, newer in step.supersede:
            closed, revision = lifecycle.revised(
                older, revision_id=revisions[older.id], written_at=now, written_by=CONSOLIDATOR, origin=origin,
                content=newer.content, attributes=newer.attributes, valid_from=newer.valid_from,
                valid_to=newer.valid_to, references=newer.references, projection=newer.projection,
            )
            try:
                batch.revision(closed, revision)
            except StaleVersion:  # changed by someone since it was read: left alone
                for dropped in (older.id, revision.id, newer.id):
                    planned.pop(dropped, None)
                continue
            self._forget_one(batch, newer, now, origin, planned)
        for record in step.forget:
            self._forget_one(batch, record, now, origin, planned)
        for record, sources in step.create:
            try:
                outcome = batch.derived(record, sources)  # written before: indexed then
            except TreeChanged:
                outcome = Derived.SOURCE_GONE  # the memory is going
            if outcome is Derived.SOURCE_GONE:
                planned.pop(record.id, None)  # its episodes were erased, or the memory is going
        batch.index()
        return run.evolve(changes=tuple(planned.values()))

    @staticmethod
    def _forget_one(
        batch: WriteBatch, record: RecordVersion, now: str, origin: dict[str, str], planned: dict[str, Change]
    ) -> None:
        closed = lifecycle.forgotten(record, at=now, written_by=CONSOLIDATOR, origin=origin)
        try:
            batch.close(record, closed)
        except StaleVersion:
            planned.pop(record.id, None)


def chunks[T](items: Sequence[T], size: int) -> builtins.list[Sequence[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
