"""OpenSearchIndex: the SearchIndex port on one Amazon OpenSearch index (k-NN + BM25 + bool filters),
through an injected `opensearchpy.OpenSearch` client. It stores and retrieves; ranking is
domain/recall/ranking.py's, as for every adapter. Every body it sends is built in queries.py.

A recall is at most three msearch round trips: the two signals; the episode log around the
candidate episodes (two small sorted searches each); one exact similarity search for everything
the log and the words found that the vector signal did not score. A document
fetched by id is checked against the tenant and memory id in its source before it is returned.

No numpy here: this module is imported by deployed handlers.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from itertools import pairwise
from typing import Any, Literal, overload

from uhp_memories.adapters.opensearch.queries import (
    bm25_body,
    bulk_delete_actions,
    bulk_index_actions,
    delete_memory_body,
    doc_id,
    index_body,
    knn_body,
    log_body,
    mention_body,
    neighbours_body,
    recency_body,
    similarity_body,
    similarity_of,
    word_count_bodies,
    word_weights,
)
from uhp_memories.domain.recall.model import (
    Candidate,
    CandidateQuery,
    EmbeddingModelMismatch,
    LogStretches,
    SearchDocument,
    SearchRequest,
    SearchUnavailable,
)

logger = logging.getLogger(__name__)
_Hits = list[dict[str, Any]]
# A memory's log of up to this many admitted documents is read whole in one search, and the stretch
# around each centre cut from it here; a longer one is read around each centre (two small sorted
# searches each, ~2 x 160 for a default recall). On the tests' 2.19.1 node, a long log read whole took a
# small fraction of the time that reading it around each centre took (measured: docs/performance.md,
# "Figures behind design choices in the code").
WHOLE_LOG_MAX = 2_000


class OpenSearchIndex:
    """A SearchIndex on one OpenSearch index, through an injected `opensearchpy.OpenSearch` client.

    `refresh` is passed on writes: "wait_for" (default) makes a write visible to the next search
    (read-your-writes) at the cost of waiting for the next refresh; False leaves it to the index's
    refresh interval. The index is created, or its recorded model checked, on first use."""

    def __init__(
        self,
        client: Any,
        index_name: str,
        *,
        model_id: str,
        dimensions: int,
        refresh: bool | str = "wait_for",
        shards: int = 1,
        replicas: int = 1,
    ) -> None:
        self._client = client
        self._name = index_name
        self._model_id = model_id
        self._dimensions = dimensions
        self._refresh = refresh
        self._shards = shards
        self._replicas = replicas
        self._ready = False
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def index_name(self) -> str:
        return self._name

    @property
    def client(self) -> Any:
        return self._client

    def ensure_index(self) -> None:
        """Create the index if it is missing; refuse one recorded with another embedding model."""
        with self._lock:
            if self._ready:
                return
            body = index_body(self._model_id, self._dimensions, shards=self._shards, replicas=self._replicas)
            with _unavailable():
                if not self._client.indices.exists(index=self._name):
                    try:
                        self._client.indices.create(index=self._name, body=body)
                    except Exception as error:  # a concurrent creator may have won the race
                        if "resource_already_exists_exception" not in str(error):
                            raise
                mapping = self._client.indices.get_mapping(index=self._name)
            meta = next(iter(mapping.values()))["mappings"].get("_meta", {}).get("uhp", {})
            if (meta.get("model_id"), meta.get("dimensions")) != (self._model_id, self._dimensions):
                raise EmbeddingModelMismatch(
                    f"{meta.get('model_id')} ({meta.get('dimensions')} dimensions)",
                    f"{self._model_id} ({self._dimensions} dimensions)",
                )
            self._ready = True

    def _searchable(self) -> bool:
        """Whether the index is there to read (its model checked once it is). A read never creates it: a
        stage's read-only functions may not (least privilege: infra/catalog.py), and a missing index holds
        nothing to find, so a recall before a new stage's first write finds nothing instead of failing."""
        if self._ready:
            return True
        with _unavailable():
            if not self._client.indices.exists(index=self._name):
                return False
        self.ensure_index()
        return True

    # -- writes ------------------------------------------------------------------------------

    def index(self, docs: Sequence[SearchDocument]) -> None:
        if not docs:
            return
        for doc in docs:
            if doc.embedding is not None:
                _check_vector(doc.embedding, self._dimensions, self._model_id)
        self.ensure_index()
        with _unavailable():
            answer = self._client.bulk(body=bulk_index_actions(self._name, docs), refresh=self._refresh)
        _raise_bulk_errors(answer, tolerated=("version_conflict_engine_exception",))

    def delete(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> None:
        if not record_ids:
            return
        self.ensure_index()
        with _unavailable():
            answer = self._client.bulk(
                body=bulk_delete_actions(self._name, tenant, memory_id, record_ids), refresh=self._refresh
            )
        _raise_bulk_errors(answer, tolerated=("not_found",))

    def delete_memory(self, tenant: str, memory_id: str) -> None:
        self.ensure_index()
        with _unavailable():
            self._client.delete_by_query(
                index=self._name, body=delete_memory_body(tenant, memory_id), refresh=True, conflicts="proceed"
            )

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, memory_id: str, record_id: str) -> SearchDocument | None:
        self.ensure_index()
        with _unavailable():
            found = self._client.get(index=self._name, id=doc_id(tenant, memory_id, record_id), ignore=[404])
        source = found.get("_source") if found and found.get("found") else None
        if not source or source.get("tenant") != tenant or source.get("memory_id") != memory_id:
            return None
        if source.get("record_id") != record_id:
            return None
        return SearchDocument(
            tenant=source["tenant"],
            memory_id=source["memory_id"],
            record_id=source["record_id"],
            chain_id=source["chain_id"],
            type=source["type"],
            status=source["status"],
            attributes=source.get("attributes") or {},
            valid_from=source.get("valid_from"),
            valid_to=source.get("valid_to"),
            written_at=source["written_at"],
            invalidated_at=source.get("invalidated_at"),
            text=source.get("text", ""),
            embedding=source.get("embedding"),
        )

    def candidates(self, request: SearchRequest, asked: CandidateQuery) -> dict[str, list[Candidate]]:
        if request.vector is not None:
            _check_vector(request.vector, self._dimensions, self._model_id)
        if not self._searchable():
            return {}
        bodies: dict[str, dict[str, Any]] = {}
        if asked.by_meaning and request.vector is not None:
            bodies["query"] = knn_body(request, request.vector, asked.depth)
        if asked.terms:
            counts = self._msearch(word_count_bodies(request, asked.terms), ["count"], totals=True)
            bodies["text"] = bm25_body(request, asked.terms, asked.depth, word_weights(asked.terms, counts))
        if asked.newest:
            bodies["recency"] = recency_body(request, asked.newest)
        answers = self._msearch(list(bodies.values()), list(bodies))
        legs = {name: _candidates(name, hits, request) for name, hits in zip(bodies, answers, strict=True)}
        if "query" in legs and asked.min_similarity is not None:
            legs["query"] = [c for c in legs["query"] if c.score > asked.min_similarity]
        return legs

    def mentioned(self, request: SearchRequest, terms: Sequence[str]) -> frozenset[str]:
        if not terms or not self._searchable():
            return frozenset()
        answers = self._msearch([mention_body(request, term) for term in terms], ["mention"] * len(terms))
        return frozenset(term for term, hits in zip(terms, answers, strict=True) if hits)

    def similarities(self, request: SearchRequest, documents: Sequence[Candidate]) -> dict[str, float]:
        if request.vector is None or not documents:
            return {}
        self.ensure_index()
        body = similarity_body(request, request.vector, sorted({d.record_id for d in documents}))
        (hits,) = self._msearch([body], ["similarity"])
        return {hit["_source"]["record_id"]: similarity_of(hit) for hit in hits}

    def log_around(
        self,
        request: SearchRequest,
        documents: Sequence[Candidate],
        types: Sequence[str],
        reach: int,
        scoring: Sequence[Candidate] = (),
    ) -> LogStretches:
        centres = [d for d in documents if d.type in types]
        if not centres:
            return LogStretches([], similarity=self.similarities(request, scoring))
        self.ensure_index()
        # The log is each memory's own: read around a document inside its memory only. A memory's
        # whole log, when it is short, in one search; around each centre otherwise.
        own = {m: replace(request, memory_id=m, also=()) for m in dict.fromkeys(_memory(c, request) for c in centres)}
        logs = self._msearch([log_body(r, types, WHOLE_LOG_MAX + 1) for r in own.values()], ["log"] * len(own))
        whole = {
            memory: [_logged(hit) for hit in hits]
            for memory, hits in zip(own, logs, strict=True)
            if len(hits) <= WHOLE_LOG_MAX
        }
        far = [c for c in centres if _memory(c, request) not in whole]
        read_apart = {c.record_id for c in far}
        bodies: list[dict[str, Any]] = []
        for centre in far:
            bodies.extend(neighbours_body(own[_memory(centre, request)], types, reach, centre, before)
                          for before in (True, False))
        sides = self._msearch(bodies, ["context"] * len(bodies))
        stretches = [_cut(whole[_memory(c, request)], c, reach) for c in centres if c.record_id not in read_apart]
        for i, centre in enumerate(far):
            earlier = [_entry(hit["_source"], request, 0.0) for hit in reversed(sides[2 * i])]
            later = [_entry(hit["_source"], request, 0.0) for hit in sides[2 * i + 1]]
            stretches.append([*earlier, centre, *later])
        runs = _runs(stretches)
        if request.vector is None:
            return LogStretches([[c._replace(score=0.0) for c in run] for run in runs])
        # One exact search scores every entry, the centres and `scoring` alike: the vector is sent
        # once, not with each of the log's searches (a 1,024-dimension vector is 20 KB of JSON).
        entries = {c.record_id for run in runs for c in run}
        close = self.similarities(request, [*(c for run in runs for c in run), *scoring])
        runs = [[c._replace(score=close.get(c.record_id, 0.0)) for c in run] for run in runs]
        asked = {d.record_id for d in scoring}
        return LogStretches(
            runs,
            frozenset(entries - close.keys()),
            {rid: s for rid, s in close.items() if rid in asked},
        )

    @overload
    def _msearch(self, bodies: list[dict[str, Any]], names: Sequence[str]) -> list[_Hits]: ...

    @overload
    def _msearch(self, bodies: list[dict[str, Any]], names: Sequence[str], totals: Literal[True]) -> list[int]: ...

    def _msearch(self, bodies: list[dict[str, Any]], names: Sequence[str], totals: bool = False) -> list[Any]:
        """The hits of each search (with `totals`, how many documents it matched; one name for all),
        in order, in one round trip; a failed one fails them all (retry)."""
        if not bodies:
            return []
        payload: list[dict[str, Any]] = []
        for body in bodies:
            payload.extend(({"index": self._name}, body))
        with _unavailable():
            answer = self._client.msearch(body=payload)
        out = []
        names = [names[0]] * len(bodies) if totals else names
        for name, response in zip(names, answer["responses"], strict=True):
            if "error" in response:
                raise SearchUnavailable(f"the {name} search failed: {_reason(response['error'])}")
            out.append(int(response["hits"]["total"]["value"]) if totals else response["hits"]["hits"])
        return out


def _candidates(name: str, hits: _Hits, request: SearchRequest) -> list[Candidate]:
    """One signal's hits as candidates, best first (ties: lower record id); the k-NN score made a
    cosine again (Lucene's is (1 + cos) / 2)."""
    found = []
    for hit in hits:
        source = hit["_source"]
        score = float(hit.get("_score") or 0.0)
        if name == "query":
            score = 2.0 * score - 1.0
        elif name == "recency":
            score = 0.0
        found.append(_entry(source, request, score))
    if name != "recency":
        found.sort(key=lambda c: (-c.score, c.record_id))
    return found


def _entry(source: dict[str, Any], request: SearchRequest, score: float) -> Candidate:
    memory_id = source.get("memory_id") or request.memory_id
    return Candidate(source["record_id"], source["chain_id"], memory_id, source["type"], source["written_at"], score)


def _memory(candidate: Candidate, request: SearchRequest) -> str:
    return candidate.memory_id or request.memory_id


def _logged(hit: dict[str, Any]) -> Candidate:
    """An entry of log_body's answer (doc values: a list of one value each)."""
    fields = {name: values[0] for name, values in hit["fields"].items()}
    return Candidate(
        fields["record_id"], fields["chain_id"], fields["memory_id"], fields["type"], fields["written_at"], 0.0
    )


def _cut(log: list[Candidate], centre: Candidate, reach: int) -> list[Candidate]:
    """The stretch of a memory's whole log around `centre`: the `reach` entries logged just before it
    and just after it, as neighbours_body would find them."""
    keys = [(c.written_at, c.record_id) for c in log]
    at = bisect_left(keys, (centre.written_at, centre.record_id))
    after = at + 1 if at < len(log) and log[at].record_id == centre.record_id else at
    return [*log[max(0, at - reach) : at], centre, *log[after : after + reach]]


def _runs(stretches: list[list[Candidate]]) -> list[list[Candidate]]:
    """Stretches of the log that may overlap (each around one centre) as runs that do not: two
    entries are known to be neighbours when one stretch holds them side by side."""
    after: dict[str, str] = {}
    entries: dict[str, Candidate] = {}
    for stretch in stretches:
        for earlier, later in pairwise(stretch):
            after[earlier.record_id] = later.record_id
        entries.update((c.record_id, c) for c in stretch)
    runs: list[list[Candidate]] = []
    for entry in sorted(entries.values(), key=lambda c: (c.memory_id, c.written_at, c.record_id)):
        if runs and after.get(runs[-1][-1].record_id) == entry.record_id:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs


def _check_vector(vector: Sequence[float], dimensions: int, model_id: str) -> None:
    if len(vector) != dimensions:
        raise EmbeddingModelMismatch(f"{model_id} ({dimensions} dimensions)", f"a vector of {len(vector)}")


def _raise_bulk_errors(answer: dict[str, Any], tolerated: tuple[str, ...]) -> None:
    if not answer.get("errors"):
        return
    for item in answer.get("items", []):
        result = next(iter(item.values()))
        error = result.get("error")
        if error is None:
            continue
        if isinstance(error, dict) and error.get("type") in tolerated:
            continue
        raise SearchUnavailable(f"indexing failed: {_reason(error)}")


def _reason(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('type')}: {error.get('reason')}"
    return str(error)


@contextmanager
def _unavailable() -> Iterator[None]:
    """Transport failures, 5xx and 429 become SearchUnavailable; request errors stay what they are."""
    try:
        yield
    except Exception as error:
        status = getattr(error, "status_code", None)
        transport = type(error).__name__ in ("ConnectionError", "ConnectionTimeout", "SSLError")
        if transport or (isinstance(status, int) and status >= 500) or status == 429:
            logger.warning("opensearch unavailable", extra={"error_type": type(error).__name__})
            raise SearchUnavailable(f"OpenSearch did not answer: {type(error).__name__}") from error
        raise


def connect(
    url: str,
    *,
    region: str | None = None,
    service: str = "es",
    credentials: Any = None,
    timeout: float = 10.0,
) -> Any:
    """An OpenSearch client for `url`; with `region`, requests are signed with SigV4 for `service`
    ("es" for a domain, "aoss" for serverless) using the default AWS credentials. Each attempt takes
    at most `timeout` seconds and the time the request has left (bounded.py); one retry at most."""
    from opensearchpy import OpenSearch, Urllib3AWSV4SignerAuth

    from uhp_memories.adapters.opensearch.bounded import DeadlineConnection

    auth = None
    if region:
        if credentials is None:
            import boto3

            credentials = boto3.Session().get_credentials()
        auth = Urllib3AWSV4SignerAuth(credentials, region, service)
    return OpenSearch(
        hosts=[url],
        http_auth=auth,
        use_ssl=url.startswith("https://"),
        verify_certs=url.startswith("https://"),
        timeout=timeout,
        connection_class=DeadlineConnection,
        max_retries=1,
        retry_on_timeout=True,
        http_compress=True,
    )
