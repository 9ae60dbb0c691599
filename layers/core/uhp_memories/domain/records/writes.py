"""Writing records (§4, §5): remember, observe, revise, forget.

Nothing is overwritten: a revision appends a version with a new id and closes the one before it, in
one transaction; forget closes the current version and keeps its place in the chain. The versions are
built by records/lifecycle.py and committed, then indexed, by records/writer.py.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.errors import (
    MemoryInvalid,
    MemoryNotFound,
    MemoryUnsupported,
    StaleVersion,
    TreeChanged,
)
from uhp_memories.domain.files.model import PathConflict, check_path
from uhp_memories.domain.limits import (
    ATTRIBUTES_JSON_BYTES,
    CONTENT_BYTES,
    REFERENCES_MAX,
    TYPE_CHARS,
)
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller
from uhp_memories.domain.observing.model import DERIVED_FROM
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.providers.ports import RecordProvider
from uhp_memories.domain.records import lifecycle
from uhp_memories.domain.records.model import (
    CORE_TYPES,
    ID_PATTERN,
    NO_TERMS,
    OBSERVE_MAX,
    RECORD_FIELDS_BEYOND_STAMPS,
    TYPE_PATTERN,
    UNREADABLE_REFUSAL,
    RecordInput,
    RecordVersion,
    RecordView,
    WriteTerms,
)
from uhp_memories.domain.records.ports import FileAttachments, TypeCatalog
from uhp_memories.domain.records.reads import RecordReads
from uhp_memories.domain.records.writer import RecordWriter
from uhp_memories.domain.timefmt import format_ms
from uhp_memories.domain.types.model import TypedAttributes, check_stated_type


def withheld_from(access: AccessView, memory_id: str, sent: Collection[str]) -> frozenset[str]:
    """What a write's answer may not show its caller: THE rule for every write answer, whatever the door
    (REST, MCP, operations). Nothing for a reader of the memory; for a caller without read, every field
    beyond the server's stamps that it did not send itself. Presenters leave out what `withheld` names."""
    if "read" in access.privileges(memory_id):
        return frozenset()
    return RECORD_FIELDS_BEYOND_STAMPS - set(sent)



class RecordWrites:
    """Remember, observe, revise and forget: each write checked, built, committed and indexed."""

    def __init__(
        self,
        ports: Ports,
        reads: RecordReads,
        writer: RecordWriter,
        files: FileAttachments | None = None,
        types: TypeCatalog | None = None,
    ) -> None:
        self._ports = ports
        self._reads = reads
        self._writer = writer
        self._files = files
        self._types = types

    def remember(
        self, caller: Caller, memory_id: str, given: RecordInput, terms: WriteTerms = NO_TERMS
    ) -> RecordView:
        access = self._ports.access(caller)
        record = self._first_version(caller, memory_id, given, format_ms(self._ports.clock.now_ms()))
        # The text is embedded while the access read and the commit run (domain/recall/engine.py,
        # embed_ahead). Only a text known before the checks: a bounded core-type text, which is its
        # content; a refused write's embedding ends on its worker thread, unread.
        ahead = self._writer.embed_ahead([record]) if _text_known_early([given]) else None
        memory = access.require(memory_id, "write")
        self._check_input(given)
        check_stated_type(given.type)
        provider = self._provider(memory, [given])
        if provider is not None:  # another provider keeps this memory's records (§10)
            # An extension type is carried as written (§4.1), its attributes checked against the tenant's
            # registration when it has one; projections (§8) are the native provider's.
            checked = self._checked(record.tenant, record.type, record.attributes, record.content)
            kept = provider.remember(caller, memory, record.evolve(attributes=checked.attributes))
            self._ports.memories.count_records(caller.tenant, memory_id, added=1)
            return self._reads.view(access, kept)
        record = self._typed(record)
        record = record.evolve(origin=terms.origin)
        if _is_file(given.content):
            record = record.evolve(content=self._attach(caller, given.content, memory_id, record.chain_id))
        if ahead is None:  # a file's name, or an extension type's projection: known only now
            ahead = self._writer.embed_ahead([record])
        try:
            self._writer.first(record, terms.conditions, ahead=ahead)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        except PathConflict as refused:
            raise _as_seen(refused, "read" in access.privileges(memory_id)) from None
        self._release_upload(caller, record)
        return self._reads.view(access, record)

    def observe(self, caller: Caller, memory_id: str, episodes: list[RecordInput]) -> list[RecordView]:
        """Append raw episodes (§5.1). The native provider derives nothing (derivation: none) and
        keeps every episode as a record, so it answers at once with the records written."""
        access = self._ports.access(caller)
        written_at = format_ms(self._ports.clock.now_ms())
        records = [self._first_version(caller, memory_id, given, written_at) for given in episodes]
        # As in remember: embedded while the access read and the commit run, when known before the
        # checks. An episode is a core type, so a batch whose texts are not known here is one the
        # checks below refuse; whatever a write did not embed ahead, the writer embeds after the commit.
        early = len(episodes) <= OBSERVE_MAX and _text_known_early(episodes)
        ahead = self._writer.embed_ahead(records) if early else None
        memory = access.require(memory_id, "write")
        if not 1 <= len(episodes) <= OBSERVE_MAX:
            raise MemoryInvalid(f"observe takes 1 to {OBSERVE_MAX} episodes")
        for given in episodes:
            if given.type != "episode":
                raise MemoryInvalid("observe takes episodes; remember writes other types")
            self._check_input(given)
        provider = self._provider(memory, episodes)
        if provider is not None:
            kept = provider.observe(caller, memory, records)
            if provider.capabilities()["observe"]["keeps_episodes"]:
                self._ports.memories.count_records(caller.tenant, memory_id, added=len(kept))
            else:  # what it derived may have merged into, or replaced, records it held: counted anew
                self._ports.memories.count_records(caller.tenant, memory_id, exactly=provider.count(memory))
            return [self._reads.view(access, r) for r in kept]
        try:
            self._writer.many(records, ahead=ahead)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        return [self._reads.view(access, record) for record in records]

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
        current = self._reads.current_or_conflict(caller, memory_id, record_id, memory)
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
                content=merged.content, attributes=checked.attributes, valid_from=merged.valid_from,
                valid_to=merged.valid_to, references=merged.references,
                written_at=format_ms(self._ports.clock.now_ms()), written_by=caller.written_by,
            )
            kept = provider.revise(caller, memory, current, revised)
            return self._reads.view(access, kept, withheld=withheld_from(access, memory_id, stated))
        content = merged.content
        if "content" in changes and _is_file(content):
            # New bytes: a new version of the chain's object, the earlier bytes kept.
            content = self._attach(caller, content, memory_id, current.chain_id)
        now = format_ms(self._ports.clock.now_ms())
        closed, revision = lifecycle.revised(
            current,
            revision_id=self._ports.ids.new("hrec_"),
            written_at=now,
            written_by=caller.written_by,
            origin=terms.origin,
            content=content,
            attributes=checked.attributes,
            projection=checked.projection,
            valid_from=merged.valid_from,
            valid_to=merged.valid_to,
            references=merged.references,
            path=merged.path,
        )
        ahead = self._writer.embed_ahead([closed, revision])  # the revision's text, while it commits
        try:
            self._writer.revision(closed, revision, terms.conditions, ahead=ahead)
        except StaleVersion:
            raise self._reads.conflict(caller, memory_id, record_id) from None
        except PathConflict as refused:
            raise _as_seen(refused, reader) from None
        if revision.content is not current.content:
            self._release_upload(caller, revision)
        # The new version's writer and origin are the caller's own; the rest it sent, or may not see.
        return self._reads.view(access, revision, withheld=withheld_from(access, memory_id, stated))

    def forget(self, caller: Caller, memory_id: str, record_id: str, terms: WriteTerms = NO_TERMS) -> RecordView:
        access = self._ports.access(caller)
        memory = access.require(memory_id, "write")
        current = self._reads.current_or_conflict(caller, memory_id, record_id, memory)
        provider = self._ports.providers.of(memory)
        if provider is not None:
            gone = provider.forget(caller, memory, current)
            self._ports.memories.count_records(caller.tenant, memory_id, added=-1)
            return self._reads.view(access, gone, withheld=withheld_from(access, memory_id, ()))
        closed = lifecycle.forgotten(
            current, at=format_ms(self._ports.clock.now_ms()), written_by=caller.written_by, origin=terms.origin
        )
        try:
            self._writer.close(current, closed, terms.conditions)
        except StaleVersion:
            raise self._reads.conflict(caller, memory_id, record_id) from None
        except PathConflict as refused:
            raise _as_seen(refused, "read" in access.privileges(memory_id)) from None
        return self._reads.view(access, closed, withheld=withheld_from(access, memory_id, ()))

    def _provider(self, memory: Memory, given: Sequence[RecordInput]) -> RecordProvider | None:
        """The provider that keeps this memory's records when it is not this server's own, after refusing
        what that provider cannot keep: files (a path, file content), which only the native provider
        implements (memory_unsupported, §12). An extension type is not refused: §4.1 says a server MUST
        carry it unchanged, and every provider keeps a record's type as written."""
        provider = self._ports.providers.of(memory)
        if provider is None:
            return None
        if any(g.path is not None or _is_file(g.content) for g in given):
            self._ports.providers.require_native(memory, "files")
        return provider

    def _attach(self, caller: Caller, content: dict[str, Any], memory_id: str, chain_id: str) -> dict[str, Any]:
        """A file already held (carried into a revision unchanged) stays as it is; a new one is
        bound to the chain as a new object version."""
        assert self._files is not None
        reference = content["file"]
        if isinstance(reference, dict) and "version" in reference:
            raise MemoryInvalid('name a new file as {"file": {"id": "file_..."}}; versions are the server\'s')
        return self._files.attach(caller, reference, memory_id, chain_id)

    def _checked(self, tenant: str, type_name: str, attributes: dict[str, Any], content: Any) -> TypedAttributes:
        if self._types is None:
            return TypedAttributes(attributes, None)
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
        return lifecycle.first(
            tenant=caller.tenant,
            memory_id=memory_id,
            record_id=self._ports.ids.new("hrec_"),
            type=given.type,
            content=given.content,
            attributes=given.attributes,
            written_at=written_at,
            written_by=caller.written_by,
            valid_from=given.valid_from,
            valid_to=given.valid_to,
            references=given.references,
            path=given.path,
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
        _check_references(given.references)


def _check_references(references: Sequence[dict[str, str]]) -> None:
    if len(references) > REFERENCES_MAX:
        raise MemoryInvalid(f"a record has at most {REFERENCES_MAX} references")
    derived_from: set[str] = set()
    for ref in references:
        if not ID_PATTERN.match(ref.get("memory_id", "")) or not ID_PATTERN.match(ref.get("record_id", "")):
            raise MemoryInvalid("a reference names memory_id (hmem_...) and record_id (hrec_...)")
        if ref.get("rel") != DERIVED_FROM:
            continue  # any other reference may repeat: it is kept as sent, and indexes nothing
        # What a record is derived from is kept by record id alone (its reverse index: two derived_from one
        # record wrote one item twice, a 500), whichever memory is named beside it: once each.
        if ref["record_id"] in derived_from:
            raise MemoryInvalid(
                f"a record is derived from {ref['record_id']} twice; send each derived_from reference once"
            )
        derived_from.add(ref["record_id"])


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

