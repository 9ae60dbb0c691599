"""The FileRepository contract (domain/files/service.py): a file's metadata (its bytes are in the ObjectStore).
Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

from dataclasses import replace

from tests.contract.builders import ACME, GLOBEX, T0
from tests.contract.conftest import Repositories
from uhp_memories.domain.files.model import StoredFile


def fid(n: int) -> str:
    return f"file_{n:032x}"


def stored(n: int, *, tenant: str = ACME, status: str = "uploaded", size: int = 11) -> StoredFile:
    return StoredFile(tenant, fid(n), f"Notes {n} — März.txt", "text/plain", size, status, "user:alice", T0 + n)


def test_put_then_get_returns_the_file_as_written(repos: Repositories) -> None:
    small, large = stored(1), stored(2, status="pending", size=5 * 1024**3)
    repos.files.put(small)
    repos.files.put(large)
    assert repos.files.get(ACME, small.id) == small
    assert repos.files.get(ACME, large.id) == large
    assert repos.files.get(ACME, fid(99)) is None


def test_mark_changes_the_status_and_nothing_else(repos: Repositories) -> None:
    pending = stored(1, status="pending")
    repos.files.put(pending)
    repos.files.mark(ACME, pending.id, "uploaded")
    assert repos.files.get(ACME, pending.id) == replace(pending, status="uploaded")
    repos.files.mark(ACME, pending.id, "attached")
    assert repos.files.get(ACME, pending.id) == replace(pending, status="attached")


def test_marking_a_file_never_put_makes_no_file_and_leaves_its_id_free(repos: Repositories) -> None:
    repos.files.mark(ACME, fid(1), "attached")
    assert repos.files.get(ACME, fid(1)) is None
    later = stored(1)
    repos.files.put(later)
    assert repos.files.get(ACME, fid(1)) == later


def test_tenants_are_isolated_even_with_the_same_ids(repos: Repositories) -> None:
    ours = stored(1)
    repos.files.put(ours)
    assert repos.files.get(GLOBEX, ours.id) is None
    theirs = stored(1, tenant=GLOBEX, status="pending")
    repos.files.put(theirs)
    assert repos.files.get(GLOBEX, ours.id) == theirs
    repos.files.mark(GLOBEX, ours.id, "attached")
    assert repos.files.get(GLOBEX, ours.id) == replace(theirs, status="attached")
    assert repos.files.get(ACME, ours.id) == ours
