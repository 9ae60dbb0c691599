"""The model that derives facts and notes from episodes (§5.1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from uhp_memories.domain.jobs import Job
from uhp_memories.domain.model import Caller
from uhp_memories.domain.observing.model import Derived, EpisodeText, Judged, Statement
from uhp_memories.domain.records.model import RecordInput, RecordVersion, RecordView


class Deriver(Protocol):
    """Turns episodes into facts and notes, and judges pairs of statements, with a model.

    `derive` sends every episode in one request and answers with what the model derived from them;
    an empty `facts` is a valid answer (nothing worth keeping). Every fact's `sources` are record ids
    of `episodes`. It raises ValueError before any call for an empty batch or a record id given twice.

    `judge` sends pairs (older, newer) in one request and answers how each newer statement stands to
    its older one (Relation), one per pair, in order. It raises ValueError before any call for no pairs.

    Both otherwise fail only with a `DerivationError`: DerivationRefused, DerivationMalformed
    (neither worth sending again as is), DerivationThrottled or DerivationUnavailable (both worth
    sending again later). Errors of configuration (access denied, unknown model) are not hidden
    as any of these: they propagate as the adapter's own.
    """

    def derive(self, episodes: Sequence[EpisodeText]) -> Derived: ...

    def judge(self, pairs: Sequence[tuple[Statement, Statement]]) -> Judged: ...


class EpisodeRecords(Protocol):
    """Records as observe writes and shows them (uhp_memories.domain.records.service.RecordService)."""

    def observe(self, caller: Caller, memory_id: str, episodes: list[RecordInput]) -> list[RecordView]:
        """Append raw episodes (§5.1)."""
        ...

    def views(self, caller: Caller, memory_id: str, versions: Sequence[RecordVersion]) -> list[RecordView]:
        """Versions of a memory as a reader of it sees them (read needed), in a read that does not ask for
        history: a forgotten record's versions are left out (§5.2)."""
        ...


class MemoryJobs(Protocol):
    """A memory's jobs as a derive job is read (uhp_memories.domain.removal.service.RemovalService)."""

    def job(self, caller: Caller, memory_id: str, job_id: str) -> Job:
        """A job of this memory (404 for another memory's, as for an unknown one)."""
        ...
