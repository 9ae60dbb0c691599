"""What the sync and the async client share: configuration, each operation as a `Call` (route, query,
body, how to read its answer), and the retry rules. Only the sending differs between the twins."""

from __future__ import annotations

import email.utils
import json
import os
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from uhp_memories_client.errors import ConfigurationError, error_for

__version__ = "0.1.0"

URL_VARIABLE = "UHP_MEMORIES_URL"
KEY_VARIABLE = "UHP_MEMORIES_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8080"
IDEMPOTENCY_HEADER = "Idempotency-Key"

# Answers sent again: throttled before it ran (429), a provider or gateway that did not answer (502, 503),
# and a request whose first attempt, under the same Idempotency-Key, is still running (409
# idempotency_in_progress). A write is sent again with the same key and the same bytes, so the server
# runs it once whatever the attempts (it keeps no 5xx, and marks what a key wrote).
RETRY_STATUSES = frozenset({429, 502, 503})
RETRY_CODES = frozenset({"idempotency_in_progress"})
# Failures on the way: nothing answered (a refused connection, a timeout, a connection cut mid-answer).
RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 8.0
MAX_RETRY_AFTER_SECONDS = 60.0

R = TypeVar("R")


@dataclass(frozen=True)
class Settings:
    base_url: str
    api_key: str
    timeout: float
    retries: int
    max_retry_after: float

    @staticmethod
    def resolve(
        base_url: str | None, api_key: str | None, timeout: float, retries: int, max_retry_after: float
    ) -> Settings:
        url = base_url or os.environ.get(URL_VARIABLE) or DEFAULT_URL
        key = api_key or os.environ.get(KEY_VARIABLE)
        if not key:
            raise ConfigurationError(f"no API key: pass api_key= or set {KEY_VARIABLE}")
        if retries < 0:
            raise ConfigurationError("retries must be 0 or more")
        return Settings(url.rstrip("/"), key, float(timeout), retries, max_retry_after)

    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.api_key, "accept": "application/json",
                "user-agent": f"uhp-memories-client/{__version__}"}


@dataclass(frozen=True)
class Call(Generic[R]):
    """One request and how to read its answer. `write`: sent with an Idempotency-Key."""

    method: str
    path: str
    read: Callable[[int, Any], R]
    params: Mapping[str, str | int] | None = None
    body: Any = None
    write: bool = False

    def content(self) -> bytes | None:
        """The body as sent, once: every attempt sends the same bytes (the server compares them)."""
        if self.body is None:
            return None
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False).encode()

    def headers(self, idempotency_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json"} if self.body is not None else {}
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        return headers

    def key(self, given: str | None) -> str | None:
        """The Idempotency-Key of this call: the caller's, else a new one for a write (one per call,
        the same across its retries), else none."""
        if given is not None:
            return given
        return uuid.uuid4().hex if self.write else None


def segment(value: str) -> str:
    return quote(value, safe="")


def query(**params: Any) -> dict[str, str | int]:
    """Query parameters without the ones not given (the server refuses an unknown or empty one)."""
    out: dict[str, str | int] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            out[name] = json.dumps(value, separators=(",", ":"))
        elif isinstance(value, Sequence) and not isinstance(value, str):
            out[name] = ",".join(value)
        else:
            out[name] = value
    return out


def body(**fields: Any) -> dict[str, Any]:
    """A request body without the fields not given."""
    return {name: value for name, value in fields.items() if value is not None}


def decode(response: httpx.Response) -> Any:
    """The answer's body: JSON when it is JSON, else its text (a gateway's or a proxy's page)."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


def finish(call: Call[R], response: httpx.Response) -> R:
    parsed = decode(response)
    if 200 <= response.status_code < 300:
        return call.read(response.status_code, parsed)
    raise error_for(response.status_code, parsed)


def should_retry(response: httpx.Response) -> bool:
    if response.status_code in RETRY_STATUSES:
        return True
    if response.status_code == 409:
        parsed = decode(response)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        return isinstance(error, dict) and error.get("code") in RETRY_CODES
    return False


def retry_after(response: httpx.Response | None) -> float | None:
    """Retry-After in seconds (a number, or an HTTP date), when the answer gave one."""
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def delay(attempt: int, response: httpx.Response | None, settings: Settings) -> float:
    """How long to wait before attempt `attempt + 1`: the answer's Retry-After when it gave one (up to
    `max_retry_after`), else exponential backoff with jitter (0.25-0.5 s, 0.5-1 s, 1-2 s, ... up to 8 s)."""
    asked = retry_after(response)
    if asked is not None:
        return min(asked, settings.max_retry_after)
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2.0**attempt)
    jitter: float = random.uniform(0, ceiling / 2)  # noqa: S311 (jitter, not a secret)
    return ceiling / 2 + jitter
