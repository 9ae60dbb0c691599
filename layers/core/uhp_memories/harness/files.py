"""A memory's files as an a13n-harness `SearchableFileStore`, over this server's REST API.

A file is a record of the memory with a `path` (docs/file-memory.md): the store writes `note` records,
and sees every current record with a path, whoever wrote it. Versions are record ids: each revision
makes a new one, and the server revises or forgets only the current version, so the id a caller read is
the version it compares and swaps on.

Every mutation sends its read set as `conditions`, checked in the write's own transaction, with one
more condition of its own: the file at the target path is `expected`. That makes a version of another
path, or a record without a path, a `version_mismatch` rather than a write to the wrong record. A
refusal is reported as DirectoryFileStore reports it: a stale dependency first (`read_conflict`), then
the target (`version_mismatch`, or `already_exists` for a move onto a held path), each with the file as
it is now, read after the refusal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import httpx2
from a13n_harness.http import outbound_tls_verify
from a13n_harness.providers.endpoint_policy import EndpointPolicy
from a13n_harness.providers.memory import (
    Changes,
    FileEntry,
    FileFormat,
    FileText,
    FullResync,
    GrepMatch,
    MemoryStoreError,
    Origin,
    SearchableFileStore,
    describe,
    validate_directory,
    validate_path,
)
from anyio import move_on_after

from uhp_memories.domain.limits import CONTENT_BYTES
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
from uhp_memories.harness.records import MEMORY_ID, RECORD_ID

FILE_TYPE = "note"
# The server's bounds (docs/file-memory.md): a page of /paths, a grep answer, a pattern, a read set.
PATHS_PAGE = 1000
GREP_LIMIT_MAX = 200
PATTERN_CHARS = 512
CONDITIONS_MAX = 4096
# Reads in flight at once when a refusal is explained by reading the read set.
DIAGNOSIS_READS = 8

# Named outside the store, whose `list` method would shadow the builtin in its annotations.
type _Matches = tuple[list[GrepMatch], bool]

_UNCONFIRMED = "uhp-memories did not confirm the write; it may or may not have happened."


@dataclass(frozen=True, slots=True)
class _Target:
    """What a mutation expects: the file at `path` is `expected` (None: there is none)."""

    path: str
    expected: str | None


@dataclass(frozen=True, slots=True)
class _Conflict:
    path: str
    reason: str  # condition | path_taken
    current_record_id: str | None


class UhpFileStore:
    """One memory's files. See the module's docstring for versions, conditions and refusals."""

    def __init__(self, api: MemoryApi, memory_id: str, *, format: FileFormat | None = None) -> None:
        if not MEMORY_ID.fullmatch(memory_id):
            raise ValueError("A uhp-memories memory id is hmem_ and 32 hex digits.")
        self._api = api
        self.format = format or FileFormat()

    # -- reading -------------------------------------------------------------------------------

    async def list(self) -> list[FileEntry]:
        entries: list[FileEntry] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": PATHS_PAGE}
            if cursor is not None:
                params["cursor"] = cursor
            answer = await self._read("GET", "/paths", params=params)
            entries.extend(_entry(wire.mapping(item)) for item in wire.items(answer.body, "data"))
            cursor = wire.optional_text(wire.mapping(answer.body), "next_cursor")
            if cursor is None:
                return sorted(entries, key=lambda entry: entry.path)

    async def read(self, path: str) -> FileText:
        path = validate_path(path, self.format)
        current = await self._current(path)
        if current is None:
            raise MemoryStoreError("not_found", f"{path} does not exist.")
        return current

    async def changes(self, since: str | None) -> Changes | FullResync:
        if since is None:
            return FullResync(cursor=await self._fresh_cursor())
        changed: dict[str, None] = {}
        cursor = since
        while True:
            answer = await self._read("GET", "/changes", params={"cursor": cursor}, invalid_ok=True)
            if answer.status == 422:
                # Not a cursor of this memory (another store's, or from before a move of the key): start over.
                return FullResync(cursor=await self._fresh_cursor())
            body = wire.mapping(answer.body)
            cursor = wire.text(body, "cursor")
            if body.get("full_resync") is True:
                return FullResync(cursor=cursor)
            changed.update((wire.text(wire.mapping(item), "path"), None) for item in wire.items(body, "changes"))
            if body.get("more") is not True:
                return Changes(cursor=cursor, paths=tuple(changed))

    async def search(
        self, pattern: str, *, regex: bool, case_sensitive: bool, path: str, limit: int
    ) -> _Matches:
        directory = validate_directory(path, self.format)
        if not 1 <= len(pattern) <= PATTERN_CHARS:
            raise MemoryStoreError("invalid_pattern", f"A pattern has 1 to {PATTERN_CHARS} characters.")
        if limit < 1:
            return [], False
        body = {
            "pattern": pattern,
            "regex": regex,
            "case_sensitive": case_sensitive,
            "under": directory,
            "limit": min(limit, GREP_LIMIT_MAX),
        }
        answer = await self._read("POST", "/grep", body=body, invalid_ok=True)
        if answer.status == 422:
            if answer.detail("reason") == "invalid_pattern":
                message = f"The pattern is not a valid RE2 expression. {_message(answer)}"
                raise MemoryStoreError("invalid_pattern", message)
            raise _refused(answer)
        matches = [_match(wire.mapping(item)) for item in wire.items(answer.body, "matches")]
        return matches, wire.mapping(answer.body).get("more") is True

    # -- changing ------------------------------------------------------------------------------

    async def write(
        self,
        path: str,
        text: str,
        *,
        expected: str | None,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        path = validate_path(path, self.format)
        describe(text, self.format)
        if len(text.encode()) > CONTENT_BYTES:
            raise MemoryStoreError("too_large", f"A uhp-memories file has at most {CONTENT_BYTES} bytes.")
        dependencies = self._dependencies(dependencies)
        target = _Target(path, expected)
        terms = _terms(dependencies, target, origin)
        if _contradicts(dependencies, target):
            raise await self._diagnosed(dependencies, target)
        if expected is None:
            answer = await self._write("POST", "/records", {"type": FILE_TYPE, "path": path, "content": text, **terms})
        elif RECORD_ID.fullmatch(expected):
            answer = await self._write("PATCH", record_path(expected), {"content": text, **terms})
        else:
            # Never sent: an id like ".." would name another route. No record has it, so it is not current.
            raise await self._diagnosed(dependencies, target)
        if not answer.ok:
            raise await self._refusal(answer, dependencies, target)
        return wire.text(wire.mapping(answer.body), "id")

    async def move(
        self,
        source: str,
        destination: str,
        *,
        expected: str,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        source = validate_path(source, self.format)
        destination = validate_path(destination, self.format)
        dependencies = self._dependencies(dependencies)
        target = _Target(source, expected)
        body = {"path": destination, **_terms(dependencies, target, origin)}
        if source == destination or not RECORD_ID.fullmatch(expected) or _contradicts(dependencies, target):
            # Nothing to send: a file cannot move onto itself (its path is held, by itself), a malformed
            # version names no record, and a read set at odds with `expected` cannot hold.
            raise await self._diagnosed(dependencies, target, destination)
        answer = await self._write("PATCH", record_path(expected), body)
        if not answer.ok:
            raise await self._refusal(answer, dependencies, target, destination)
        return wire.text(wire.mapping(answer.body), "id")

    async def delete(
        self,
        path: str,
        *,
        expected: str,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> None:
        path = validate_path(path, self.format)
        dependencies = self._dependencies(dependencies)
        target = _Target(path, expected)
        terms = _terms(dependencies, target, origin)
        if not RECORD_ID.fullmatch(expected) or _contradicts(dependencies, target):
            raise await self._diagnosed(dependencies, target)
        answer = await self._write("DELETE", record_path(expected), terms)
        if not answer.ok:
            raise await self._refusal(answer, dependencies, target)

    async def purge(self) -> None:
        """Erase every version of every file of the memory, and what was derived from them (needs delete).
        What the deployment keeps beyond erase's reach (backups, for their retention) is logged."""
        answer = await self._write("POST", "/erase", {"under": ""})
        if not answer.ok:
            raise _refused(answer)
        await settle_erase(self._api, answer)

    # -- the read set and refusals -------------------------------------------------------------

    def _dependencies(self, dependencies: Mapping[str, str | None] | None) -> dict[str, str | None]:
        """The read set under canonical paths."""
        return {validate_path(path, self.format): version for path, version in (dependencies or {}).items()}

    async def _refusal(
        self,
        answer: Answer,
        dependencies: Mapping[str, str | None],
        target: _Target,
        destination: str | None = None,
    ) -> MemoryStoreError:
        """The store's error for a refused mutation, in DirectoryFileStore's order: dependencies, then target."""
        if answer.status == 404 and answer.code == "memory_record_not_found":
            # `expected` names no record of this memory: it is not the file's version, whatever else holds.
            return await self._diagnosed(dependencies, target, destination)
        if answer.status != 409 or answer.code != "memory_conflict":
            return _refused(answer)
        conflicts = _conflicts(answer)
        if not conflicts:
            # A version no longer current, refused before the conditions were looked at.
            return await self._diagnosed(dependencies, target, destination)
        held = {conflict.path: conflict.current_record_id for conflict in conflicts if conflict.reason == "condition"}
        # A failed condition is a dependency's unless it is the target's own (same path, same version) or the
        # path holds what the dependency expects (so the target's condition on that path failed).
        for path, version in dependencies.items():
            if path in held and held[path] != version and (path, version) != (target.path, target.expected):
                return await self._read_conflict(path)
        target_failed = target.path in held or (
            target.expected is None and any(c.path == target.path and c.reason == "path_taken" for c in conflicts)
        )
        taken = any(c.path == destination and c.reason == "path_taken" for c in conflicts)
        if destination is not None and taken and not target_failed:
            return await self._already_exists(destination)
        return await self._version_mismatch(target.path)

    async def _diagnosed(
        self, dependencies: Mapping[str, str | None], target: _Target, destination: str | None = None
    ) -> MemoryStoreError:
        """The error for a mutation the server did not check the read set of, found by reading it now.

        Nothing was written, so reading after the fact only chooses which refusal to report.
        """
        limit = asyncio.Semaphore(DIAGNOSIS_READS)

        async def version(path: str) -> str | None:
            async with limit:
                current = await self._current(path)
            return current.version if current is not None else None

        # A read set entry that repeats the target's own condition is the target's check, as in _refusal.
        paths = [path for path, seen in dependencies.items() if (path, seen) != (target.path, target.expected)]
        versions = await asyncio.gather(*(version(path) for path in paths))
        for path, current in zip(paths, versions, strict=True):
            if current != dependencies[path]:
                return await self._read_conflict(path)
        if destination is not None and await version(target.path) == target.expected:
            existing = await self._current(destination)
            if existing is not None:
                return MemoryStoreError("already_exists", f"{destination} already exists.", current=existing)
        return await self._version_mismatch(target.path)

    async def _read_conflict(self, path: str) -> MemoryStoreError:
        return MemoryStoreError(
            "read_conflict",
            f"{path} changed since it was observed; reread it and reconsider the write.",
            current=await self._current(path),
        )

    async def _version_mismatch(self, path: str) -> MemoryStoreError:
        return MemoryStoreError(
            "version_mismatch", f"{path} changed since it was read.", current=await self._current(path)
        )

    async def _already_exists(self, path: str) -> MemoryStoreError:
        return MemoryStoreError("already_exists", f"{path} already exists.", current=await self._current(path))

    # -- calls ---------------------------------------------------------------------------------

    async def _current(self, path: str) -> FileText | None:
        """The file at `path` now, or None."""
        answer = await self._read("GET", "/records", params={"path": path})
        found = wire.items(answer.body, "data")
        if not found:
            return None
        record = wire.mapping(found[0])
        text = record.get("content")
        if record.get("path") != path or not isinstance(text, str):
            raise wire.unavailable()
        return FileText(path=path, text=text, version=wire.text(record, "id"))

    async def _fresh_cursor(self) -> str:
        answer = await self._read("GET", "/changes")
        return wire.text(wire.mapping(answer.body), "cursor")

    async def _read(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: object = None,
        invalid_ok: bool = False,
    ) -> Answer:
        """A successful answer; a 422 too when the caller tells its refusals apart (`invalid_ok`)."""
        try:
            answer = await self._api.read(method, path, params=params, body=body)
        except Unavailable:
            raise wire.unavailable() from None
        if answer.ok or (invalid_ok and answer.status == 422 and answer.code == "memory_invalid"):
            return answer
        raise _refused(answer)

    async def _write(self, method: str, path: str, body: object) -> Answer:
        """The server's final answer to one write, refusals included: the caller explains them."""
        try:
            return await self._api.write(method, path, body=body)
        except OutcomeUnknown:
            raise MemoryStoreError("write_unconfirmed", _UNCONFIRMED) from None
        except Unavailable:
            raise wire.unavailable() from None


def _terms(dependencies: Mapping[str, str | None], target: _Target, origin: Origin) -> dict[str, object]:
    """A mutation's conditions (the read set, and the target at its expected version) and origin."""
    conditions = [{"path": path, "record_id": version} for path, version in dependencies.items()]
    own = {"path": target.path, "record_id": target.expected}
    if own not in conditions:
        conditions.append(own)
    if len(conditions) > CONDITIONS_MAX:
        # Refused before sending: the server checks at most CONDITIONS_MAX, the target's own included.
        raise MemoryStoreError(
            "read_set_full", f"A write depends on at most {CONDITIONS_MAX} files, itself included; read fewer."
        )
    terms: dict[str, object] = {"conditions": conditions}
    attributed = {name: value for name, value in _origin_fields(origin) if value is not None}
    if attributed:
        terms["origin"] = attributed
    return terms


def _contradicts(dependencies: Mapping[str, str | None], target: _Target) -> bool:
    """Whether the read set expects another version at the target's path than `expected`: then the two
    conditions cannot both hold, and the server refuses such a pair as invalid rather than stale."""
    return target.path in dependencies and dependencies[target.path] != target.expected


def _origin_fields(origin: Origin) -> Iterable[tuple[str, str | None]]:
    return (("run_id", origin.run_id), ("principal_id", origin.principal_id), ("tool_call_id", origin.tool_call_id))


def _conflicts(answer: Answer) -> list[_Conflict]:
    listed = answer.detail("conflicts")
    if not isinstance(listed, list):
        return []
    conflicts = []
    for item in map(wire.mapping, listed):
        current = item.get("current_record_id")
        conflicts.append(
            _Conflict(wire.text(item, "path"), wire.text(item, "reason"), current if isinstance(current, str) else None)
        )
    return conflicts


def _refused(answer: Answer) -> MemoryStoreError:
    """A refusal other than a conflict: the server answered 4xx, so it did not act."""
    code = answer.code
    if code == "memory_not_found":
        return MemoryStoreError("memory_deleted", "The memory was deleted, or this API key cannot see it.")
    if answer.status == 401:
        return MemoryStoreError("forbidden", "The API key is missing or unknown.")
    if answer.status == 403:
        return MemoryStoreError("forbidden", "This API key lacks the privilege the operation needs on the memory.")
    if answer.status == 413:
        return MemoryStoreError("too_large", "The request is larger than the server accepts.")
    if code == "memory_invalid":
        # Everything the store sends passed the harness's rules first; the server's may be stricter.
        return MemoryStoreError("invalid_file", f"The server refused the file. {_message(answer)}")
    refusal = code or str(answer.status)
    return MemoryStoreError("unavailable", f"uhp-memories refused the request ({refusal}); nothing changed.")


def _message(answer: Answer) -> str:
    message = answer.detail("message")
    return message if isinstance(message, str) else ""


def _entry(item: Mapping[str, object]) -> FileEntry:
    return FileEntry(
        path=wire.text(item, "path"),
        version=wire.text(item, "record_id"),
        size=wire.integer(item, "bytes"),
        description=wire.optional_text(item, "description"),
    )


def _match(item: Mapping[str, object]) -> GrepMatch:
    text = item.get("text")
    if not isinstance(text, str):
        raise wire.unavailable()
    return GrepMatch(
        path=wire.text(item, "path"), line=wire.integer(item, "line"), text=text, version=wire.text(item, "record_id")
    )


def open_file_store(
    *,
    base_url: str,
    api_key: str,
    memory_id: str,
    http: httpx2.AsyncClient | None = None,
    format: FileFormat | None = None,
) -> AbstractAsyncContextManager[SearchableFileStore]:
    """One memory's files as a `SearchableFileStore`, for `FileMount`: an async context manager.

    The arguments are checked at once, as a13n-harness's `open` checks its own; the client is opened on
    entering. `http` stays the caller's. Without it the store owns a client that reaches public HTTPS
    endpoints only, as a13n-harness's Memory Providers do, so a local server (plain HTTP) is refused here
    with what to do: pass a client of the caller's.
    """
    base_url = plain_base_url(base_url)
    if not api_key:
        raise ValueError("uhp-memories requires an API key.")
    if not MEMORY_ID.fullmatch(memory_id):
        raise ValueError("A uhp-memories memory id is hmem_ and 32 hex digits.")
    if http is None:
        require_own_client_reach(base_url)
    return _file_store(base_url, api_key, memory_id, http, format)


@asynccontextmanager
async def _file_store(
    base_url: str, api_key: str, memory_id: str, http: httpx2.AsyncClient | None, format: FileFormat | None
) -> AsyncGenerator[SearchableFileStore]:
    if http is not None:
        yield UhpFileStore(MemoryApi(http, base_url, api_key, memory_id), memory_id, format=format)
        return
    policy = EndpointPolicy(require_https=True)

    async def check_request(request: httpx2.Request) -> None:
        await policy.validate(str(request.url))

    client = httpx2.AsyncClient(
        verify=outbound_tls_verify(), timeout=30, follow_redirects=False, event_hooks={"request": [check_request]}
    )
    try:
        yield UhpFileStore(MemoryApi(client, base_url, api_key, memory_id), memory_id, format=format)
    finally:
        # Closing must not hang the caller's exit on a stuck connection.
        with move_on_after(1, shield=True):
            await client.aclose()
