"""The local gateway's own answers: pages to land on without a key, and every refusal in the API's
error shape (JSON), never http.server's HTML; one log line per request without content."""

from __future__ import annotations

import http.client
import json
import logging
import secrets
import socket

import pytest
import requests

from tests.integration.conftest import Client
from uhp_memories import __version__
from uhp_memories.local.gateway import REQUEST_LOG, LocalGateway


def _error(answer: requests.Response) -> tuple[int, str]:
    assert answer.headers["Content-Type"].startswith("application/json"), answer.text
    return answer.status_code, answer.json()["error"]["code"]


def test_the_root_names_the_service_its_version_and_where_to_go(gateway: LocalGateway) -> None:
    answer = requests.get(gateway.url + "/", timeout=30)
    assert answer.status_code == 200
    body = answer.json()
    assert (body["service"], body["version"]) == ("uhp-memories", __version__)
    assert "2026-10-04" in body["protocol"]
    assert body["links"]["openapi"] == gateway.url + "/openapi.json"
    assert requests.get(gateway.url + "/healthz", timeout=30).json() == {"status": "ok"}


@pytest.mark.slow
def test_the_openapi_document_and_its_docs_page_are_served_offline(gateway: LocalGateway) -> None:
    document = requests.get(gateway.url + "/openapi.json", timeout=30).json()
    assert document["openapi"].startswith("3.")
    assert "/v1/memories" in document["paths"]
    assert document["servers"] == [{"url": gateway.url, "description": "this local server"}]
    page = requests.get(gateway.url + "/docs", timeout=30)
    assert page.headers["Content-Type"].startswith("text/html")
    assert "/docs/swagger-ui-bundle.js" in page.text
    assert "http" not in page.text.split("<body>")[1]
    bundle = requests.get(gateway.url + "/docs/swagger-ui-bundle.js", timeout=30)
    assert bundle.status_code == 200
    assert len(bundle.content) > 100_000
    assert _error(requests.get(gateway.url + "/docs/../../etc/passwd", timeout=30))[0] == 404


@pytest.mark.parametrize("method", ["OPTIONS", "TRACE", "PUT"])
def test_a_method_a_route_lacks_is_405_with_the_methods_it_has(alice: Client, method: str) -> None:
    answer = requests.request(method, alice.base_url + "/v1/memories", headers={"x-api-key": alice.key}, timeout=30)
    assert _error(answer) == (405, "method_not_allowed")
    assert answer.headers["Allow"] == "GET, HEAD, POST"
    assert _error(requests.delete(alice.base_url + "/healthz", timeout=30)) == (405, "method_not_allowed")


def test_head_answers_as_get_without_a_body(alice: Client) -> None:
    alice.create_memory("Seen")
    got = requests.get(alice.base_url + "/v1/memories", headers={"x-api-key": alice.key}, timeout=30)
    head = requests.head(alice.base_url + "/v1/memories", headers={"x-api-key": alice.key}, timeout=30)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["Content-Length"] == str(len(got.content))


def test_an_unknown_method_and_a_long_request_line_are_json(gateway: LocalGateway) -> None:
    for request in (b"BREW /v1/memories HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"GET /v1/memories?q=" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"):
        status, _, body = _raw(gateway, request)
        assert (status, body["error"]["code"]) in ((501, "not_implemented"), (414, "uri_too_long"))


def test_one_log_line_per_request_with_no_content(alice: Client, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=REQUEST_LOG.name):
        memory = alice.create_memory("Logged")
        alice.remember(memory["id"], "a secret nobody may log", attributes={"account": "hidden-account"})
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == REQUEST_LOG.name)
    lines = [json.loads(line) for line in logged.splitlines()]
    posts = [line for line in lines if line["route"] == "/v1/memories/{memory_id}/records"]
    assert posts
    assert set(posts[-1]) == {"time", "method", "route", "status", "ms"}
    assert (posts[-1]["method"], posts[-1]["status"]) == ("POST", 201)
    assert "secret" not in logged
    assert "hidden-account" not in logged
    assert memory["id"] not in logged


def _raw(gateway: LocalGateway, request: bytes) -> tuple[int, bytes, dict]:
    host, port = gateway.server.server_address[:2]
    with socket.create_connection((str(host), port), timeout=30) as raw:
        raw.sendall(request)
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"Content-Type: application/json" in head
    assert b"Connection: close" in head  # the connection cannot go on: where the next request starts is unknown
    return int(head.split()[1]), head, json.loads(body)


def test_a_content_length_that_is_not_a_number_is_400_json(gateway: LocalGateway) -> None:
    status, _, body = _raw(gateway, b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n{}")
    assert (status, body["error"]["code"]) == (400, "invalid_request")


@pytest.mark.slow
def test_a_body_shorter_than_its_content_length_is_408_not_a_thread_held_forever(
    gateway: LocalGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uhp_memories.local import gateway as module

    monkeypatch.setattr(module._RequestHandler, "timeout", 1)
    status, _, body = _raw(gateway, b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{}")
    assert (status, body["error"]["code"]) == (408, "request_timeout")


# -- the API key: one header, one identity ------------------------------------------------------


def _get_with_headers(gateway: LocalGateway, path: str, headers: list[tuple[str, str]]) -> tuple[int, dict]:
    """A GET carrying exactly these header lines, repeated names included (requests merges them)."""
    host, port = gateway.server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), port, timeout=30)
    try:
        connection.putrequest("GET", path)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        connection.close()


@pytest.mark.parametrize("names", [("X-Api-Key", "x-api-key"), ("x-api-key", "x-api-key"), ("x-api-key", "X-API-KEY")])
def test_two_api_key_headers_are_refused_and_leave_no_key_behind(
    gateway: LocalGateway, alice: Client, names: tuple[str, str]
) -> None:
    """The authorizer cache was keyed by the first x-api-key while the authorizer read the last: one
    request with a made-up key first and a real one after made the made-up key valid for 300 s."""
    made_up = "k-made-up-" + secrets.token_hex(8)
    for pair in ([(names[0], made_up), (names[1], alice.key)], [(names[0], alice.key), (names[1], made_up)]):
        status, body = _get_with_headers(gateway, "/v1/memories", pair)
        assert (status, body["error"]["code"]) == (401, "unauthenticated"), body
    status, body = _get_with_headers(gateway, "/v1/memories", [("x-api-key", made_up)])
    assert (status, body["error"]["code"]) == (401, "unauthenticated"), "the made-up key was cached as valid"
    assert _get_with_headers(gateway, "/v1/memories", [(names[1], alice.key)])[0] == 200


def test_the_authorizer_refuses_a_request_with_two_keys_whatever_the_gateway_hands_it(alice: Client) -> None:
    """Deployed, API Gateway puts a repeated header's last value in `headers` and all of them in
    `multiValueHeaders`; the authorizer refuses such a request itself (401), not only the local gateway."""
    from functions.authorizer.handler import Unauthorized, lambda_handler

    event = {"methodArn": "arn:aws:execute-api:local:000000000000:local/local/GET/v1/memories",
             "headers": {"x-api-key": alice.key}, "multiValueHeaders": {"x-api-key": ["k-made-up", alice.key]}}
    with pytest.raises(Unauthorized):
        lambda_handler(event, None)
    event["multiValueHeaders"] = {"X-Api-Key": ["k-made-up"], "x-api-key": [alice.key]}
    with pytest.raises(Unauthorized):
        lambda_handler(event, None)
    event["multiValueHeaders"] = {"x-api-key": [alice.key]}
    assert lambda_handler(event, None)["principalId"] == alice.principal


def test_a_burst_of_connections_waits_to_be_served_rather_than_being_reset(gateway: LocalGateway) -> None:
    """socketserver listens with a backlog of 5: a burst of clients connecting at once found the queue
    full. 100 connections opened together, each then asking once, are all answered."""
    assert gateway.server.request_queue_size >= 128
    host, port = gateway.server.server_address[:2]
    sockets = [socket.create_connection((str(host), port), timeout=30) for _ in range(100)]
    try:
        for raw in sockets:
            raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for raw in sockets:
            answer = b""
            while chunk := raw.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    finally:
        for raw in sockets:
            raw.close()
