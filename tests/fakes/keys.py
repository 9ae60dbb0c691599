"""In-memory fake of the API keys: the contract of DynamoKeyRepository (by hash; no key is kept)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from uhp_memories.adapters.dynamodb.apikeys import KeyExists


@dataclass(frozen=True)
class StoredKey:
    key_id: str
    tenant: str
    principal: str
    groups: tuple[str, ...]
    revoked_at: str = ""


class InMemoryKeyRepository:
    def __init__(self) -> None:
        self.keys: dict[str, StoredKey] = {}

    def find(self, key_hash: str) -> StoredKey | None:
        found = self.keys.get(key_hash)
        return None if found is None or found.revoked_at else found

    def put(self, key_hash: str, key_id: str, tenant: str, principal: str, groups: Sequence[str]) -> None:
        # Never written twice, so a key can never be pointed at another tenant or principal.
        if key_hash in self.keys:
            raise KeyExists(f"key {key_id}: the keys table holds this key already")
        self.keys[key_hash] = StoredKey(key_id, tenant, principal, tuple(groups))

    def revoke(self, key_hash: str, at: str) -> None:
        found = self.keys.get(key_hash)
        if found is not None and not found.revoked_at:
            self.keys[key_hash] = replace(found, revoked_at=at)
