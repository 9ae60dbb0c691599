"""A memory's facts as an a13n-harness `RecordStore`, over this server's REST API.

The namespace is a memory id. The store holds the memory's `fact` records, the protocol's type for one
thing worth remembering as it was said: it writes facts, and searches, lists, changes and purges only
facts, so a note, procedure or episode another client keeps in the same memory is neither shown to the
model nor changed by it.

Ids. Every version of a record has its own id on this server, and a revision makes a new one. The
store names a record by the id of its chain's first version, which never changes: `update` and `delete`
accept it (or any later version's id) for as long as the record lives, and act on its current version.
A listed or recalled version that is not a first one is named by its chain through its history, read
once per version and remembered.

The last writer wins: a write that names a version another writer superseded meanwhile is refused
with 409 and the current version's id, and the store writes that version instead. A forgotten record
(the server's `delete`) no longer exists for the store, although reading its version by id still
answers it with status `forgotten`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Annotated, Literal

import httpx2
from a13n_harness.providers.memory import (
    MemoryErrorCode,
    MemoryProviderDefinition,
    MemoryRecord,
    MemoryStoreError,
    RecordPage,
    RecordStore,
)
from pydantic import BaseModel, ConfigDict, Field, SecretStr, StringConstraints, field_validator

from uhp_memories.domain.limits import CONTENT_BYTES, LIST_MAX, RECALL_LIMIT_MAX
from uhp_memories.harness import wire
from uhp_memories.harness.api import (
    Answer,
    MemoryApi,
    OutcomeUnknown,
    Unavailable,
    plain_base_url,
    record_path,
    require_own_client_reach,
    settle_erase,
)

RECORD_TYPE = "fact"
MEMORY_ID = re.compile(r"hmem_[0-9a-f]{32}")
RECORD_ID = re.compile(r"hrec_[0-9a-f]{32}")
# The longest query recall takes (RecallIn.query); a longer one is cut, as an embedder cuts its input.
QUERY_CHARS = 8_000
# Redirects a change follows to the current version before giving up on a record that keeps changing.
MAX_REDIRECTS = 8
# History reads in flight at once, naming the chains of one page's revised records.
CHAIN_LOOKUPS = 8
# Version id -> chain id, remembered per store: a fact that never changes, so the map is never stale.
CHAIN_CACHE_ENTRIES = 10_000

_UNCONFIRMED = "uhp-memories did not confirm the write; it may or may not have happened."

type _Operation = Literal["read", "list", "write"]
type _BaseUrl = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2048)]


class UhpMemoriesConfiguration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: _BaseUrl = Field(
        title="Base URL", description="The API's address, a deployed stage's (with its stage path) or a local server's"
    )

    @field_validator("base_url")
    @classmethod
    def _plain_base_url(cls, value: str) -> str:
        return plain_base_url(value)


class UhpMemoriesCredential(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_key: SecretStr = Field(title="API Key", min_length=1, max_length=4096)


class UhpRecordStore:
    """One memory's facts. See the module's docstring for ids, the last writer and forgotten records."""

    def __init__(self, api: MemoryApi, memory_id: str) -> None:
        if not MEMORY_ID.fullmatch(memory_id):
            raise ValueError("A uhp-memories namespace is a memory id: hmem_ and 32 hex digits.")
        self._api = api
        self._memory_id = memory_id
        self._chains: dict[str, str] = {}
        self._lookups = asyncio.Semaphore(CHAIN_LOOKUPS)

    async def search(self, query: str, *, limit: int) -> tuple[MemoryRecord, ...]:
        if limit < 1:
            return ()
        body = {"query": query[:QUERY_CHARS], "types": [RECORD_TYPE], "limit": min(limit, RECALL_LIMIT_MAX)}
        answer = await self._read("POST", "/recall", body=body)
        results = wire.field(answer.body, "results", list)
        found = [(wire.mapping(item.get("record")), item.get("score")) for item in map(wire.mapping, results)]
        return await self._named([record for record, _ in found], [score for _, score in found])

    async def list(self, *, limit: int, cursor: str | None = None) -> RecordPage:
        if limit < 1:
            return RecordPage((), cursor)
        params: dict[str, str | int] = {"types": RECORD_TYPE, "limit": min(limit, LIST_MAX)}
        if cursor is not None:
            params["cursor"] = cursor
        answer = await self._read("GET", "/records", params=params, operation="list" if cursor else "read")
        next_cursor = wire.mapping(answer.body).get("next_cursor")
        if next_cursor is not None and not isinstance(next_cursor, str):
            raise wire.unavailable()
        records = [wire.mapping(item) for item in wire.field(answer.body, "data", list)]
        return RecordPage(await self._named(records, [None] * len(records)), next_cursor)

    async def add(self, text: str) -> MemoryRecord:
        _check_text(text)
        answer = await self._write("POST", "/records", body={"type": RECORD_TYPE, "content": text})
        record = wire.mapping(answer.body)
        if wire.integer(record, "version") != 1:
            raise MemoryStoreError("write_unconfirmed", _UNCONFIRMED)
        return _memory_record(record, wire.text(record, "id"))

    async def update(self, record_id: str, text: str) -> MemoryRecord:
        _check_text(text)
        named = await self._require(record_id)
        chain = await self._chain_of(named)
        written = await self._change("PATCH", wire.text(named, "id"), {"content": text}, chain=chain)
        return _memory_record(written, chain)

    async def delete(self, record_id: str) -> None:
        named = await self._require(record_id)
        await self._change("DELETE", wire.text(named, "id"), None)

    async def purge(self) -> None:
        """Erase every version of every fact of the memory, and what was derived from them (needs delete)."""
        every_fact = {"field": "type", "op": "eq", "value": RECORD_TYPE}
        answer = await self._write("POST", "/erase", body={"filters": every_fact})
        await settle_erase(self._api, answer)

    # -- the record a caller names ---------------------------------------------------------------

    async def _require(self, record_id: str) -> Mapping[str, object]:
        """The version `record_id` names, when it is a fact of this memory that was not forgotten."""
        if not RECORD_ID.fullmatch(record_id):
            # Never sent: an id like ".." would otherwise name another route of the memory.
            raise _not_found(record_id)
        answer = await self._read("GET", record_path(record_id), missing=True)
        if answer.status == 404:
            raise _not_found(record_id)
        record = wire.mapping(answer.body)
        if wire.text(record, "id") != record_id:
            raise wire.unavailable()
        if (
            record.get("memory_id") != self._memory_id
            or record.get("type") != RECORD_TYPE
            or record.get("status") == "forgotten"
        ):
            raise _not_found(record_id)
        return record

    async def _change(
        self, method: str, record_id: str, body: object, *, chain: str | None = None
    ) -> Mapping[str, object]:
        """Revise or forget the chain's current version, following the server to it: last writer wins.

        `chain`, when known, is remembered for every version met on the way and the one written.
        """
        target = record_id
        for _ in range(MAX_REDIRECTS):
            answer = await self._write(method, record_path(target), body=body, missing=True, conflicts=True)
            if answer.ok:
                written = wire.mapping(answer.body)
                if chain is not None:
                    self._remember_chain(wire.text(written, "id"), chain)
                return written
            if answer.status == 404:
                raise _not_found(record_id)
            current = answer.detail("current_record_id")
            if answer.code != "memory_conflict" or not isinstance(current, str) or not RECORD_ID.fullmatch(current):
                raise _refused(answer, "write")
            if current == target:
                # The chain ends in the version named, and it cannot change: it was forgotten.
                raise _not_found(record_id)
            if chain is not None:
                self._remember_chain(current, chain)
            target = current
        raise MemoryStoreError("unavailable", "The record kept changing under other writers; nothing changed.")

    # -- naming records by their chains -----------------------------------------------------------

    async def _named(self, raws: Sequence[Mapping[str, object]], scores: Sequence[object]) -> tuple[MemoryRecord, ...]:
        """Each fact of this memory with text content, named by its chain, in order; one erased meanwhile is
        left out. The server answers this memory's records only; one of another would be dropped all the same."""
        kept = [
            (raw, score)
            for raw, score in zip(raws, scores, strict=True)
            if raw.get("memory_id") == self._memory_id
            and raw.get("type") == RECORD_TYPE
            and isinstance(raw.get("content"), str)
        ]
        chains = await asyncio.gather(*(self._chain_if_kept(raw) for raw, _ in kept))
        return tuple(
            _memory_record(raw, chain, score)
            for (raw, score), chain in zip(kept, chains, strict=True)
            if chain is not None
        )

    async def _chain_if_kept(self, record: Mapping[str, object]) -> str | None:
        try:
            return await self._chain_of(record)
        except MemoryStoreError as error:
            if error.code == "record_not_found":
                return None
            raise

    async def _chain_of(self, record: Mapping[str, object]) -> str:
        """The id of the chain's first version: the record's own id at version 1, else from its history."""
        record_id = wire.text(record, "id")
        if wire.integer(record, "version") == 1:
            return record_id
        if (known := self._chains.get(record_id)) is not None:
            return known
        async with self._lookups:
            answer = await self._read("GET", record_path(record_id, "/history"), params={"limit": 1}, missing=True)
        if answer.status == 404:
            raise _not_found(record_id)
        versions = wire.field(answer.body, "data", list)
        first = wire.mapping(versions[0] if versions else None)
        if wire.integer(first, "version") != 1:
            raise wire.unavailable()
        chain = wire.text(first, "id")
        self._remember_chain(record_id, chain)
        return chain

    def _remember_chain(self, version_id: str, chain_id: str) -> None:
        if len(self._chains) >= CHAIN_CACHE_ENTRIES:
            self._chains.clear()
        self._chains[version_id] = chain_id

    # -- calls -------------------------------------------------------------------------------

    async def _read(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: object = None,
        missing: bool = False,
        operation: _Operation = "read",
    ) -> Answer:
        try:
            answer = await self._api.read(method, path, params=params, body=body)
        except Unavailable:
            raise wire.unavailable() from None
        return _final(answer, operation, missing)

    async def _write(
        self, method: str, path: str, *, body: object = None, missing: bool = False, conflicts: bool = False
    ) -> Answer:
        """The answer to one write; a 409 `memory_conflict` too when the caller follows it (`conflicts`)."""
        try:
            answer = await self._api.write(method, path, body=body)
        except OutcomeUnknown:
            raise MemoryStoreError("write_unconfirmed", _UNCONFIRMED) from None
        except Unavailable:
            raise wire.unavailable() from None
        if conflicts and answer.status == 409 and answer.code == "memory_conflict":
            return answer
        return _final(answer, "write", missing)


def _final(answer: Answer, operation: _Operation, missing: bool) -> Answer:
    """A success, or a 404 `memory_record_not_found` the caller handles (`missing`); any other refusal raised."""
    if answer.ok or (missing and answer.status == 404 and answer.code == "memory_record_not_found"):
        return answer
    raise _refused(answer, operation)


# Refusals: the server answered 4xx, so it did not act (docs/decisions.md, spec §12).
_REFUSALS: dict[str, tuple[MemoryErrorCode, str]] = {
    "memory_not_found": ("memory_deleted", "The memory does not exist, or this API key cannot see it."),
    "memory_forbidden": ("forbidden", "This API key lacks the privilege the operation needs on the memory."),
    "unauthenticated": ("forbidden", "The API key is missing or unknown."),
    "memory_record_not_found": ("record_not_found", "No such record in this memory."),
    "request_too_large": ("too_large", "The request is larger than the server accepts."),
}


def _refused(answer: Answer, operation: _Operation) -> MemoryStoreError:
    code = answer.code
    if code == "memory_invalid" and operation == "write":
        # Everything else a write sends is the store's own, and valid.
        return MemoryStoreError("invalid_text", f"The server refused the record's text. {_message(answer)}")
    if code == "memory_invalid" and operation == "list":
        return MemoryStoreError("invalid_cursor", "Use the next_cursor of a previous page.")
    if code in _REFUSALS:
        store_code, message = _REFUSALS[code]
        return MemoryStoreError(store_code, message)
    if answer.status == 413:
        return MemoryStoreError("too_large", "The request is larger than the server accepts.")
    refusal = code or str(answer.status)
    return MemoryStoreError("unavailable", f"uhp-memories refused the request ({refusal}); nothing changed.")


def _message(answer: Answer) -> str:
    message = answer.detail("message")
    return message if isinstance(message, str) else ""


def _check_text(text: str) -> None:
    """The server's rule for text content (at most CONTENT_BYTES of UTF-8), before anything is sent."""
    if not text.strip():
        raise MemoryStoreError("invalid_text", "A record's text is not blank.")
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise MemoryStoreError("invalid_text", "A record's text is valid Unicode (no lone surrogates).") from None
    if size > CONTENT_BYTES:
        raise MemoryStoreError("invalid_text", f"A record holds at most {CONTENT_BYTES} bytes of UTF-8 text.")


def _memory_record(record: Mapping[str, object], chain_id: str, score: object = None) -> MemoryRecord:
    text = record.get("content")
    if not isinstance(text, str):
        raise wire.unavailable()
    return MemoryRecord(
        id=chain_id,
        text=text,
        score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        updated_at=_timestamp(wire.mapping(record.get("time")).get("written_at")),
    )


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _not_found(record_id: str) -> MemoryStoreError:
    return MemoryStoreError("record_not_found", f"No record {record_id!r} in this memory.")


@asynccontextmanager
async def _open_store(
    configuration: UhpMemoriesConfiguration,
    credential: UhpMemoriesCredential | None,
    namespace: str,
    http: httpx2.AsyncClient,
) -> AsyncGenerator[RecordStore]:
    if credential is None:
        raise ValueError("uhp-memories requires an API key.")
    api = MemoryApi(http, configuration.base_url, credential.api_key.get_secret_value(), namespace)
    yield UhpRecordStore(api, namespace)


class UhpMemoriesDefinition(MemoryProviderDefinition[UhpMemoriesConfiguration, UhpMemoriesCredential]):
    """a13n-harness's Memory Provider definition, whose `open` also refuses at once what could never work:
    a namespace that is not a memory id, and, without `http`, an address the store's own client would
    refuse on every call (harness/api.py, require_own_client_reach)."""

    def open(
        self,
        configuration: object,
        credential: object = None,
        *,
        namespace: str,
        http: httpx2.AsyncClient | None = None,
    ) -> AbstractAsyncContextManager[RecordStore]:
        opened = super().open(configuration, credential, namespace=namespace, http=http)
        if not MEMORY_ID.fullmatch(namespace):
            raise ValueError("A uhp-memories namespace is a memory id: hmem_ and 32 hex digits.")
        if http is None:
            require_own_client_reach(UhpMemoriesConfiguration.model_validate(configuration).base_url)
        return opened


UHP_MEMORIES = UhpMemoriesDefinition(
    type="uhp_memories",
    display_name="uhp-memories",
    configuration_model=UhpMemoriesConfiguration,
    credential_model=UhpMemoriesCredential,
    open_store=_open_store,
)
