"""What files need from the outside: the object store, file items and path items."""

from __future__ import annotations

from typing import Protocol

from uhp_memories.domain.files.model import (
    JournalHead,
    PathChange,
    PathEntry,
    StoredFile,
    Upload,
)


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


class PathRepository(Protocol):
    """The path items and the change journal a memory's file writes leave (adapters/dynamodb/paths.py)."""

    def at(self, tenant: str, memory_id: str, path: str) -> PathEntry | None:
        ...

    def entries(
        self, tenant: str, memory_id: str, under: str, after: str | None, limit: int
    ) -> tuple[list[PathEntry], bool]:
        """Current files under a directory in path order after `after`; and whether more follow."""
        ...

    def head(self, tenant: str, memory_id: str) -> JournalHead:
        ...

    def changes(self, tenant: str, memory_id: str, after: int, up_to: int) -> list[PathChange]:
        """Journal entries with after < seq <= up_to, in order; missing ones have expired."""
        ...
