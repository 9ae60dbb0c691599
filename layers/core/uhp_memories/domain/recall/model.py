"""Recall's values: what is asked, what the index answers, how answers fuse, and its errors."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple

from uhp_memories.domain.errors import DomainError
from uhp_memories.domain.filters import Filter
from uhp_memories.domain.memories.model import MemorySummary
from uhp_memories.domain.records.model import INCLUDE_VALUES, RecordView
from uhp_memories.domain.timefmt import parse_instant

SIGNALS = ("query", "text", "filters")


CONTEXT = "context"  # in `why`: the episodes around this one matched better than it did itself


MAX_LIMIT = 1000


@dataclass(frozen=True)
class SearchDocument:
    """One record version as the index holds it.

    Times are RFC 3339 in UTC with milliseconds (`2026-10-01T17:02:11.000Z`), so they sort as
    strings. `embedding` is None for a version with no text to embed; such a version takes part in
    the text and filter signals only."""

    tenant: str
    memory_id: str
    record_id: str
    chain_id: str
    type: str
    status: str  # active | superseded | forgotten
    attributes: Mapping[str, Any]
    valid_from: str | None
    valid_to: str | None
    written_at: str
    invalidated_at: str | None
    text: str
    embedding: Sequence[float] | None = None

    @property
    def is_open(self) -> bool:
        return self.invalidated_at is None


FUSION_METHODS = ("relative", "rrf")


@dataclass(frozen=True)
class Fusion:
    """How the signals of one request become one ranking.

    `relative` (the default): each signal's raw score is divided by the best score that signal gave
    in this request (cosine similarity for `query`, BM25 for `text`), and the weighted mean of those
    shares is the document's own score, in [0, 1]. A document the words found is scored by meaning
    too (its exact similarity, asked of the index), so a candidate is never penalised for falling
    just outside the query signal's cut. `rrf`: weighted reciprocal rank fusion, sum over signals
    of weight / (k + rank), divided by its largest possible value. Either way a document ranked
    first by every signal asked for scores 1.0.

    Context: an episode (a record of one of `context_types`, as observe writes them) is read with
    the episodes logged around it. Its score becomes 1 - (1 - own) * (1 - context_weight * best),
    where `best` is the best own score among the `context_window` episodes before and after it in
    its memory's log that the request admits: the turn that answers a question is often the one
    after the turn that matches its words. Only documents that match a signal of their own are
    ever returned; context re-ranks them. `context_weight` 0 turns it off. One rule for every
    adapter (domain/recall/ranking.py applies it): the log is the memory's episodes in write order
    (written_at, then record id: ids sort in the order they were made); the window counts only the
    episodes the request admits (its visibility, as_of, types and filters), so one the filter
    excludes is skipped, not a gap; and the log is read around every candidate episode, twice the
    window on either side, so an episode within the window of a candidate is scored, and lifted by
    its own neighbours, too.

    Each signal ranks its best `candidates` documents (at least the request's limit), every filter
    applied before that cut. A vector candidate whose cosine similarity is not above `min_similarity`
    is dropped from the query signal (None keeps every candidate): by default a vector orthogonal or
    opposite to the query never counts as a match.

    Defaults were chosen on the LoCoMo dev set (bench/recall_locomo.py, docs/benchmarks.md)."""

    method: str = "relative"
    k: float = 60.0  # rrf only
    query_weight: float = 1.0
    text_weight: float = 1.0
    candidates: int = 100
    min_similarity: float | None = 0.0
    context_weight: float = 0.7
    context_window: int = 2
    context_types: tuple[str, ...] = ("episode",)

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(f"fusion method must be one of {FUSION_METHODS}")
        if not (self.k >= 0 and math.isfinite(self.k)):
            raise ValueError("fusion k must be a finite number >= 0")
        if self.query_weight < 0 or self.text_weight < 0:
            raise ValueError("fusion weights must be >= 0")
        if self.candidates < 1:
            raise ValueError("fusion candidates must be >= 1")
        if not 0 <= self.context_weight <= 1:
            raise ValueError("fusion context_weight must be between 0 and 1")
        if self.context_window < 0:
            raise ValueError("fusion context_window must be >= 0")
        object.__setattr__(self, "context_types", tuple(self.context_types))

    @property
    def uses_context(self) -> bool:
        return self.context_weight > 0 and self.context_window > 0 and bool(self.context_types)


@dataclass(frozen=True)
class SearchRequest:
    """One search inside one memory (and the memories in `also`, fused as one).

    `vector` is the query's embedding (the `query` signal), `text` the words for BM25 (the `text`
    signal), `filters` a parsed filter tree and `types` a set of record types (together the `filters`
    signal). With neither vector nor text, results are the matching versions, newest first.

    Visibility: `include="active"` keeps current active versions; `"all"` adds superseded and
    forgotten ones. With `as_of=T`, "active" keeps the versions the memory held open at T
    (written_at <= T and (invalidated_at is null or > T)), "all" every version written at or
    before T; filters on `time.invalidated_at` then see the version as it stood at T."""

    tenant: str
    memory_id: str
    vector: Sequence[float] | None = None
    text: str | None = None
    filters: Filter | None = None
    types: tuple[str, ...] = ()
    include: str = "active"
    as_of: str | None = None
    limit: int = 10
    fusion: Fusion | None = None  # None: the engine's default
    # Memories searched together with memory_id (a recall with depth): one ranking, every signal on
    # one scale across them, each document still read inside its own memory.
    also: tuple[str, ...] = ()

    @property
    def memory_ids(self) -> tuple[str, ...]:
        return (self.memory_id, *(m for m in self.also if m != self.memory_id))

    def __post_init__(self) -> None:
        if not self.tenant or not self.memory_id or not all(self.also):
            raise ValueError("a search names its tenant and its memory")
        object.__setattr__(self, "also", tuple(self.also))
        if self.include not in INCLUDE_VALUES:
            raise ValueError(f"include must be one of {INCLUDE_VALUES}")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_LIMIT}")
        if self.as_of is not None:
            object.__setattr__(self, "as_of", parse_instant(self.as_of, "as_of"))
        object.__setattr__(self, "types", tuple(self.types))

    @property
    def has_filters(self) -> bool:
        return self.filters is not None or bool(self.types)


@dataclass(frozen=True)
class Hit:
    """One result. `why` lists the signals that produced it, in the order of SIGNALS, then CONTEXT when
    the episodes logged around it lifted it more than its own match did; `signals` holds
    each matching signal's raw score (`query`: cosine similarity; `text`: the engine's BM25 score),
    which is what an abstain threshold is calibrated on."""

    record_id: str
    chain_id: str
    score: float
    why: tuple[str, ...]
    signals: Mapping[str, float] = field(default_factory=dict)
    memory_id: str = ""  # the memory the document is in (a search of several)


class Candidate(NamedTuple):
    """One document as the index hands it to ranking: found by a signal, with that signal's raw score
    (`query`: cosine similarity; `text`: the engine's BM25 score; `recency`: 0), or read from the
    episode log (score 0). `written_at` and `type` place it in its memory's log. A named tuple: a
    recall builds about a thousand, and a frozen dataclass costs several times as much to build.
    Where they are built by the hundred, `tuple.__new__(Candidate, (six fields))` builds one: the
    named tuple's own constructor is a Python function, twice the cost (measured: docs/performance.md,
    "Figures behind design choices in the code")."""

    record_id: str
    chain_id: str
    memory_id: str
    type: str
    written_at: str
    score: float = 0.0


@dataclass(frozen=True)
class CandidateQuery:
    """The signals ranking asks the index for, answered in one call (one round trip, or BM25 beside
    the vector scan) as candidate lists ("legs"), each best first:

    - `query` (when `by_meaning`): the `depth` admitted documents most similar to the request's
      vector (cosine), among those whose similarity is above `min_similarity` (None: all of them);
    - `text` (when `terms`): the `depth` admitted documents with the best BM25 score for any of
      these words (each already lowercased, search.fusion.query_terms);
    - `recency` (when `newest` > 0): the `newest` admitted documents, newest first (written_at, then
      record id, both descending).

    Each list spans every memory of the request (one cut across them); ties go to the lower record id."""

    depth: int
    by_meaning: bool = False
    terms: tuple[str, ...] = ()
    newest: int = 0
    min_similarity: float | None = None


class LogStretches(NamedTuple):
    """The episode log around some documents (SearchIndex.log_around): stretches of it, each a run
    of consecutive entries in write order, no entry in two. With a request vector, each entry's
    score is its exact cosine similarity to that vector, `without_vector` names the entries that
    have none (their score, 0, means nothing), and `similarity` holds that of each document asked
    to be scored beside the log that has a vector."""

    stretches: list[list[Candidate]]
    without_vector: frozenset[str] = frozenset()
    similarity: Mapping[str, float] = MappingProxyType({})


class SearchError(Exception):
    """Base of every error raised by the search package."""


class EmbeddingModelMismatch(SearchError):
    """An index built with one embedding model was asked to take or compare vectors of another.

    Vectors of two models live in two unrelated spaces: mixing them returns confident nonsense, so the
    index refuses instead. Rebuild the index (`reindex`) to change models."""

    def __init__(self, expected: str, given: str) -> None:
        super().__init__(f"this index holds vectors of {expected!r}; refusing vectors of {given!r}")
        self.expected = expected
        self.given = given


class SearchUnavailable(SearchError):
    """The index or the embedding service did not answer, or not in the time the request had left
    (uhp_memories.deadlines); the caller may retry."""


class TextNotEmbeddable(SearchError):
    """The embedding model refused this text (Bedrock's ValidationException: more tokens than it
    takes, say), and will refuse it again: unlike SearchUnavailable, retrying does not help. The
    engine indexes such a record without a vector, found by its words and filters, so one text
    never stalls a stream shard or a reindex. The message carries the model's reason (counts, never
    the text)."""

    def __init__(self, reason: str, code: str = "ValidationException") -> None:
        super().__init__(reason)
        self.code = code


RECALL_LIMIT_DEFAULT = 10


class MemoryUnavailable(DomainError):
    code = "memory_unavailable"


class QueryNotEmbedded(MemoryUnavailable):
    """Raised by RecallIndex.embed_query when the embedding model did not answer (Bedrock throttled or
    down). Recall goes on with the words and says so in `degraded`: a 503 would take the text and the
    filters away from a caller that asked for them too. (Anywhere else it is a 503.)"""


# In `degraded` when the meaning signal could not be computed (the words were searched instead).
QUERY_NOT_EMBEDDED = "query:embedder_unavailable"


NOTHING_ASKED = (
    "recall needs something to look for: a query (a question), text (words to match), filters or types; "
    "GET /v1/memories/{id}/records lists a memory's records, newest first"
)


@dataclass(frozen=True)
class RecallInput:
    """A recall request (§6.2). `query_words`: whether a `query` given without `text` is searched by
    its words too (the `text` signal, with the query as its text); False searches its meaning only."""

    query: str | None = None
    text: str | None = None
    filters: Any = None
    types: tuple[str, ...] = ()
    as_of: str | None = None
    include: str = "active"
    limit: int | None = None
    depth: int = 0
    query_words: bool = True

    @property
    def asks(self) -> bool:
        """Whether the request names something to look for: a query, words, filters or types (a
        blank query or text names nothing)."""
        return bool(_given(self.query) or _given(self.text) or self.filters is not None or self.types)

    def searched(self) -> RecallInput:
        """The request as it is searched: a query alone is searched by its words too (as `text`),
        unless `query_words` is False; text given is searched as given."""
        if self.text is None and self.query_words and _given(self.query):
            return replace(self, text=self.query)
        return self

    def named(self, why: Sequence[str]) -> tuple[str, ...]:
        """`why` in the request's own signals (§6.3: it names the signals that produced a result): the
        words searched to serve a query given without `text` are part of `query`, so a result they found
        says `query`, never a `text` the request did not send."""
        if self.text is not None:
            return tuple(why)
        return tuple(dict.fromkeys("query" if signal == "text" else signal for signal in why))


def _given(words: str | None) -> bool:
    return words is not None and bool(words.strip())


@dataclass(frozen=True)
class RecallResult:
    record: RecordView
    score: float
    why: tuple[str, ...]


@dataclass(frozen=True)
class RecallAnswer:
    results: list[RecallResult]
    parent: MemorySummary | None
    children: list[MemorySummary]
    degraded: list[str] = field(default_factory=list)
    abstain: bool = False
