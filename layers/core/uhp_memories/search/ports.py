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


@dataclass(frozen=True)
class Fusion:
    """How the signals of one request become one ranking: weighted reciprocal rank fusion.

    fused(d) = sum over signals s of weight_s / (k + rank_s(d)), rank from 1; the reported score is
    fused(d) divided by its largest possible value, so a document ranked first by every signal asked
    for scores 1.0. Each signal ranks its best `candidates` documents (at least the request's limit),
    every filter applied before that cut. A vector candidate whose cosine similarity is not above
    `min_similarity` is dropped from the query signal (None keeps every candidate): by default a
    vector orthogonal or opposite to the query never counts as a match."""

    k: float = 60.0
    query_weight: float = 1.0
    text_weight: float = 1.0
    candidates: int = 100
    min_similarity: float | None = 0.0

    def __post_init__(self) -> None:
        if not (self.k >= 0 and math.isfinite(self.k)):
            raise ValueError("fusion k must be a finite number >= 0")
        if self.query_weight < 0 or self.text_weight < 0:
            raise ValueError("fusion weights must be >= 0")
        if self.candidates < 1:
            raise ValueError("fusion candidates must be >= 1")


@dataclass(frozen=True)
class SearchRequest:
    """One search inside one memory.

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

    def __post_init__(self) -> None:
        if not self.tenant or not self.memory_id:
            raise ValueError("a search names its tenant and its memory")
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
    """One result. `why` lists the signals that produced it, in the order of SIGNALS; `signals` holds
    each matching signal's raw score (`query`: cosine similarity; `text`: the engine's BM25 score),
    which is what an abstain threshold is calibrated on."""

    record_id: str
    chain_id: str
    score: float
    why: tuple[str, ...]
    signals: Mapping[str, float] = field(default_factory=dict)


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
