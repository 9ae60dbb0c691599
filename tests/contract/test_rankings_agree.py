"""Every search adapter gives the same ranking: the same ids in the same order, scores within a small
tolerance, the same `why`, on a fixed corpus and every signal combination (query, text, filters,
their mixes, include=all, as_of, types, a search of several memories), with episodes so that context
applies and small cuts so that the signals' completion does too. Ranking is domain/recall/ranking.py's
for all of them; this checks that the adapters' primitives (candidates, similarities, the episode
log) answer alike. The embedded engine is the reference; OpenSearch runs on its stand-in and on a
real OpenSearch 2.19 node (tests/opensearch_node.py).

BM25's raw scores are each engine's own (FTS5 and Lucene weigh a word's rarity differently, and
FTS5 counts it per memory, OpenSearch per index), and so is stemming. The corpus is built so that
ranking does not depend on either: every document has six words and no stopword, and the words a
text query names occur in equally many documents, so each text score as a share of its best is the
same number in every engine. (Across several memories the shares differ, since FTS5 counts each
memory apart: the search of several memories is asked by meaning and by filters only.)
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract.opensearch_fake import SEARCH_BACKENDS, opensearch_client
from uhp_memories.adapters.opensearch import OpenSearchIndex
from uhp_memories.adapters.opensearch import index as opensearch_index
from uhp_memories.domain.filters import parse_filter
from uhp_memories.domain.recall.model import Fusion, Hit, SearchDocument, SearchRequest
from uhp_memories.domain.recall.ports import SearchIndex
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.timefmt import format_ms
from uhp_memories.local.embedded import EmbeddedSearchIndex

MODEL, DIMS = "contract-random-16", 16
TENANT, MEMORY, OTHER = "acme", "hmem_" + "a" * 32, "hmem_" + "b" * 32
T0 = 1_790_000_000_000
SCORE_TOLERANCE = 1e-5  # float32 vectors in one engine, float64 in the other
TIED = 1e-6  # scores this close are a tie: the order between them is float noise
# Six-word texts: query words, and fillers no query names. Plain roots, no stopwords, so every
# analyzer (FTS5's porter, OpenSearch's english, the stand-in's none) counts six terms per text.
FILLERS = ["compass", "anchor", "pepper", "marble", "velvet", "cobalt", "falcon", "tundra", "ember", "willow"]
LANTERN, HARBOR, MEADOW = "lantern", "harbor", "meadow"
SPEAKERS = ["alice", "bob", "carol"]


def rid(n: int) -> str:
    return f"hrec_{n:032x}"


def unit(rng: random.Random) -> list[float]:
    vector = [rng.gauss(0.0, 1.0) for _ in range(DIMS)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


def at(seconds: float) -> str:
    return format_ms(int(T0 + seconds * 1000))


def corpus() -> list[SearchDocument]:
    """Forty-eight versions in MEMORY (episodes in observe batches of four sharing a written_at, a
    fact every sixth, a few closed by revisions, one forgotten), twelve episodes in OTHER."""
    rng = random.Random(11)
    lantern = {3, 4, 9, 14, 15, 22, 27, 31, 38, 44}  # ten documents say "lantern", three of them twice
    harbor, meadow = {5, 9, 12, 17, 23, 33, 40}, {6, 9, 12, 18, 23, 34, 41}  # seven each: equal rarity
    docs = []
    for n in range(1, 61):
        memory = MEMORY if n <= 48 else OTHER
        words = [rng.choice(FILLERS) for _ in range(6)]
        if n in lantern:
            words[0] = LANTERN
            if n % 3 == 0:
                words[3] = LANTERN
        if n in harbor:
            words[1] = HARBOR
        if n in meadow:
            words[2] = MEADOW
        closed = n in (4, 10, 16, 28, 35)
        written = (n - 1) // 4 * 10
        docs.append(
            SearchDocument(
                tenant=TENANT,
                memory_id=memory,
                record_id=rid(n),
                chain_id=rid(n),
                type="fact" if n % 6 == 0 else "episode",
                status=("forgotten" if n == 35 else "superseded") if closed else "active",
                attributes={"speaker": SPEAKERS[n % 3]},
                valid_from=None,
                valid_to=None,
                written_at=at(written),
                invalidated_at=at(written + 25) if closed else None,
                text=" ".join(words),
                embedding=unit(rng),
            )
        )
    return docs


DOCS = corpus()
BY_ID = {d.record_id: d for d in DOCS}


def near(n: int, noise: float = 0.6, seed: int = 0) -> list[float]:
    """A query vector close to one document's."""
    rng = random.Random(1000 + n + seed)
    base = BY_ID[rid(n)].embedding
    assert base is not None
    vector = [x + noise * y for x, y in zip(base, unit(rng), strict=True)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


BOB = {"field": "attributes.speaker", "op": "eq", "value": "bob"}
NOT_CAROL = {"field": "attributes.speaker", "op": "ne", "value": "carol"}
NARROW = Fusion(candidates=4)
# Each request: every signal combination, visibility and fusion setting ranking distinguishes.
REQUESTS: dict[str, dict[str, Any]] = {
    "query": {"vector": near(9)},
    "query, narrow cut": {"vector": near(22), "fusion": NARROW, "limit": 3},
    "text": {"text": LANTERN},
    "text, two equally rare words": {"text": f"{HARBOR} {MEADOW}"},
    "filters": {"filters": BOB},
    "types": {"types": ("fact",), "limit": 5},
    "query + text": {"vector": near(14), "text": LANTERN},
    "query + text, narrow cut": {"vector": near(31), "text": LANTERN, "fusion": NARROW, "limit": 4},
    "query + text, a fact past the vector cut": {
        "vector": near(41), "text": f"{HARBOR} {MEADOW}", "fusion": NARROW, "limit": 4,
    },
    "query + text + filters": {"vector": near(9), "text": f"{HARBOR} {MEADOW}", "filters": NOT_CAROL},
    "query + text + filter on speaker": {"vector": near(27), "text": LANTERN, "filters": BOB},
    "query + text, include all": {"vector": near(16), "text": LANTERN, "include": "all"},
    "query + text, as_of": {"vector": near(4), "text": LANTERN, "as_of": at(100)},
    "query + text, as_of, include all": {"vector": near(10), "text": LANTERN, "as_of": at(60), "include": "all"},
    "query + text, no context": {"vector": near(14), "text": LANTERN, "fusion": Fusion(context_weight=0.0)},
    "query + text, rrf": {"vector": near(14), "text": LANTERN, "fusion": Fusion(method="rrf", context_weight=0.0)},
    "query + text, no similarity floor": {"vector": near(3), "text": LANTERN, "fusion": Fusion(min_similarity=None)},
    "query, several memories": {"vector": near(50), "also": (OTHER,)},
    "filters, several memories": {"filters": NOT_CAROL, "also": (OTHER,), "limit": 12},
}


def ask(name: str) -> SearchRequest:
    fields = dict(REQUESTS[name])
    if "filters" in fields:
        fields["filters"] = parse_filter(fields["filters"])
    fields.setdefault("limit", 50)
    return SearchRequest(TENANT, MEMORY, **fields)


@pytest.fixture(scope="module")
def embedded() -> Iterator[SearchIndex]:
    index = EmbeddedSearchIndex(":memory:", model_id=MODEL, dimensions=DIMS)
    index.index(DOCS)
    yield index
    index.close()


@pytest.fixture(scope="module", params=[b for b in SEARCH_BACKENDS if b != "embedded"])
def other(request: pytest.FixtureRequest) -> Iterator[SearchIndex]:
    client = opensearch_client(request.param)
    name = f"uhp-agree-{uuid.uuid4().hex[:12]}"
    index = OpenSearchIndex(client, name, model_id=MODEL, dimensions=DIMS, refresh=True, replicas=0)
    index.ensure_index()
    index.index(DOCS)
    yield index
    client.indices.delete(index=name, ignore=[404])


def tie_groups(hits: list[Hit]) -> list[list[Hit]]:
    """Consecutive hits whose scores are within TIED of each other, as groups."""
    groups: list[list[Hit]] = []
    for hit in hits:
        if groups and groups[-1][-1].score - hit.score <= TIED:
            groups[-1].append(hit)
        else:
            groups.append([hit])
    return groups


def assert_same_ranking(expected: list[Hit], got: list[Hit]) -> None:
    assert [h.record_id for h in got] == [h.record_id for h in expected] or _same_up_to_ties(expected, got)
    by_id = {h.record_id: h for h in got}
    for want in expected:
        hit = by_id[want.record_id]
        assert hit.score == pytest.approx(want.score, abs=SCORE_TOLERANCE), want.record_id
        assert (hit.why, hit.chain_id, hit.memory_id) == (want.why, want.chain_id, want.memory_id), want.record_id
        assert set(hit.signals) == set(want.signals), want.record_id
        if "query" in want.signals:  # a cosine in every engine (BM25's raw score is each engine's own)
            assert hit.signals["query"] == pytest.approx(want.signals["query"], abs=SCORE_TOLERANCE)


def _same_up_to_ties(expected: list[Hit], got: list[Hit]) -> bool:
    want, have = tie_groups(expected), tie_groups(got)
    same = len(want) == len(have) and all(
        {h.record_id for h in a} == {h.record_id for h in b} for a, b in zip(want, have, strict=True)
    )
    assert same, ([h.record_id for h in expected], [h.record_id for h in got])
    return same


@pytest.mark.slow
@pytest.mark.parametrize("name", list(REQUESTS))
def test_every_adapter_ranks_as_the_embedded_engine(embedded: SearchIndex, other: SearchIndex, name: str) -> None:
    expected = rank(embedded, ask(name))
    assert expected, "every request of the corpus finds something"
    assert_same_ranking(expected, rank(other, ask(name)))


def test_the_corpus_exercises_what_ranking_does(embedded: SearchIndex) -> None:
    """The requests above reach every step of ranking: context lifts some results, the completion
    scores documents outside the vector cut, and a cut falls between two distinct scores."""
    context = rank(embedded, ask("query + text"))
    assert any("context" in h.why for h in context)
    narrow = rank(embedded, ask("query + text, narrow cut"))
    query_cut = rank(embedded, SearchRequest(TENANT, MEMORY, vector=near(31), limit=4, fusion=NARROW))
    joined = {h.record_id for h in narrow if "query" in h.signals} - {h.record_id for h in query_cut}
    assert joined, "a document outside the query signal's cut got its similarity"
    fact = rank(embedded, ask("query + text, a fact past the vector cut"))
    cut = {h.record_id for h in rank(embedded, SearchRequest(TENANT, MEMORY, vector=near(41), limit=4, fusion=NARROW))}
    words_only = [h for h in fact if BY_ID[h.record_id].type == "fact" and h.record_id not in cut]
    assert any("query" in h.signals for h in words_only), "a fact the words found, never in the log, got its similarity"
    for name in ("query, narrow cut", "query + text, narrow cut", "types"):
        hits = rank(embedded, ask(name))
        wider = rank(embedded, SearchRequest(**{**ask(name).__dict__, "limit": 50}))
        assert len(wider) > len(hits), name
        assert wider[len(hits) - 1].score - wider[len(hits)].score > TIED, name  # no tie across the cut
    filtered = rank(embedded, ask("query + text + filter on speaker"))
    assert all(BY_ID[h.record_id].attributes["speaker"] == "bob" for h in filtered)


# -- a wide recall: the episode log read around every candidate, in one msearch of ~320 searches ----

WIDE_MEMORY = "hmem_" + "c" * 32


def wide_corpus() -> list[SearchDocument]:
    """240 episodes of six words, 200 of them saying "lantern" once (so every text score is the same
    number in every engine, and the text signal's cut falls on the record ids), in observe batches of
    four sharing a written_at."""
    rng = random.Random(23)
    docs = []
    for n in range(1, 241):
        words = [rng.choice(FILLERS) for _ in range(6)]
        if n % 6:
            words[rng.randrange(6)] = LANTERN
        docs.append(SearchDocument(
            tenant=TENANT, memory_id=WIDE_MEMORY, record_id=rid(1000 + n), chain_id=rid(1000 + n), type="episode",
            status="active", attributes={"speaker": SPEAKERS[n % 3]}, valid_from=None, valid_to=None,
            written_at=at((n - 1) // 4 * 10), invalidated_at=None, text=" ".join(words), embedding=unit(rng),
        ))
    return docs


WIDE = wide_corpus()


class CountingClient:
    """The client, counting the searches of each msearch it sends."""

    def __init__(self, client: Any) -> None:
        self._client, self.msearches = client, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def msearch(self, body: list[dict[str, Any]], **params: Any) -> Any:
        self.msearches.append(len(body) // 2)
        return self._client.msearch(body=body, **params)


@pytest.fixture(scope="module", params=[b for b in SEARCH_BACKENDS if b != "embedded"])
def wide(request: pytest.FixtureRequest) -> Iterator[tuple[SearchIndex, SearchIndex, CountingClient]]:
    reference = EmbeddedSearchIndex(":memory:", model_id=MODEL, dimensions=DIMS)
    reference.index(WIDE)
    client = CountingClient(opensearch_client(request.param))
    name = f"uhp-wide-{uuid.uuid4().hex[:12]}"
    index = OpenSearchIndex(client, name, model_id=MODEL, dimensions=DIMS, refresh=True, replicas=0)
    index.ensure_index()
    index.index(WIDE)
    yield reference, index, client
    client.indices.delete(index=name, ignore=[404])
    reference.close()


@pytest.mark.slow
@pytest.mark.parametrize("read", ["whole", "around each centre"])
@pytest.mark.parametrize("fields", [
    {"text": LANTERN},
    {"vector": list(WIDE[7].embedding or []), "text": LANTERN},
    {"vector": list(WIDE[50].embedding or []), "text": LANTERN, "filters": NOT_CAROL},
], ids=["text", "query + text", "query + text + filters"])
def test_a_recall_read_around_every_candidate_ranks_alike(
    wide: tuple[SearchIndex, SearchIndex, CountingClient], fields: dict[str, Any], read: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default request over a memory of 240 episodes: about 160 candidate episodes, the log around
    each read from the memory's whole log in one search, or, when the log is longer than
    WHOLE_LOG_MAX, around each centre in one msearch of about 320 searches (ranking.py, index.py)."""
    reference, index, client = wide
    if read != "whole":
        monkeypatch.setattr(opensearch_index, "WHOLE_LOG_MAX", 100)
    fields = {**fields, "filters": parse_filter(fields["filters"])} if "filters" in fields else fields
    request = SearchRequest(TENANT, WIDE_MEMORY, limit=10, **fields)
    sent = len(client.msearches)
    assert_same_ranking(rank(reference, request), rank(index, request))
    largest = max(client.msearches[sent:])
    assert largest >= 200 if read != "whole" else largest < 10, client.msearches[sent:]  # (the words' counts: 4)
