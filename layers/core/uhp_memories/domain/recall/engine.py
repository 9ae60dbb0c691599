"""RecallEngine: a SearchIndex and an Embedder working together, in the terms RecordService speaks.

The record service calls it after each DynamoDB commit with the versions it wrote (a new version,
and the version a revise or forget closed), on erase with the ids it removed, and on recall with
the caller's query. The engine turns versions into documents, embeds what has text (reusing the
vector a closed version already has), embeds the recall query, and ranks what the index finds
(domain/recall/ranking.py: the one ranking of every adapter).

A text the model refuses (TextNotEmbeddable: too long for it, say) is indexed without a vector, by
its words and filters alone: one record never fails the write's indexing, a stream batch or a
reindex. Work handed to a worker thread carries the request's context, so the request's deadline
(uhp_memories.deadlines) bounds the model's calls there too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass

from uhp_memories import deadlines
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.filters import Filter
from uhp_memories.domain.recall.fusion import query_terms
from uhp_memories.domain.recall.model import (
    EmbeddingModelMismatch,
    Fusion,
    Hit,
    QueryNotEmbedded,
    SearchDocument,
    SearchRequest,
    SearchUnavailable,
    TextNotEmbeddable,
)
from uhp_memories.domain.recall.ports import Embedder, SearchIndex
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.domain.timefmt import parse_instant

logger = logging.getLogger(__name__)
TextOf = Callable[[RecordVersion], str]
# A recall's query is embedded on one of these threads while the request thread checks access and
# reads the memories to search: the model (ONNX locally, Bedrock's HTTP call in AWS) runs without the
# GIL, so the two overlap (the process's GIL switch interval, which decides how promptly the model's
# thread gets the GIL back, is set where the process builds its engine: bootstrap.build_recall_engine).
_EMBEDDING = ThreadPoolExecutor(max_workers=4, thread_name_prefix="embed-query")
# A write's texts are embedded on these threads, started before its DynamoDB commit (embed_ahead), so
# the model runs while the transaction does; a write of several texts (observe) is split across
# both, as the model and Bedrock's HTTP call release the GIL (two: a Lambda of 1,769 MB has two
# vCPUs, and so has the local machine). Side by side with embedding after the commit on the request
# thread, a remember and an observe of a session both answer sooner at p50 (measured:
# docs/performance.md, "Writes: the embedding beside the commit (issue 18)").
WRITE_EMBEDDING_THREADS = 2
_WRITE_EMBEDDING = ThreadPoolExecutor(max_workers=WRITE_EMBEDDING_THREADS, thread_name_prefix="embed-write")


@dataclass(frozen=True)
class EmbeddedAhead:
    """Vectors on their way for the texts of a write's new versions (RecallEngine.embed_ahead): the
    embedding of each text, by its place in `texts` (blank texts have none)."""

    texts: tuple[str, ...]
    embeddings: dict[int, Future[list[list[float]]]]

    def vectors(self) -> dict[int, list[float] | None]:
        """Place -> vector, None for a text the model refused (TextNotEmbeddable). Waits for every
        text, at most the time the request has left (SearchUnavailable after that), and raises what
        else the embedder raised."""
        vectors: dict[int, list[float] | None] = {}
        for place, embedding in self.embeddings.items():
            left = deadlines.remaining()
            try:
                vectors[place] = embedding.result(timeout=None if left is None else max(left, 0.0))[0]
            except TextNotEmbeddable:
                vectors[place] = None
            except TimeoutError:
                if embedding.done():
                    raise  # the embedder's own
                raise SearchUnavailable("the texts were not embedded in the time the request had left") from None
        return vectors


def text_of(record: RecordVersion) -> str:
    """The text a version is searched by: an extension type's projection (§8), else its content, or a
    file's name for file content."""
    if record.projection is not None:
        return record.projection
    content = record.content
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and isinstance(content.get("file"), dict):
        return str(content["file"].get("name") or "")
    return ""


def document_for(record: RecordVersion, text: str, embedding: Sequence[float] | None) -> SearchDocument:
    return SearchDocument(
        tenant=record.tenant,
        memory_id=record.memory_id,
        record_id=record.id,
        chain_id=record.chain_id,
        type=record.type,
        status=record.status,
        attributes=record.attributes,
        valid_from=_canonical(record.valid_from),
        valid_to=_canonical(record.valid_to),
        written_at=_canonical(record.written_at) or record.written_at,
        invalidated_at=_canonical(record.invalidated_at),
        text=text,
        embedding=embedding,
    )


def _canonical(value: str | None) -> str | None:
    """Times sort as strings only in one form. The record service should store that form already;
    a time that cannot be read is left out of the index rather than failing a committed write."""
    if value is None:
        return None
    try:
        return parse_instant(value)
    except MemoryInvalid:
        logger.warning("unreadable record time left out of the search index")
        return None


class RecallEngine:
    """Keeps a SearchIndex in step with record versions and searches it. Thread-safe when its index
    and embedder are. `fusion` ranks a search that names none (Fusion() when None)."""

    def __init__(
        self, index: SearchIndex, embedder: Embedder, *, text: TextOf = text_of, fusion: Fusion | None = None
    ) -> None:
        if (embedder.model_id, embedder.dimensions) != (index.model_id, index.dimensions):
            raise EmbeddingModelMismatch(
                f"{index.model_id} ({index.dimensions} dimensions)",
                f"{embedder.model_id} ({embedder.dimensions} dimensions)",
            )
        self.index = index
        self.embedder = embedder
        self.fusion = fusion or Fusion()
        self._text = text

    @property
    def model_id(self) -> str:
        """The embedding model of this engine (an abstain threshold is calibrated per model)."""
        return self.embedder.model_id

    def embed_ahead(self, versions: Sequence[RecordVersion]) -> EmbeddedAhead:
        """Start embedding the texts of a write's new versions now, on worker threads, so the model
        runs while the write's DynamoDB transaction does; pass the handle to index_versions after
        the commit, with the same versions. Several texts are shared out across the threads as they
        come free. A closed version (a revision's previous one) is not embedded: index_versions
        looks its vector up."""
        texts = tuple(self._text(v) for v in versions)
        # One task a text, longest first: each thread takes the next text when it is free, so the
        # two finish together however the lengths fall (halves of unequal length left one thread
        # idle while the other still embedded), and the longest are not left for last.
        new = (i for i, text in enumerate(texts) if text.strip() and versions[i].invalidated_at is None)
        places = sorted(new, key=lambda i: -len(texts[i]))
        return EmbeddedAhead(
            texts, {i: _WRITE_EMBEDDING.submit(copy_context().run, self.embedder.embed, [texts[i]]) for i in places}
        )

    def index_versions(
        self, versions: Sequence[RecordVersion], *, reuse_all: bool = False, ahead: EmbeddedAhead | None = None
    ) -> None:
        """Index these versions (upsert). Call it after the DynamoDB commit with every version the
        write touched: remember -> [new]; revise -> [closed previous, new]; forget -> [closed].

        A closed version keeps the vector it was indexed with (looked up, not re-embedded); with
        `reuse_all` every version is looked up first, which suits a replayed stream of old images.
        `ahead` (embed_ahead of these versions) holds vectors already on their way: a text it
        embedded is not embedded again. A text the model refuses is indexed without a vector."""
        texts = [self._text(v) for v in versions]
        embeddings: list[Sequence[float] | None] = [None] * len(versions)
        early = ahead.vectors() if ahead is not None else {}
        missing: list[int] = []
        refused: list[int] = []
        for i, (version, text) in enumerate(zip(versions, texts, strict=True)):
            if not text.strip():
                continue
            if reuse_all or version.invalidated_at is not None:
                known = self.index.get(version.tenant, version.memory_id, version.id)
                if known is not None and known.text == text and known.embedding is not None:
                    embeddings[i] = known.embedding
                    continue
            if ahead is not None and i in early and ahead.texts[i] == text:
                embeddings[i] = early[i]
                if early[i] is None:
                    refused.append(i)
                continue
            missing.append(i)
        if missing:
            vectors = self._embed_each([texts[i] for i in missing])
            for i, vector in zip(missing, vectors, strict=True):
                embeddings[i] = vector
                if vector is None:
                    refused.append(i)
        for i in refused:
            logger.warning("the model refused a text; indexed by its words only", extra={"record_id": versions[i].id})
        self.index.index([document_for(v, t, e) for v, t, e in zip(versions, texts, embeddings, strict=True)])

    def _embed_each(self, texts: list[str]) -> list[list[float] | None]:
        """One vector per text, None for a text the model refuses; what else it raises
        (SearchUnavailable) is raised. A text a call: both embedders embed one text at a time anyway
        (Titan a request each, MiniLM a run each), so nothing is embedded twice to find the refused."""
        vectors: list[list[float] | None] = []
        for text in texts:
            try:
                vectors.append(self.embedder.embed([text])[0])
            except TextNotEmbeddable:
                vectors.append(None)
        return vectors

    def erase(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        """Remove the documents of these versions for good (erase: every version of the chain, and
        every derived record, are the caller's to list)."""
        self.index.delete(tenant, memory_id, record_ids)

    def embed_query(self, query: str) -> list[float] | None:
        """The vector of a recall query (None for a blank one): embedded once, it serves every memory
        a recall searches. An embedder that does not answer (in the time the request has left), or
        refuses the query, raises QueryNotEmbedded (recall then searches the words and says so)."""
        if not query.strip():
            return None
        try:
            return self.embedder.embed([query])[0]
        except (SearchUnavailable, TextNotEmbeddable) as error:
            raise QueryNotEmbedded(str(error)) from error

    def embedding(self, query: str) -> Future[list[float] | None]:
        """embed_query started on a worker thread (its future raises what embed_query raises), in
        half the time the request has left: a model that does not answer leaves the other half to
        search the query's words (a recall waits for its vector before it searches)."""
        return _EMBEDDING.submit(copy_context().run, self._embed_query_in_half_the_time, query)

    def _embed_query_in_half_the_time(self, query: str) -> list[float] | None:
        with deadlines.share(0.5):
            return self.embed_query(query)

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
        """The words no document of these memories that the request admits contains, in one call to
        the index (SearchIndex.mentioned, which stops at a word's first document: asking the text
        signal for its best document scored every document that holds the word, and put the default
        request's p95 at 100,000 records over its target; measured: docs/performance.md,
        "Figures behind design choices in the code")."""
        terms = {word: term for word in words for term in query_terms(word)[:1]}
        if not terms:
            return []
        request = SearchRequest(
            tenant=tenant, memory_id=memory_id, filters=filters, types=tuple(types), include=include,
            as_of=as_of, limit=1, also=tuple(also),
        )
        found = self.index.mentioned(request, sorted(set(terms.values())))
        return [word for word, term in terms.items() if term not in found]

    def drop_memory(self, tenant: str, memory_id: str) -> None:
        self.index.delete_memory(tenant, memory_id)

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
    ) -> list[Hit]:
        """Recall inside one memory (and the memories in `also`, fused as one ranking): `query` is
        embedded here, unless its `vector` is given (from embed_query); `filters` is the parsed
        filter tree (domain.filters.parse_filter); `as_of` an instant (a snapshot's name resolved
        already)."""
        if vector is None and query is not None:
            vector = self.embed_query(query)
        request = SearchRequest(
            tenant=tenant,
            memory_id=memory_id,
            vector=vector,
            text=text,
            filters=filters,
            types=tuple(types),
            include=include,
            as_of=as_of,
            limit=limit,
            fusion=fusion,
            also=tuple(also),
        )
        return rank(self.index, request, self.fusion)
