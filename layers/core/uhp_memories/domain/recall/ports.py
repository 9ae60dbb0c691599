"""The ports of recall: a search index over record versions, and an embedder that turns text into
vectors. The value types they speak are here too. Nothing in this module imports numpy, so a deployed
Lambda can depend on it.

One document is one record version. Isolation is by filter (`enforced_filter`, §10.3): every read an
adapter runs carries the request's tenant and memory id as a filter the request cannot remove, and
every document fetched by id is checked against both before it is returned.

The index stores and retrieves; it does not rank. It hands out primitives (each signal's candidates
with their raw scores, the similarity of given documents, the episode log around given documents)
and domain/recall/ranking.py fuses them into one ranking, the same for every adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.filters import Filter
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.recall.model import (
    Candidate,
    CandidateQuery,
    Fusion,
    LogStretches,
    SearchDocument,
    SearchRequest,
)
from uhp_memories.domain.records.model import RecordVersion, RecordView


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
    EmbeddingModelMismatch.

    "Admitted" below means what the request lets through: its memories (tenant and memory ids, which
    nothing can remove), its visibility (include, as_of) and its filters and types, every one applied
    before any cut. Every read raises SearchUnavailable when the store does not answer (the caller
    may retry); nothing else is raised for a well-formed request."""

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

    def candidates(self, request: SearchRequest, asked: CandidateQuery) -> dict[str, list[Candidate]]:
        """The candidate lists `asked` names (see CandidateQuery), each present, empty when nothing is
        admitted. A vector of another size raises EmbeddingModelMismatch."""
        ...

    def mentioned(self, request: SearchRequest, terms: Sequence[str]) -> frozenset[str]:
        """Those of these words (lowercased, as fusion.query_terms gives them) that at least one
        document the request admits contains, as the text signal matches words; each search stops
        at the first such document, so a word in thousands of documents costs no more than in one.
        One round trip for all of them."""
        ...

    def similarities(self, request: SearchRequest, documents: Sequence[Candidate]) -> dict[str, float]:
        """The cosine similarity of the request's vector to each of these documents, by record id,
        exact. A document that has no vector, or is not in one of the request's memories, is left out
        (as is everything, without a request vector); the request's filters are not applied (ranking
        asks only about documents the index handed it)."""
        ...

    def log_around(
        self,
        request: SearchRequest,
        documents: Sequence[Candidate],
        types: Sequence[str],
        reach: int,
        scoring: Sequence[Candidate] = (),
    ) -> LogStretches:
        """The episode log around these documents (each one the request admits): every document of
        `types` that the request admits and that is logged within `reach` places of one of them, in
        its own memory, counting only such documents, with them. The log is write order: written_at,
        then record id. Each of `documents` of `types` is in a stretch with everything within
        `reach` of it (a document of another type has no place in the log). Every entry carries the
        request vector's similarity, and so do the documents of `scoring` (see LogStretches):
        ranking reads the own score of every entry, and asking for a thousand similarities apart,
        and those of the words' finds in yet another round trip, costs more than the log itself."""
        ...


class SearchHit(Protocol):
    """One hit of the index (uhp_memories.search.Hit), read-only."""

    @property
    def record_id(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def why(self) -> tuple[str, ...]: ...

    @property
    def signals(self) -> Any: ...

    @property
    def memory_id(self) -> str: ...


class RecallIndex(Protocol):
    """The search side of recall (uhp_memories.domain.recall.engine.RecallEngine)."""

    @property
    def model_id(self) -> str:
        """The embedding model the index is filled by (abstain is calibrated per model)."""
        ...

    def search(
        self,
        tenant: str,
        memory_id: str,
        *,
        query: str | None = None,
        text: str | None = None,
        filters: Filter | None = None,
        types: Sequence[str] = (),
        include: str = "active",
        as_of: str | None = None,
        limit: int = 10,
        fusion: Fusion | None = None,
        vector: Sequence[float] | None = None,
        also: Sequence[str] = (),
    ) -> Sequence[SearchHit]:
        ...

    def embedding(self, query: str) -> Future[Any]:
        """The query's vector, computed while the caller goes on: None for a blank query; the future
        raises QueryNotEmbedded when the model does not answer."""
        ...

    def unmatched(
        self,
        tenant: str,
        memory_id: str,
        words: Sequence[str],
        *,
        filters: Filter | None = None,
        types: Sequence[str] = (),
        include: str = "active",
        as_of: str | None = None,
        also: Sequence[str] = (),
    ) -> list[str]:
        """The words (lowercased) that no document these memories hold, as the request admits them,
        contains: one call to the index for all of them."""
        ...


class MemoryNeighbours(Protocol):
    """The memory tree as recall names where a reader can go (uhp_memories.domain.memories.service.MemoryService)."""

    def neighbours(
        self, access: AccessView, memory: Memory, children: Sequence[Memory] | None = None
    ) -> tuple[MemorySummary | None, list[MemorySummary]]:
        """The parent and the direct children the caller may read."""
        ...


class RecalledRecords(Protocol):
    """Records as recall answers with them (uhp_memories.domain.records.service.RecordService)."""

    def resolve_as_of(self, caller: Caller, memory_id: str, as_of: str) -> str:
        """An RFC 3339 time, or the name of one of this memory's snapshots, as a canonical instant."""
        ...

    def view(self, access: AccessView, record: RecordVersion) -> RecordView:
        """A version as this reader sees it (references resolved with its privileges)."""
        ...
