"""The mem0 provider (§10): a memory bound to it keeps its records in mem0, through mem0's own Python
library: `mem0.Memory` (mem0 OSS, in this process) or `mem0.MemoryClient` (the hosted Platform, its API key
the server's credential). Everything above the records stays the server's (domain/providers/ports.py).

How this memory maps onto mem0 (docs/decisions.md, "The mem0 provider"):
- A memory is a mem0 `user_id` (the memory's id): mem0 has no container per memory, so every call carries
  it as a filter and every record fetched by id is checked against it and the tenant (isolation
  `enforced_filter`, §10.3).
- A record is one mem0 memory; its id is `hrec_` + mem0's UUID in hex, so ids keep the API's shape and
  lead back to mem0's. What mem0 has no field for rides in its metadata under `uhp_`: the type, the
  attributes, valid time, references, status, version and each version's writer and time.
- remember and observe add with `infer=False` (each text kept as stated), or, when the operator gave mem0
  a model, observe adds with `infer=True` and answers what mem0 derived (derivation `write_time`).
- revise is mem0's own update (the record keeps its id; mem0's history table keeps each text): `native`.
- forget has no mem0 call that closes a record and keeps it: the adapter marks it forgotten in its
  metadata and leaves it out of every read that does not ask for history: `emulated`.
- recall is mem0's search, by meaning (`query`); mem0 offline has no word index, so `text` is answered
  in `degraded` (`text:not_supported`); filters are applied by the adapter over what mem0 answers.
- erase deletes from mem0's store and removes the record's rows from mem0's history table when the
  adapter holds that table (OSS); where it cannot (the Platform's history; mem0's raw message log of
  derived memories), it says so in `unreachable`, each entry with a reason and an `until` (a string,
  always: when the copy goes, or that nothing ends it).
- a `derived_from` reference may name a record of the same memory only, which the memory's erase follows:
  one elsewhere (a native record, another mem0 memory's) is refused, memory_unsupported, since that
  record's erase cannot reach mem0 to remove the copy (docs/decisions.md).
"""

from __future__ import annotations

import logging
import os
import queue
import re
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as NoAnswerInTime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uhp_memories import deadlines
from uhp_memories.domain.errors import MemoryUnsupported
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller
from uhp_memories.domain.providers.ports import (
    RECALL_CANDIDATES_MAX,
    RECALL_CANDIDATES_PER_RESULT,
    ProviderErase,
    ProviderNotAnswering,
    ProviderRecall,
)
from uhp_memories.domain.records.model import RecordVersion

logger = logging.getLogger(__name__)

PROVIDER_ID = "mem0"
RECORD_ID = re.compile(r"^hrec_[0-9a-f]{32}$")
META = "uhp"  # the one metadata key the adapter writes under: {"uhp": {...}}
# mem0 lists a user's memories in one call (no cursor in mem0 OSS): a listing pages over at most this
# many, newest first (docs/decisions.md). What must reach every record (erase, a memory's deletion) asks
# again for EVERY_GROWTH times as many until mem0 answers fewer than asked: the end.
SCAN_MAX = 10_000
EVERY_GROWTH = 4
PROVIDER_WRITER = {"kind": "provider", "id": PROVIDER_ID}  # what mem0 derived, or wrote without the server
# The write of an Idempotency-Key request, on each mem0 memory it adds: a top-level metadata key (mem0
# filters on those), and the position of the record in the request's list. A retry finds what an attempt
# before it added, and adds only what that attempt did not (docs/decisions.md "mem0 held to the contract").
WRITE_TAG = "uhp_write"
WRITE_INDEX = "uhp_write_index"
# The most mem0 memories one write may add: an observe's episodes, or what mem0 derived from them.
WRITE_LANDED_MAX = 1_000


@dataclass(frozen=True)
class Mem0Settings:
    """How the operator connected mem0 (settings.py `mem0_*`; `uhp-memories serve --mem0`).

    `mode`: "oss" (mem0.Memory in this process) or "platform" (mem0.MemoryClient, the hosted service).
    OSS: `folder` keeps its vector store (Qdrant's embedded mode) and history (SQLite); None: a folder of
    the process's own, gone with it. `derive_url`/`derive_model`: an OpenAI-compatible chat endpoint
    mem0 derives with (`infer=True`); without one, mem0 keeps each text as stated (`infer=False`).
    Platform: `api_key` (the server's credential, from Secrets Manager when deployed) and `host`."""

    mode: str = "oss"
    folder: str | None = None
    derive_url: str | None = None
    derive_model: str | None = None
    derive_api_key: str | None = None
    api_key: str | None = None
    host: str | None = None
    vector_store: dict[str, Any] = field(default_factory=dict)  # a deployed stage's (e.g. OpenSearch)
    timeout_seconds: float = 5.0  # the longest one call to mem0 may take (settings.mem0_timeout_seconds)

    @property
    def infers(self) -> bool:
        return self.mode == "oss" and bool(self.derive_url and self.derive_model)


def record_id_of(mem0_id: str) -> str:
    return "hrec_" + uuid.UUID(str(mem0_id)).hex


def mem0_id_of(record_id: str) -> str | None:
    return str(uuid.UUID(record_id[5:])) if RECORD_ID.match(record_id) else None


class Deadlined:
    """mem0's client behind a deadline: each call is made on one thread of the adapter's own, one at a
    time (mem0 OSS's embedded stores are not made for threads, and the local gateway serves a thread per
    request), and waited for at most `timeout_seconds` (or the request's time left, when shorter). A call
    that does not answer by then, or answers with an error, is §12 memory_unavailable (502), never a 500
    nor a request held until the gateway gives up. A call still running past its deadline goes on on
    that thread (nothing in mem0's library can be stopped from outside): the calls behind it wait for it
    and time out the same way while mem0 does not answer; one not yet started is dropped."""

    def __init__(self, client: Any, timeout_seconds: float) -> None:
        self.inner = client
        self._timeout = timeout_seconds
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._starting = threading.Lock()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.run(name, lambda: getattr(self.inner, name)(*args, **kwargs))

        return call

    def run(self, what: str, work: Callable[[], Any]) -> Any:
        """`work` on the adapter's thread, its answer waited for within the deadline. `what` names it in
        the log (never a record's content)."""
        answer: Future[Any] = Future()
        self._started().put((answer, work))
        try:
            return answer.result(timeout=max(deadlines.bounded(self._timeout), 0.0))
        except NoAnswerInTime:
            answer.cancel()
            logger.warning("mem0 did not answer in time", extra={"call": what, "timeout_s": self._timeout})
            raise ProviderNotAnswering(
                f"the memory's provider 'mem0' did not answer within {self._timeout:g} s; retry later") from None
        except Exception as error:
            logger.warning("mem0 answered with an error", extra={"call": what, "error_type": type(error).__name__})
            raise ProviderNotAnswering("the memory's provider 'mem0' answered with an error; retry later") from error

    def _started(self) -> queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]]:
        with self._starting:
            if self._worker is None:
                # A daemon: a call mem0 never answers must not keep the process from ending.
                self._worker = threading.Thread(target=self._work, name="mem0-calls", daemon=True)
                self._worker.start()
        return self._calls

    def _work(self) -> None:
        while True:
            answer, work = self._calls.get()
            if not answer.set_running_or_notify_cancel():
                continue  # its caller stopped waiting before it started
            try:
                answer.set_result(work())
            except BaseException as error:  # handed to the caller, whatever it is
                answer.set_exception(error)


class Mem0Provider:
    """A RecordProvider over one mem0 client (`Memory` or `MemoryClient`), shared by every memory bound to
    mem0, every call to it under a deadline (`Deadlined`)."""

    id = PROVIDER_ID

    def __init__(
        self,
        client: Any,
        settings: Mem0Settings,
        *,
        history_db: str | None = None,
        now: Callable[[], str],
        write_tag: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._client = Deadlined(client, settings.timeout_seconds)
        self._settings = settings
        self._history_db = history_db  # mem0 OSS's SQLite history, which erase cleans
        self._now = now
        # The running request's write under its Idempotency-Key (None: no key, or its marker is committed).
        # mem0's add comes before the DynamoDB commit that carries the key's marker (the count): a crash
        # between them left mem0 holding records no marker named, and a retry added them again.
        self._write_tag = write_tag

    # -- what it is --------------------------------------------------------------------------------

    def is_outside(self) -> bool:
        # The Platform is another company's service; OSS deriving with a model sends every turn to it.
        return self._settings.mode == "platform" or self._settings.infers

    def capabilities(self) -> dict[str, Any]:
        infers = self._settings.infers
        platform = self._settings.mode == "platform"
        return {
            "id": PROVIDER_ID,
            "object": "memory.provider",
            "mode": self._settings.mode,
            # One mem0 user_id per memory, added to every call and checked on every record fetched by id.
            "isolation": "enforced_filter",
            "derivation": "write_time" if infers else "none",
            # With a model mem0 keeps what it derived, not the episodes.
            "observe": {"keeps_episodes": not infers, "answers": "records"},
            # Meaning only: mem0 offline has no word index. Filters are applied by the adapter.
            # Fields and types are applied over mem0's best candidates by meaning, at most
            # RECALL_CANDIDATES_PER_RESULT per result asked and RECALL_CANDIDATES_MAX in all: an answer
            # that fell short with more candidates left beyond them says `filters:over_top_<n>` in degraded.
            "recall": {"signals": ["query", "filters"], "abstain": True, "max_depth": 0,
                       "emulated": ["filters"], "as_of": False,
                       "filters_over": {"candidates_per_result": RECALL_CANDIDATES_PER_RESULT,
                                        "candidates_max": RECALL_CANDIDATES_MAX,
                                        "degraded": "filters:over_top_<n>"}},
            # mem0 keeps every text of a record (its history table); the adapter keeps each version's
            # attributes and valid time in the record's metadata. Nothing reads the memory as it stood
            # (as_of is memory_unsupported): mem0 has no read at an instant.
            "history": {"content": "versions", "attributes": "versions", "structure": "none", "as_of": False},
            "snapshots": False,
            "revise": "native",
            "forget": "emulated",
            "erase": {"unreachable": "reported", "history": "unreachable" if platform else "removed"},
            "prime": False,
            "consolidate": False,
            "queries": {"named": False, "free": False},
            # No §8 type operations; a record of any type, an extension's too, is carried as written (§4.1).
            "types": False,
            "extension_types": "carried",
            "files": False,
            # mem0 keeps no count per user: the server keeps a memory's records.count as each write through
            # it lands (a derivation, which may merge records, is counted anew over a listing).
            "records_count": "kept",
        }

    # -- writes --------------------------------------------------------------------------------------

    def remember(self, caller: Caller, memory: Memory, record: RecordVersion) -> RecordVersion:
        _refuse_derived_elsewhere(memory, [record])
        [kept] = self._add(memory, [record], infer=False)
        return kept

    def observe(self, caller: Caller, memory: Memory, episodes: Sequence[RecordVersion]) -> list[RecordVersion]:
        _refuse_derived_elsewhere(memory, episodes)
        if self._settings.infers:
            tag = self._write_tag()
            landed = self._landed(memory, tag)
            if landed:  # an attempt before this one derived them: one add derives all, or none
                return [landed[i] for i in sorted(landed)]
            derived = episodes[0].evolve(type="fact", written_by=PROVIDER_WRITER)
            added = self._client.add(
                [{"role": "user", "content": str(e.content)} for e in episodes],
                user_id=memory.id,
                metadata=_tagged({META: self._meta(memory, derived)}, tag, 0),
                infer=True,
            )
            return [v for v in (self._fetch(memory, r["id"]) for r in _results(added)) if v is not None]
        return self._add(memory, episodes, infer=False)

    def _add(self, memory: Memory, records: Sequence[RecordVersion], *, infer: bool) -> list[RecordVersion]:
        """Each record added as one mem0 memory, in order; under an Idempotency-Key, those an attempt
        before this one added are answered as mem0 keeps them, not added again."""
        tag = self._write_tag()
        landed = self._landed(memory, tag)
        kept: list[RecordVersion] = []
        for index, record in enumerate(records):
            if index in landed:
                kept.append(landed[index])
                continue
            added = self._client.add(
                [{"role": "user", "content": str(record.content)}],
                user_id=memory.id,
                metadata=_tagged({META: self._meta(memory, record)}, tag, index),
                infer=infer,
            )
            # Kept as stated: the record is what was sent, under mem0's id (no read back).
            kept += [record.evolve(id=record_id_of(r["id"]), chain_id=record_id_of(r["id"]))
                     for r in _results(added) if r.get("event", "ADD") == "ADD"]
        return kept

    def _landed(self, memory: Memory, tag: str | None) -> dict[int, RecordVersion]:
        """What an earlier attempt of this write added to the memory, by its position in the write (none
        without a key). Checked here whatever mem0's filter did: the tag, the memory and the tenant."""
        if tag is None:
            return {}
        listed = self._client.get_all(filters={"user_id": memory.id, WRITE_TAG: tag}, top_k=WRITE_LANDED_MAX)
        found: dict[int, RecordVersion] = {}
        for item in _results(listed):
            metadata = item.get("metadata") or {}
            version = self._version(memory, item) if metadata.get(WRITE_TAG) == tag else None
            if version is not None:
                found[int(metadata.get(WRITE_INDEX, len(found)))] = version
        return found

    def revise(self, caller: Caller, memory: Memory, current: RecordVersion, revised: RecordVersion) -> RecordVersion:
        _refuse_derived_elsewhere(memory, [revised])
        mem0_id = mem0_id_of(current.id)
        assert mem0_id is not None
        stored = self._stored_meta(memory, mem0_id)
        writers = [*stored.get("writers", []), _writer_entry(revised, text_changed=revised.content != current.content)]
        meta = {**self._meta(memory, revised), "version": current.version + 1, "writers": writers}
        self._client.update(mem0_id, text=str(revised.content), metadata={META: meta})
        found = self._fetch(memory, mem0_id)
        assert found is not None
        return found

    def forget(self, caller: Caller, memory: Memory, current: RecordVersion) -> RecordVersion:
        mem0_id = mem0_id_of(current.id)
        assert mem0_id is not None
        meta = self._stored_meta(memory, mem0_id)
        meta.update(status="forgotten", invalidated_at=self._now(),
                    forgotten_by={"written_by": caller.written_by, "origin": None})
        self._client.update(mem0_id, metadata={META: meta})
        found = self._fetch(memory, mem0_id)
        assert found is not None
        return found

    # -- reads ---------------------------------------------------------------------------------------

    def get(self, memory: Memory, record_id: str) -> RecordVersion | None:
        mem0_id = mem0_id_of(record_id)
        if mem0_id is None:
            return None
        return self._fetch(memory, mem0_id)

    def scan(self, memory: Memory, include: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        listed = self._client.get_all(filters={"user_id": memory.id}, top_k=SCAN_MAX)
        versions = [v for v in (self._version(memory, item) for item in _results(listed)) if v is not None]
        versions = [v for v in versions if include == "all" or v.status == "active"]
        for version in sorted(versions, key=lambda v: (v.written_at, v.id), reverse=True):
            position = f"{version.written_at}#{version.id}"
            if after is None or position < after:
                yield position, version

    def every(self, memory: Memory) -> list[RecordVersion]:
        """Every record of the memory, forgotten ones included: listed to the end, never at a bound."""
        return [v for v in (self._version(memory, item) for item in self._every_item(memory)) if v is not None]

    def count(self, memory: Memory) -> int:
        """The memory's active records, counted over a listing of them all: mem0 keeps no count per user
        (and forgotten records stay in it). Asked after a derivation only, which may merge or replace
        records (capabilities `records_count`); the server keeps the count as other writes land."""
        return sum(1 for v in self.every(memory) if v.status == "active")

    def _every_item(self, memory: Memory) -> list[dict[str, Any]]:
        """mem0 lists a user's memories in one call, up to `top_k`, with no cursor: asked for more each time
        until it answers fewer than asked, it has answered them all."""
        top_k = SCAN_MAX
        while True:
            listed = _results(self._client.get_all(filters={"user_id": memory.id}, top_k=top_k))
            if len(listed) < top_k:
                return listed
            top_k *= EVERY_GROWTH

    def history(self, memory: Memory, record: RecordVersion) -> list[RecordVersion]:
        """Each version the adapter wrote, its text taken from mem0's history table in order (a version
        that changed only attributes keeps the text before it)."""
        mem0_id = mem0_id_of(record.id)
        assert mem0_id is not None
        rows = self._client.history(mem0_id) or []
        texts = [r.get("new_memory") for r in rows if r.get("event") == "ADD"
                 or (r.get("event") == "UPDATE" and r.get("old_memory") != r.get("new_memory"))]
        writers = self._stored_meta(memory, mem0_id).get("writers", [])
        versions: list[RecordVersion] = []
        text_index, text = -1, record.content
        for n, entry in enumerate(writers, start=1):
            if entry.get("text_changed", True) and text_index + 1 < len(texts):
                text_index += 1
                text = texts[text_index]
            last = n == len(writers)
            # An entry written before versions kept their attributes (issue 36) has none: the record's own.
            held = {k: entry[k] for k in ("attributes", "valid_from", "valid_to") if k in entry}
            versions.append(record.evolve(
                **({} if last else held),
                version=n, content=record.content if last else text, written_at=entry["at"],
                written_by=entry["by"], status=record.status if last else "superseded",
                invalidated_at=record.invalidated_at if last else writers[n]["at"],
                forgotten_by=record.forgotten_by if last else None,
            ))
        return versions or [record]

    def recall(self, memory: Memory, query: str | None, text: str | None, limit: int, include: str) -> ProviderRecall:
        degraded = ["text:not_supported"] if text else []
        if not query:
            return ProviderRecall([], degraded)
        found = self._client.search(query, filters={"user_id": memory.id}, top_k=limit, threshold=0.0)
        hits: list[tuple[RecordVersion, float, tuple[str, ...]]] = []
        for item in _results(found):
            version = self._version(memory, item)
            if version is not None and (include == "all" or version.status == "active"):
                hits.append((version, float(item.get("score") or 0.0), ("query",)))
        best = max((score for _, score, _ in hits), default=None)
        # As many as asked for: mem0 may hold more beyond them (threshold 0.0 answers all it holds, else).
        return ProviderRecall(hits, degraded, best, truncated=len(_results(found)) >= limit)

    # -- erase ---------------------------------------------------------------------------------------

    def erase(self, memory: Memory, records: Sequence[RecordVersion]) -> ProviderErase:
        erased: list[str] = []
        unreachable: list[dict[str, Any]] = []
        for record in records:
            mem0_id = mem0_id_of(record.id)
            if mem0_id is None or self._fetch(memory, mem0_id) is None:
                continue
            self._client.delete(mem0_id)
            erased.append(record.id)
            unreachable += self._history_left(record.id, mem0_id)
        if erased and self._settings.infers:
            unreachable += [
                {"record_id": rid, "where": "mem0 message log",
                 "reason": "mem0 keeps the recent raw messages it derived from per user, with no call to remove "
                           "them one by one",
                 "until": "ten later messages observed in this memory push it out (mem0 keeps its 10 latest)"}
                for rid in erased
            ]
        return ProviderErase(erased, unreachable)

    def _history_left(self, record_id: str, mem0_id: str) -> list[dict[str, Any]]:
        """Remove a deleted record's rows from mem0's history table where the adapter holds it (mem0 keeps
        every text there, and its API cannot remove them); else report them."""
        if self._history_db is not None:
            self._client.run("history cleanup", lambda: _delete_history_rows(str(self._history_db), mem0_id))
            return []
        return [{"record_id": record_id, "where": "mem0 history",
                 "reason": "mem0 keeps every text a record held in its history, and its API has no call to remove it",
                 "until": "unknown: mem0 names no end to its history"}]

    def drop_memory(self, memory: Memory) -> None:
        for item in self._every_item(memory):
            if self._version(memory, item) is None:
                continue
            self._client.delete(item["id"])
            self._history_left(record_id_of(item["id"]), str(item["id"]))

    # -- the mapping -------------------------------------------------------------------------------------

    def _meta(self, memory: Memory, record: RecordVersion) -> dict[str, Any]:
        return {
            "tenant": memory.tenant,
            "memory_id": memory.id,
            "type": record.type,
            "attributes": record.attributes,
            "valid_from": record.valid_from,
            "valid_to": record.valid_to,
            "references": list(record.references),
            "status": "active",
            "version": record.version,
            "written_at": record.written_at,
            "written_by": record.written_by,
            "writers": [_writer_entry(record, text_changed=True)],
        }

    def _stored_meta(self, memory: Memory, mem0_id: str) -> dict[str, Any]:
        item = self._client.get(mem0_id)
        return dict(((item or {}).get("metadata") or {}).get(META) or {})

    def _fetch(self, memory: Memory, mem0_id: str) -> RecordVersion | None:
        item = self._client.get(mem0_id)
        return self._version(memory, item) if item else None

    def _version(self, memory: Memory, item: dict[str, Any]) -> RecordVersion | None:
        """A mem0 memory as a record of `memory`, or None when it is not one: every record fetched is
        checked against the memory and the tenant, whatever mem0 was asked (§10.3)."""
        meta = (item.get("metadata") or {}).get(META) or {}
        if str(item.get("user_id")) != memory.id:
            return None
        if meta and (meta.get("tenant") != memory.tenant or meta.get("memory_id") != memory.id):
            return None
        record_id = record_id_of(item["id"])
        status = meta.get("status", "active")
        return RecordVersion(
            tenant=memory.tenant,
            memory_id=memory.id,
            id=record_id,
            chain_id=record_id,
            version=int(meta.get("version", 1)),
            type=str(meta.get("type", "fact")),
            content=str(item.get("memory", "")),
            attributes=dict(meta.get("attributes") or {}),
            status=status,
            supersedes=None,
            superseded_by=None,
            valid_from=meta.get("valid_from"),
            valid_to=meta.get("valid_to"),
            written_at=str(meta.get("written_at") or item.get("updated_at") or item.get("created_at") or ""),
            invalidated_at=meta.get("invalidated_at") if status == "forgotten" else None,
            written_by=dict(meta.get("written_by") or PROVIDER_WRITER),
            references=tuple(meta.get("references") or ()),
            forgotten_by=meta.get("forgotten_by") if status == "forgotten" else None,
        )


def _refuse_derived_elsewhere(memory: Memory, records: Sequence[RecordVersion]) -> None:
    """A `derived_from` reference to a record of another memory is refused (§12 memory_unsupported): the
    erase of that record (the native workflow, or another mem0 memory's) cannot reach this memory's
    records, so the copy would outlive it, neither erased nor reported. Within the memory, its erase
    follows the reference."""
    for record in records:
        for ref in record.references:
            if ref.get("rel") == "derived_from" and ref.get("memory_id") != memory.id:
                raise MemoryUnsupported(
                    f"memory {memory.id} is kept by provider 'mem0', whose records may be derived_from a record of "
                    "their own memory only: an erase elsewhere cannot reach mem0 to remove the copy (name it with "
                    "another rel, such as related)"
                )


def _tagged(metadata: dict[str, Any], tag: str | None, index: int) -> dict[str, Any]:
    return metadata if tag is None else {**metadata, WRITE_TAG: tag, WRITE_INDEX: index}


def _delete_history_rows(history_db: str, mem0_id: str) -> None:
    with sqlite3.connect(history_db) as db:  # on the adapter's thread, as mem0's own use of it is
        db.execute("DELETE FROM history WHERE memory_id = ?", (mem0_id,))


def _writer_entry(record: RecordVersion, *, text_changed: bool) -> dict[str, Any]:
    """One version's entry in the record's metadata: who wrote it and when, and what mem0's history does
    not keep of it (its attributes and valid time; its text is in mem0's history table)."""
    return {"by": record.written_by, "at": record.written_at, "text_changed": text_changed,
            "attributes": record.attributes, "valid_from": record.valid_from, "valid_to": record.valid_to}


def _results(answer: Any) -> list[dict[str, Any]]:
    if isinstance(answer, dict):
        return list(answer.get("results") or [])
    return list(answer or [])


# -- connecting ------------------------------------------------------------------------------------------


class PlatformCalls:
    """mem0's Platform client (`MemoryClient`) behind the calls the adapter makes of mem0 OSS's `Memory`: the
    Platform pages a listing (`page`, `page_size`) where OSS takes `top_k`, takes no threshold on search, and
    answers an add at once only when asked (`async_mode=False`: the adapter answers with what it wrote).
    Covered at its HTTP boundary by the tests, not against the hosted service (docs/decisions.md)."""

    PAGE = 100

    def __init__(self, client: Any) -> None:
        self._client = client

    def add(self, messages: Any, *, user_id: str, metadata: dict[str, Any], infer: bool) -> Any:
        return self._client.add(messages, user_id=user_id, metadata=metadata, infer=infer, async_mode=False)

    def get(self, memory_id: str) -> Any:
        try:
            return self._client.get(memory_id)
        except Exception as error:  # the Platform answers 404 for an id it does not hold
            if "not found" in str(error).lower() or getattr(error, "status_code", None) == 404:
                return None
            raise

    def get_all(self, *, filters: dict[str, Any], top_k: int) -> dict[str, Any]:
        found: list[dict[str, Any]] = []
        page = 1
        while len(found) < top_k:
            answer = self._client.get_all(filters=_platform_filters(filters), page=page, page_size=self.PAGE)
            found += list(answer.get("results") or [])
            if not answer.get("next"):
                break
            page += 1
        return {"results": found[:top_k]}

    def search(self, query: str, *, filters: dict[str, Any], top_k: int, threshold: float = 0.0) -> Any:
        return self._client.search(query, filters=filters, top_k=top_k)

    def update(self, memory_id: str, *, text: str | None = None, metadata: dict[str, Any] | None = None) -> Any:
        return self._client.update(memory_id, text=text, metadata=metadata)

    def delete(self, memory_id: str) -> Any:
        return self._client.delete(memory_id)

    def history(self, memory_id: str) -> Any:
        return self._client.history(memory_id)


def _platform_filters(filters: dict[str, Any]) -> dict[str, Any]:
    """OSS's flat filters (`user_id` and metadata keys) in the Platform's v2 syntax: the user alone as
    it is, metadata keys as `{"AND": [{"user_id": ...}, {"metadata": {...}}]}`."""
    metadata = {k: v for k, v in filters.items() if k != "user_id"}
    if not metadata:
        return filters
    return {"AND": [{"user_id": filters["user_id"]}, {"metadata": metadata}]}


def _no_telemetry() -> None:
    """mem0 reports usage to PostHog unless told not to, reading MEM0_TELEMETRY when first imported: set it
    before, and switch its flag off after, in case something imported mem0 earlier. Nothing the server
    does may reach a third party it was not connected to."""
    os.environ["MEM0_TELEMETRY"] = "False"
    from mem0.memory import telemetry

    telemetry.MEM0_TELEMETRY = False


def _offline(folder: str) -> None:
    """Before mem0 is first imported (it reads these then): no telemetry (PostHog would reach the
    network), its home under `folder`, and a placeholder key for the OpenAI client its default config
    builds and the adapter never calls without a model."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(Path(folder) / "mem0-home"))
    os.environ.setdefault("OPENAI_API_KEY", "not-used-without-a-model")
    logging.getLogger("mem0").setLevel(logging.ERROR)


def connect(settings: Mem0Settings, *, embedder: Any, dimensions: int, now: Callable[[], str],
            write_tag: Callable[[], str | None] = lambda: None) -> Mem0Provider:
    """The provider, connected as the operator configured it: mem0 OSS in this process with `embedder`
    (ours, so both sides of a memory embed alike), or the Platform's client. `write_tag` names the
    running request's keyed write (Mem0Provider)."""
    if settings.mode == "platform":
        _no_telemetry()
        from mem0 import MemoryClient

        client = MemoryClient(api_key=settings.api_key, host=settings.host) if settings.host else MemoryClient(
            api_key=settings.api_key)
        return Mem0Provider(PlatformCalls(client), settings, now=now, write_tag=write_tag)
    folder = settings.folder or tempfile.mkdtemp(prefix="uhp-mem0-")
    Path(folder).mkdir(parents=True, exist_ok=True)
    _offline(folder)
    _no_telemetry()
    from mem0 import Memory

    history_db = str(Path(folder) / "history.db")
    config: dict[str, Any] = {
        "vector_store": settings.vector_store or {
            "provider": "qdrant",
            "config": {"collection_name": "uhp", "embedding_model_dims": dimensions,
                       "path": str(Path(folder) / "qdrant"), "on_disk": True},
        },
        "history_db_path": history_db,
    }
    if settings.infers:
        config["llm"] = {"provider": "openai", "config": {
            "model": settings.derive_model, "openai_base_url": settings.derive_url,
            "api_key": settings.derive_api_key or "not-needed-by-a-local-server"}}
    client = Memory.from_config(config)
    client.embedding_model = _as_mem0_embedder(embedder)
    return Mem0Provider(client, settings, history_db=history_db, now=now, write_tag=write_tag)


def _as_mem0_embedder(embedder: Any) -> Any:
    """Our embedder (uhp_memories.search Embedder) behind mem0's custom-embedder interface."""
    from mem0.embeddings.base import EmbeddingBase

    class Ours(EmbeddingBase):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return list(embedder.embed([str(text)])[0])

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
            return [list(v) for v in embedder.embed([str(t) for t in texts])]

    return Ours()
