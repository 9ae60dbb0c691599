"""Faults injected at the adapters, under real HTTP: DynamoDB throttled or losing transaction races, the
search index down, S3 failing, a workflow step failing. What must hold whatever fails: a write is
acknowledged only once DynamoDB has it, a refused one wrote nothing (and runs again on a retry with its
Idempotency-Key), the index catches up, what was not done is said (`degraded`, 503 and a job), and
nothing acknowledged is lost."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from tests.integration.conftest import Client, error_code
from uhp_memories.admin import reindex
from uhp_memories.domain.recall.model import SearchUnavailable
from uhp_memories.local.moto_env import LocalAws


def aws_error(code: str, operation: str, **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "injected"}, **extra}, operation)


@contextmanager
def failing(target: Any, method: str, times: int, error: Callable[[], Exception]) -> Iterator[list[int]]:
    """`target.method` raises `error()` on its next `times` calls, then works again. Yields the count
    of calls that failed. `target` is one of the container's clients (or the search index): every
    adapter holds that very object, so each of them meets the fault."""
    original = getattr(target, method)
    failed = [0]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failed[0] < times:
            failed[0] += 1
            raise error()
        return original(*args, **kwargs)

    setattr(target, method, flaky)
    try:
        yield failed
    finally:
        try:
            delattr(target, method)  # an instance attribute shadowing the class's (or __getattr__'s)
        except AttributeError:
            setattr(target, method, original)


def records_of(client: Client, memory_id: str) -> list[dict[str, Any]]:
    return client.get(f"/v1/memories/{memory_id}/records", include="all", limit="100").json()["data"]


@pytest.fixture
def container(local_aws: LocalAws) -> Any:
    assert local_aws.container is not None
    return local_aws.container


@pytest.fixture
def s3(container: Any) -> Any:
    """The S3 client every file adapter of the container holds."""
    return container.files._objects._client


# -- DynamoDB ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException",
                                  "RequestLimitExceeded", "InternalServerError"])
def test_a_throttled_write_is_unavailable_wrote_nothing_and_runs_on_retry(
    alice: Client, container: Any, code: str
) -> None:
    memory = alice.create_memory("m")
    key = {"Idempotency-Key": f"retry-me-{code}"}
    body = {"type": "fact", "content": "Acme renews in March."}
    with failing(container.dynamodb, "transact_write_items", 1, lambda: aws_error(code, "TransactWriteItems")):
        refused = alice.post(f"/v1/memories/{memory['id']}/records", body, headers=key)
    assert refused.status_code == 503, refused.text
    assert error_code(refused) == "memory_unavailable"
    assert records_of(alice, memory["id"]) == []
    # The 503 was not kept: the same key runs the write now, once.
    written = alice.post(f"/v1/memories/{memory['id']}/records", body, headers=key)
    assert written.status_code == 201, written.text
    assert alice.post(f"/v1/memories/{memory['id']}/records", body, headers=key).json() == written.json()
    assert [r["id"] for r in records_of(alice, memory["id"])] == [written.json()["id"]]


@pytest.mark.slow
def test_a_throttled_read_is_unavailable(alice: Client, container: Any) -> None:
    memory = alice.create_memory("m")
    alice.remember(memory["id"])
    error = lambda: aws_error("ProvisionedThroughputExceededException", "Query")  # noqa: E731
    with failing(container.dynamodb, "query", 1_000, error):
        answer = alice.get(f"/v1/memories/{memory['id']}/records")
    assert answer.status_code == 503, answer.text
    assert len(records_of(alice, memory["id"])) == 1


@pytest.mark.slow
def test_transaction_conflicts_are_retried_and_the_write_lands_once(alice: Client, container: Any) -> None:
    memory = alice.create_memory("m")
    record = alice.remember(memory["id"], "v1")

    def conflict() -> ClientError:
        return aws_error("TransactionCanceledException", "TransactWriteItems",
                         CancellationReasons=[{"Code": "None"}, {"Code": "TransactionConflict"}])

    with failing(container.dynamodb, "transact_write_items", 2, conflict) as failed:
        revised = alice.patch(f"/v1/memories/{memory['id']}/records/{record['id']}", {"content": "v2"})
    assert failed[0] == 2
    assert revised.status_code == 200, revised.text
    history = alice.get(f"/v1/memories/{memory['id']}/records/{record['id']}/history").json()["data"]
    assert [(v["content"], v["status"]) for v in history] == [("v1", "superseded"), ("v2", "active")]


@pytest.mark.slow
def test_a_transaction_that_keeps_conflicting_is_unavailable_and_wrote_nothing(alice: Client, container: Any) -> None:
    memory = alice.create_memory("m")
    record = alice.remember(memory["id"], "v1")

    def conflict() -> ClientError:
        return aws_error("TransactionCanceledException", "TransactWriteItems",
                         CancellationReasons=[{"Code": "TransactionConflict"}])

    with failing(container.dynamodb, "transact_write_items", 1_000, conflict):
        refused = alice.patch(f"/v1/memories/{memory['id']}/records/{record['id']}", {"content": "v2"})
    assert refused.status_code == 503, refused.text
    assert [r["content"] for r in records_of(alice, memory["id"])] == ["v1"]
    assert alice.patch(f"/v1/memories/{memory['id']}/records/{record['id']}", {"content": "v2"}).status_code == 200


# -- the search index -------------------------------------------------------------------------


@pytest.mark.slow
def test_with_the_index_down_writes_are_acknowledged_recall_is_unavailable_and_a_reindex_catches_up(
    alice: Client, container: Any
) -> None:
    memory = alice.create_memory("m")
    engine = container.recall_engine()
    down = lambda: SearchUnavailable("injected: the index is down")  # noqa: E731
    with failing(engine.index, "index", 1_000, down), failing(engine.index, "candidates", 1_000, down):
        written = alice.remember(memory["id"], "Globex prefers email over calls.")
        assert [r["id"] for r in records_of(alice, memory["id"])] == [written["id"]]  # durable
        recalled = alice.post(f"/v1/memories/{memory['id']}/recall", {"text": "globex email"})
        assert recalled.status_code == 503, recalled.text
        assert error_code(recalled) == "memory_unavailable"
    # Back up: the write missed the index, so recall cannot see it yet ...
    assert alice.post(f"/v1/memories/{memory['id']}/recall", {"text": "globex email"}).json()["results"] == []
    # ... until the index catches up from DynamoDB (the stream indexer in AWS; `reindex` anywhere).
    target = _LocalTarget(engine)
    reindex.reindex(container.dynamodb, container.settings.table_name, target)
    found = alice.post(f"/v1/memories/{memory['id']}/recall", {"text": "globex email"}).json()["results"]
    assert [r["record"]["id"] for r in found] == [written["id"]]


class _LocalTarget:
    """The local engine as a reindex target (no drop: the embedded index is rebuilt in place)."""

    description = "local embedded index"

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def drop(self) -> None:
        raise AssertionError("not asked to drop")

    def engine(self) -> Any:
        return self._engine


@pytest.mark.slow
def test_with_the_embedder_down_recall_answers_by_words_and_says_so(alice: Client, container: Any) -> None:
    memory = alice.create_memory("m")
    written = alice.remember(memory["id"], "Globex prefers email over calls.")
    engine = container.recall_engine()
    # What an embedder raises when its model does not answer (Bedrock throttled or down).
    with failing(engine.embedder, "embed", 1_000, lambda: SearchUnavailable("injected: the model is down")):
        answer = alice.post(f"/v1/memories/{memory['id']}/recall", {"query": "globex email"})
    assert answer.status_code == 200, answer.text
    assert "query:embedder_unavailable" in answer.json()["degraded"]
    assert [r["record"]["id"] for r in answer.json()["results"]] == [written["id"]]


# -- S3 ---------------------------------------------------------------------------------------


def test_an_upload_s3_refuses_is_unavailable_and_leaves_no_file(alice: Client, s3: Any) -> None:
    error = lambda: aws_error("SlowDown", "PutObject", ResponseMetadata={"HTTPStatusCode": 503})  # noqa: E731
    with failing(s3, "put_object", 1_000, error):
        answer = alice.session.post(alice.base_url + "/v1/files", files={"file": ("a.txt", b"bytes", "text/plain")},
                                    headers={"x-api-key": alice.key}, timeout=30)
    assert answer.status_code == 503, answer.text
    assert error_code(answer) == "memory_unavailable"


@pytest.mark.slow
def test_a_file_record_whose_bytes_s3_cannot_copy_is_not_written(alice: Client, s3: Any) -> None:
    memory = alice.create_memory("docs")
    uploaded = alice.session.post(alice.base_url + "/v1/files", files={"file": ("a.txt", b"bytes", "text/plain")},
                                  headers={"x-api-key": alice.key}, timeout=30).json()
    body = {"type": "note", "content": {"file": {"id": uploaded["id"]}}}
    with failing(s3, "copy_object", 1_000, lambda: EndpointConnectionError(endpoint_url="s3")):
        refused = alice.post(f"/v1/memories/{memory['id']}/records", body)
    assert refused.status_code == 503, refused.text
    assert records_of(alice, memory["id"]) == []
    assert alice.get(f"/v1/files/{uploaded['id']}").json()["status"] == "uploaded"  # still attachable
    written = alice.post(f"/v1/memories/{memory['id']}/records", body)
    assert written.status_code == 201, written.text


# -- workflows --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_workflow_step_that_fails_once_is_retried_and_the_erase_completes(
    alice: Client, local_aws: LocalAws
) -> None:
    memory = alice.create_memory("m")
    doomed = alice.remember(memory["id"], "erase me")
    kept = alice.remember(memory["id"], "keep me")
    local_aws.fail_step("erase_records", 1)
    answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [doomed["id"]]})
    assert answer.status_code in (200, 202), answer.text
    if answer.status_code == 202:  # a slow machine: the job finishes what the request began
        job = alice.get(f"/v1/memories/{memory['id']}/jobs/{answer.json()['job']['id']}").json()
        assert job["status"] in ("running", "completed")
    else:
        assert answer.json()["erased"] == [doomed["id"]]
    assert [r["id"] for r in records_of(alice, memory["id"])] == [kept["id"]]
