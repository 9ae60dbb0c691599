"""A small local API Gateway: builds REST proxy events, calls the authorizer exactly as API Gateway
would, then the function that owns the route. The functions are the deployed code, unchanged."""

from __future__ import annotations

import base64
import importlib
import json
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from uhp_memories.api.errors import CHALLENGE
from uhp_memories.api.payloads import LAMBDA_PAYLOAD_BYTES, payload_bytes
from uhp_memories.api.routes import ROUTES, Route
from uhp_memories.local import landing

MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
STAGE = "local"
# The deployed stage caches the authorizer's answer per API key (cdk.json api.authorizer_cache_seconds).
AUTHORIZER_CACHE_SECONDS_DEFAULT = 300
API_KEY_HEADER = "x-api-key"


@dataclass
class LambdaContext:
    """What Lambda hands a handler, as much as Powertools reads of it."""

    function_name: str
    aws_request_id: str
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:local"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    function_version: str = "$LATEST"
    # An API function's timeout (infra/constructs/compute.py, TIMEOUTS["api"]), counted from the call:
    # a request's deadline (uhp_memories.deadlines) is what it is in AWS.
    timeout_ms: int = 28_000
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.timeout_ms - int((time.monotonic() - self.started) * 1000))


@dataclass(frozen=True)
class CompiledRoute:
    route: Route
    pattern: re.Pattern[str]
    literal_segments: int


def _compile(route: Route) -> CompiledRoute:
    segments = route.path.strip("/").split("/")
    regex = "".join(f"/(?P<{s[1:-1]}>[^/]+)" if s.startswith("{") else "/" + re.escape(s) for s in segments)
    literal = sum(1 for s in segments if not s.startswith("{"))
    return CompiledRoute(route, re.compile(f"^{regex}$"), literal)


# API Gateway prefers literal path segments over parameters (/v1/memories/types over {memory_id}).
COMPILED = sorted((_compile(r) for r in ROUTES), key=lambda c: -c.literal_segments)


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    for compiled in COMPILED:
        found = compiled.pattern.match(path)
        if found and compiled.route.method == method:
            return compiled.route, found.groupdict()
    return None


def methods_at(path: str) -> list[str]:
    """The methods some route serves at this path (none: no route has it); HEAD wherever GET is."""
    found = {c.route.method for c in COMPILED if c.pattern.match(path)}
    if landing.is_page(path):
        found.add("GET")
    return sorted(found | ({"HEAD"} if "GET" in found else set()))


class AuthorizerCache:
    """API Gateway's authorizer result cache: an allowing answer is reused for the same x-api-key
    until its time is up, so most requests skip the authorizer (and its DynamoDB read), as deployed.
    Refusals are not cached, so a key added while the server runs works at once; `keys revoke
    --data-dir` clears the cache, so a revoked key is refused at once (the deployed `keys revoke`
    deletes the API Gateway key, which also acts at once)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._answers: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(self, identity: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._answers.get(identity)
            if found is None or found[0] <= time.monotonic():
                self._answers.pop(identity, None)
                return None
            return found[1]

    def put(self, identity: str, policy: dict[str, Any]) -> None:
        if self.seconds > 0:
            with self._lock:
                self._answers[identity] = (time.monotonic() + self.seconds, policy)

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()


def _handler(function: str) -> Any:
    return importlib.import_module(f"functions.{function}.handler").lambda_handler


def _answer(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An answer of the gateway itself, in the API's error shape."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps({"error": {"code": code, "message": message}}),
    }


def _path_of(raw_path: str) -> str:
    return urlsplit(raw_path).path.rstrip("/") or "/"


def header_maps(lines: list[tuple[str, str]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """A request's header lines as API Gateway hands them on: names matched without case (each under
    the spelling it first came in), `multiValueHeaders` every value in order, `headers` the last."""
    multi: dict[str, list[str]] = {}
    spelling: dict[str, str] = {}
    for name, value in lines:
        multi.setdefault(spelling.setdefault(name.lower(), name), []).append(value)
    return {name: values[-1] for name, values in multi.items()}, multi


def _api_keys(multi_headers: dict[str, list[str]]) -> list[str]:
    return [v for k, values in multi_headers.items() if k.lower() == API_KEY_HEADER for v in values]


def invoke(
    method: str,
    raw_path: str,
    headers: dict[str, str],
    body: bytes | None,
    authorizer_cache: AuthorizerCache | None = None,
    multi_headers: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """One request through authorizer and function, as API Gateway runs it. `multi_headers` holds every
    value of a repeated header (default: each of `headers` once)."""
    multi_headers = multi_headers or {k: [v] for k, v in headers.items()}
    split = urlsplit(raw_path)
    path = _path_of(raw_path)
    matched = match(method, path)
    if matched is None:
        allowed = methods_at(path)
        if allowed:
            return _answer(
                405, "method_not_allowed", f"{path} answers {', '.join(allowed)}", {"Allow": ", ".join(allowed)}
            )
        # API Gateway answers unknown routes itself (MISSING_AUTHENTICATION_TOKEN, mapped to 404).
        return _answer(404, "not_found", "no such route")
    route, params = matched
    query = parse_qs(split.query, keep_blank_values=True)
    request_id = str(uuid.uuid4())
    method_arn = f"arn:aws:execute-api:local:000000000000:local/{STAGE}/{method}{path}"
    request_context: dict[str, Any] = {
        "resourcePath": route.path,
        "httpMethod": method,
        "path": f"/{STAGE}{path}",
        "stage": STAGE,
        "requestId": request_id,
        "identity": {"sourceIp": "127.0.0.1"},
        "accountId": "000000000000",
        "apiId": "local",
    }
    authorizer_event = {
        "type": "REQUEST",
        "methodArn": method_arn,
        "resource": route.path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "pathParameters": params or None,
        "requestContext": request_context,
    }
    # The cache is keyed by the identity source, the one key the authorizer reads. Two keys in one
    # request are refused before either is looked up: the cache once took the first while the
    # authorizer read the last, which made any string a valid key for the cache's 300 s.
    api_keys = _api_keys(multi_headers)
    if len(api_keys) > 1:
        return _answer(401, "unauthenticated", "send one x-api-key header, not several", CHALLENGE)
    identity = api_keys[0] if api_keys else None
    policy = authorizer_cache.get(identity) if authorizer_cache is not None and identity else None
    if policy is None:
        try:
            policy = _handler("authorizer")(authorizer_event, LambdaContext("uhp-memories-authorizer", request_id))
        except Exception:
            # API Gateway's UNAUTHORIZED gateway response, with this API's error body.
            return _answer(401, "unauthenticated", "missing or unknown API key (header x-api-key)", CHALLENGE)
        if authorizer_cache is not None and identity and policy["policyDocument"]["Statement"][0]["Effect"] == "Allow":
            authorizer_cache.put(identity, policy)
    if policy["policyDocument"]["Statement"][0]["Effect"] != "Allow":
        return _answer(403, "forbidden", "the authorizer denied this request")
    text_body = None
    is_base64 = False
    if body:
        try:
            text_body = body.decode()
        except UnicodeDecodeError:
            text_body, is_base64 = base64.b64encode(body).decode(), True
    event = {
        "resource": route.path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": {
            **request_context,
            "authorizer": {**policy["context"], "principalId": policy["principalId"]},
        },
        "body": text_body,
        "isBase64Encoded": is_base64,
    }
    if payload_bytes(event) > LAMBDA_PAYLOAD_BYTES:
        # Lambda refuses an invocation over 6 MB, base64 included: the function never runs.
        return _answer(413, "request_too_large",
                       f"the request is larger than the {LAMBDA_PAYLOAD_BYTES} bytes a Lambda function takes")
    answer = _handler(route.function)(event, LambdaContext(f"uhp-memories-{route.function}", request_id))
    if payload_bytes(answer) > LAMBDA_PAYLOAD_BYTES:
        # Lambda refuses to return an answer over 6 MB, and API Gateway answers 502 (the functions' own
        # check, api/app.py, answers a clearer 500 first; this holds for any function).
        return _answer(502, "internal_error", "the function's answer was larger than Lambda returns")
    return answer


# The gateway's own refusals of a request it cannot read, in the API's error shape.
_REFUSALS = {
    400: "invalid_request",
    408: "request_timeout",
    413: "request_too_large",
    414: "uri_too_long",
    431: "headers_too_large",
    501: "not_implemented",
    505: "http_version_not_supported",
}
# `uhp-memories serve` sends it to stderr (local/cli.py); in a test's process it is the test's to read.
REQUEST_LOG = logging.getLogger("uhp_memories.local.requests")


def log_request(method: str, route: str | None, status: int, seconds: float) -> None:
    """One line per request, as JSON: method, route (its template, never the path or the query,
    which carry ids and filters), status and latency. Never a body or a header."""
    REQUEST_LOG.info(
        json.dumps(
            {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "method": method,
                "route": route,
                "status": status,
                "ms": round(seconds * 1000, 1),
            },
            separators=(",", ":"),
        )
    )


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uhp-memories-local"
    # A read that waits this long for bytes a client announced and never sent ends the request (408)
    # instead of holding its thread until the client gives up; an idle kept-alive connection closes too.
    timeout = 30
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for the client to
    # acknowledge the headers, which a kept-alive client delays by up to 40 ms on every response.
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        started = time.perf_counter()
        # HEAD is answered as GET is, without the body.
        method = "GET" if self.command == "HEAD" else self.command
        path = _path_of(self.path)
        answer, route = self._answer(method, path)
        # Logged once the answer is ready, before it is sent: a client that has its answer finds its line.
        log_request(self.command, route, int(answer.get("statusCode", 200)), time.perf_counter() - started)
        self._send(answer, with_body=self.command != "HEAD")

    def _answer(self, method: str, path: str) -> tuple[dict[str, Any], str | None]:
        """The answer, and the route template it was answered by (None: no route)."""
        declared = (self.headers.get("Content-Length") or "0").strip()
        if not declared.isdigit():
            self.close_connection = True  # where the body ends is unknown: the connection cannot go on
            return _answer(400, "invalid_request", "Content-Length is not a number of bytes"), None
        length = int(declared)
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body is not read
            return _answer(413, "request_too_large", "the request body is larger than 10 MiB"), None
        try:
            body = self.rfile.read(length) if length else None
        except TimeoutError:
            body = None
        if length and (body is None or len(body) < length):
            self.close_connection = True  # a Content-Length longer than what came: nothing more is coming
            return _answer(408, "request_timeout", "the request body ended before its Content-Length"), None
        if method == "GET":
            page = landing.answer(path, getattr(self.server, "base_url", ""))
            if page is not None:
                return page, "/docs/{asset}" if path.startswith("/docs/") else path
        headers, multi_headers = header_maps(list(self.headers.items()))
        matched = match(method, path)
        try:
            answer = invoke(method, self.path, headers, body, getattr(self.server, "authorizer_cache", None),
                            multi_headers)
        except Exception:
            answer = _answer(500, "internal_error", "the local gateway failed")
        return answer, matched[0].path if matched else None

    def _send(self, answer: dict[str, Any], *, with_body: bool = True) -> None:
        raw = answer.get("body") or ""
        payload = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode()
        self.send_response(int(answer.get("statusCode", 200)))
        # API Gateway merges a proxy answer's headers and multiValueHeaders.
        headers: dict[str, list[str]] = {k: list(v) for k, v in (answer.get("multiValueHeaders") or {}).items()}
        for key, value in (answer.get("headers") or {}).items():
            headers.setdefault(key, [str(value)])
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = ["application/json"]
        for key, values in headers.items():
            if key.lower() not in ("content-length", "connection"):
                for value in values:
                    self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(payload)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if with_body:
            self.wfile.write(payload)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = do_CONNECT = _serve

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's refusals (a request line too long, a method it has no do_ for, a malformed
        request) in the API's error shape, not as an HTML page."""
        self.close_connection = True
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "error"
        answer = _answer(code, _REFUSALS.get(code, "invalid_request"), message or phrase)
        self._send(answer, with_body=getattr(self, "command", "") != "HEAD")
        log_request(getattr(self, "command", "") or "?", None, code, 0.0)

    def log_message(self, format: str, *args: Any) -> None:
        # http.server's own log line (the raw path) is replaced by log_request's.
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # How many connections wait to be accepted: socketserver's 5 reset a burst of clients opening
    # connections at once (a connection pool warming up, a load test) before a thread took any.
    request_queue_size = 128


class LocalGateway:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8080,
        authorizer_cache_seconds: float = AUTHORIZER_CACHE_SECONDS_DEFAULT,
    ) -> None:
        # Binds and listens at once: a port in use fails here, before anything else starts.
        self.server = _Server((host, port), _RequestHandler)
        self.authorizer_cache = AuthorizerCache(authorizer_cache_seconds)
        self.server.authorizer_cache = self.authorizer_cache  # type: ignore[attr-defined]
        self.server.base_url = self.url  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None
        self._serving = False

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}" if isinstance(host, str) else f"http://{host.decode()}:{port}"

    def start_background(self) -> LocalGateway:
        self._serving = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._serving = True
        self.server.serve_forever()

    def stop(self) -> None:
        if self._serving:  # shutdown() waits for serve_forever, which never started otherwise
            self.server.shutdown()
            self._serving = False
        self.server.server_close()
