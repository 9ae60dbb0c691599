"""The KeyRepository contract (ports.py): API keys by the SHA-256 of the key. Run on the in-memory fake
and on DynamoDB (moto)."""

from __future__ import annotations

import hashlib

import pytest

from uhp_memories.adapters.dynamodb.apikeys import KeyExists
from uhp_memories.domain.access.ports import ApiKeyRecord, KeyRepository


def hashed(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def fields(record: ApiKeyRecord | None) -> tuple[str, str, str, tuple[str, ...]] | None:
    return None if record is None else (record.key_id, record.tenant, record.principal, tuple(record.groups))


def test_put_then_find_by_the_hash_answers_who_the_key_acts_as(keys: KeyRepository) -> None:
    keys.put(hashed("k-alice"), "key_1", "acme", "user:alice", ["group:sales", "group:ops"])
    assert fields(keys.find(hashed("k-alice"))) == ("key_1", "acme", "user:alice", ("group:sales", "group:ops"))


def test_a_key_without_groups_finds_none(keys: KeyRepository) -> None:
    keys.put(hashed("k-etl"), "key_2", "acme", "service:etl", [])
    assert fields(keys.find(hashed("k-etl"))) == ("key_2", "acme", "service:etl", ())


def test_an_unknown_hash_finds_nothing(keys: KeyRepository) -> None:
    keys.put(hashed("k-alice"), "key_1", "acme", "user:alice", [])
    assert keys.find(hashed("k-mallory")) is None
    assert keys.find("k-alice") is None  # the key itself is not what is stored


def test_a_key_is_written_once_and_never_pointed_at_another_tenant_or_principal(keys: KeyRepository) -> None:
    keys.put(hashed("k-1"), "key_1", "acme", "user:alice", ["group:sales"])
    with pytest.raises(KeyExists):
        keys.put(hashed("k-1"), "key_9", "globex", "harness:chrn_1", [])
    keys.put(hashed("k-2"), "key_2", "acme", "user:bob", [])
    assert fields(keys.find(hashed("k-1"))) == ("key_1", "acme", "user:alice", ("group:sales",))
    assert fields(keys.find(hashed("k-2"))) == ("key_2", "acme", "user:bob", ())


def test_a_revoked_key_is_found_no_more_and_stays_revoked(keys: KeyRepository) -> None:
    keys.put(hashed("k-1"), "key_1", "acme", "user:alice", [])
    keys.put(hashed("k-2"), "key_2", "acme", "user:bob", [])
    revoke = keys.revoke  # type: ignore[attr-defined]  # the adapter's and the fake's, not (yet) the port's
    revoke(hashed("k-1"), "2026-05-01T00:00:00Z")
    revoke(hashed("k-1"), "2026-06-01T00:00:00Z")
    assert keys.find(hashed("k-1")) is None
    assert fields(keys.find(hashed("k-2"))) == ("key_2", "acme", "user:bob", ())
    with pytest.raises(KeyExists):  # a revoked key is not written again either
        keys.put(hashed("k-1"), "key_1", "acme", "user:alice", [])


def test_revoking_a_key_never_put_makes_no_key(keys: KeyRepository) -> None:
    keys.revoke(hashed("k-never"), "2026-05-01T00:00:00Z")  # type: ignore[attr-defined]
    assert keys.find(hashed("k-never")) is None
    keys.put(hashed("k-never"), "key_1", "acme", "user:alice", [])
    assert fields(keys.find(hashed("k-never"))) == ("key_1", "acme", "user:alice", ())
