"""Bedrock Runtime's InvokeModel for Titan Text Embeddings v2, over real HTTP, and an endpoint that
answers nothing in time: what the embedder and the OpenSearch client meet when Bedrock or a domain
refuses or stalls, through their real clients (botocore, opensearch-py) and their real timeouts.

FakeTitan enforces Titan v2's input limits and answers them as Bedrock does: HTTP 400 with the error
type in `x-amzn-ErrorType` and the reason in `message`, which botocore turns into a ClientError
whose code is ValidationException, with Titan's own wording (a too-long text: "Too many input
tokens. Max input tokens: 8192, request input token count: N"; too many characters: "Malformed input
request: expected maxLength: 50000, actual: N, ..."). Its characters are Java's (UTF-16 units), and
its tokens a stand-in for Titan's unpublished tokenizer, pessimistic where tokenizers are: Unicode
compatibility normalization first (NFKC, as SentencePiece does, so one character may become many),
then a token for every four letters of a word, for every digit, punctuation character and run of
white space, every byte of a character beyond ASCII (byte fallback), and two for the start and end.
The embedding is a bag of words (local/hashing.py), so a text is found by the words it shares with
a query.

Point a client at it with `client()`, or the whole process with AWS_ENDPOINT_URL_BEDROCK_RUNTIME
(`url`), as bootstrap builds its client.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from uhp_memories.local.hashing import HashingEmbedder

TITAN_MAX_TOKENS = 8_192
TITAN_MAX_CHARACTERS = 50_000
_PIECES = re.compile(r"[A-Za-z]+|[0-9]|\s+|[!-/:-@\[-`{-~]|[^\x00-\x7f]")
_ERROR_TYPE = "{}:http://internal.amazon.com/coral/com.amazon.bedrock/"


def titan_tokens(text: str) -> int:
    """The stand-in's token count of a text (see the module's docstring)."""
    count = 2
    for piece in _PIECES.findall(unicodedata.normalize("NFKC", text)):
        if piece[0].isascii() and piece[0].isalpha():
            count += -(-len(piece) // 4)
        elif not piece[0].isascii():
            count += len(piece.encode("utf-8", "surrogatepass"))
        else:
            count += 1
    return count


def java_length(text: str) -> int:
    """A string's length as Java counts it (UTF-16 code units): an emoji is two."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Endpoint:
    """A local HTTP server on a free port whose requests `handle` answers; `stop` releases any
    request still held and closes it."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.requests: list[tuple[str, str, bytes]] = []  # (method, path, body), as received
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with endpoint._lock:
                    endpoint.requests.append((self.command, self.path, body))
                status, headers, payload = endpoint.handle(self.command, self.path, body)
                try:
                    self.send_response(status)
                    for name, value in {**headers, "Content-Length": str(len(payload))}.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting (its timeout): nobody reads the answer

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-endpoint")

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        raise NotImplementedError

    def start(self) -> _Endpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeTitan(_Endpoint):
    """Titan Text Embeddings v2 behind InvokeModel. `delay`: seconds each answer waits (until `stop`);
    `throttled`: every call answers 429 ThrottlingException, as an exhausted quota does."""

    def __init__(self, *, delay: float = 0.0, throttled: bool = False) -> None:
        super().__init__()
        self.delay = delay
        self.throttled = throttled

    @property
    def texts(self) -> list[str]:
        """The inputText of every call received, in order."""
        return [json.loads(body)["inputText"] for _, _, body in self.requests]

    def client(self, config: Any = None) -> Any:
        import boto3

        return boto3.client(
            "bedrock-runtime", region_name="eu-west-1", endpoint_url=self.url, config=config,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.delay:
            self.released.wait(self.delay)
        if self.throttled:
            return _error(429, "ThrottlingException", "Too many requests, please wait before trying again.")
        match = re.fullmatch(r"/model/([^/]+)/invoke", path)
        if method != "POST" or match is None:
            return _error(404, "UnknownOperationException", "")
        if unquote(match.group(1)) != "amazon.titan-embed-text-v2:0":
            return _error(404, "ResourceNotFoundException", "The requested resource could not be found.")
        try:
            request = json.loads(body)
        except ValueError:
            return _refused("Malformed input request: unable to parse the body, please reformat your input "
                            "and try again.")
        text, dimensions = request.get("inputText"), request.get("dimensions", 1024)
        if not isinstance(text, str):
            return _refused("Malformed input request: #: required key [inputText] not found, please reformat your "
                            "input and try again.")
        length = java_length(text)
        if length > TITAN_MAX_CHARACTERS:
            return _refused(f"Malformed input request: expected maxLength: {TITAN_MAX_CHARACTERS}, actual: {length}, "
                            "please reformat your input and try again.")
        if length == 0:
            return _refused("Malformed input request: expected minLength: 1, actual: 0, please reformat your input "
                            "and try again.")
        if dimensions not in (256, 512, 1024):
            return _refused("Malformed input request: #/dimensions: 300 is not a valid enum value, please reformat "
                            "your input and try again.")
        tokens = titan_tokens(text)
        if tokens > TITAN_MAX_TOKENS:
            return _refused(f"400 Bad Request: Too many input tokens. Max input tokens: {TITAN_MAX_TOKENS}, "
                            f"request input token count: {tokens} ")
        vector = HashingEmbedder(dimensions).embed([text])[0]
        if not any(vector):
            vector = [1.0] + [0.0] * (dimensions - 1)
        payload = json.dumps({"embedding": vector, "inputTextTokenCount": tokens}).encode()
        return 200, {"Content-Type": "application/json", "x-amzn-bedrock-input-token-count": str(tokens)}, payload


class StalledEndpoint(_Endpoint):
    """A service that takes every request and answers none before `stop` (then 503): a domain that is
    up but too slow, as its client meets it."""

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        self.released.wait()
        return 503, {"Content-Type": "application/json"}, b'{"message":"stopped"}'


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "x-amzn-ErrorType": _ERROR_TYPE.format(code)}
    return status, headers, json.dumps({"message": message}).encode()


def _refused(message: str) -> tuple[int, dict[str, str], bytes]:
    return _error(400, "ValidationException", message)


@contextmanager
def titan(**options: Any) -> Iterator[FakeTitan]:
    with FakeTitan(**options) as fake:
        yield fake
