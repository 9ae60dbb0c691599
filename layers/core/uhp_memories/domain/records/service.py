"""Records (§4, §5): remember, get, list, revise, forget, history, snapshots, as_of.

Nothing is overwritten: a revision appends a version with a new id and closes the one before it, in
one transaction; forget closes the current version and keeps its place in the chain.
"""

from __future__ import annotations

import builtins
import json
import logging
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from uhp_memories.domain import cursors
from uhp_memories.domain.access.check import AccessView
from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import (
    AlreadyExists,
    MemoryConflict,
    MemoryInvalid,
    MemoryNotFound,
    MemoryUnsupported,
    RecordNotFound,
    StaleVersion,
    TreeChanged,
    WriteContended,
)
from uhp_memories.domain.files.paths import PathCondition, PathConflict, PathEntry, check_directory, check_path
from uhp_memories.domain.files.service import FileService
from uhp_memories.domain.filters import matches, parse_filter
from uhp_memories.domain.limits import (
    ATTRIBUTES_JSON_BYTES,
    CONTENT_BYTES,
    LIST_DEFAULT,
    LIST_MAX,
    MESSAGE_CHARS,
    REFERENCES_MAX,
    SNAPSHOT_NAME_CHARS,
    TYPE_CHARS,
)
from uhp_memories.domain.memories.service import MemoryService, MemorySummary
from uhp_memories.domain.models import CORE_TYPES, Caller, Checked, Memory, Page, RecordVersion, Snapshot
from uhp_memories.domain.providers.ports import RecordProvider
from uhp_memories.domain.timefmt import format_ms, parse_instant
from uhp_memories.domain.types.service import check_stated_type

logger = logging.getLogger(__name__)
TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_][a-z0-9_\-]*)*$")
ID_PATTERN = re.compile(r"^[a-z]+_[0-9a-f]{32}$")
INCLUDE_VALUES = ("active", "all")
# One transaction holds at most 100 items: the episodes and the memory's counter.
OBSERVE_MAX = 50
# Reading a file is two reads (its path item, then the record it names); a revision between them is
# read again.
PATH_READ_ATTEMPTS = 5


@dataclass(frozen=True)
class RecordView:
    """A record version as one reader sees it: references resolved with the reader's privileges.
    `withheld` names the fields the caller may not be shown (RECORD_FIELDS_BEYOND_STAMPS): a write
    answers a caller without read only what it sent and the server's stamps."""

    record: RecordVersion
    references: list[dict[str, Any]]
    withheld: frozenset[str] = frozenset()


# What a version holds beyond the server's stamps (ids, version, status, write times): a caller with
# write and without read sees of these only what it sent itself, so it can change a record without
# reading it through the answer.
RECORD_FIELDS_BEYOND_STAMPS = frozenset(
    {"type", "content", "attributes", "valid_from", "valid_to", "references", "path", "origin", "written_by"}
)
# What a refusal of a revision says to a caller without read, when the check looked at the record as
# revised: the fields it did not send are not told (a record's type, its valid time, its content).
UNREADABLE_REFUSAL = (
    "this revision is refused: the record as revised would not be valid, and what it holds beyond the "
    "fields you sent is shown only to a caller with read on the memory"
)


def withheld_from(access: AccessView, memory_id: str, sent: Collection[str]) -> frozenset[str]:
    """What a write's answer may not show its caller: THE rule for every write answer, whatever the door
    (REST, MCP, operations). Nothing for a reader of the memory; for a caller without read, every field
    beyond the server's stamps that it did not send itself. Presenters leave out what `withheld` names."""
    if "read" in access.privileges(memory_id):
        return frozenset()
    return RECORD_FIELDS_BEYOND_STAMPS - set(sent)


@dataclass(frozen=True)
class RecordInput:
    type: str
    content: Any
    attributes: dict[str, Any]
    valid_from: str | None = None
    valid_to: str | None = None
    references: tuple[dict[str, str], ...] = ()
    path: str | None = None  # a file of the memory (docs/file-memory.md)


@dataclass(frozen=True)
class WriteTerms:
    """What a write carries beyond its record: the read set it must still hold at commit, and who
    it is attributed to beyond the key (docs/file-memory.md)."""

    conditions: tuple[PathCondition, ...] = ()
    origin: dict[str, str] | None = None


NO_TERMS = WriteTerms()


class PathLookup(Protocol):
    """Which record holds a path now (uhp_memories.domain.files.tree.PathRepository)."""

    def at(self, tenant: str, memory_id: str, path: str) -> PathEntry | None:
        ...


class TypeCatalog(Protocol):
    """Extension types (uhp_memories.domain.types.service.TypeService): a version's attributes validated against
    its type, and its text projection."""

    def check(self, tenant: str, type_name: str, attributes: dict[str, Any], content: Any) -> Checked:
        ...


class VersionIndex(Protocol):
    """The recall index as writes see it (uhp_memories.search.RecallEngine)."""

    def embed_ahead(self, versions: Sequence[RecordVersion]) -> Any:
        """Start embedding these new versions' texts while the write commits; the handle goes to
        index_versions (`ahead`). Nothing is indexed before the commit."""
        ...

    def index_versions(self, versions: Sequence[RecordVersion], *, ahead: Any = None) -> None:
        ...


def embed_ahead(index: Callable[[], VersionIndex | None] | None, versions: Sequence[RecordVersion]) -> Any:
    """The embedding of a write's new versions, started before its commit so the two overlap (None
    without an index). A failure here is the indexing's, never the write's: it surfaces, and is
    logged, in index_after_commit."""
    engine = index() if index is not None else None
    if engine is None or not versions:
        return None
    try:
        return engine.embed_ahead(versions)
    except Exception as error:  # the write goes on; index_after_commit embeds again
        logger.warning("embedding ahead of commit failed", extra={"error_type": type(error).__name__})
        return None


def index_after_commit(
    index: Callable[[], VersionIndex | None] | None, versions: Sequence[RecordVersion], ahead: Any = None
) -> None:
    """Index what a write committed, so recall reads its own writes in the common case. DynamoDB
    holds the write already: an indexing failure is logged, never the write's failure (the stream
    indexer, or `uhp-memories reindex`, catches the index up). `ahead`: embed_ahead's handle."""
    engine = index() if index is not None else None
    if engine is None or not versions:
        return
    try:
        engine.index_versions(versions, ahead=ahead)
    except Exception as error:  # any failure here must not fail a committed write
        logger.warning("indexing after commit failed", extra={"error_type": type(error).__name__})


@dataclass(frozen=True)
class RecordPage(Page):
    """A page of a memory's records, with where a reader can go from the memory (§6.1), as recall
    names them."""

    parent: MemorySummary | None = None
    children: list[MemorySummary] = field(default_factory=list)


class RecordService:
    def __init__(
        self,
        ports: Ports,
        memories: MemoryService,
        files: FileService | None = None,
        index: Callable[[], VersionIndex | None] | None = None,
        paths: PathLookup | None = None,
        types: TypeCatalog | None = None,
    ) -> None:
        self._ports = ports
        self._memories = memories
        self._files = files
        self._index = index
        self._paths = paths
        self._types = types

    # -- writes ------------------------------------------------------------------------------

    def remember(
        self, caller: Caller, memory_id: str, given: RecordInput, terms: WriteTerms = NO_TERMS
    ) -> RecordView:
        access = self._ports.access(caller)
        record = self._first_version(caller, memory_id, given, format_ms(self._ports.clock.now_ms()))
        # The text is embedded while the access read and the commit run (search/engine.py,
        # embed_ahead). Only a text known before the checks: a bounded core-type text, which is its
        # content; a refused write's embedding ends on its worker thread, unread.
        ahead = embed_ahead(self._index, [record]) if _text_known_early([given]) else None
        memory = access.require(memory_id, "write")
        self._check_input(given)
        check_stated_type(given.type)
        provider = self._provider(memory, [given])
        if provider is not None:  # another provider keeps this memory's records (§10)
            return self._view(access, provider.remember(caller, memory, record))
        record = self._typed(record)
        record = record.evolve(origin=terms.origin)
        if _is_file(given.content):
            record = record.evolve(content=self._attach(caller, given.content, memory_id, record.chain_id))
        if ahead is None:  # a file's name, or an extension type's projection: known only now
            ahead = embed_ahead(self._index, [record])
        try:
            self._ports.records.append_first(record, terms.conditions)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        except PathConflict as refused:
            raise _as_seen(refused, "read" in access.privileges(memory_id)) from None
        self._release_upload(caller, record)
        index_after_commit(self._index, [record], ahead)
        return self._view(access, record)

    def observe(self, caller: Caller, memory_id: str, episodes: list[RecordInput]) -> list[RecordView]:
        """Append raw episodes (§5.1). The native provider derives nothing (derivation: none) and
        keeps every episode as a record, so it answers at once with the records written."""
        access = self._ports.access(caller)
        written_at = format_ms(self._ports.clock.now_ms())
        records = [self._first_version(caller, memory_id, given, written_at) for given in episodes]
        # As in remember: embedded while the access read and the commit run, when known before the
        # checks. An episode is a core type, so a batch whose texts are not known here is one the
        # checks below refuse; whatever a write did not embed ahead, index_after_commit embeds.
        early = len(episodes) <= OBSERVE_MAX and _text_known_early(episodes)
        ahead = embed_ahead(self._index, records) if early else None
        memory = access.require(memory_id, "write")
        if not 1 <= len(episodes) <= OBSERVE_MAX:
            raise MemoryInvalid(f"observe takes 1 to {OBSERVE_MAX} episodes")
        for given in episodes:
            if given.type != "episode":
                raise MemoryInvalid("observe takes episodes; remember writes other types")
            self._check_input(given)
        provider = self._provider(memory, episodes)
        if provider is not None:
            return [self._view(access, r) for r in provider.observe(caller, memory, records)]
        try:
            self._ports.records.append_many(records)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        index_after_commit(self._index, records, ahead)
        return [self._view(access, record) for record in records]

    def revise(
        self,
        caller: Caller,
        memory_id: str,
        record_id: str,
        changes: dict[str, Any],
        terms: WriteTerms = NO_TERMS,
        *,
        sent: Collection[str] | None = None,
    ) -> RecordView:
        """Append a new version. `changes` holds only the fields the caller sent; a new `path`
        moves the file. `sent`: the record fields the caller stated itself, when not the keys of
        `changes` (an operation states none: it sends its input, not fields)."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "write")
        if not changes:
            raise MemoryInvalid("a revision changes at least one of content, attributes, time, references or path")
        if "path" in changes and changes["path"] is None:
            raise MemoryInvalid("a file's path cannot be removed; forget the file instead")
        current = self._current_or_conflict(caller, memory_id, record_id, memory)
        reader = "read" in access.privileges(memory_id)
        try:
            if current.type == "episode":
                raise MemoryInvalid("episodes are append-only: remember a new episode instead of revising one")
            if "type" in changes and changes["type"] != current.type:
                raise MemoryInvalid("a record's type cannot change; remember a new record instead")
            merged = RecordInput(
                type=current.type,
                content=changes.get("content", current.content),
                attributes=changes.get("attributes", current.attributes),
                valid_from=changes.get("valid_from", current.valid_from),
                valid_to=changes.get("valid_to", current.valid_to),
                references=changes.get("references", current.references),
                path=changes.get("path", current.path),
            )
            self._check_input(merged)
            provider = self._provider(memory, [merged])
            checked = self._checked(caller.tenant, merged.type, merged.attributes, merged.content)
        except MemoryInvalid:
            if reader:
                raise
            raise MemoryInvalid(UNREADABLE_REFUSAL) from None
        stated = set(changes if sent is None else sent) | {"written_by", "origin"}
        if provider is not None:
            revised = current.evolve(
                content=merged.content, attributes=merged.attributes, valid_from=merged.valid_from,
                valid_to=merged.valid_to, references=merged.references,
                written_at=format_ms(self._ports.clock.now_ms()), written_by=caller.written_by,
            )
            kept = provider.revise(caller, memory, current, revised)
            return self._view(access, kept, withheld=withheld_from(access, memory_id, stated))
        content = merged.content
        if "content" in changes and _is_file(content):
            # New bytes: a new version of the chain's object, the earlier bytes kept.
            content = self._attach(caller, content, memory_id, current.chain_id)
        now = format_ms(self._ports.clock.now_ms())
        revision = current.evolve(
            id=self._ports.ids.new("hrec_"),
            version=current.version + 1,
            content=content,
            attributes=checked.attributes,
            projection=checked.projection,
            valid_from=merged.valid_from,
            valid_to=merged.valid_to,
            references=merged.references,
            supersedes=current.id,
            written_at=now,
            written_by=caller.written_by,
            path=merged.path,
            origin=terms.origin,
        )
        closed = current.evolve(status="superseded", superseded_by=revision.id, invalidated_at=now)
        ahead = embed_ahead(self._index, [closed, revision])  # the revision's text, while it commits
        try:
            self._ports.records.append_revision(closed, revision, terms.conditions)
        except StaleVersion:
            raise self._conflict(caller, memory_id, record_id) from None
        except PathConflict as refused:
            raise _as_seen(refused, reader) from None
        if revision.content is not current.content:
            self._release_upload(caller, revision)
        index_after_commit(self._index, [closed, revision], ahead)
        # The new version's writer and origin are the caller's own; the rest it sent, or may not see.
        return self._view(access, revision, withheld=withheld_from(access, memory_id, stated))

    def forget(self, caller: Caller, memory_id: str, record_id: str, terms: WriteTerms = NO_TERMS) -> RecordView:
        access = self._ports.access(caller)
        memory = access.require(memory_id, "write")
        current = self._current_or_conflict(caller, memory_id, record_id, memory)
        provider = self._ports.providers.of(memory)
        if provider is not None:
            gone = provider.forget(caller, memory, current)
            return self._view(access, gone, withheld=withheld_from(access, memory_id, ()))
        closed = current.evolve(
            status="forgotten",
            invalidated_at=format_ms(self._ports.clock.now_ms()),
            forgotten_by={"written_by": caller.written_by, "origin": terms.origin},
        )
        try:
            self._ports.records.close(current, closed, terms.conditions)
        except StaleVersion:
            raise self._conflict(caller, memory_id, record_id) from None
        except PathConflict as refused:
            raise _as_seen(refused, "read" in access.privileges(memory_id)) from None
        index_after_commit(self._index, [closed])
        return self._view(access, closed, withheld=withheld_from(access, memory_id, ()))

    def _provider(self, memory: Memory, given: Sequence[RecordInput]) -> RecordProvider | None:
        """The provider that keeps this memory's records when it is not this server's own, after refusing
        what that provider cannot keep: files (a path, file content) and extension types (§8), which
        only the native provider implements (memory_unsupported, §12)."""
        provider = self._ports.providers.of(memory)
        if provider is None:
            return None
        if any(g.path is not None or _is_file(g.content) for g in given):
            self._ports.providers.require_native(memory, "files")
        if any(g.type not in CORE_TYPES for g in given):
            self._ports.providers.require_native(memory, "extension types (§8)")
        return provider

    def _attach(self, caller: Caller, content: dict[str, Any], memory_id: str, chain_id: str) -> dict[str, Any]:
        """A file already held (carried into a revision unchanged) stays as it is; a new one is
        bound to the chain as a new object version."""
        assert self._files is not None
        reference = content["file"]
        if isinstance(reference, dict) and "version" in reference:
            raise MemoryInvalid('name a new file as {"file": {"id": "file_..."}}; versions are the server\'s')
        return self._files.attach(caller, reference, memory_id, chain_id)

    def _checked(self, tenant: str, type_name: str, attributes: dict[str, Any], content: Any) -> Checked:
        if self._types is None:
            return Checked(attributes, None)
        return self._types.check(tenant, type_name, attributes, content)

    def _typed(self, record: RecordVersion) -> RecordVersion:
        """A first version as its type has it: attributes validated (and times in one form), projected."""
        checked = self._checked(record.tenant, record.type, record.attributes, record.content)
        return record.evolve(attributes=checked.attributes, projection=checked.projection)

    def _release_upload(self, caller: Caller, record: RecordVersion) -> None:
        """Once a record holds a file's bytes, the upload they came from goes: the bytes then live
        only under the record, where its memory's access, erase and delete reach them."""
        if self._files is not None and _is_file(record.content):
            self._files.release_upload(caller, record.content["file"]["id"], record.memory_id, record.id)

    def _first_version(self, caller: Caller, memory_id: str, given: RecordInput, written_at: str) -> RecordVersion:
        record_id = self._ports.ids.new("hrec_")
        return RecordVersion(
            tenant=caller.tenant,
            memory_id=memory_id,
            id=record_id,
            chain_id=record_id,
            version=1,
            type=given.type,
            content=given.content,
            attributes=given.attributes,
            status="active",
            supersedes=None,
            superseded_by=None,
            valid_from=given.valid_from,
            valid_to=given.valid_to,
            written_at=written_at,
            invalidated_at=None,
            written_by=caller.written_by,
            references=given.references,
            path=given.path,
        )

    # -- reads -------------------------------------------------------------------------------

    def get(
        self, caller: Caller, memory_id: str, record_id: str, as_of: str | None = None, include: str = "active"
    ) -> RecordView:
        """The version this id names, with its status. Naming one version's id asks for that
        version, so a superseded version of a live record answers as such, and every id a history
        names stays readable. A forgotten record leaves this read as it leaves list and recall
        (§5.2: "it leaves every read that does not ask for history"): a version of a chain whose
        current version is forgotten is not found unless `include=all` asks for history.

        With as_of, the memory as it stood then: the version with its status at that instant, or
        not found if it was written later (or forgotten by then, unless include=all). Never another
        version of its chain, which would answer under an id the caller did not ask for."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        if include not in INCLUDE_VALUES:
            raise MemoryInvalid(f"include must be one of {list(INCLUDE_VALUES)}")
        record = self._find(caller, memory_id, record_id, memory)
        if as_of is not None:
            self._ports.providers.require_native(memory, "as_of (reading a memory as it stood)")
            instant = self.resolve_as_of(caller, memory_id, as_of)
            if record.written_at > instant:
                raise RecordNotFound(record_id)
            record = record.as_of(instant)
            if include == "active" and record.status == "forgotten":
                raise RecordNotFound(record_id)
        elif include == "active" and self._chain_forgotten(caller, record):
            raise RecordNotFound(record_id)
        return self._view(access, record)

    def _chain_forgotten(self, caller: Caller, record: RecordVersion) -> bool:
        if record.is_current:  # every version another provider answers is its record's current one
            return record.status == "forgotten"
        return self._ports.records.chain(caller.tenant, record.chain_id)[-1].status == "forgotten"

    def list(
        self,
        caller: Caller,
        memory_id: str,
        *,
        types: list[str] | None = None,
        filters: Any = None,
        include: str = "active",
        as_of: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        path: str | None = None,
        under: str | None = None,
    ) -> RecordPage:
        """A page of the memory's records, newest first; `path` keeps the file at that path, `under`
        the files under a directory."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        if path is not None:
            check_path(path)
        if under is not None:
            check_directory(under)
        provider = self._ports.providers.of(memory)
        if provider is not None and (path is not None or under is not None):
            self._ports.providers.require_native(memory, "files (path, under)")
        if provider is not None and as_of is not None:
            self._ports.providers.require_native(memory, "as_of (reading a memory as it stood)")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        if include not in INCLUDE_VALUES:
            raise MemoryInvalid(f"include must be one of {list(INCLUDE_VALUES)}")
        flt = parse_filter(filters)
        wanted_types = set(types or [])
        instant = self.resolve_as_of(caller, memory_id, as_of) if as_of is not None else None
        kind = f"records:{include}:{instant or ''}"
        after = cursors.decode(kind, cursor, str, over=memory_id)
        candidates = (
            provider.scan(memory, include, after) if provider is not None
            else self._candidates(caller, memory_id, include, instant, after)
        )
        if path is not None and instant is None and include == "active" and self._paths is not None:
            candidates = self._at_path(caller, memory_id, path)

        page: list[RecordVersion] = []
        next_position: str | None = None
        last_position: str | None = None
        for position, version in candidates:
            if wanted_types and version.type not in wanted_types:
                continue
            if not matches(flt, version):
                continue
            if path is not None and version.path != path:
                continue
            if under is not None and (version.path is None or not version.path.startswith(under)):
                continue
            if len(page) == size:
                next_position = last_position
                break
            page.append(version)
            last_position = position
        next_cursor = cursors.encode(kind, next_position, over=memory_id) if next_position is not None else None
        parent, children = self._memories.neighbours(access, memory)
        return RecordPage([self._view(access, v) for v in page], next_cursor, parent, children)

    def history(
        self, caller: Caller, memory_id: str, record_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page:
        """Every version of the record, oldest first, each with its writer and time."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        record = self._find(caller, memory_id, record_id, memory)
        provider = self._ports.providers.of(memory)
        chain = (
            provider.history(memory, record) if provider is not None
            else [v for v in self._ports.records.chain(caller.tenant, record.chain_id) if v.memory_id == memory_id]
        )
        after = cursors.decode("history", cursor, int, over=f"{memory_id}/{record.chain_id}")
        if after is not None:
            chain = [v for v in chain if v.version > after]
        page = chain[:size]
        over = f"{memory_id}/{record.chain_id}"
        next_cursor = cursors.encode("history", page[-1].version, over=over) if len(chain) > size else None
        return Page([self._view(access, v) for v in page], next_cursor)

    # -- snapshots ---------------------------------------------------------------------------

    def create_snapshot(self, caller: Caller, memory_id: str, name: str, message: str = "") -> Snapshot:
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "write"), "snapshots")
        if not name or len(name) > SNAPSHOT_NAME_CHARS or _looks_like_time(name):
            raise MemoryInvalid(
                f"snapshot name must be 1 to {SNAPSHOT_NAME_CHARS} characters and must not read as a time"
            )
        if len(message) > MESSAGE_CHARS:
            raise MemoryInvalid(f"message is at most {MESSAGE_CHARS} characters")
        snapshot = Snapshot(
            tenant=caller.tenant,
            memory_id=memory_id,
            id=self._ports.ids.new("hsnp_"),
            name=name,
            message=message,
            time=format_ms(self._ports.clock.now_ms()),
            created_by=caller.principal,
        )
        try:
            self._ports.records.put_snapshot(snapshot)
        except AlreadyExists:
            raise MemoryConflict(f"this memory already has a snapshot named '{name}'") from None
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        return snapshot

    def list_snapshots(
        self, caller: Caller, memory_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page:
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "read"), "snapshots")
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        found = sorted(self._ports.records.list_snapshots(caller.tenant, memory_id), key=lambda s: (s.time, s.id))
        after = cursors.decode("snapshots", cursor, (str, str), over=memory_id)
        if after is not None:
            found = [s for s in found if [s.time, s.id] > after]
        page = found[:size]
        next_cursor = (
            cursors.encode("snapshots", [page[-1].time, page[-1].id], over=memory_id) if len(found) > size else None
        )
        return Page(page, next_cursor)

    def resolve_as_of(self, caller: Caller, memory_id: str, as_of: str) -> str:
        """An RFC 3339 time, or the name of one of this memory's snapshots, as a canonical instant."""
        if _looks_like_time(as_of):
            return parse_instant(as_of, "as_of")
        snapshot = self._ports.records.get_snapshot(caller.tenant, memory_id, as_of)
        if snapshot is None:
            raise MemoryInvalid(f"as_of must be an RFC 3339 time or a snapshot of this memory; no snapshot '{as_of}'")
        return snapshot.time

    # -- helpers -----------------------------------------------------------------------------

    def _candidates(
        self, caller: Caller, memory_id: str, include: str, instant: str | None, after: str | None
    ) -> Iterator[tuple[str, RecordVersion]]:
        records = self._ports.records
        if instant is None and include == "active":
            yield from records.scan_active(caller.tenant, memory_id, after)
            return
        for position, version in records.scan_versions(caller.tenant, memory_id, after, instant):
            if instant is not None:
                if include == "active" and not version.held_at(instant):
                    continue
                version = version.as_of(instant)
            yield position, version

    def _at_path(self, caller: Caller, memory_id: str, path: str) -> Iterator[tuple[str, RecordVersion]]:
        """The current file at a path, read by its path item rather than by scanning the memory."""
        assert self._paths is not None
        for _ in range(PATH_READ_ATTEMPTS):
            entry = self._paths.at(caller.tenant, memory_id, path)
            if entry is None:
                return
            record = self._ports.records.get(caller.tenant, memory_id, entry.record_id)
            if record is not None and record.is_current and record.status == "active":
                yield record.written_at + "#" + record.id, record
                return
            # A revision committed between the two reads: the path item names its successor now.
        raise WriteContended(f"the file at {path} kept changing while it was read; read it again")

    def _find(self, caller: Caller, memory_id: str, record_id: str, memory: Memory | None = None) -> RecordVersion:
        """The version this id names in this memory, from the provider that keeps it (`memory`: the
        memory as the access check read it; None: the native store's)."""
        record = None
        provider = self._ports.providers.of(memory) if memory is not None else None
        if ID_PATTERN.match(record_id):
            record = (provider.get(memory, record_id) if provider is not None and memory is not None
                      else self._ports.records.get(caller.tenant, memory_id, record_id))
        if record is None:
            raise RecordNotFound(record_id)
        return record

    def _current_or_conflict(
        self, caller: Caller, memory_id: str, record_id: str, memory: Memory | None = None
    ) -> RecordVersion:
        record = self._find(caller, memory_id, record_id, memory)
        if not record.is_current or record.status != "active":
            raise self._conflict(caller, memory_id, record_id, memory)
        return record

    def _conflict(
        self, caller: Caller, memory_id: str, record_id: str, memory: Memory | None = None
    ) -> MemoryConflict:
        record = self._find(caller, memory_id, record_id, memory)
        if "read" not in self._ports.access(caller).privileges(memory_id):
            # The current version's id is what a reader would fetch next; a caller that may not
            # read the memory is told only that this version can no longer change.
            return MemoryConflict(f"record {record_id} is not the current version; it can no longer change")
        provider = self._ports.providers.of(memory) if memory is not None else None
        latest = record if provider is not None else self._ports.records.chain(caller.tenant, record.chain_id)[-1]
        if latest.status == "forgotten":
            return MemoryConflict(
                f"record {record_id} was forgotten; it can no longer change", current_record_id=latest.id
            )
        return MemoryConflict(
            f"record {record_id} is not the current version; revise {latest.id} instead",
            current_record_id=latest.id,
        )

    def _check_input(self, given: RecordInput) -> None:
        if not TYPE_PATTERN.match(given.type) or len(given.type) > TYPE_CHARS:
            raise MemoryInvalid(
                "type must be a core type (episode, fact, note, procedure, link) or an extension name "
                "such as x.calendar.event"
            )
        if _is_file(given.content):
            if self._files is None:
                raise MemoryUnsupported("file content is not supported by this server")
        elif isinstance(given.content, dict):
            raise MemoryInvalid("content is text, or a file reference {\"file\": {\"id\": ...}}")
        elif not isinstance(given.content, str):
            raise MemoryInvalid("content is text")
        elif not _is_unicode(given.content):
            raise MemoryInvalid("content is not valid Unicode text (it holds a lone surrogate)")
        elif len(given.content.encode()) > CONTENT_BYTES:
            raise MemoryInvalid(f"content is at most {CONTENT_BYTES} bytes of UTF-8 text")
        # Measured as stored: compact JSON in UTF-8.
        attributes_json = json.dumps(given.attributes, separators=(",", ":"), ensure_ascii=False)
        if len(attributes_json.encode()) > ATTRIBUTES_JSON_BYTES:
            raise MemoryInvalid(f"attributes are at most {ATTRIBUTES_JSON_BYTES} bytes of JSON")
        if given.valid_from and given.valid_to and given.valid_to < given.valid_from:
            raise MemoryInvalid("time.valid_to is before time.valid_from")
        if given.path is not None:
            _check_file(given)
        if len(given.references) > REFERENCES_MAX:
            raise MemoryInvalid(f"a record has at most {REFERENCES_MAX} references")
        for ref in given.references:
            if not ID_PATTERN.match(ref.get("memory_id", "")) or not ID_PATTERN.match(ref.get("record_id", "")):
                raise MemoryInvalid("a reference names memory_id (hmem_...) and record_id (hrec_...)")

    def find_view(self, caller: Caller, memory_id: str, record_id: str) -> RecordView | None:
        """A version of this memory as the caller sees it (read needed), or None when it is gone."""
        access = self._ports.access(caller)
        access.require(memory_id, "read")
        record = self._ports.records.get(caller.tenant, memory_id, record_id)
        return self._view(access, record) if record is not None else None

    def view(self, access: AccessView, record: RecordVersion) -> RecordView:
        """A version as this reader sees it (references resolved with its privileges)."""
        return self._view(access, record)

    def views(self, caller: Caller, memory_id: str, versions: Sequence[RecordVersion]) -> builtins.list[RecordView]:
        """Versions of a memory as a reader of it sees them (read needed)."""
        access = self._ports.access(caller)
        access.require(memory_id, "read")
        return [self._view(access, v) for v in versions]

    def _view(self, access: AccessView, record: RecordVersion, withheld: frozenset[str] = frozenset()) -> RecordView:
        references = [] if "references" in withheld else [self._resolve(access, ref) for ref in record.references]
        return RecordView(record, references, withheld)

    def _resolve(self, access: AccessView, ref: dict[str, str]) -> dict[str, Any]:
        """A reference as this reader may see it: followable only with read on the target memory,
        and otherwise indistinguishable from a reference to nothing (§4.2, §13)."""
        memory_id, record_id = ref["memory_id"], ref["record_id"]
        if "read" in access.privileges(memory_id):
            target = self._ports.records.get(access.caller.tenant, memory_id, record_id)
            if target is not None:
                return {"rel": ref.get("rel", "related"), "memory_id": memory_id, "record_id": record_id,
                        "available": True}
        return {"memory_id": memory_id, "record_id": record_id, "available": False}


def _as_seen(refused: PathConflict, reader: bool) -> PathConflict:
    """A file write's refusal as its caller may see it: to a caller without read, which record holds a
    path is not told (it could fetch nothing with it, and learns what the memory holds)."""
    return refused if reader else refused.unnamed()


def _check_file(given: RecordInput) -> None:
    """What a record with a path must be: text, and not an episode (which can never move)."""
    check_path(given.path)
    if not isinstance(given.content, str):
        raise MemoryInvalid("a file (a record with a path) holds text content")
    if given.type == "episode":
        raise MemoryInvalid("an episode cannot be a file: episodes are append-only")


def _text_known_early(given: Sequence[RecordInput]) -> bool:
    """Whether these inputs' search texts are known before their checks: core-type text content
    (a core type projects nothing, so its text is its content) of a bounded length, which the
    checks will accept or refuse; either way nothing is indexed before the commit."""
    return all(
        g.type in CORE_TYPES and isinstance(g.content, str) and len(g.content) <= CONTENT_BYTES for g in given
    )


def _is_file(content: Any) -> bool:
    return isinstance(content, dict) and set(content) == {"file"}


def _is_unicode(text: str) -> bool:
    """Whether `text` can be stored as UTF-8: JSON may spell a lone surrogate ("\\ud800"), UTF-8 cannot."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _looks_like_time(value: str) -> bool:
    return bool(re.match(r"^\d{4}-\d{2}-\d{2}", value))
