"""The ports of recall: a search index over record versions, and an embedder that turns text into
vectors. The value types they speak are here too. Nothing in this module imports numpy, so a deployed
Lambda can depend on it.

One document is one record version. Isolation is by filter (`enforced_filter`, §10.3): every read an
adapter runs carries the request's tenant and memory id as a filter the request cannot remove, and
every document fetched by id is checked against both before it is returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from uhp_memories.domain.filters import Filter
from uhp_memories.domain.timefmt import parse_instant

INCLUDE_VALUES = ("active", "all")
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
    too (the embedded engine has every similarity at hand; OpenSearch scores the rest exactly in one
    more search), so a candidate is never penalised for falling just outside the other signal's
    cut. `rrf`: weighted reciprocal rank fusion, sum over signals of weight / (k + rank), divided by
    its largest possible value. Either way a document ranked first by every signal asked for scores
    1.0.

    Context: an episode (a record of one of `context_types`, as observe writes them) is read with
    the episodes logged around it. Its score becomes 1 - (1 - own) * (1 - context_weight * best),
    where `best` is the best own score among the `context_window` episodes before and after it in
    the memory's log (write order) that the request admits: the turn that answers a question is
    often the one after the turn that matches its words. Only documents that match a signal of
    their own are ever returned; context re-ranks them. `context_weight` 0 turns it off. The log
    is written_at, then record id (ids sort in the order they were made). The embedded engine reads
    it around every candidate; OpenSearch around the best max(30, 3 x limit), in one msearch, and
    counts its window in the episodes the request admits (the embedded engine in all of them).

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
    fusion: Fusion | None = None  # None: the index's default
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


class Embedder(Protocol):
    """Turns texts into vectors of one model.

    Every vector of one embedder lives in one space named by `model_id`; an index keeps vectors of a
    single model. Implementations return plain lists of floats: numpy stays inside the adapters that
    need it, never in a deployed handler's import path."""

    @property
    def model_id(self) -> str:
        """Names the vector space: the model and everything that changes its vectors."""
        ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order, L2-normalized (so a dot product is a cosine)."""
        ...


class SearchIndex(Protocol):
    """The recall index: documents (record versions) of many memories, searched one memory at a time.

    Derived from DynamoDB, never the source of truth: it can be rebuilt from the record versions.
    The index is bound to one embedding model (`model_id`, `dimensions`), recorded where the index is
    kept; opening it with another model, or giving it a vector of another size, raises
    EmbeddingModelMismatch."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def index(self, docs: Sequence[SearchDocument]) -> None:
        """Insert or replace documents by (tenant, memory_id, record_id). Idempotent.

        A version closes once and never reopens: replacing a closed document with an open image of
        the same version (a late or retried event) keeps the closed one, so indexing events may
        arrive out of order."""
        ...

    def get(self, tenant: str, memory_id: str, record_id: str) -> SearchDocument | None:
        """The document of one version, only if it belongs to this tenant and this memory."""
        ...

    def delete(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        """Remove documents for good (erase). Ids not in this memory are ignored."""
        ...

    def delete_memory(self, tenant: str, memory_id: str) -> None:
        """Remove every document of one memory."""
        ...

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most `request.limit` hits, best first; every filter applies inside every signal."""
        ...
