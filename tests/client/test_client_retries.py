"""Retries and error mapping without the server: httpx.MockTransport answering what a throttled or
unavailable stage answers, and a tiny stand-in HTTP server for the real wait on Retry-After."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from uhp_memories_client import (
    IDEMPOTENCY_HEADER,
    AsyncClient,
    Client,
    IdempotencyKeyCommitted,
    InternalError,
    MemoryBusy,
    MemoryNotFound,
    MemoryUnavailable,
    NotFound,
    RateLimited,
    UhpConnectionError,
    UhpError,
)
from uhp_memories_client.errors import error_for

RECORD = {
    "id": "hrec_1", "object": "memory.record", "memory_id": "hmem_1", "type": "fact", "content": "a fact",
    "attributes": {}, "version": 1, "status": "active", "supersedes": None,
    "time": {"valid_from": None, "valid_to": None, "written_at": "2026-10-01T17:02:11Z", "invalidated_at": None},
    "written_by": {"kind": "user", "id": "alice"}, "references": [], "trust": "untrusted",
    "a_field_of_a_newer_server": {"kept": True},
}
UNAVAILABLE = {"error": {"code": "memory_unavailable", "message": "storage did not answer"}}


def scripted(*answers: httpx.Response | Exception) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering `answers` in order, keeping the requests it was sent."""
    sent: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handle), sent


def unavailable(retry_after: str | None = None, status: int = 503) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(status, json=UNAVAILABLE, headers=headers)


def client_over(transport: httpx.MockTransport, **kwargs: Any) -> tuple[Client, list[float]]:
    client = Client("http://stage.invalid/dev", "k-test", transport=transport, **kwargs)
    waits: list[float] = []
    client._sleep = waits.append  # the waits, recorded instead of slept
    return client, waits


def test_a_write_retried_on_503_waits_retry_after_and_keeps_its_key_and_bytes() -> None:
    transport, sent = scripted(unavailable("2"), unavailable("1"), httpx.Response(201, json=RECORD))
    client, waits = client_over(transport)

    record = client.remember("hmem_1", "a fact", attributes={"é": "ü"})

    assert record.id == "hrec_1"
    assert record.model_extra == {"a_field_of_a_newer_server": {"kept": True}}  # a newer server's field, kept
    assert waits == [2.0, 1.0]
    assert len(sent) == 3
    keys = {r.headers[IDEMPOTENCY_HEADER] for r in sent}
    assert len(keys) == 1  # the same key on every attempt
    assert len({r.content for r in sent}) == 1  # and the same bytes
    assert json.loads(sent[0].content) == {"type": "fact", "content": "a fact", "attributes": {"é": "ü"}}
    assert str(sent[0].url) == "http://stage.invalid/dev/v1/memories/hmem_1/records"  # the stage path kept
    assert sent[0].headers["x-api-key"] == "k-test"


def test_a_caller_key_is_sent_as_given() -> None:
    transport, sent = scripted(unavailable(), httpx.Response(201, json=RECORD))
    client, _ = client_over(transport)
    client.remember("hmem_1", "a fact", idempotency_key="mine-1")
    assert [r.headers[IDEMPOTENCY_HEADER] for r in sent] == ["mine-1", "mine-1"]


def test_429_and_502_without_retry_after_back_off_exponentially_with_jitter() -> None:
    throttled = httpx.Response(429, json={"error": {"code": "rate_limited", "message": "slow down"}})
    transport, sent = scripted(throttled, unavailable(status=502), unavailable(), httpx.Response(200, json=RECORD))
    client, waits = client_over(transport)
    assert client.get_record("hmem_1", "hrec_1").content == "a fact"
    assert len(sent) == 4
    assert IDEMPOTENCY_HEADER not in sent[0].headers  # a read carries none
    for attempt, waited in enumerate(waits):
        assert 0.25 * 2**attempt <= waited <= 0.5 * 2**attempt


def test_retry_after_as_an_http_date_and_capped() -> None:
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    transport, _ = scripted(unavailable(date), unavailable("3600"), httpx.Response(200, json=RECORD))
    client, waits = client_over(transport, max_retry_after=10)
    client.get_record("hmem_1", "hrec_1")
    assert 0 < waits[0] <= 10
    assert waits[1] == 10


def test_retries_run_out_with_the_last_answer_raised() -> None:
    transport, sent = scripted(*(unavailable("0") for _ in range(3)))
    client, waits = client_over(transport, retries=2)
    with pytest.raises(MemoryUnavailable) as raised:
        client.create_memory("m")
    assert (raised.value.status, raised.value.code) == (503, "memory_unavailable")
    assert len(sent) == 3
    assert waits == [0.0, 0.0]


def test_connection_failures_are_retried_then_raised() -> None:
    refused = httpx.ConnectError("connection refused")
    transport, sent = scripted(refused, httpx.ReadTimeout("timed out"), httpx.Response(201, json=RECORD))
    client, _ = client_over(transport)
    assert client.remember("hmem_1", "a fact").id == "hrec_1"
    assert len({r.headers[IDEMPOTENCY_HEADER] for r in sent}) == 1

    transport, sent = scripted(refused, refused)
    client, _ = client_over(transport, retries=1)
    with pytest.raises(UhpConnectionError) as raised:
        client.get_memory("hmem_1")
    assert (raised.value.status, raised.value.code) == (None, "connection_error")
    assert len(sent) == 2


def test_a_refusal_is_not_retried() -> None:
    missing = httpx.Response(404, json={"error": {"code": "memory_not_found", "message": "no such memory"}})
    transport, sent = scripted(missing)
    client, waits = client_over(transport)
    with pytest.raises(MemoryNotFound):
        client.get_memory("hmem_1")
    assert (len(sent), waits) == (1, [])


def test_idempotency_in_progress_is_waited_for() -> None:
    running = httpx.Response(409, json={"error": {"code": "idempotency_in_progress", "message": "still running"}},
                             headers={"Retry-After": "1"})
    transport, sent = scripted(running, httpx.Response(201, json=RECORD))
    client, waits = client_over(transport)
    assert client.remember("hmem_1", "a fact").id == "hrec_1"
    assert waits == [1.0]
    assert sent[0].headers[IDEMPOTENCY_HEADER] == sent[1].headers[IDEMPOTENCY_HEADER]


@pytest.mark.parametrize(
    ("status", "body", "expected", "code"),
    [
        (409, {"error": {"code": "memory_busy", "message": "a run holds it"}}, MemoryBusy, "memory_busy"),
        (409, {"error": {"code": "idempotency_key_committed", "message": "m", "written_ids": ["hrec_9"]}},
         IdempotencyKeyCommitted, "idempotency_key_committed"),
        (404, {"error": {"code": "memory_thing_not_found", "message": "newer"}}, NotFound, "memory_thing_not_found"),
        (429, {"message": "Too Many Requests"}, RateLimited, "rate_limited"),  # API Gateway's own body
        (502, "<html>Bad Gateway</html>", MemoryUnavailable, "memory_unavailable"),
        (500, {"error": {"code": "internal_error", "message": "m"}}, InternalError, "internal_error"),
        (418, None, UhpError, "http_418"),
    ],
)
def test_error_bodies_map_to_their_class(status: int, body: Any, expected: type[UhpError], code: str) -> None:
    error = error_for(status, body)
    assert type(error) is expected
    assert (error.status, error.code) == (status, code)
    if isinstance(error, IdempotencyKeyCommitted):
        assert error.written_ids == ["hrec_9"]


@pytest.mark.anyio
async def test_the_async_twin_retries_alike() -> None:
    sent: list[httpx.Request] = []
    answers = [unavailable("2"), httpx.Response(201, json=RECORD)]

    async def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answers.pop(0)

    waits: list[float] = []

    async def record_wait(seconds: float) -> None:
        waits.append(seconds)

    async with AsyncClient("http://stage.invalid", "k-test", transport=httpx.MockTransport(handle)) as client:
        client._sleep = record_wait
        record = await client.remember("hmem_1", "a fact")
    assert record.id == "hrec_1"
    assert waits == [2.0]
    assert sent[0].headers[IDEMPOTENCY_HEADER] == sent[1].headers[IDEMPOTENCY_HEADER]


class StandIn(BaseHTTPRequestHandler):
    """503 with Retry-After: 1 on the first request, then the record."""

    answered: list[tuple[float, str | None]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.answered.append((time.monotonic(), self.headers.get(IDEMPOTENCY_HEADER)))
        first = len(self.answered) == 1
        payload = json.dumps(UNAVAILABLE if first else RECORD).encode()
        self.send_response(503 if first else 201)
        if first:
            self.send_header("Retry-After", "1")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[tuple[str, Callable[[], list[tuple[float, str | None]]]]]:
    answered: list[tuple[float, str | None]] = []
    handler = type("Handler", (StandIn,), {"answered": answered})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", lambda: answered
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_a_real_503_with_retry_after_is_waited_for(
    stand_in: tuple[str, Callable[[], list[tuple[float, str | None]]]],
) -> None:
    url, answered = stand_in
    with Client(url, "k-test") as client:
        assert client.remember("hmem_1", "a fact").id == "hrec_1"
    (first_at, first_key), (second_at, second_key) = answered()
    assert second_at - first_at >= 0.95  # Retry-After: 1
    assert first_key is not None
    assert first_key == second_key
