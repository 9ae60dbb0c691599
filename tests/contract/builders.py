"""What the repository contract suites build: ids, memories, grants, record versions and snapshots,
written as the services write them."""

from __future__ import annotations

from tests.contract.conftest import Repositories
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import PRIVILEGES
from uhp_memories.domain.records.model import RecordVersion, Snapshot
from uhp_memories.domain.timefmt import format_ms

ACME = "acme"
GLOBEX = "globex"
T0 = 1_790_000_000_000


def mid(n: int) -> str:
    return f"hmem_{n:032x}"


def gid(n: int) -> str:
    return f"hgrt_{n:032x}"


def rid(n: int) -> str:
    return f"hrec_{n:032x}"


def at(offset_ms: int) -> str:
    return format_ms(T0 + offset_ms)


def memory(n: int, parent: int | None = None, *, tenant: str = ACME, created_at: int | None = None,
           name: str | None = None, restricted: bool = False) -> Memory:
    created = T0 + (created_at if created_at is not None else n)
    return Memory(
        tenant=tenant,
        id=mid(n),
        name=name or f"memory {n}",
        description=f"what memory {n} holds",
        parent_id=mid(parent) if parent is not None else None,
        restricted=restricted,
        provider="native",
        created_by="user:alice",
        created_at=created,
        updated_at=created,
    )


def grant(n: int, memory_id: str, principal: str = "user:bob", *, tenant: str = ACME,
          privileges: tuple[str, ...] = ("read",), created_at: int = 0) -> Grant:
    return Grant(tenant, gid(n), memory_id, principal, privileges, T0 + created_at, "user:alice")


def creator_grant(m: Memory) -> Grant:
    grant_id = "hgrt_c" + m.id[6:]
    return Grant(m.tenant, grant_id, m.id, m.created_by, PRIVILEGES, m.created_at, m.created_by, implicit=True)


def add(repos: Repositories, n: int, parent: int | None = None, **fields) -> Memory:
    m = memory(n, parent, **fields)
    repos.memories.create(m, creator_grant(m))
    return m


def first(n: int, memory_id: str, written: int, *, tenant: str = ACME, content: str | None = None,
          type_: str = "fact") -> RecordVersion:
    return RecordVersion(
        tenant=tenant,
        memory_id=memory_id,
        id=rid(n),
        chain_id=rid(n),
        version=1,
        type=type_,
        content=content if content is not None else f"record {n}",
        attributes={"n": n, "nested": {"big": 2**60, "ratio": 0.25, "ok": True, "none": None}},
        status="active",
        supersedes=None,
        superseded_by=None,
        valid_from="2026-01-01T00:00:00.000Z",
        valid_to=None,
        written_at=at(written),
        invalidated_at=None,
        written_by={"kind": "user", "id": "alice"},
        references=({"rel": "related", "memory_id": memory_id, "record_id": rid(999)},),
    )


def revision(current: RecordVersion, n: int, written: int, content: str) -> tuple[RecordVersion, RecordVersion]:
    """(the current version closed, its revision), as RecordService.revise builds them."""
    new = current.evolve(id=rid(n), version=current.version + 1, content=content, supersedes=current.id,
                         written_at=at(written))
    closed = current.evolve(status="superseded", superseded_by=new.id, invalidated_at=new.written_at)
    return closed, new


def forgotten(current: RecordVersion, written: int) -> RecordVersion:
    return current.evolve(status="forgotten", invalidated_at=at(written))


def revise(repos: Repositories, current: RecordVersion, n: int, written: int, content: str) -> RecordVersion:
    closed, new = revision(current, n, written, content)
    repos.records.append_revision(closed, new)
    return new


def ids(items) -> list[str]:
    return [item.id for item in items]


def snapshot(n: int, memory_id: str, name: str, *, tenant: str = ACME, time: int = 0) -> Snapshot:
    return Snapshot(tenant, memory_id, f"hsnp_{n:032x}", name, f"message {n}", at(time), "user:alice")

