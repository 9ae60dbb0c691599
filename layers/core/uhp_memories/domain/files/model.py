"""File memory (docs/file-memory.md): a record with a `path` is a file of its memory. The rules a
path obeys, the index line of a file, the read set a write carries, and the change journal's cursor,
each in one place.

The path rules and the index line are a13n-harness's (`validate_path`, `describe` in
a13n_harness/providers/memory/files.py), restated here because the server does not import the
harness; tests/unit/test_paths_agree_with_harness.py checks that both agree."""

from __future__ import annotations

import base64
import binascii
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from uhp_memories.domain.errors import DomainError, MemoryConflict, MemoryInvalid

PATH_BYTES = 256
DESCRIPTION_CHARS = 200
FRONTMATTER_BYTES = 2048
# A harness tracks up to 2,048 files a conversation has seen and sends them all with each write.
CONDITIONS_MAX = 4096
ORIGIN_FIELDS = ("run_id", "principal_id", "tool_call_id")
ORIGIN_CHARS = 256
# How long the change journal keeps an entry; a cursor older than what it still holds answers full_resync.
JOURNAL_RETENTION_SECONDS = 30 * 24 * 3600
CHANGES_MAX = 1000
# The epoch of a memory's journal until its files are first erased; each erase starts a new one.
FIRST_EPOCH = "0"


@dataclass(frozen=True)
class PathCondition:
    """One entry of a write's read set: the current record at `path` is `record_id` (None: none)."""

    path: str
    record_id: str | None


@dataclass(frozen=True)
class PathEntry:
    """A current file: the path item kept beside its record."""

    path: str
    record_id: str
    chain_id: str
    bytes: int
    description: str | None
    written_at: str
    written_by: dict[str, str]


@dataclass(frozen=True)
class PathChange:
    """One journal entry: after change `seq`, `path` holds `record_id` (None: nothing)."""

    seq: int
    path: str
    record_id: str | None


@dataclass(frozen=True)
class JournalHead:
    epoch: str
    seq: int


@dataclass(frozen=True)
class Conflict:
    """Why a file write was refused: a condition that no longer holds, or a path another record holds."""

    path: str
    reason: str  # condition | path_taken
    current_record_id: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "reason": self.reason, "current_record_id": self.current_record_id}


class PathConflict(MemoryConflict):
    """A file write whose path or read set no longer holds; nothing was written. Raised by the
    record repository inside the write's transaction, and answered as it is (409 with `conflicts`)."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(
            "the write was refused: " + "; ".join(_said(c) for c in conflicts),
            conflicts=[c.as_dict() for c in conflicts],
        )
        self.conflicts = conflicts

    def unnamed(self) -> PathConflict:
        """The same refusal without the ids of the records that hold the paths."""
        return PathConflict([Conflict(c.path, c.reason, None) for c in self.conflicts])


def _said(conflict: Conflict) -> str:
    holder = conflict.current_record_id or "no record"
    if conflict.reason == "path_taken":
        return f"{conflict.path} is held by {holder}"
    return f"{conflict.path} is now held by {holder}, not as the write's conditions say"


def check_path(path: Any, field: str = "path") -> str:
    """A file path as the harness writes one, or memory_invalid. Never normalised here: a path that
    is not already NFC is refused, so one file is never reachable under two spellings."""
    if not isinstance(path, str):
        raise MemoryInvalid(f"{field} is a string")
    if unicodedata.normalize("NFC", path) != path:
        raise MemoryInvalid(f"{field} must be NFC-normalised Unicode")
    if not path or path.startswith("/") or path.endswith("/"):
        raise MemoryInvalid(f"{field} names a file relative to the memory root (no leading or trailing '/')")
    _check_segments(path, field)
    return path


def check_directory(directory: Any, field: str = "under") -> str:
    """A directory: "" for the root, else a relative path ending in "/"."""
    if not isinstance(directory, str):
        raise MemoryInvalid(f"{field} is a string")
    if directory == "":
        return directory
    if unicodedata.normalize("NFC", directory) != directory:
        raise MemoryInvalid(f"{field} must be NFC-normalised Unicode")
    if directory.startswith("/") or not directory.endswith("/"):
        raise MemoryInvalid(f'{field} is "" or a relative path ending in "/"')
    _check_segments(directory[:-1], field)
    return directory


def _check_segments(path: str, field: str) -> None:
    if len(path.encode()) > PATH_BYTES:
        raise MemoryInvalid(f"{field} has at most {PATH_BYTES} bytes of UTF-8")
    if any(unicodedata.category(char) == "Cc" or char == "\\" for char in path):
        raise MemoryInvalid(f"{field} has no control characters or backslashes")
    # Format characters (Unicode Cf: zero-width spaces and joiners U+200B..U+200D, the bidi marks and
    # controls U+200E/F, U+202A..U+202E, U+2066..U+2069, the BOM U+FEFF, the soft hyphen...) show
    # nothing or reorder what is shown: `a\u200b.md` reads as `a.md`, and a bidi override makes
    # `txt.exe` read as `exe.txt`. A listing would show two files under one name. Refused, stricter
    # than the harness, which takes them (docs/decisions.md, "Hostile input").
    if any(unicodedata.category(char) == "Cf" for char in path):
        raise MemoryInvalid(f"{field} has no invisible or bidirectional format characters (such as U+200B or U+202E)")
    if any(segment in ("", ".", "..") for segment in path.split("/")):
        raise MemoryInvalid(f'{field} has no empty, "." or ".." segments')


def check_conditions(raw: Any) -> tuple[PathCondition, ...]:
    """A write's read set as the API sends it: [{"path", "record_id": "hrec_..." | null}]."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MemoryInvalid('conditions is a list of {"path", "record_id"}')
    if len(raw) > CONDITIONS_MAX:
        raise MemoryInvalid(f"a write carries at most {CONDITIONS_MAX} conditions")
    found: dict[PathCondition, None] = {}
    for entry in raw:
        if not isinstance(entry, dict) or set(entry) != {"path", "record_id"}:
            raise MemoryInvalid('a condition is {"path": "...", "record_id": "hrec_..." or null}')
        record_id = entry["record_id"]
        if record_id is not None and not isinstance(record_id, str):
            raise MemoryInvalid("a condition's record_id is a string or null")
        # Two different record ids for one path cannot both hold: the write is refused as a conflict
        # (409, each failing one listed), as any other condition that does not hold.
        found[PathCondition(check_path(entry["path"], "a condition's path"), record_id)] = None
    return tuple(found)


def check_origin(raw: Any) -> dict[str, str] | None:
    """Who a change is attributed to, beyond the key: {run_id, principal_id, tool_call_id}."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not set(raw) <= set(ORIGIN_FIELDS):
        raise MemoryInvalid(f"origin is an object with at most {', '.join(ORIGIN_FIELDS)}")
    origin: dict[str, str] = {}
    for name, value in raw.items():
        if value is None:
            continue
        if not isinstance(value, str) or not 1 <= len(value) <= ORIGIN_CHARS:
            raise MemoryInvalid(f"origin.{name} is a string of 1 to {ORIGIN_CHARS} characters")
        origin[name] = value
    return origin or None


def describe(text: str) -> str | None:
    """A file's index line: its frontmatter `description`, else its first non-empty line, cut to
    200 characters. Text the harness would refuse to describe (broken frontmatter) has none."""
    body = text
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end < 0 or len(text[: end + 5].encode()) > FRONTMATTER_BYTES:
            return None
        described = _frontmatter_description(text[4:end])
        if described is not _NONE_GIVEN:
            return described
        body = text[end + 5 :]
    line = next((line.strip() for line in body.splitlines() if line.strip()), None)
    return line[:DESCRIPTION_CHARS] if line else None


_NONE_GIVEN: Any = object()


def _frontmatter_description(source: str) -> Any:
    import yaml  # only files with frontmatter pay for the import

    try:
        value = yaml.safe_load(source)
    except (yaml.YAMLError, ValueError, LookupError, AttributeError, TypeError, RecursionError):
        # PyYAML raises more than YAMLError on some input (an impossible date, a bad !!bool tag,
        # deep nesting): text it cannot read has no description, and the write goes through.
        return None
    if value is None:
        return _NONE_GIVEN
    if not isinstance(value, dict):
        return None
    description = value.get("description")
    if description is None:
        return _NONE_GIVEN
    if not isinstance(description, str) or "\n" in description.strip() or not description.strip():
        return None
    if len(description.strip()) > DESCRIPTION_CHARS:
        return None
    return description.strip()


# -- the change journal's cursor ----------------------------------------------------------------


@dataclass(frozen=True)
class JournalCursor:
    memory_id: str
    epoch: str
    seq: int
    at_ms: int  # when it was given: a cursor older than the journal's retention cannot be answered


def encode_cursor(cursor: JournalCursor) -> str:
    raw = json.dumps([cursor.memory_id, cursor.epoch, cursor.seq, cursor.at_ms], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(memory_id: str, text: str) -> JournalCursor:
    """A cursor this memory's journal gave, or memory_invalid (another memory's, or not a cursor)."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        owner, epoch, seq, at_ms = raw
    except (ValueError, TypeError, binascii.Error):
        raise MemoryInvalid("cursor is not a cursor this memory's changes gave") from None
    if owner != memory_id or not isinstance(epoch, str) or type(seq) is not int or type(at_ms) is not int:
        raise MemoryInvalid("cursor is not a cursor this memory's changes gave")
    return JournalCursor(owner, epoch, seq, at_ms)


INLINE_MAX_BYTES = 4 * 1024 * 1024  # a Lambda request carries at most 6 MB, base64 included


FILE_MAX_BYTES = 5 * 1024 * 1024 * 1024  # one S3 PUT


NAME_CHARS = 255


def check_name(name: str) -> str:
    """A file's name as uploaded, or memory_invalid. Free text (quotes, accents, any script), but no
    slash and no control character (Unicode Cc: C0, DEL and C1): a CR/LF in a name came back to its
    readers as a download header of its own, and no name a person gives holds one."""
    if not name or len(name) > NAME_CHARS or "/" in name or "\\" in name:
        raise MemoryInvalid(f"a file name is 1 to {NAME_CHARS} characters without slashes")
    if any(unicodedata.category(char) == "Cc" for char in name):
        raise MemoryInvalid("a file name has no control character (such as CR, LF, tab or NUL)")
    return name


def content_disposition(name: str) -> str:
    """The Content-Disposition a download of `name` is sent with, the one place it is spelled (the
    inline answer and the presigned S3 address alike): RFC 6266's `attachment` with an ASCII
    `filename` (accents dropped; a quote, backslash, percent sign, control or other non-ASCII
    character replaced by `_`) and RFC 5987's `filename*`, the name itself, UTF-8 and percent-encoded.
    A reader that knows `filename*` takes the name exactly; the header is ASCII whatever the name."""
    fallback = "".join(
        char if " " <= char <= "~" and char not in '"\\%' else "_"
        for char in unicodedata.normalize("NFKD", name)
        if not unicodedata.combining(char)
    )
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


FILE_ID = re.compile(r"^file_[0-9a-f]{32}$")


MEDIA_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")


UPLOAD_SECONDS = 3600


DOWNLOAD_SECONDS = 300


class FileNotFound(DomainError):
    code = "file_not_found"

    def __init__(self, file_id: str) -> None:
        super().__init__(f"file {file_id} not found")


@dataclass(frozen=True)
class StoredFile:
    tenant: str
    id: str
    name: str
    media_type: str
    bytes: int
    status: str  # pending (waiting for its presigned upload) | uploaded | attached (a record holds it)
    created_by: str
    created_at: int
    # The record that holds the file once attached: its memory decides who reads the metadata.
    memory_id: str | None = None
    record_id: str | None = None


@dataclass(frozen=True)
class Upload:
    url: str
    method: str
    headers: dict[str, str]
    expires_in: int


@dataclass(frozen=True)
class Content:
    """A file's bytes, inline when small, or a short-lived presigned address when large."""

    media_type: str
    name: str
    data: bytes | None = None
    redirect: str | None = None


@dataclass(frozen=True)
class ChangeList:
    changes: list[PathChange]  # each path once, with what holds it now, in the order they last changed
    cursor: str
    more: bool
    full_resync: bool


def held_file(content: Any) -> str | None:
    """The id of the file a record's content holds (`{"file": {"id": ...}}`); None for text."""
    if isinstance(content, dict) and isinstance(content.get("file"), dict):
        file_id = content["file"].get("id")
        return file_id if isinstance(file_id, str) else None
    return None


UPLOADS_PREFIX = "uploads/"  # one prefix for every tenant, so a lifecycle rule can expire stale uploads


def upload_key(tenant: str, file_id: str) -> str:
    return f"{UPLOADS_PREFIX}{tenant}/{file_id}"


def chain_key(tenant: str, memory_id: str, chain_id: str) -> str:
    return f"t/{tenant}/m/{memory_id}/r/{chain_id}"


def memory_prefix(tenant: str, memory_id: str) -> str:
    return f"t/{tenant}/m/{memory_id}/"
