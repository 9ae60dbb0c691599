"""The REST calls the harness stores make: the API key on every request, an Idempotency-Key on every
write, answers read up to a bound, and what each outcome says about whether a write happened.

A write is sent again, with the same Idempotency-Key and the same bytes, only when its outcome is
unknown (the answer was lost, the server failed, or the first attempt is still running): the server
runs a key's request once and replays its answer, so sending again learns the outcome and never writes
twice. When every attempt leaves the outcome unknown, the caller is told so (`OutcomeUnknown`). A read
without a usable answer, and a request throttled before it ran (429), are sent again the same way.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import httpx2
from a13n_harness.http import ProviderHttpError, bounded_response_body
from a13n_harness.providers.endpoint_policy import EndpointPolicyError
from a13n_harness.providers.memory import MemoryStoreError

# Above any answer: Lambda answers at most 6 MB; locally, a page of 100 records at the content limit is 10 MB.
RESPONSE_BYTES = 16 * 1024 * 1024
# Waits before the second and third attempt of a request whose outcome is unknown or that was throttled.
RETRY_DELAYS: tuple[float, ...] = (0.1, 0.4)
# The longest wait a Retry-After header may ask for before an attempt.
MAX_RETRY_AFTER_SECONDS = 2.0
IDEMPOTENCY_HEADER = "Idempotency-Key"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# Failures raised before the request left (no connection, or the owned client's endpoint policy
# refused the address): nothing reached the server.
_NOT_SENT: tuple[type[Exception], ...] = (
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.PoolTimeout,
    httpx2.UnsupportedProtocol,
    EndpointPolicyError,
)


@dataclass(frozen=True, slots=True)
class Answer:
    """A final answer of the server: a success, or a refusal it gave in its error body."""

    status: int
    body: object

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def code(self) -> str | None:
        """The error code of `{"error": {"code", "message"}}`, when the body is one."""
        error = self.body.get("error") if isinstance(self.body, Mapping) else None
        code = error.get("code") if isinstance(error, Mapping) else None
        return code if isinstance(code, str) else None

    def detail(self, name: str) -> object:
        """A field of the error body beside its code, such as a conflict's `current_record_id`."""
        error = self.body.get("error") if isinstance(self.body, Mapping) else None
        return error.get(name) if isinstance(error, Mapping) else None


class Unavailable(Exception):
    """The server could not be reached or did not answer usably; a write among these attempts never
    reached it or was refused before it ran, so nothing changed."""


class OutcomeUnknown(Exception):
    """A write may or may not have happened: every attempt lost its answer, failed on the server or
    found the first one still running."""


@dataclass(frozen=True, slots=True)
class _Attempt:
    answer: Answer | None  # None: no usable answer
    reached: bool  # the request may have reached the server
    retry_after: float | None = None


class MemoryApi:
    """One memory's routes under `base_url`, called with one API key.

    `http` stays the caller's: it is neither configured nor closed here.
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        base_url: str,
        api_key: str,
        memory_id: str,
        *,
        retry_delays: Sequence[float] = RETRY_DELAYS,
    ) -> None:
        self._http = http
        self._prefix = f"{base_url}/v1/memories/{quote(memory_id, safe='')}"
        self._headers = {"x-api-key": api_key, "accept": "application/json"}
        self._retry_delays = tuple(retry_delays)

    async def read(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: object = None,
    ) -> Answer:
        """The server's final answer (2xx or 4xx). Raises `Unavailable` when there is none."""
        try:
            return await self._call(method, path, params=params, body=body, headers={})
        except OutcomeUnknown:
            raise Unavailable from None

    async def write(self, method: str, path: str, *, body: object = None) -> Answer:
        """The server's final answer (2xx or 4xx) to one write, made once whatever the attempts.

        Raises `OutcomeUnknown` when the write may have happened unseen, `Unavailable` when it
        certainly did not.
        """
        if method not in WRITE_METHODS:
            raise ValueError(f"{method} is not a write")
        # One key per write, never derived from its content: two writes of the same text are two records.
        key = uuid.uuid4().hex
        answer = await self._call(method, path, params=None, body=body, headers={IDEMPOTENCY_HEADER: key})
        if answer.status == 409 and answer.code == "idempotency_key_committed":
            return await self._committed(method, path, answer)
        return answer

    async def _committed(self, method: str, path: str, answer: Answer) -> Answer:
        """A write the server committed on an earlier attempt whose answer was lost (the server answers a
        retry 409 idempotency_key_committed with the ids it wrote, and writes nothing again): a record
        write is answered as it would have been, with the record read back; any other write's outcome
        the caller cannot see (OutcomeUnknown)."""
        written = answer.detail("written_ids")
        ids = [i for i in written if isinstance(i, str) and i.startswith("hrec_")] if isinstance(written, list) else []
        named = path.rstrip("/").rsplit("/", 1)[-1]
        wanted = named if method == "DELETE" else next((i for i in ids if i != named), None)
        if not path.startswith("/records") or wanted is None:
            raise OutcomeUnknown
        read = await self.read("GET", f"/records/{quote(wanted, safe='')}", params={"include": "all"})
        if read.status != 200:
            raise OutcomeUnknown
        # The record alone, as the write answers it: a get adds where a reader can go (§6.1).
        body = ({k: v for k, v in read.body.items() if k not in ("parent", "children")}
                if isinstance(read.body, Mapping) else read.body)
        return Answer(201 if method == "POST" else 200, body)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None,
        body: object,
        headers: Mapping[str, str],
    ) -> Answer:
        # The same bytes on every attempt: the server refuses a key reused with a different body.
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        all_headers = {**self._headers, **headers}
        if content is not None:
            all_headers["content-type"] = "application/json"
        delays = iter(self._retry_delays)
        reached = False
        while True:
            attempt = await self._attempt(method, f"{self._prefix}{path}", params, content, all_headers)
            if attempt.answer is not None:
                return attempt.answer
            reached = reached or attempt.reached
            delay = next(delays, None)
            if delay is None:
                break
            if attempt.retry_after is not None:
                delay = max(delay, min(attempt.retry_after, MAX_RETRY_AFTER_SECONDS))
            await asyncio.sleep(delay)
        if reached:
            raise OutcomeUnknown
        raise Unavailable

    async def _attempt(
        self,
        method: str,
        url: str,
        params: Mapping[str, str | int] | None,
        content: bytes | None,
        headers: Mapping[str, str],
    ) -> _Attempt:
        request = self._http.build_request(method, url, params=params, content=content, headers=headers)
        try:
            response = await self._http.send(request, stream=True)
        except _NOT_SENT:
            return _Attempt(None, reached=False)
        except httpx2.HTTPError:
            return _Attempt(None, reached=True)
        try:
            raw = await bounded_response_body(response, max_bytes=RESPONSE_BYTES)
        except (httpx2.HTTPError, ProviderHttpError):
            return _Attempt(None, reached=True)
        finally:
            await response.aclose()
        status = response.status_code
        if status == 429:
            # Throttled before it ran (API Gateway's usage plan or the firewall): nothing happened.
            return _Attempt(None, reached=False, retry_after=_seconds(response.headers.get("retry-after")))
        try:
            answer = Answer(status, json.loads(raw) if raw else None)
        except ValueError:
            # A refusal is a refusal whatever its body says; an unreadable success may be replayed readably.
            return _Attempt(Answer(status, None) if 400 <= status < 500 else None, reached=True)
        if status == 409 and answer.code == "idempotency_in_progress":
            return _Attempt(None, reached=True)
        if 200 <= status < 500:
            return _Attempt(answer, reached=True)
        return _Attempt(None, reached=True)


logger = logging.getLogger(__name__)
# How long a purge follows an erase that outlasted its request, and how often it looks.
PURGE_WAIT_SECONDS = 120.0
PURGE_POLL_SECONDS = 0.5


PURGE_UNFINISHED = "The erase has not finished; purge again to complete it."


async def settle_erase(api: MemoryApi, answer: Answer) -> None:
    """A purge's erase, followed until it completes (it answers 202 when it outlasts its request);
    `write_unconfirmed` when it has not completed by the wait's end or failed.

    A completed erase is a completed purge. What it reports out of reach (the deployment's backups and
    streams, for their retention) is logged, as places and times, never ids or content: the harness's
    purge has no report to carry it, and failing every purge on a stage with backups would tell the
    caller the files were not erased when they were."""
    report: object = answer.body
    if answer.status == 202:
        job = answer.body.get("job") if isinstance(answer.body, Mapping) else None
        job_id = job.get("id") if isinstance(job, Mapping) else None
        if not isinstance(job_id, str):
            raise MemoryStoreError("write_unconfirmed", PURGE_UNFINISHED)
        report = await _completed_job(api, job_id)
    unreachable = report.get("unreachable") if isinstance(report, Mapping) else None
    if isinstance(unreachable, list) and unreachable:
        places = sorted({f"{u.get('where')} until {u.get('until')}" for u in unreachable if isinstance(u, Mapping)})
        logger.warning("purge erased the memory's content; copies remain out of reach", extra={"places": places})


async def _completed_job(api: MemoryApi, job_id: str) -> Mapping[str, object]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PURGE_WAIT_SECONDS
    while loop.time() < deadline:
        await asyncio.sleep(PURGE_POLL_SECONDS)
        try:
            answer = await api.read("GET", f"/jobs/{quote(job_id, safe='')}")
        except Unavailable:
            continue
        status = answer.body.get("status") if answer.ok and isinstance(answer.body, Mapping) else None
        if status == "completed":
            assert isinstance(answer.body, Mapping)
            return answer.body
        if status != "running":
            break
    raise MemoryStoreError("write_unconfirmed", PURGE_UNFINISHED)


def record_path(record_id: str, suffix: str = "") -> str:
    return f"/records/{quote(record_id, safe='')}{suffix}"


def require_own_client_reach(base_url: str) -> None:
    """Refuse, when the store is to open its own HTTP client, a base URL that client would never reach.

    Without `http`, a13n-harness gives a Memory Provider a client whose endpoint policy lets public HTTPS
    endpoints only (EndpointPolicy(require_https=True)): it refuses an http:// request before it leaves,
    so every tool would answer `unavailable` with nothing sent. A loopback address is refused here too:
    a server on this machine (`uhp-memories serve`) speaks plain HTTP, and the default client is for
    a deployed stage. Said at once, with what to do, instead of on the first call."""
    parsed = urlsplit(base_url)
    if parsed.scheme == "https" and not _is_loopback(parsed.hostname or ""):
        return
    what = "a loopback address" if _is_loopback(parsed.hostname or "") else "not an HTTPS address"
    raise ValueError(
        f"uhp-memories: {base_url} is {what}, and without `http` the store's own client reaches public HTTPS "
        "endpoints only (a deployed stage's ApiUrl): every request would be refused before it is sent. For a "
        "local server, pass a client of your own: `async with httpx2.AsyncClient(timeout=30) as http:` "
        "then `http=http` (README.md, \"Mount a memory in a13n-harness\")."
    )


def _is_loopback(hostname: str) -> bool:
    host = hostname.rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def plain_base_url(value: str) -> str:
    """An http(s) address without credentials, query or fragment, and without a trailing slash."""
    parsed = urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError("A base URL is an http or https address.")
    if parsed.username is not None or parsed.password is not None or parsed.query or parsed.fragment:
        raise ValueError("A base URL has no user information, query or fragment.")
    return value.rstrip("/")


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
