"""A request's deadline (uhp_memories.deadlines): its arithmetic, how it reaches worker threads, and
how it bounds the real clients: opensearch-py through the connection `connect` gives it, botocore
through the Titan embedder, each against a local endpoint that answers too late (tests/fakes/titan.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextvars import copy_context
from dataclasses import dataclass

import pytest

from tests.fakes.titan import FakeTitan, StalledEndpoint
from uhp_memories import deadlines
from uhp_memories.adapters.bedrock.embedder import TitanEmbedder, client_config
from uhp_memories.adapters.opensearch import OpenSearchIndex, connect
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import QueryNotEmbedded, SearchRequest, SearchUnavailable
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.local.embedded import EmbeddedSearchIndex


@dataclass
class Context:
    """A Lambda context with `remaining_ms` left."""

    remaining_ms: int

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture(autouse=True)
def no_deadline() -> Iterator[None]:
    """Each test starts, and leaves, without one (a test runs in the session's context)."""
    deadlines.start(None)
    yield
    deadlines.start(None)


# -- arithmetic ----------------------------------------------------------------------------------


def test_the_deadline_is_the_lambda_s_remaining_time_less_the_margin() -> None:
    deadlines.start(Context(10_000))

    left = deadlines.remaining()
    assert left is not None
    budget = 10 - deadlines.SAFETY_MARGIN_SECONDS
    assert budget - 0.05 < left <= budget
    assert deadlines.bounded(3.0) == 3.0
    assert budget - 0.05 < deadlines.bounded(60.0) <= budget
    time.sleep(0.2)
    assert deadlines.remaining() < left - 0.19  # type: ignore[operator]


def test_less_time_than_the_margin_is_a_deadline_already_spent() -> None:
    deadlines.start(Context(1_500))

    assert deadlines.remaining() < 0  # type: ignore[operator]
    assert deadlines.bounded(10.0) < 0


def test_without_a_lambda_context_nothing_is_bounded() -> None:
    deadlines.start(Context(5_000))
    deadlines.start(None)  # the next request is a direct call: the last one's deadline is gone
    assert deadlines.remaining() is None
    assert deadlines.bounded(10.0) == 10.0
    deadlines.start(object())
    assert deadlines.remaining() is None


def test_within_sets_a_deadline_for_its_block_and_restores_the_one_before() -> None:
    deadlines.start(Context(30_000))
    with deadlines.within(1.0):
        assert 0.9 < deadlines.remaining() <= 1.0  # type: ignore[operator]
    assert deadlines.remaining() > 27  # type: ignore[operator]


def test_a_share_of_the_time_left_leaves_the_rest_to_what_follows() -> None:
    with deadlines.share(0.5):
        assert deadlines.remaining() is None  # no deadline, no share
    with deadlines.within(4.0):
        with deadlines.share(0.5):
            assert 1.9 < deadlines.remaining() <= 2.0  # type: ignore[operator]
        assert 3.9 < deadlines.remaining() <= 4.0  # type: ignore[operator]
        with deadlines.within(-1.0), deadlines.share(0.5):
            assert deadlines.remaining() <= 0  # type: ignore[operator]


def test_a_worker_thread_sees_the_deadline_only_when_handed_the_request_s_context() -> None:
    seen: dict[str, float | None] = {}
    with deadlines.within(5.0):
        plain = threading.Thread(target=lambda: seen.update(plain=deadlines.remaining()))
        context = copy_context()
        carried = threading.Thread(target=lambda: context.run(lambda: seen.update(carried=deadlines.remaining())))
        for thread in (plain, carried):
            thread.start()
            thread.join()

    assert seen["plain"] is None
    assert seen["carried"] is not None
    assert 4.5 < seen["carried"] <= 5.0


# -- OpenSearch ----------------------------------------------------------------------------------


@pytest.fixture
def stalled() -> Iterator[StalledEndpoint]:
    with StalledEndpoint() as endpoint:
        yield endpoint


def opensearch(url: str) -> OpenSearchIndex:
    return OpenSearchIndex(connect(url), "uhp-recall", model_id="m", dimensions=4)


@pytest.mark.slow
def test_a_stalled_domain_is_unavailable_when_the_request_s_time_is_up(stalled: StalledEndpoint) -> None:
    index = opensearch(stalled.url)
    request = SearchRequest(tenant="acme", memory_id="hmem_" + "a" * 32, text="renews")

    started = time.monotonic()
    with deadlines.within(0.5), pytest.raises(SearchUnavailable, match="ConnectionTimeout"):
        rank(index, request)
    took = time.monotonic() - started

    assert took < 3.0  # not the client's 10 s a try, twice
    assert 1 <= len(stalled.requests) <= 2  # one retry at most, within the same half second


@pytest.mark.slow
def test_a_request_whose_time_is_spent_sends_nothing_to_the_domain(stalled: StalledEndpoint) -> None:
    with deadlines.within(-1.0), pytest.raises(SearchUnavailable):
        opensearch(stalled.url).ensure_index()

    assert stalled.requests == []


def test_connect_retries_once_and_bounds_each_try() -> None:
    client = connect("http://127.0.0.1:9")

    assert (client.transport.max_retries, client.transport.retry_on_timeout) == (1, True)
    assert type(client.transport.get_connection()).__name__ == "DeadlineConnection"


# -- Bedrock -------------------------------------------------------------------------------------


@pytest.fixture
def slow_titan() -> Iterator[FakeTitan]:
    with FakeTitan(delay=30.0) as titan:
        yield titan


@pytest.mark.slow
def test_a_slow_model_is_unavailable_when_the_request_s_time_is_up(slow_titan: FakeTitan) -> None:
    embedder = TitanEmbedder(slow_titan.client(client_config()), dimensions=256)

    started = time.monotonic()
    with deadlines.within(0.4), pytest.raises(SearchUnavailable, match="time the request had left"):
        embedder.embed(["Acme renews in March."])

    assert time.monotonic() - started < 3.0  # not botocore's 10 s read timeout


@pytest.mark.slow
def test_a_request_whose_time_is_spent_does_not_call_the_model(slow_titan: FakeTitan) -> None:
    embedder = TitanEmbedder(slow_titan.client(client_config()), dimensions=256)

    with deadlines.within(-1.0), pytest.raises(SearchUnavailable, match="spent"):
        embedder.embed(["Acme renews in March."])

    time.sleep(0.05)
    assert slow_titan.requests == []


def test_the_bedrock_client_tries_twice_and_bounds_each_try() -> None:
    config = client_config()

    assert config.retries == {"total_max_attempts": 2, "mode": "standard"}
    assert (config.connect_timeout, config.read_timeout) == (2.0, 10.0)


def version(content: str) -> RecordVersion:
    return RecordVersion(
        tenant="acme", memory_id="hmem_" + "a" * 32, id="hrec_" + "1" * 32, chain_id="hrec_" + "1" * 32, version=1,
        type="fact", content=content, attributes={}, status="active", supersedes=None, superseded_by=None,
        valid_from=None, valid_to=None, written_at="2026-10-01T17:02:11.000Z", invalidated_at=None,
        written_by={"principal": "user:alice"},
    )


@pytest.mark.slow
def test_the_engine_s_worker_threads_embed_within_the_request_s_time(slow_titan: FakeTitan) -> None:
    """The query a recall embeds on a worker thread is given half the time its request has left (the
    other half searches its words), and a write's texts embedded while it commits are bounded by the
    request's deadline."""
    embedder = TitanEmbedder(slow_titan.client(client_config()), dimensions=256)
    index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    engine = RecallEngine(index, embedder)

    started = time.monotonic()
    with deadlines.within(2.0):
        query = engine.embedding("when does Acme renew?")
        ahead = engine.embed_ahead([version("Acme renews in March.")])
        with pytest.raises(QueryNotEmbedded):
            query.result()
        assert 0.95 < time.monotonic() - started < 1.6  # half of it
        with pytest.raises(SearchUnavailable):
            engine.index_versions([version("Acme renews in March.")], ahead=ahead)
        assert 1.95 < time.monotonic() - started < 3.0
    assert index.get("acme", "hmem_" + "a" * 32, "hrec_" + "1" * 32) is None  # the stream catches up
    index.close()
