"""In-memory fakes of the file ports: the versioned bucket (S3ObjectStore's contract) and the file
metadata (DynamoFileRepository's)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from urllib.parse import quote

from uhp_memories.domain.errors import AlreadyExists
from uhp_memories.domain.files.model import StoredFile, Upload

FAKE_ENDPOINT = "https://objects.invalid/"


@dataclass(frozen=True)
class ObjectVersion:
    version: str
    data: bytes
    media_type: str


class InMemoryObjectStore:
    """A versioned bucket: every put and copy adds a version of its key, nothing is overwritten.

    Reading or copying what is not there raises KeyError (S3 answers NoSuchKey or NoSuchVersion)."""

    def __init__(self) -> None:
        self.versions: dict[str, list[ObjectVersion]] = {}
        self._next = itertools.count(1)

    def _add(self, key: str, data: bytes, media_type: str) -> str:
        # Opaque and never reused, as S3's version ids are; not ordered, so nothing may rely on order.
        version = f"{next(self._next):08d}.{len(key)}"
        self.versions.setdefault(key, []).append(ObjectVersion(version, bytes(data), media_type))
        return version

    def put(self, key: str, data: bytes, media_type: str) -> str:
        return self._add(key, data, media_type)

    def size(self, key: str) -> int | None:
        found = self.versions.get(key)
        return len(found[-1].data) if found else None

    def copy(self, source_key: str, target_key: str) -> str:
        current = self.versions[source_key][-1]
        return self._add(target_key, current.data, current.media_type)

    def read(self, key: str, version: str) -> bytes:
        for stored in self.versions[key]:
            if stored.version == version:
                return stored.data
        raise KeyError(f"{key} (version {version})")

    def presign_put(self, key: str, media_type: str, size: int, expires_in: int) -> Upload:
        url = f"{FAKE_ENDPOINT}{quote(key)}?expires={expires_in}&size={size}"
        return Upload(url=url, method="PUT", headers={"Content-Type": media_type}, expires_in=expires_in)

    def presign_get(self, key: str, version: str, name: str, expires_in: int) -> str:
        return f"{FAKE_ENDPOINT}{quote(key)}?versionId={quote(version)}&filename={quote(name)}&expires={expires_in}"

    def delete_all_versions(self, prefix: str) -> int:
        doomed = [key for key in self.versions if key.startswith(prefix)]
        return sum(len(self.versions.pop(key)) for key in doomed)


class InMemoryFileRepository:
    """File metadata by tenant and id. Putting an id twice raises AlreadyExists (DynamoDB's adapter
    lets its ConditionFailed through: file ids are fresh, so neither happens in use)."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], StoredFile] = {}

    def put(self, stored: StoredFile) -> None:
        key = (stored.tenant, stored.id)
        if key in self.files:
            raise AlreadyExists(stored.id)
        self.files[key] = stored

    def get(self, tenant: str, file_id: str) -> StoredFile | None:
        return self.files.get((tenant, file_id))

    def mark(self, tenant: str, file_id: str, status: str) -> None:
        stored = self.files.get((tenant, file_id))
        if stored is not None:
            self.files[(tenant, file_id)] = replace(stored, status=status)

    def hold(self, tenant: str, file_id: str, memory_id: str, record_id: str) -> None:
        stored = self.files.get((tenant, file_id))
        if stored is not None:
            self.files[(tenant, file_id)] = replace(stored, status="attached", memory_id=memory_id,
                                                    record_id=record_id)

    def delete(self, tenant: str, file_id: str) -> None:
        self.files.pop((tenant, file_id), None)
