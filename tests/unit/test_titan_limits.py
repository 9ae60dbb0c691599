"""Titan v2's input limits (8,192 tokens, 50,000 characters) against a fake Bedrock that enforces them
as Bedrock answers (tests/fakes/titan.py, over HTTP through botocore): every text a record can hold
is cut to what Titan takes, and a text Titan refuses all the same is indexed by its words, in the
embedded index and in the OpenSearch adapter over the fake cluster, without failing its write."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.contract.opensearch_fake import FakeOpenSearch
from tests.fakes.titan import TITAN_MAX_CHARACTERS, TITAN_MAX_TOKENS, FakeTitan, java_length, titan_tokens
from uhp_memories.adapters.bedrock.embedder import MAX_INPUT_BYTES, TitanEmbedder, client_config, within_input_limit
from uhp_memories.adapters.opensearch import OpenSearchIndex
from uhp_memories.domain.limits import CONTENT_BYTES
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import QueryNotEmbedded, SearchRequest, SearchUnavailable, TextNotEmbeddable
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.local.embedded import EmbeddedSearchIndex

TENANT, MEMORY = "acme", "hmem_" + "a" * 32
# Within the byte bound (3 bytes a character), and far beyond Titan's tokens once Unicode
# normalization expands each U+FDFA to the 18 characters of its phrase: the one kind of text the
# bound cannot see.
REFUSED = "Initech invoice " + "\ufdfa" * 2_500


def utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTitan]:
    with FakeTitan() as titan:
        yield titan


@pytest.fixture
def embedder(fake: FakeTitan) -> TitanEmbedder:
    fake.requests.clear()
    return TitanEmbedder(fake.client(client_config()), dimensions=256)


def version(n: int, content: str) -> RecordVersion:
    return RecordVersion(
        tenant=TENANT, memory_id=MEMORY, id=f"hrec_{n:032x}", chain_id=f"hrec_{n:032x}", version=1, type="fact",
        content=content, attributes={}, status="active", supersedes=None, superseded_by=None, valid_from=None,
        valid_to=None, written_at=f"2026-10-01T17:02:{n:02d}.000Z", invalidated_at=None,
        written_by={"principal": "user:alice"},
    )


# -- the fake answers as Titan does ------------------------------------------------------------


def test_the_fake_refuses_as_titan_does_in_botocore_s_shape(fake: FakeTitan) -> None:
    client = fake.client()
    for text, reason in (
        ("x" * (TITAN_MAX_CHARACTERS + 1), f"expected maxLength: {TITAN_MAX_CHARACTERS}, actual: 50001"),
        ("7" * 9_000, f"Max input tokens: {TITAN_MAX_TOKENS}, request input token count: 9002"),
    ):
        with pytest.raises(ClientError) as refused:
            client.invoke_model(modelId="amazon.titan-embed-text-v2:0", body=f'{{"inputText":"{text}"}}')
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert reason in refused.value.response["Error"]["Message"]


# -- every text a record holds is cut to what Titan takes ----------------------------------------


LONGEST = {
    "english": "The renewal was agreed in March after a long call. " * 2_100,
    "digits": "4111111111111111 " * 6_100,
    "emoji": "\U0001f600\U0001f44d " * 11_000,
    "chinese": "续约在三月份谈妥了。" * 3_500,
    "indented code": "        if (x) { return y; }\n" * 3_600,
}


@pytest.mark.parametrize("kind", sorted(LONGEST))
def test_the_longest_text_a_record_holds_is_embedded_by_its_start(
    kind: str, fake: FakeTitan, embedder: TitanEmbedder
) -> None:
    text = LONGEST[kind][: CONTENT_BYTES]
    assert utf8(text) > CONTENT_BYTES * 0.95  # as long as a record's content may be

    assert len(embedder.embed([text])[0]) == 256

    (sent,) = fake.texts
    assert text.startswith(sent)
    assert MAX_INPUT_BYTES - 4 < utf8(sent) <= MAX_INPUT_BYTES


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.tuples(st.text(max_size=40), st.integers(1, 4_000)).map(lambda t: t[0] * t[1]))
def test_the_cut_is_the_longest_start_within_the_bound(text: str) -> None:
    cut = within_input_limit(text)

    assert text.startswith(cut)
    assert utf8(cut) <= MAX_INPUT_BYTES
    assert java_length(cut) <= TITAN_MAX_CHARACTERS
    if cut != text:
        assert utf8(text[: len(cut) + 1]) > MAX_INPUT_BYTES  # the next character would not fit
    # Wherever normalization does not lengthen the text, a pessimistic tokenizer keeps within Titan's.
    assume(utf8(unicodedata.normalize("NFKC", cut)) <= utf8(cut))
    assert titan_tokens(cut) <= TITAN_MAX_TOKENS


# -- a text Titan refuses ------------------------------------------------------------------------


def test_a_text_titan_refuses_is_not_embeddable_and_asked_once(fake: FakeTitan, embedder: TitanEmbedder) -> None:
    assert utf8(REFUSED) <= MAX_INPUT_BYTES < titan_tokens(REFUSED)

    with pytest.raises(TextNotEmbeddable, match="Too many input tokens") as refused:
        embedder.embed([REFUSED])

    assert refused.value.code == "ValidationException"
    assert len(fake.requests) == 1  # a refusal is not retried


@pytest.mark.slow
def test_throttling_is_retried_once_then_unavailable() -> None:
    with FakeTitan(throttled=True) as throttled:
        embedder = TitanEmbedder(throttled.client(client_config()), dimensions=256)
        with pytest.raises(SearchUnavailable, match="ThrottlingException"):
            embedder.embed(["Acme renews in March."])
        assert len(throttled.requests) == 2  # botocore's one retry, and no more


# -- the engine indexes it by its words, in either index -----------------------------------------


@pytest.fixture(params=["embedded", "opensearch-fake"])
def engine(request: pytest.FixtureRequest, embedder: TitanEmbedder) -> Iterator[RecallEngine]:
    index: Any
    if request.param == "embedded":
        index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    else:
        index = OpenSearchIndex(FakeOpenSearch(), "uhp-recall", model_id=embedder.model_id,
                                dimensions=embedder.dimensions)
    yield RecallEngine(index, embedder)
    if request.param == "embedded":
        index.close()


def found(engine: RecallEngine, *, text: str | None = None, query: str | None = None) -> list[str]:
    vector = engine.embed_query(query) if query else None
    request = SearchRequest(tenant=TENANT, memory_id=MEMORY, text=text, vector=vector)
    return [hit.record_id for hit in rank(engine.index, request)]


def test_a_record_titan_refuses_is_indexed_by_its_words_beside_the_others(engine: RecallEngine) -> None:
    refused, kept = version(1, REFUSED), version(2, "Initech pays by wire transfer.")

    engine.index_versions([refused, kept])

    stored = engine.index.get(TENANT, MEMORY, refused.id)
    assert stored is not None
    assert stored.embedding is None
    assert stored.text == REFUSED
    assert engine.index.get(TENANT, MEMORY, kept.id).embedding is not None  # type: ignore[union-attr]
    assert set(found(engine, text="initech")) == {refused.id, kept.id}
    assert found(engine, query="wire transfer") == [kept.id]


def test_a_refusal_made_while_the_write_committed_is_indexed_by_its_words(engine: RecallEngine) -> None:
    refused = version(3, REFUSED)
    ahead = engine.embed_ahead([refused])

    engine.index_versions([refused], ahead=ahead)

    assert engine.index.get(TENANT, MEMORY, refused.id).embedding is None  # type: ignore[union-attr]
    assert found(engine, text="invoice") == [refused.id]


def test_the_longest_record_is_found_by_meaning_and_by_its_last_word(engine: RecallEngine) -> None:
    words = "The renewal was agreed in March after a long call. " * 1_900 + "Zanzibar"
    record = version(4, words)
    assert utf8(words) < CONTENT_BYTES

    engine.index_versions([record])

    assert engine.index.get(TENANT, MEMORY, record.id).embedding is not None  # type: ignore[union-attr]
    assert found(engine, query="renewal agreed in March") == [record.id]
    assert found(engine, text="zanzibar") == [record.id]  # beyond the cut: the words hold all of it


@pytest.mark.slow
def test_a_query_titan_refuses_is_searched_by_its_words(engine: RecallEngine) -> None:
    with pytest.raises(QueryNotEmbedded):
        engine.embed_query(REFUSED)
