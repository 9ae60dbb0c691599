"""The client against the local server over real HTTP: round trips, pages, recall, errors, idempotency."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable

import httpx
import pytest
from uhp_memories_client import (
    IDEMPOTENCY_HEADER,
    AsyncClient,
    Client,
    ConfigurationError,
    Deleted,
    Grant,
    IdempotencyKeyReused,
    Memory,
    MemoryConflict,
    MemoryForbidden,
    MemoryInvalid,
    MemoryNotFound,
    MemoryRecordNotFound,
    NotFound,
    Page,
    RecallAnswer,
    Record,
    RecordPage,
    Unauthenticated,
)

from tests.client.conftest import Keyed


@pytest.mark.slow
def test_remember_get_list_revise_history_forget(alice: Client) -> None:
    memory = alice.create_memory("Sales", description="What the sales team knows")
    assert isinstance(memory, Memory)
    assert memory.id.startswith("hmem_")
    assert (memory.name, memory.parent_id, memory.restricted) == ("Sales", None, False)
    assert set(memory.privileges) >= {"read", "write", "create", "delete"}
    assert memory.created_at is not None
    assert alice.get_memory(memory.id) == memory

    first = alice.remember(memory.id, "Acme renews in March.", attributes={"account": "acme"})
    assert isinstance(first, Record)
    assert (first.type, first.content, first.version, first.status) == ("fact", "Acme renews in March.", 1, "active")
    assert first.written_by is not None
    assert (first.written_by.kind, first.written_by.id) == ("user", "alice")
    assert first.trust == "untrusted"
    assert first.time is not None
    assert first.time.written_at

    got = alice.get_record(memory.id, first.id)
    assert (got.id, got.content, got.attributes) == (first.id, "Acme renews in March.", {"account": "acme"})

    page = alice.list_records(memory.id, types=["fact"])
    assert isinstance(page, RecordPage)
    assert [r.id for r in page.data] == [first.id]
    assert page.next_cursor is None

    second = alice.revise(memory.id, first.id, content="Acme renews in April.")
    assert (second.version, second.supersedes, second.status) == (2, first.id, "active")

    history = alice.history(memory.id, first.id)
    assert isinstance(history, Page)
    assert [(v.id, v.version, v.status) for v in history.data] == [
        (first.id, 1, "superseded"), (second.id, 2, "active"),
    ]
    assert [v.id for v in alice.iter_history(memory.id, second.id)] == [first.id, second.id]

    forgotten = alice.forget(memory.id, second.id)
    assert (forgotten.id, forgotten.status) == (second.id, "forgotten")
    assert list(alice.iter_records(memory.id)) == []
    assert {r.status for r in alice.iter_records(memory.id, include="all")} == {"superseded", "forgotten"}


@pytest.mark.slow
def test_memories_update_grants_and_delete(alice: Client, bob: Client) -> None:
    parent = alice.create_memory("Company")
    child = alice.create_memory("Acme", parent_id=parent.id)
    assert (child.parent_id, child.ancestors) == (parent.id, [parent.id])
    moved = alice.update_memory(child.id, name="Acme Corp", parent_id=None)  # None: to the root
    assert (moved.name, moved.parent_id) == ("Acme Corp", None)
    assert alice.update_memory(moved.id, description="the account").name == "Acme Corp"  # the rest kept

    grant = alice.create_grant(parent.id, "user:bob", ["read"])
    assert isinstance(grant, Grant)
    assert (grant.principal, grant.privileges, grant.memory_id) == ("user:bob", ["read"], parent.id)
    assert grant.id in [g.id for g in alice.iter_grants(parent.id)]
    assert bob.get_memory(parent.id).privileges == ["read"]
    assert [m.id for m in bob.iter_memories()] == [parent.id]  # where Bob enters the tree

    deleted = alice.delete_grant(parent.id, grant.id)
    assert isinstance(deleted, Deleted)
    with pytest.raises(MemoryNotFound):
        bob.get_memory(parent.id)

    gone = alice.delete_memory(moved.id)
    assert isinstance(gone, Deleted)
    assert (gone.id, gone.deleted) == (moved.id, True)
    with pytest.raises(MemoryNotFound):
        alice.get_memory(moved.id)


@pytest.mark.slow
def test_iterators_walk_every_page(alice: Client) -> None:
    memory = alice.create_memory("Many")
    written = [alice.remember(memory.id, f"fact number {n}").id for n in range(5)]

    first = alice.list_records(memory.id, limit=2)
    assert len(first.data) == 2
    assert first.next_cursor is not None
    second = alice.list_records(memory.id, limit=2, cursor=first.next_cursor)
    assert not {r.id for r in first.data} & {r.id for r in second.data}

    walked = [r.id for r in alice.iter_records(memory.id, page_size=2)]  # three pages
    assert sorted(walked) == sorted(written)
    assert len(walked) == len(set(walked)) == 5

    for n in range(3):
        alice.create_memory(f"child {n}", parent_id=memory.id)
    children = list(alice.iter_memories(parent=memory.id, page_size=2))
    assert sorted(m.name for m in children) == ["child 0", "child 1", "child 2"]


@pytest.mark.slow
def test_recall_answers_typed(alice: Client) -> None:
    memory = alice.create_memory("Tea")
    tea = alice.remember(memory.id, "Alice drinks green tea every morning.", attributes={"topic": "drinks"})
    alice.remember(memory.id, "The office is on the third floor.")

    answer = alice.recall(memory.id, "What does Alice drink?", limit=3)
    assert isinstance(answer, RecallAnswer)
    assert answer.results
    assert answer.results[0].record.id == tea.id
    assert isinstance(answer.results[0].record, Record)
    assert 0 < answer.results[0].score <= 1
    assert "query" in answer.results[0].why
    assert isinstance(answer.abstain, bool)
    assert answer.degraded == []

    by_field = alice.recall(memory.id, filters={"field": "attributes.topic", "op": "eq", "value": "drinks"})
    assert [r.record.id for r in by_field.results] == [tea.id]
    assert by_field.results[0].why == ["filters"]


def test_errors_raise_their_code_class(alice: Client, bob: Client, key_of: Callable[..., Keyed]) -> None:
    memory = alice.create_memory("Private")
    url, key = key_of("user:mallory", "t-" + secrets.token_hex(6))  # another tenant
    with Client(url, key) as mallory, pytest.raises(MemoryNotFound) as raised:
        mallory.get_memory(memory.id)
    error = raised.value
    assert isinstance(error, NotFound)
    assert (error.status, error.code) == (404, "memory_not_found")
    assert error.message
    assert error.body["error"]["code"] == "memory_not_found"

    alice.create_grant(memory.id, "user:bob", ["read"])
    with pytest.raises(MemoryForbidden) as forbidden:
        bob.remember(memory.id, "Bob may not write here.")
    assert forbidden.value.status == 403

    with pytest.raises(MemoryRecordNotFound):
        alice.get_record(memory.id, "hrec_" + "0" * 32)

    first = alice.remember(memory.id, "v1")
    current = alice.revise(memory.id, first.id, content="v2")
    with pytest.raises(MemoryConflict) as conflict:
        alice.revise(memory.id, first.id, content="v3 from a stale read")
    assert (conflict.value.status, conflict.value.current_record_id) == (409, current.id)

    with pytest.raises(MemoryInvalid):
        alice.remember(memory.id, "a type nobody registered", type="not-a-type")

    with Client(url, "k-nobody-" + secrets.token_hex(8)) as stranger, pytest.raises(Unauthenticated) as unknown:
        stranger.list_memories()
    assert unknown.value.status == 401


class Recording(httpx.HTTPTransport):
    """httpx's own transport, keeping every request it sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return super().handle_request(request)


def test_every_write_sends_an_idempotency_key_and_reads_none(key_of: Callable[..., Keyed]) -> None:
    url, key = key_of("user:alice")
    transport = Recording()
    with Client(url, key, transport=transport) as client:
        memory = client.create_memory("Keys")
        record = client.remember(memory.id, "keyed")
        revised = client.revise(memory.id, record.id, content="keyed again")
        client.get_memory(memory.id)
        list(client.iter_records(memory.id))
        client.recall(memory.id, text="keyed")  # a read, though a POST
        client.forget(memory.id, revised.id)
    sent = [(r.method, r.url.path, r.headers.get(IDEMPOTENCY_HEADER)) for r in transport.sent]
    assert [(method, path) for method, path, _ in sent] == [
        ("POST", "/v1/memories"),
        ("POST", f"/v1/memories/{memory.id}/records"),
        ("PATCH", f"/v1/memories/{memory.id}/records/{record.id}"),
        ("GET", f"/v1/memories/{memory.id}"),
        ("GET", f"/v1/memories/{memory.id}/records"),
        ("POST", f"/v1/memories/{memory.id}/recall"),
        ("DELETE", f"/v1/memories/{memory.id}/records/{revised.id}"),
    ]
    writes = [k for method, path, k in sent if method != "GET" and not path.endswith("/recall")]
    assert len(writes) == 4
    for written in writes:
        assert written is not None
        assert uuid.UUID(hex=written).version == 4
    assert len(set(writes)) == 4  # one key per write
    assert [k for method, path, k in sent if method == "GET" or path.endswith("/recall")] == [None, None, None]
    assert all(r.headers["x-api-key"] == key for r in transport.sent)


def test_a_write_sent_again_with_its_key_is_made_once(alice: Client) -> None:
    memory = alice.create_memory("Once")
    key = str(uuid.uuid4())
    first = alice.remember(memory.id, "said once", idempotency_key=key)
    again = alice.remember(memory.id, "said once", idempotency_key=key)  # as a retry after a lost answer
    assert again == first
    assert [r.id for r in alice.iter_records(memory.id)] == [first.id]

    with pytest.raises(IdempotencyKeyReused) as reused:  # the same key for another request
        alice.remember(memory.id, "something else", idempotency_key=key)
    assert reused.value.status == 422


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_async_twin_round_trip(async_alice: AsyncClient) -> None:
    async with async_alice as client:
        memory = await client.create_memory("Async")
        first = await client.remember(memory.id, "Acme renews in March.")
        assert (await client.get_record(memory.id, first.id)).content == "Acme renews in March."
        second = await client.revise(memory.id, first.id, content="Acme renews in April.")
        assert second.supersedes == first.id
        history = await client.history(memory.id, first.id)
        assert [v.version for v in history.data] == [1, 2]
        for n in range(3):
            await client.remember(memory.id, f"more {n}")
        walked = [r.id async for r in client.iter_records(memory.id, page_size=2)]
        assert len(walked) == len(set(walked)) == 4
        assert second.id in walked
        with pytest.raises(MemoryConflict):
            await client.revise(memory.id, first.id, content="stale")
        observed = await client.observe(memory.id, ["user: hello", {"content": "assistant: hi"}])
        assert [r.type for r in observed.records] == ["episode", "episode"]
        erased = await client.erase(memory.id, record_ids=[first.id])
        assert sorted(getattr(erased, "erased", [])) == sorted([first.id, second.id])
        with pytest.raises(MemoryRecordNotFound):
            await client.get_record(memory.id, second.id)


def test_url_and_key_from_the_environment(key_of: Callable[..., Keyed], monkeypatch: pytest.MonkeyPatch) -> None:
    url, key = key_of("user:alice")
    monkeypatch.setenv("UHP_MEMORIES_URL", url)
    monkeypatch.setenv("UHP_MEMORIES_API_KEY", key)
    with Client() as client:
        assert client.create_memory("From the environment").name == "From the environment"

    monkeypatch.delenv("UHP_MEMORIES_API_KEY")
    with pytest.raises(ConfigurationError, match="UHP_MEMORIES_API_KEY"):
        Client()
    monkeypatch.delenv("UHP_MEMORIES_URL")
    with Client(api_key="k") as default:
        assert default.settings.base_url == "http://127.0.0.1:8080"
