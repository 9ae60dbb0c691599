"""Files (§7): bytes uploaded once, then named by a record. Each record keeps its bytes under one
object key per version chain, in a versioned bucket: a revision with new bytes is a new object
version, so the bytes of every earlier version stay readable through history and as_of."""

from __future__ import annotations

from typing import Any

from uhp_memories.domain.access.ports import CheckTiming
from uhp_memories.domain.errors import MemoryInvalid, RecordNotFound
from uhp_memories.domain.files.model import (
    DOWNLOAD_SECONDS,
    FILE_ID,
    FILE_MAX_BYTES,
    INLINE_MAX_BYTES,
    MEDIA_TYPE,
    UPLOAD_SECONDS,
    Content,
    FileNotFound,
    StoredFile,
    Upload,
    chain_key,
    check_name,
    upload_key,
)
from uhp_memories.domain.files.ports import FileRepository, ObjectStore
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records.model import INCLUDE_VALUES


class FileService:
    """Files (§7): uploads, their binding to file records, and a file record's bytes."""
    def __init__(
        self, ports: Ports, objects: ObjectStore, files: FileRepository, timing: CheckTiming | None = None
    ) -> None:
        self._ports = ports
        self._objects = objects
        self._files = files
        # Holds a file's not-found answer to the usual time of a file look-up, its own read included,
        # as memories' are held to a memory check's (docs/decisions.md, "The 404 of an unseen file").
        self._timing = timing

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
        """A file as this caller may see it: its uploader until a record holds it, then the record's readers."""
        began = self._timing.now() if self._timing is not None else None
        stored = self._files.get(caller.tenant, file_id) if FILE_ID.match(file_id) else None
        # Only its uploader may see or use a file until a record holds it; then the record's
        # memory decides who reads it, the uploader included (unknown and forbidden alike: 404).
        held = stored is not None and stored.status == "attached" and stored.memory_id is not None
        if stored is not None and not held and stored.created_by == caller.principal:
            seen = True  # the uploader's own file: nothing to hide from it
        else:
            # Every other look-up checks one memory: the holding record's, or an id no memory has, so a
            # file in a memory the caller cannot see and an unknown id cost the same check; the whole
            # look-up is then held as a memory's not-found is (docs/decisions.md, "The 404 of an unseen file").
            checked = stored.memory_id if held and stored is not None else None
            readable = self._ports.access(caller).holds(checked or self._ports.ids.new("hmem_"), "read")
            seen = held and readable
            if self._timing is not None and began is not None:
                self._timing.decided(began)
                if not seen:
                    self._timing.hold(began)
        if stored is None or not seen:
            raise FileNotFound(file_id)
        if held:
            return stored
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

    def content(
        self, caller: Caller, memory_id: str, record_id: str, version: str | None, include: str = "active"
    ) -> Content:
        """A file record's bytes: of this version, or of another version of the same record. A forgotten
        record leaves this read as it leaves get by id (§5.2): any version of a chain whose current
        version is forgotten is not found unless `include=all` asks for history, whose bytes forget
        keeps (erase is what removes them)."""
        records = self._ports.records
        access = self._ports.access(caller)
        # Only the native provider keeps files (§10): another provider's memory holds none to read.
        self._ports.providers.require_native(access.require(memory_id, "read"), "files")
        if include not in INCLUDE_VALUES:
            raise MemoryInvalid(f"include must be one of {list(INCLUDE_VALUES)}")
        record = records.get(caller.tenant, memory_id, record_id)
        if record is None:
            raise RecordNotFound(record_id)
        chain = [v for v in records.chain(caller.tenant, record.chain_id) if v.memory_id == memory_id]
        if include == "active" and (chain[-1] if chain else record).status == "forgotten":
            raise RecordNotFound(record_id)
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
        check_name(name)
        if not MEDIA_TYPE.match(media_type):
            raise MemoryInvalid("media_type must look like type/subtype")
        if not 0 <= size <= FILE_MAX_BYTES:
            raise MemoryInvalid(f"a file is at most {FILE_MAX_BYTES} bytes")
