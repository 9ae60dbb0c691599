"""Derivation (§5.1): a model reads episodes a memory already holds and says what is worth keeping.

The port is `Deriver`; its adapters live in `uhp_memories.derivation` (Bedrock Converse, any
OpenAI-compatible chat endpoint), the prompts and the answer's schema in one module there
(`uhp_memories.adapters.prompts`). This module holds what does not depend on a model: the values
that cross the port, the errors it fails with, and how a derived fact points back at its episodes.

Derivation runs after the episodes are written, so a failed derivation never loses one: each error
below only says what happened, and whether asking again may help (`retryable`). Nothing here or in
an adapter puts episode content (or a model's answer, which quotes it) in a log or an error message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from uhp_memories.domain.fence import text_of
from uhp_memories.domain.jobs import Job
from uhp_memories.domain.records.model import RecordVersion, RecordView

DerivedType = Literal["fact", "note"]
DERIVED_TYPES: tuple[DerivedType, ...] = ("fact", "note")
DERIVED_FROM = "derived_from"


@dataclass(frozen=True)
class EpisodeText:
    """One episode as a deriver reads it: its ids, its content as text, and when the memory got it."""

    record_id: str
    memory_id: str
    content: str
    written_at: str  # RFC 3339, server clock

    @classmethod
    def of(cls, record: RecordVersion) -> EpisodeText:
        """An episode record as a deriver reads it (structured content as the compact JSON a fence shows)."""
        return cls(record.id, record.memory_id, text_of(record.content), record.written_at)


@dataclass(frozen=True)
class DerivedFact:
    """One record a model derived: what to write (as a `fact` or `note`) and the episodes it came from."""

    content: str
    type: DerivedType
    attributes: dict[str, Any]
    sources: tuple[str, ...]  # record ids of episodes given to the derivation, each once
    valid_from: str | None = None  # RFC 3339 in the canonical form (timefmt), when the episode says so


@dataclass(frozen=True)
class DerivationUsage:
    """What the call cost, as the model's endpoint counted it (§9.2 reports usage in tokens)."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Derived:
    """One derivation's answer. `model` and `prompt_version` say what produced it, so a record written
    from it can be traced to the model and the prompt, and re-derived when either changes."""

    facts: list[DerivedFact]
    usage: DerivationUsage
    model: str
    prompt_version: str
    # Why the model stopped, as its endpoint said it (end_turn, tool_use, stop): for logs and metrics.
    stop_reason: str = ""


# How a newer statement stands to an older one about the same thing (a consolidation run's question):
# "updates" when only the newer should stay current (a changed value, date, status or preference, or a
# contradiction); "same" when both say one thing; "compatible" when both hold together; "unrelated".
Relation = Literal["updates", "same", "compatible", "unrelated"]
RELATIONS: tuple[Relation, ...] = ("updates", "same", "compatible", "unrelated")


@dataclass(frozen=True)
class Statement:
    """A current record as a judge reads it: its id, its text, and when it was true and written."""

    record_id: str
    content: str
    written_at: str
    valid_from: str | None = None

    @classmethod
    def of(cls, record: RecordVersion) -> Statement:
        return cls(record.id, text_of(record.content), record.written_at, record.valid_from)


@dataclass(frozen=True)
class Judged:
    """A judgement of pairs: one relation per pair given, in order, and what it cost."""

    relations: list[Relation]
    usage: DerivationUsage
    model: str
    prompt_version: str




class DerivationError(Exception):
    """A derivation that produced nothing to write. `reason` is a short code, safe to log; the message
    never quotes episodes or the model's answer. `usage` is what the call cost when the model did
    answer (a refused or malformed answer is paid for too), None when it never got that far."""

    retryable = False

    def __init__(self, reason: str, message: str = "", usage: DerivationUsage | None = None) -> None:
        super().__init__(message or reason)
        self.reason = reason
        self.usage = usage


class DerivationRefused(DerivationError):
    """The model, or a safety filter in front of it, declined to answer."""


class DerivationMalformed(DerivationError):
    """The answer did not follow the schema, named an episode it was not given, or was cut short."""


class DerivationThrottled(DerivationError):
    """The endpoint is rate limiting: send again later (after `retry_after_s` when it said)."""

    retryable = True

    def __init__(self, reason: str, message: str = "", *, retry_after_s: float | None = None) -> None:
        super().__init__(reason, message)
        self.retry_after_s = retry_after_s


class DerivationUnavailable(DerivationError):
    """The endpoint is down, overloaded or timed out: send again later."""

    retryable = True


@dataclass(frozen=True)
class RetryPolicy:
    """How the derive workflow sends its step again after a retryable failure: workflows/derive.asl.json's
    Retry for DerivationThrottled and DerivationUnavailable (tests/unit/test_observing.py holds the two
    alike). Step Functions waits `interval_s`, then `backoff` times longer each time, `max_attempts` times."""

    interval_s: float
    backoff: float
    max_attempts: int

    def pause_after(self, failures: int) -> float | None:
        """The wait before the next attempt once the step has failed `failures` times; None when no
        attempt is left (the job then fails with the last error)."""
        if failures > self.max_attempts:
            return None
        return self.interval_s * self.backoff ** (failures - 1)


DERIVE_RETRIES = RetryPolicy(interval_s=10, backoff=2, max_attempts=5)


def check_batch(episodes: Sequence[EpisodeText]) -> None:
    """What every deriver requires of its input, before it calls a model."""
    if not episodes:
        raise ValueError("derivation takes at least one episode")
    if len({episode.record_id for episode in episodes}) != len(episodes):
        raise ValueError("derivation takes each episode once")


def check_sources(sources: Iterable[str], episodes: Sequence[EpisodeText]) -> None:
    """Every source must be an episode this derivation was given: a model that names another record
    (made up, or read inside an episode's content) is not believed."""
    known = {episode.record_id for episode in episodes}
    unknown = [source for source in sources if source not in known]
    if unknown:
        raise DerivationMalformed("unknown_source", f"the answer names {len(unknown)} record(s) it was not given")


def references_for(fact: DerivedFact, episodes: Sequence[EpisodeText]) -> tuple[dict[str, str], ...]:
    """The references a record written from `fact` carries (§4.2): one `derived_from` per source, in
    the order the model gave them (a source named twice, once), pointing at the episode in its own memory."""
    check_sources(fact.sources, episodes)
    memory_of = {episode.record_id: episode.memory_id for episode in episodes}
    sources = dict.fromkeys(fact.sources)  # what a record is derived from is said once (records/writes.py)
    return tuple({"rel": DERIVED_FROM, "memory_id": memory_of[source], "record_id": source} for source in sources)


DERIVER = {"kind": "deriver", "id": "native"}


DERIVE = "derive"  # the job kind and the workflow


@dataclass(frozen=True)
class Observed:
    """What observe answers: the episodes written, and the job deriving from them (None: nothing runs
    after the answer, so the records are the whole answer)."""

    records: list[RecordView]
    job: Job | None


@dataclass(frozen=True)
class JobView:
    """A job as one reader sees it: a derive job with the records it produced that the reader may still
    read (an erased one is gone; a forgotten one left this read, §5.2); every other job as removal shows it."""

    job: Job
    records: list[RecordView]
