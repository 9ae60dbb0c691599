"""A slow search domain and a slow model, through the local gateway, with a Lambda that has little
time left: every call to them ends in the request's time (uhp_memories.deadlines), so recall answers
503 `memory_unavailable` (never a Lambda timeout, which API Gateway answers 502), a write DynamoDB
committed answers 201 (the stream indexer catches the index up), and a slow model alone costs recall
its meaning, not its answer.

The engine is the one AWS runs, built by bootstrap.build_recall_engine with its real clients:
opensearch-py (SigV4, the deadline connection) against a domain that takes requests and answers none
in time, and botocore's bedrock-runtime (its client configuration) against Titan answering a minute
late (tests/fakes/titan.py), reached as AWS_ENDPOINT_URL_BEDROCK_RUNTIME points it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.titan import FakeTitan, StalledEndpoint
from tests.integration.conftest import Client, error_code
from uhp_memories import bootstrap
from uhp_memories.adapters.opensearch.bounded import DeadlineConnection
from uhp_memories.local import gateway
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow

# What each function call has left as it starts: its deadline falls SAFETY_MARGIN_SECONDS (2 s)
# before, a second in.
REMAINING_MS = 3_000
# However slow the services, an answer comes by the deadline (1 s) and the work after it; without
# deadlines a recall waits for two tries of the OpenSearch client's 10 s, and a write for botocore's
# read timeout.
ANSWERED_WITHIN_S = 5.0


def little_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, every function the gateway calls starts with REMAINING_MS left."""
    monkeypatch.setattr(gateway.LambdaContext, "get_remaining_time_in_millis", lambda self: REMAINING_MS)


@pytest.fixture
def stalled_domain() -> Iterator[StalledEndpoint]:
    with StalledEndpoint() as domain:
        yield domain


@pytest.fixture
def titan() -> Iterator[FakeTitan]:
    with FakeTitan() as fake:
        yield fake


@pytest.fixture
def slow_titan() -> Iterator[FakeTitan]:
    with FakeTitan(delay=60.0) as fake:
        yield fake


def aws_engine(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch, domain_url: str, titan: FakeTitan) -> Any:
    """The stage's engine as bootstrap builds it in AWS, against these endpoints."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", titan.url)
    settings = local_aws.settings.model_copy(update={"search_endpoint": domain_url, "embedding_dimensions": 256})
    engine = bootstrap.build_recall_engine(settings)
    assert engine is not None
    assert isinstance(engine.index.client.transport.get_connection(), DeadlineConnection)
    return engine


def serving(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch, *, index: Any = None, embedder: Any = None) -> None:
    """The local server's engine searches `index` and embeds with `embedder` for the rest of the test."""
    assert local_aws.container is not None
    engine = local_aws.container.recall_engine()
    if index is not None:
        monkeypatch.setattr(engine, "index", index)
    if embedder is not None:
        monkeypatch.setattr(engine, "embedder", embedder)


def timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


def test_with_a_slow_domain_recall_is_unavailable_and_a_write_is_committed(
    alice: Client, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch,
    stalled_domain: StalledEndpoint, titan: FakeTitan,
) -> None:
    memory = alice.create_memory("m")
    aws = aws_engine(local_aws, monkeypatch, stalled_domain.url, titan)
    serving(local_aws, monkeypatch, index=aws.index, embedder=aws.embedder)
    little_time(monkeypatch)

    written, took = timed(lambda: alice.post(f"/v1/memories/{memory['id']}/records",
                                             {"type": "fact", "content": "Globex prefers email over calls."}))
    assert written.status_code == 201, written.text
    assert took < ANSWERED_WITHIN_S
    listed = alice.get(f"/v1/memories/{memory['id']}/records").json()["data"]
    assert [r["id"] for r in listed] == [written.json()["id"]]  # committed: the stream indexes it later

    recalled, took = timed(lambda: alice.post(f"/v1/memories/{memory['id']}/recall", {"query": "globex email"}))
    assert recalled.status_code == 503, recalled.text
    assert error_code(recalled) == "memory_unavailable"
    assert took < ANSWERED_WITHIN_S
    assert len(titan.texts) == 2  # the record and the query were embedded: the domain was the one too slow
    assert {method for method, _, _ in stalled_domain.requests} <= {"HEAD"}  # asked whether the index exists
    assert stalled_domain.requests


def test_with_only_the_model_slow_recall_answers_by_words_in_time(
    alice: Client, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch,
    stalled_domain: StalledEndpoint, slow_titan: FakeTitan,
) -> None:
    memory = alice.create_memory("m")
    written = alice.remember(memory["id"], "Globex prefers email over calls.")
    slow = aws_engine(local_aws, monkeypatch, stalled_domain.url, slow_titan)
    serving(local_aws, monkeypatch, embedder=slow.embedder)
    little_time(monkeypatch)

    recalled, took = timed(lambda: alice.post(f"/v1/memories/{memory['id']}/recall", {"query": "globex email"}))

    assert recalled.status_code == 200, recalled.text
    assert took < ANSWERED_WITHIN_S
    assert "query:embedder_unavailable" in recalled.json()["degraded"]
    assert [r["record"]["id"] for r in recalled.json()["results"]] == [written["id"]]
