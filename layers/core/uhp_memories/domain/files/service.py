"""Files (§7): bytes uploaded once, then named by a record. Each record keeps its bytes under one
object key per version chain, in a versioned bucket: a revision with new bytes is a new object
version, so the bytes of every earlier version stay readable through history and as_of."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import DomainError, MemoryInvalid, RecordNotFound
from uhp_memories.domain.models import Caller

INLINE_MAX_BYTES = 4 * 1024 * 1024  # a Lambda request carries at most 6 MB, base64 included
FILE_MAX_BYTES = 5 * 1024 * 1024 * 1024  # one S3 PUT
NAME_CHARS = 255
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


class ObjectStore(Protocol):
    """The versioned bucket. Keys are built by the service; every key starts with the tenant."""

    def put(self, key: str, data: bytes, media_type: str) -> str:
        """Write bytes; returns the new object version id."""
        ...

    def size(self, key: str) -> int | None:
        """The current object's size, or None when there is none."""
        ...

    def copy(self, source_key: str, target_key: str) -> str:
        """Copy the current object to a new version of another key; returns that version id."""
        ...

    def read(self, key: str, version: str) -> bytes:
        ...

    def presign_put(self, key: str, media_type: str, size: int, expires_in: int) -> Upload:
        ...

    def presign_get(self, key: str, version: str, name: str, expires_in: int) -> str:
        ...

    def delete_all_versions(self, prefix: str) -> int:
        """Delete every version (and delete marker) under a prefix; returns how many."""
        ...


class FileRepository(Protocol):
    def put(self, stored: StoredFile) -> None:
        ...

    def get(self, tenant: str, file_id: str) -> StoredFile | None:
        ...

    def mark(self, tenant: str, file_id: str, status: str) -> None:
        ...

    def hold(self, tenant: str, file_id: str, memory_id: str, record_id: str) -> None:
        """Mark the file attached to the record that now holds its bytes; an absent file stays absent."""
        ...

    def delete(self, tenant: str, file_id: str) -> None:
        """Remove the file's metadata for good (erase: its name is user content); absent is fine."""
        ...


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


class FileService:
    def __init__(self, ports: Ports, objects: ObjectStore, files: FileRepository) -> None:
        self._ports = ports
        self._objects = objects
        self._files = files

    def upload(self, caller: Caller, name: str, media_type: str, data: bytes) -> StoredFile:
        """A small file sent through the API."""
        self._check(name, media_type, len(data))
        if len(data) > INLINE_MAX_BYTES:
            raise MemoryInvalid(
                f"a file sent through the API is at most {INLINE_MAX_BYTES} bytes; "
                "larger ones start with POST /v1/files {name, media_type, bytes} and a presigned PUT"
            )
        stored = self._new(caller, name, media_type, len(data), "uploaded")
        self._objects.put(upload_key(caller.tenant, stored.id), data, media_type)
        self._files.put(stored)
        return stored

    def start_upload(self, caller: Caller, name: str, media_type: str, size: int) -> tuple[StoredFile, Upload]:
        """A large file: its metadata now, its bytes through a presigned PUT straight to S3."""
        self._check(name, media_type, size)
        stored = self._new(caller, name, media_type, size, "pending")
        self._files.put(stored)
        upload = self._objects.presign_put(upload_key(caller.tenant, stored.id), media_type, size, UPLOAD_SECONDS)
        return stored, upload

    def get(self, caller: Caller, file_id: str) -> StoredFile:
        stored = self._files.get(caller.tenant, file_id) if FILE_ID.match(file_id) else None
        # Only its uploader may see or use a file until a record holds it; then the record's
        # memory decides who reads it, the uploader included (unknown and forbidden alike: 404).
        if stored is None:
            raise FileNotFound(file_id)
        if stored.status == "attached" and stored.memory_id is not None:
            if "read" not in self._ports.access(caller).privileges(stored.memory_id):
                raise FileNotFound(file_id)
            return stored
        if stored.created_by != caller.principal:
            raise FileNotFound(file_id)
        if stored.status == "pending":
            size = self._objects.size(upload_key(caller.tenant, file_id))
            if size is not None and size == stored.bytes:
                self._files.mark(caller.tenant, file_id, "uploaded")
                stored = StoredFile(**{**stored.__dict__, "status": "uploaded"})
        return stored

    def attach(self, caller: Caller, reference: Any, memory_id: str, chain_id: str) -> dict[str, Any]:
        """Bind an uploaded file to a record chain: its bytes become a new version of the chain's
        object. Returns the content reference the record keeps."""
        if not isinstance(reference, dict) or set(reference) != {"id"} or not isinstance(reference["id"], str):
            raise MemoryInvalid('a file reference is {"file": {"id": "file_..."}}; the server fills in the rest')
        stored = self.get(caller, reference["id"])
        if stored.status == "attached":
            raise MemoryInvalid(f"file {stored.id} is already held by a record; upload the bytes again")
        if stored.status != "uploaded":
            raise MemoryInvalid(f"file {stored.id} has not been uploaded completely yet")
        target = chain_key(caller.tenant, memory_id, chain_id)
        version = self._objects.copy(upload_key(caller.tenant, stored.id), target)
        return {
            "file": {
                "id": stored.id,
                "name": stored.name,
                "bytes": stored.bytes,
                "media_type": stored.media_type,
                "version": version,
            }
        }

    def release_upload(self, caller: Caller, file_id: str, memory_id: str, record_id: str) -> None:
        """Remove an upload the record `record_id` now holds; the file id cannot be attached again."""
        self._objects.delete_all_versions(upload_key(caller.tenant, file_id))
        self._files.hold(caller.tenant, file_id, memory_id, record_id)

    def content(self, caller: Caller, memory_id: str, record_id: str, version: str | None) -> Content:
        """A file record's bytes: of this version, or of another version of the same record."""
        records = self._ports.records
        access = self._ports.access(caller)
        # Only the native provider keeps files (§10): another provider's memory holds none to read.
        self._ports.providers.require_native(access.require(memory_id, "read"), "files")
        record = records.get(caller.tenant, memory_id, record_id)
        if record is None:
            raise RecordNotFound(record_id)
        chain = [v for v in records.chain(caller.tenant, record.chain_id) if v.memory_id == memory_id]
        files = [v.content["file"] for v in chain if isinstance(v.content, dict) and "file" in v.content]
        if version is None:
            if not (isinstance(record.content, dict) and "file" in record.content):
                raise MemoryInvalid("this record's content is text, not a file")
            chosen = record.content["file"]
        else:
            matching = [f for f in files if f["version"] == version]
            if not matching:
                raise RecordNotFound(f"{record_id} (version {version})")
            chosen = matching[0]
        key = chain_key(caller.tenant, memory_id, record.chain_id)
        if chosen["bytes"] <= INLINE_MAX_BYTES:
            return Content(chosen["media_type"], chosen["name"], data=self._objects.read(key, chosen["version"]))
        url = self._objects.presign_get(key, chosen["version"], chosen["name"], DOWNLOAD_SECONDS)
        return Content(chosen["media_type"], chosen["name"], redirect=url)

    def _new(self, caller: Caller, name: str, media_type: str, size: int, status: str) -> StoredFile:
        return StoredFile(
            tenant=caller.tenant,
            id=self._ports.ids.new("file_"),
            name=name,
            media_type=media_type,
            bytes=size,
            status=status,
            created_by=caller.principal,
            created_at=self._ports.clock.now_ms(),
        )

    @staticmethod
    def _check(name: str, media_type: str, size: int) -> None:
        if not name or len(name) > NAME_CHARS or "/" in name or "\\" in name:
            raise MemoryInvalid(f"a file name is 1 to {NAME_CHARS} characters without slashes")
        if not MEDIA_TYPE.match(media_type):
            raise MemoryInvalid("media_type must look like type/subtype")
        if not 0 <= size <= FILE_MAX_BYTES:
            raise MemoryInvalid(f"a file is at most {FILE_MAX_BYTES} bytes")
