"""Undoing a finished consolidation run (§9.2, ConsolidationService.revert): new versions that make the
memory hold again what it held before the run, each stamped with the caller and the run it reverts.
"""

from __future__ import annotations

from uhp_memories.domain.consolidation.model import REVERTS, Run
from uhp_memories.domain.errors import StaleVersion
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records import lifecycle
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.domain.records.writer import RecordWriter
from uhp_memories.domain.timefmt import format_ms


class RunReversal:
    """Writes the versions that undo a run's changes; ConsolidationService.revert checks and records it."""

    def __init__(self, ports: Ports, writer: RecordWriter) -> None:
        self._ports = ports
        self._writer = writer

    def undo(self, caller: Caller, run: Run) -> None:
        """Undo each change the run names that still stands; a record changed since is left as it is."""
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

    def _bring_back(self, forgotten: RecordVersion, now: str, caller: Caller, run_id: str) -> None:
        """A forgotten record current again: a new active version with the same content. The
        forgotten version keeps its status, so history shows it was forgotten and brought back."""
        closed, revision = lifecycle.reopened(
            forgotten, revision_id=self._ports.ids.new("hrec_"), written_at=now, written_by=caller.written_by,
            origin={REVERTS: run_id},
        )
        try:
            self._writer.reopen(closed, revision)
        except StaleVersion:
            return  # changed since it was read: left alone

    def _restore(
        self, before: RecordVersion, successor: RecordVersion, now: str, caller: Caller, run_id: str
    ) -> None:
        """The version the run superseded current again: a new version over the run's successor,
        holding what `before` held."""
        closed, revision = lifecycle.revised(
            successor, revision_id=self._ports.ids.new("hrec_"), written_at=now, written_by=caller.written_by,
            origin={REVERTS: run_id}, content=before.content, attributes=before.attributes,
            valid_from=before.valid_from, valid_to=before.valid_to, references=before.references,
        )
        try:
            self._writer.revision(closed, revision)
        except StaleVersion:
            return

    def _forget(self, created: RecordVersion, now: str, caller: Caller, run_id: str) -> None:
        closed = lifecycle.forgotten(created, at=now, written_by=caller.written_by, origin={REVERTS: run_id})
        try:
            self._writer.close(created, closed)
        except StaleVersion:
            return
