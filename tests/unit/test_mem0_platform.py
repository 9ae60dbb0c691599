"""The mem0 provider over mem0's Platform client (`mem0.MemoryClient`, mem0ai 2.2.1) at its HTTP boundary:
what the client sends a loopback stand-in of the Platform (tests/fakes/mem0_platform.py) for each thing
the adapter does, with the server's credential and never a caller's, each memory kept apart by its
user_id, and an erase that reports the history the Platform keeps (it cannot be removed through its API).
The adapter is declared untested against the hosted service itself (docs/decisions.md)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("mem0", reason="the mem0 extra (mem0ai) is not installed")

from tests.fakes.mem0_platform import FakePlatform
from uhp_memories.adapters.mem0 import Mem0Provider, Mem0Settings, connect
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller
from uhp_memories.domain.records.model import RecordVersion

ALICE = Caller("acme", "user:alice")
KEY = "m0-server-credential"


def memory(name: str) -> Memory:
    return Memory("acme", f"hmem_{uuid.uuid4().hex}", name, "", None, False, "mem0", "user:alice", 1, 1)


def record(memory_id: str, text: str, at: str = "2026-12-05T10:00:00.000Z") -> RecordVersion:
    return RecordVersion(tenant="acme", memory_id=memory_id, id="new", chain_id="new", version=1, type="fact",
                         content=text, attributes={"account": "acme"}, status="active", supersedes=None,
                         superseded_by=None, valid_from=None, valid_to=None, written_at=at, invalidated_at=None,
                         written_by=ALICE.written_by)


@pytest.fixture
def platform() -> Iterator[FakePlatform]:
    with FakePlatform() as fake:
        yield fake


@pytest.fixture
def provider(platform: FakePlatform) -> Mem0Provider:
    return connect(Mem0Settings(mode="platform", api_key=KEY, host=platform.url), embedder=None, dimensions=0,
                   now=lambda: "2026-12-05T11:00:00.000Z")


@pytest.mark.slow
def test_every_request_carries_the_servers_credential_and_the_memory_as_user_id(
    platform: FakePlatform, provider: Mem0Provider
) -> None:
    team = memory("Team")
    kept = provider.remember(ALICE, team, record(team.id, "Acme renews in March."))
    assert kept.content == "Acme renews in March."
    assert provider.get(team, kept.id) == kept
    assert [v.id for _, v in provider.scan(team, "active", None)] == [kept.id]
    assert [v.id for v, _, _ in provider.recall(team, "when does acme renew", None, 5, "active").hits] == [kept.id]
    assert {headers["authorization"] for _, _, headers, _ in platform.requests} == {f"Token {KEY}"}
    adds = [body for method, path, _, body in platform.requests if path == "/v3/memories/add/"]
    assert [(b["user_id"], b["infer"], b["async_mode"]) for b in adds] == [(team.id, False, False)]
    assert adds[0]["metadata"]["uhp"]["memory_id"] == team.id
    listed = [b for _, path, _, b in platform.requests if path in ("/v3/memories/", "/v3/memories/search/")]
    assert all(b["filters"] == {"user_id": team.id} for b in listed)


@pytest.mark.slow
def test_a_record_of_another_memory_is_none_whatever_the_platform_answers(provider: Mem0Provider) -> None:
    team, other = memory("Team"), memory("Other")
    kept = provider.remember(ALICE, team, record(team.id, "Only the team's."))
    assert provider.get(other, kept.id) is None
    assert list(provider.scan(other, "all", None)) == []


@pytest.mark.slow
def test_revise_forget_and_history_through_the_platform(provider: Mem0Provider) -> None:
    team = memory("Team")
    kept = provider.remember(ALICE, team, record(team.id, "v1"))
    revised = provider.revise(ALICE, team, kept, kept.evolve(content="v2", written_at="2026-12-05T10:05:00.000Z"))
    assert (revised.id, revised.version, revised.content) == (kept.id, 2, "v2")
    assert [(v.version, v.content) for v in provider.history(team, revised)] == [(1, "v1"), (2, "v2")]
    gone = provider.forget(ALICE, team, revised)
    assert gone.status == "forgotten"
    assert list(provider.scan(team, "active", None)) == []


def test_erase_deletes_and_reports_the_history_the_platform_keeps(
    platform: FakePlatform, provider: Mem0Provider
) -> None:
    team = memory("Team")
    kept = provider.remember(ALICE, team, record(team.id, "Erase me."))
    done = provider.erase(team, [kept])
    assert done.erased == [kept.id]
    assert [(u["record_id"], u["where"]) for u in done.unreachable] == [(kept.id, "mem0 history")]
    assert provider.get(team, kept.id) is None
    assert platform.memories == {}
    assert provider.capabilities()["erase"] == {"unreachable": "reported", "history": "unreachable"}
    assert provider.is_outside()  # another company's service: the person attaching is told (§9)


@pytest.mark.slow
def test_a_keyed_writes_retry_finds_what_it_added_through_the_platforms_metadata_filter(
    platform: FakePlatform,
) -> None:
    """The tag of an Idempotency-Key write rides in each add's metadata; a retry asks the Platform for it in
    the v2 filter syntax and adds nothing that an attempt before it added."""
    tag = "a" * 32
    keyed = connect(Mem0Settings(mode="platform", api_key=KEY, host=platform.url), embedder=None, dimensions=0,
                    now=lambda: "2026-12-05T11:00:00.000Z", write_tag=lambda: tag)
    team = memory("Team")
    first = keyed.remember(ALICE, team, record(team.id, "Added once."))
    retried = keyed.remember(ALICE, team, record(team.id, "Added once."))
    assert retried.id == first.id
    assert [m["metadata"]["uhp_write"] for m in platform.memories.values()] == [tag]
    asked = [b["filters"] for method, path, _, b in platform.requests if path == "/v3/memories/"]
    assert {"AND": [{"user_id": team.id}, {"metadata": {"uhp_write": tag}}]} in asked
