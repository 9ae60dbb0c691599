"""What recall quality asks of every adapter beyond the SearchIndex contract (chosen on the LoCoMo
dev set, bench/recall_locomo.py): relative score fusion that scores every candidate by both signals,
and episode context, where an episode is read with the episodes logged around it. Run against the
embedded engine and the OpenSearch adapter (over the in-process stand-in, and on a real OpenSearch 2.19
node, as in test_search_index.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract.opensearch_fake import SEARCH_BACKENDS, opensearch_client
from uhp_memories.adapters.opensearch import OpenSearchIndex
from uhp_memories.domain.filters import parse_filter
from uhp_memories.domain.recall.model import CONTEXT, Fusion, SearchDocument, SearchRequest
from uhp_memories.domain.recall.ports import SearchIndex
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.timefmt import format_ms
from uhp_memories.local.embedded import EmbeddedSearchIndex
from uhp_memories.local.hashing import HashingEmbedder

EMBEDDER = HashingEmbedder(64)
TENANT, MEMORY = "acme", "hmem_" + "a" * 32
T0 = 1_790_000_000_000
NO_CONTEXT = Fusion(context_weight=0.0)


def rid(n: int) -> str:
    return f"hrec_{n:032x}"


def doc(n: int, text: str, *, written: int, type: str = "episode", **fields: Any) -> SearchDocument:
    base: dict[str, Any] = {
        "tenant": TENANT,
        "memory_id": MEMORY,
        "record_id": rid(n),
        "chain_id": rid(n),
        "type": type,
        "status": "active",
        "attributes": {},
        "valid_from": None,
        "valid_to": None,
        "written_at": format_ms(T0 + written * 1000),
        "invalidated_at": None,
        "text": text,
        "embedding": EMBEDDER.embed([text])[0],
    }
    base.update(fields)
    return SearchDocument(**base)


def ask(**fields: Any) -> SearchRequest:
    if "query" in fields:
        fields["vector"] = EMBEDDER.embed([fields.pop("query")])[0]
    if "filters" in fields:
        fields["filters"] = parse_filter(fields["filters"])
    return SearchRequest(TENANT, MEMORY, **fields)


def ids(hits: list[Any]) -> list[str]:
    return [h.record_id for h in hits]


def conversation(type: str = "episode") -> list[SearchDocument]:
    """A question in one turn, its answer in the next; far away in the log, a turn that matches the
    answer's words as well as the answer does (and sorts first by id)."""
    return [
        doc(20, "alice: did you ever see the old lighthouse on the cape", written=1, type=type,
            attributes={"speaker": "alice"}),
        doc(21, "bob: yes we went there together last summer", written=1, type=type, attributes={"speaker": "bob"}),
        doc(22, "bob: the weather is nice today", written=1, type=type, attributes={"speaker": "bob"}),
        *[doc(30 + n, f"carol: filler number{n} about nothing much", written=2, type=type) for n in range(8)],
        doc(10, "bob: yes we went there together last winter", written=3, type=type, attributes={"speaker": "bob"}),
    ]


@pytest.fixture(params=SEARCH_BACKENDS)
def index(request: pytest.FixtureRequest) -> Iterator[SearchIndex]:
    if request.param == "embedded":
        yield EmbeddedSearchIndex(":memory:", model_id=EMBEDDER.model_id, dimensions=EMBEDDER.dimensions)
        return
    client = opensearch_client(request.param)
    name = f"uhp-quality-{uuid.uuid4().hex[:12]}"
    opened = OpenSearchIndex(
        client, name, model_id=EMBEDDER.model_id, dimensions=EMBEDDER.dimensions, refresh=True, replicas=0
    )
    opened.ensure_index()
    yield opened
    client.indices.delete(index=name, ignore=[404])


@pytest.mark.slow
def test_an_episode_is_lifted_by_the_turn_before_it(index: SearchIndex) -> None:
    index.index(conversation())
    request = {"text": "did they see the old lighthouse on the cape together"}
    plain = ids(rank(index, ask(**request, fusion=NO_CONTEXT)))
    assert plain.index(rid(10)) < plain.index(rid(21))  # equal matches on their own: the id decides
    hits = rank(index, ask(**request))
    assert ids(hits)[:2] == [rid(20), rid(21)]  # the answer comes right after its question
    assert CONTEXT in hits[1].why
    assert CONTEXT not in hits[0].why
    assert all(0 < h.score <= 1 for h in hits)


@pytest.mark.slow
def test_context_never_returns_a_document_without_a_signal_of_its_own(index: SearchIndex) -> None:
    index.index(conversation())
    found = set(ids(rank(index, ask(text="lighthouse together", limit=100))))
    assert rid(22) not in found  # next to both matches, but matches nothing itself
    assert found == {rid(20), rid(21), rid(10)}


@pytest.mark.slow
def test_records_other_than_episodes_are_read_alone(index: SearchIndex) -> None:
    index.index(conversation(type="fact"))
    hits = ids(rank(index, ask(text="when did they see the lighthouse together")))
    assert hits.index(rid(10)) < hits.index(rid(21))


@pytest.mark.slow
def test_a_neighbour_the_filter_excludes_lifts_nothing(index: SearchIndex) -> None:
    index.index(conversation())
    bob = {"field": "attributes.speaker", "op": "eq", "value": "bob"}
    hits = rank(index, ask(text="when did they see the lighthouse together", filters=bob))
    assert ids(hits)[:2] == [rid(10), rid(21)]
    assert all(CONTEXT not in h.why for h in hits)


@pytest.mark.slow
def test_the_window_counts_only_the_episodes_the_request_admits(index: SearchIndex) -> None:
    """Between a question and its answer, two turns of another speaker: with a filter on the
    speaker they are skipped (the answer is next to its question), without one they are a gap."""
    bob = {"speaker": "bob"}
    index.index([
        doc(20, "bob: did you ever see the old lighthouse on the cape", written=1, attributes=bob),
        doc(30, "carol: filler number0 about nothing much", written=2, attributes={"speaker": "carol"}),
        doc(31, "carol: filler number1 about nothing much", written=2, attributes={"speaker": "carol"}),
        doc(21, "bob: yes we went there together last summer", written=3, attributes=bob),
        *[doc(40 + n, f"bob: filler number{n} about nothing much", written=4, attributes=bob) for n in range(3)],
        doc(10, "bob: yes we went there together last winter", written=9, attributes=bob),
    ])
    words = {"text": "did they see the old lighthouse on the cape together"}
    only_bob = ids(rank(index, ask(**words, filters={"field": "attributes.speaker", "op": "eq", "value": "bob"})))
    assert only_bob.index(rid(21)) < only_bob.index(rid(10))  # lifted by the question, two places back
    everyone = ids(rank(index, ask(**words)))
    assert everyone.index(rid(10)) < everyone.index(rid(21))  # three places back: out of the window


@pytest.mark.slow
def test_the_log_follows_write_order_through_late_writes_and_erase(index: SearchIndex) -> None:
    question = doc(20, "alice: did you ever see the old lighthouse on the cape", written=1)
    answer = doc(21, "bob: yes we went there together last summer", written=1)
    decoy = doc(10, "bob: yes we went there together last winter", written=3)
    fillers = [doc(30 + n, f"carol: filler number{n} about nothing much", written=2) for n in range(8)]
    request = ask(text="when did they see the lighthouse together")
    index.index([answer, *fillers, decoy])
    assert ids(rank(index, request))[:2] == [rid(10), rid(21)]  # loads the memory's log
    index.index([question])  # written before the rest, indexed after it (a replayed stream)
    assert ids(rank(index, request))[:2] == [rid(20), rid(21)]
    index.delete(TENANT, MEMORY, [rid(20)])
    assert ids(rank(index, request))[:2] == [rid(10), rid(21)]


@pytest.mark.slow
def test_a_document_the_words_found_is_scored_by_meaning_too(index: SearchIndex) -> None:
    index.index([
        doc(1, "acme renewal march", written=1, type="fact"),
        doc(2, "acme discount", written=2, type="fact"),
        doc(3, "unrelated words entirely", written=3, type="fact"),
    ])
    hits = rank(index, ask(query="acme renewal", text="discount", fusion=Fusion(candidates=1)))
    by_id = {h.record_id: h for h in hits}
    assert set(by_id) == {rid(1), rid(2)}
    assert by_id[rid(2)].why == ("query", "text")  # below the query signal's cut, still scored by it
    assert by_id[rid(2)].signals["query"] > 0


@pytest.mark.slow
def test_relative_fusion_scores_a_first_place_everywhere_as_one(index: SearchIndex) -> None:
    index.index([doc(1, "acme renewal", written=1, type="fact"), doc(2, "acme", written=2, type="fact")])
    hits = rank(index, ask(query="acme renewal", text="acme renewal"))
    assert ids(hits) == [rid(1), rid(2)]
    assert hits[0].score == pytest.approx(1.0)
    assert 0 < hits[1].score < 1


@pytest.mark.slow
def test_reciprocal_rank_fusion_is_still_there(index: SearchIndex) -> None:
    index.index([doc(1, "acme renewal", written=1, type="fact"), doc(2, "acme", written=2, type="fact")])
    rrf = Fusion(method="rrf", k=60.0, context_weight=0.0)
    hits = rank(index, ask(query="acme renewal", text="acme renewal", fusion=rrf))
    assert ids(hits) == [rid(1), rid(2)]
    assert hits[0].score == pytest.approx(1.0)
    assert hits[1].score == pytest.approx(61 / 62)


def test_fusion_settings_are_checked() -> None:
    for bad in ({"method": "max"}, {"context_weight": 1.5}, {"context_window": -1}):
        with pytest.raises(ValueError, match="fusion"):
            Fusion(**bad)


def test_the_abstain_threshold_is_the_one_calibrated_for_the_model() -> None:
    from uhp_memories.domain.recall.abstain import UNCALIBRATED_SIMILARITY, AbstainPolicy, Calibration
    from uhp_memories.domain.recall.model import RecallInput
    from uhp_memories.local.minilm import MODEL_ID

    # The figures calibrated on the LoCoMo dev set (docs/decisions.md, "Recall"; docs/benchmarks.md),
    # written out: a change of the table they live in must show here.
    assert MODEL_ID.endswith(":onnx-int8-u8u8")
    assert AbstainPolicy().calibration(MODEL_ID) == Calibration(threshold=0.40, certain=0.66, named=0.54)
    assert AbstainPolicy().threshold(MODEL_ID) == 0.40
    assert AbstainPolicy().threshold("amazon.titan-embed-text-v2:0") == UNCALIBRATED_SIMILARITY
    assert AbstainPolicy().threshold("amazon.titan-embed-text-v2:0") != 0.40
    assert AbstainPolicy(0.9).threshold(MODEL_ID) == 0.9

    class Found:
        record_id, score, why = "hrec_1", 1.0, ("query",)

        def __init__(self, similarity: float) -> None:
            self.signals = {"query": similarity}

    question = RecallInput(query="who?")
    calibrated = 0.40
    assert AbstainPolicy().abstain(question, [Found(calibrated - 0.01)], MODEL_ID)
    assert not AbstainPolicy().abstain(question, [Found(calibrated + 0.01)], MODEL_ID)
    assert AbstainPolicy().abstain(question, [], MODEL_ID)
    assert not AbstainPolicy().abstain(RecallInput(text="who"), [Found(0.0)], MODEL_ID)
