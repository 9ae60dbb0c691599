"""`Client` and `AsyncClient`: the same methods, the same arguments, the same answers; one blocks, the
other is awaited. Both send the calls of `_operations` with the retry rules of `_core`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from uhp_memories_client import _core
from uhp_memories_client import _operations as ops
from uhp_memories_client._core import MAX_RETRY_AFTER_SECONDS, RETRY_EXCEPTIONS, Call, Settings
from uhp_memories_client._operations import UNSET, Episode, Include, Unset
from uhp_memories_client.errors import UhpConnectionError
from uhp_memories_client.models import (
    Deleted,
    EraseResult,
    Grant,
    Job,
    JobAccepted,
    Memory,
    ObserveResult,
    Page,
    RecallAnswer,
    Record,
    RecordPage,
)

R = TypeVar("R")


def _no_answer(exc: Exception) -> UhpConnectionError:
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return UhpConnectionError(None, "connection_error", said)


class Client:
    """The Harness Memories API, blocking.

    `base_url` defaults to `UHP_MEMORIES_URL`, then http://127.0.0.1:8080 (a deployed stage's `ApiUrl`
    includes its stage path); `api_key` to `UHP_MEMORIES_API_KEY` (ConfigurationError without either).
    Every write carries an Idempotency-Key (a new uuid4 per call unless `idempotency_key=` is given), the
    same across its retries. 429, 502, 503 and connection failures are sent again up to `retries` times,
    after the answer's Retry-After or an exponential backoff with jitter. A refusal raises the `UhpError`
    subclass of its code (uhp_memories_client.errors). `transport` replaces httpx's (a test's
    httpx.MockTransport, say)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30,
        retries: int = 3,
        max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, timeout, retries, max_retry_after)
        self._http = httpx.Client(base_url=self.settings.base_url, headers=self.settings.headers(),
                                  timeout=self.settings.timeout, transport=transport)
        self._sleep: Callable[[float], None] = time.sleep

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _send(self, call: Call[R], idempotency_key: str | None = None) -> R:
        key, content = call.key(idempotency_key), call.content()
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._http.request(call.method, call.path, params=call.params, content=content,
                                              headers=call.headers(key))
            except RETRY_EXCEPTIONS as exc:
                if attempt >= self.settings.retries:
                    raise _no_answer(exc) from exc
            except httpx.TransportError as exc:
                raise _no_answer(exc) from exc
            else:
                if attempt >= self.settings.retries or not _core.should_retry(response):
                    return _core.finish(call, response)
            self._sleep(_core.delay(attempt, response, self.settings))
            attempt += 1

    def _items(self, page: Callable[[str | None], Call[Any]]) -> Iterator[Any]:
        cursor: str | None = None
        while True:
            answer: Page[Any] = self._send(page(cursor))
            yield from answer.data
            if not answer.next_cursor:
                return
            cursor = answer.next_cursor

    # Memories

    def create_memory(
        self,
        name: str,
        *,
        description: str | None = None,
        parent_id: str | None = None,
        restricted: bool | None = None,
        provider: str | None = None,
        idempotency_key: str | None = None,
    ) -> Memory:
        return self._send(ops.create_memory(name, description, parent_id, restricted, provider), idempotency_key)

    def get_memory(self, memory_id: str) -> Memory:
        return self._send(ops.get_memory(memory_id))

    def list_memories(
        self, *, parent: str | None = None, ancestor: str | None = None, limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Memory]:
        """One page: the roots the caller enters at, a memory's children (`parent`), or every descendant
        (`ancestor`)."""
        return self._send(ops.list_memories(parent, ancestor, limit, cursor))

    def iter_memories(
        self, *, parent: str | None = None, ancestor: str | None = None, page_size: int | None = None
    ) -> Iterator[Memory]:
        """Every memory of the listing, page after page."""
        return self._items(lambda cursor: ops.list_memories(parent, ancestor, page_size, cursor))

    def update_memory(
        self,
        memory_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        parent_id: str | Unset | None = UNSET,
        restricted: bool | None = None,
        idempotency_key: str | None = None,
    ) -> Memory:
        """Rename, describe, restrict, or move (`parent_id`; None moves it to the root)."""
        return self._send(ops.update_memory(memory_id, name, description, parent_id, restricted), idempotency_key)

    def delete_memory(self, memory_id: str, *, idempotency_key: str | None = None) -> Deleted | JobAccepted:
        """Delete the memory, its records and its descendants (a JobAccepted while it goes on)."""
        return self._send(ops.delete_memory(memory_id), idempotency_key)

    # Grants

    def create_grant(
        self, memory_id: str, principal: str, privileges: Sequence[str], *, idempotency_key: str | None = None
    ) -> Grant:
        return self._send(ops.create_grant(memory_id, principal, privileges), idempotency_key)

    def list_grants(self, memory_id: str, *, limit: int | None = None, cursor: str | None = None) -> Page[Grant]:
        return self._send(ops.list_grants(memory_id, limit, cursor))

    def iter_grants(self, memory_id: str, *, page_size: int | None = None) -> Iterator[Grant]:
        return self._items(lambda cursor: ops.list_grants(memory_id, page_size, cursor))

    def delete_grant(self, memory_id: str, grant_id: str, *, idempotency_key: str | None = None) -> Deleted:
        return self._send(ops.delete_grant(memory_id, grant_id), idempotency_key)

    # Records

    def remember(
        self,
        memory_id: str,
        content: str | Mapping[str, Any],
        *,
        type: str = "fact",
        attributes: Mapping[str, Any] | None = None,
        references: Sequence[Mapping[str, Any]] | None = None,
        time: Mapping[str, Any] | None = None,
        path: str | None = None,
        idempotency_key: str | None = None,
    ) -> Record:
        """Write one record as stated."""
        call = ops.remember(memory_id, content, type, attributes, references, time, path)
        return self._send(call, idempotency_key)

    def get_record(
        self, memory_id: str, record_id: str, *, as_of: str | None = None, include: Include | None = None
    ) -> Record:
        return self._send(ops.get_record(memory_id, record_id, as_of, include))

    def list_records(
        self,
        memory_id: str,
        *,
        types: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        include: Include | None = None,
        as_of: str | None = None,
        path: str | None = None,
        under: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RecordPage:
        """One page of records, with the memory's parent and children."""
        return self._send(ops.list_records(memory_id, types, filters, include, as_of, path, under, limit, cursor))

    def iter_records(
        self,
        memory_id: str,
        *,
        types: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        include: Include | None = None,
        as_of: str | None = None,
        path: str | None = None,
        under: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Record]:
        """Every record of the listing, page after page."""
        return self._items(
            lambda cursor: ops.list_records(memory_id, types, filters, include, as_of, path, under, page_size, cursor)
        )

    def revise(
        self,
        memory_id: str,
        record_id: str,
        *,
        content: str | Mapping[str, Any] | None = None,
        type: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        references: Sequence[Mapping[str, Any]] | None = None,
        time: Mapping[str, Any] | None = None,
        path: str | None = None,
        idempotency_key: str | None = None,
    ) -> Record:
        """A new version of the record (the fields given replace the current version's). A revise of a
        version no longer current raises MemoryConflict, whose `current_record_id` names the current one."""
        call = ops.revise(memory_id, record_id, content, type, attributes, references, time, path)
        return self._send(call, idempotency_key)

    def forget(self, memory_id: str, record_id: str, *, idempotency_key: str | None = None) -> Record:
        """Close the record (status forgotten); history keeps its trace."""
        return self._send(ops.forget(memory_id, record_id), idempotency_key)

    def history(
        self, memory_id: str, record_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Record]:
        """One page of the record's versions, oldest first."""
        return self._send(ops.history(memory_id, record_id, limit, cursor))

    def iter_history(self, memory_id: str, record_id: str, *, page_size: int | None = None) -> Iterator[Record]:
        return self._items(lambda cursor: ops.history(memory_id, record_id, page_size, cursor))

    def observe(
        self, memory_id: str, episodes: Sequence[Episode], *, idempotency_key: str | None = None
    ) -> ObserveResult:
        """Append episodes (each a text, or {"content", "attributes", "time", "references"})."""
        return self._send(ops.observe(memory_id, episodes), idempotency_key)

    def get_job(self, memory_id: str, job_id: str) -> Job:
        return self._send(ops.get_job(memory_id, job_id))

    def recall(
        self,
        memory_id: str,
        query: str | None = None,
        *,
        text: str | None = None,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
        depth: int | None = None,
        as_of: str | None = None,
        include: Include | None = None,
        query_words: bool | None = None,
        idempotency_key: str | None = None,
    ) -> RecallAnswer:
        """Retrieve by meaning (`query`), words (`text`) and fields (`filters`). A read: sent without an
        Idempotency-Key unless one is given."""
        call = ops.recall(memory_id, query, text, filters, types, limit, depth, as_of, include, query_words)
        return self._send(call, idempotency_key)

    def erase(
        self,
        memory_id: str,
        *,
        record_ids: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        under: str | None = None,
        idempotency_key: str | None = None,
    ) -> EraseResult | JobAccepted:
        """Remove content for good, with everything derived from it (needs delete)."""
        return self._send(ops.erase(memory_id, record_ids, filters, under), idempotency_key)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Any other route, its answer as parsed JSON (every method but GET carries an Idempotency-Key)."""
        return self._send(ops.raw(method, path, params, json), idempotency_key)


class AsyncClient:
    """The twin of `Client`, awaited: the same methods, arguments, answers and rules; `iter_*` are
    async iterators (`async for`)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30,
        retries: int = 3,
        max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, timeout, retries, max_retry_after)
        self._http = httpx.AsyncClient(base_url=self.settings.base_url, headers=self.settings.headers(),
                                       timeout=self.settings.timeout, transport=transport)
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, call: Call[R], idempotency_key: str | None = None) -> R:
        key, content = call.key(idempotency_key), call.content()
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = await self._http.request(call.method, call.path, params=call.params, content=content,
                                                    headers=call.headers(key))
            except RETRY_EXCEPTIONS as exc:
                if attempt >= self.settings.retries:
                    raise _no_answer(exc) from exc
            except httpx.TransportError as exc:
                raise _no_answer(exc) from exc
            else:
                if attempt >= self.settings.retries or not _core.should_retry(response):
                    return _core.finish(call, response)
            await self._sleep(_core.delay(attempt, response, self.settings))
            attempt += 1

    async def _items(self, page: Callable[[str | None], Call[Any]]) -> AsyncIterator[Any]:
        cursor: str | None = None
        while True:
            answer: Page[Any] = await self._send(page(cursor))
            for item in answer.data:
                yield item
            if not answer.next_cursor:
                return
            cursor = answer.next_cursor

    # Memories

    async def create_memory(
        self,
        name: str,
        *,
        description: str | None = None,
        parent_id: str | None = None,
        restricted: bool | None = None,
        provider: str | None = None,
        idempotency_key: str | None = None,
    ) -> Memory:
        return await self._send(ops.create_memory(name, description, parent_id, restricted, provider), idempotency_key)

    async def get_memory(self, memory_id: str) -> Memory:
        return await self._send(ops.get_memory(memory_id))

    async def list_memories(
        self, *, parent: str | None = None, ancestor: str | None = None, limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Memory]:
        return await self._send(ops.list_memories(parent, ancestor, limit, cursor))

    def iter_memories(
        self, *, parent: str | None = None, ancestor: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[Memory]:
        return self._items(lambda cursor: ops.list_memories(parent, ancestor, page_size, cursor))

    async def update_memory(
        self,
        memory_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        parent_id: str | Unset | None = UNSET,
        restricted: bool | None = None,
        idempotency_key: str | None = None,
    ) -> Memory:
        call = ops.update_memory(memory_id, name, description, parent_id, restricted)
        return await self._send(call, idempotency_key)

    async def delete_memory(self, memory_id: str, *, idempotency_key: str | None = None) -> Deleted | JobAccepted:
        return await self._send(ops.delete_memory(memory_id), idempotency_key)

    # Grants

    async def create_grant(
        self, memory_id: str, principal: str, privileges: Sequence[str], *, idempotency_key: str | None = None
    ) -> Grant:
        return await self._send(ops.create_grant(memory_id, principal, privileges), idempotency_key)

    async def list_grants(self, memory_id: str, *, limit: int | None = None, cursor: str | None = None) -> Page[Grant]:
        return await self._send(ops.list_grants(memory_id, limit, cursor))

    def iter_grants(self, memory_id: str, *, page_size: int | None = None) -> AsyncIterator[Grant]:
        return self._items(lambda cursor: ops.list_grants(memory_id, page_size, cursor))

    async def delete_grant(self, memory_id: str, grant_id: str, *, idempotency_key: str | None = None) -> Deleted:
        return await self._send(ops.delete_grant(memory_id, grant_id), idempotency_key)

    # Records

    async def remember(
        self,
        memory_id: str,
        content: str | Mapping[str, Any],
        *,
        type: str = "fact",
        attributes: Mapping[str, Any] | None = None,
        references: Sequence[Mapping[str, Any]] | None = None,
        time: Mapping[str, Any] | None = None,
        path: str | None = None,
        idempotency_key: str | None = None,
    ) -> Record:
        call = ops.remember(memory_id, content, type, attributes, references, time, path)
        return await self._send(call, idempotency_key)

    async def get_record(
        self, memory_id: str, record_id: str, *, as_of: str | None = None, include: Include | None = None
    ) -> Record:
        return await self._send(ops.get_record(memory_id, record_id, as_of, include))

    async def list_records(
        self,
        memory_id: str,
        *,
        types: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        include: Include | None = None,
        as_of: str | None = None,
        path: str | None = None,
        under: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RecordPage:
        call = ops.list_records(memory_id, types, filters, include, as_of, path, under, limit, cursor)
        return await self._send(call)

    def iter_records(
        self,
        memory_id: str,
        *,
        types: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        include: Include | None = None,
        as_of: str | None = None,
        path: str | None = None,
        under: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Record]:
        return self._items(
            lambda cursor: ops.list_records(memory_id, types, filters, include, as_of, path, under, page_size, cursor)
        )

    async def revise(
        self,
        memory_id: str,
        record_id: str,
        *,
        content: str | Mapping[str, Any] | None = None,
        type: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        references: Sequence[Mapping[str, Any]] | None = None,
        time: Mapping[str, Any] | None = None,
        path: str | None = None,
        idempotency_key: str | None = None,
    ) -> Record:
        call = ops.revise(memory_id, record_id, content, type, attributes, references, time, path)
        return await self._send(call, idempotency_key)

    async def forget(self, memory_id: str, record_id: str, *, idempotency_key: str | None = None) -> Record:
        return await self._send(ops.forget(memory_id, record_id), idempotency_key)

    async def history(
        self, memory_id: str, record_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Record]:
        return await self._send(ops.history(memory_id, record_id, limit, cursor))

    def iter_history(self, memory_id: str, record_id: str, *, page_size: int | None = None) -> AsyncIterator[Record]:
        return self._items(lambda cursor: ops.history(memory_id, record_id, page_size, cursor))

    async def observe(
        self, memory_id: str, episodes: Sequence[Episode], *, idempotency_key: str | None = None
    ) -> ObserveResult:
        return await self._send(ops.observe(memory_id, episodes), idempotency_key)

    async def get_job(self, memory_id: str, job_id: str) -> Job:
        return await self._send(ops.get_job(memory_id, job_id))

    async def recall(
        self,
        memory_id: str,
        query: str | None = None,
        *,
        text: str | None = None,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
        depth: int | None = None,
        as_of: str | None = None,
        include: Include | None = None,
        query_words: bool | None = None,
        idempotency_key: str | None = None,
    ) -> RecallAnswer:
        call = ops.recall(memory_id, query, text, filters, types, limit, depth, as_of, include, query_words)
        return await self._send(call, idempotency_key)

    async def erase(
        self,
        memory_id: str,
        *,
        record_ids: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        under: str | None = None,
        idempotency_key: str | None = None,
    ) -> EraseResult | JobAccepted:
        return await self._send(ops.erase(memory_id, record_ids, filters, under), idempotency_key)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotency_key: str | None = None,
    ) -> Any:
        return await self._send(ops.raw(method, path, params, json), idempotency_key)
