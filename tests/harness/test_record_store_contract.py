"""a13n-harness's RecordStore contract (a13n_harness.providers.memory.contracts and its Record Memory
spec), run against UHP_MEMORIES over a real local server: search by meaning, list with an opaque
cursor, add, update (the last writer wins, the id stays), delete, purge, and a record of another
namespace that does not exist for the store. Arranging and checking go through the REST API."""

from __future__ import annotations

import asyncio
import re
from contextlib import AsyncExitStack
from typing import Any

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

import httpx2
from a13n_harness.providers.memory import MemoryRecord, MemoryStoreError, RecordPage, RecordStore

from tests.harness.conftest import ClientFactory, OpenRecords, Stage
from tests.integration.conftest import Client, error_code
from uhp_memories.harness import UHP_MEMORIES, UhpRecordStore

pytestmark = pytest.mark.anyio

RECORD_ID = re.compile(r"^hrec_[0-9a-f]{32}$")
MISSING_RECORD = "hrec_" + "0" * 32
CONTENT_BYTES = 100 * 1024


def facts(client: Client, memory_id: str, **params: Any) -> list[dict[str, Any]]:
    """The memory's current facts as the REST API lists them."""
    answer = client.get(f"/v1/memories/{memory_id}/records", types="fact", limit=100, **params)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


def history(client: Client, memory_id: str, record_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/memories/{memory_id}/records/{record_id}/history", limit=100)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


async def every_page(store: RecordStore, limit: int) -> list[RecordPage]:
    pages = [await store.list(limit=limit)]
    while pages[-1].next_cursor is not None:
        pages.append(await store.list(limit=limit, cursor=pages[-1].next_cursor))
    return pages


# -- the definition and opening --------------------------------------------------------------------


def test_the_definition_declares_uhp_memories_with_a_required_api_key() -> None:
    assert UHP_MEMORIES.type == "uhp_memories"
    assert UHP_MEMORIES.DOMAIN == "Memory"
    with pytest.raises(ValueError, match="credential is required"):
        UHP_MEMORIES.open({"base_url": "https://memories.example.com/prod"}, namespace="hmem_" + "a" * 32)


@pytest.mark.parametrize(
    "base_url", ["ftp://memories.example.com", "https://user:pw@memories.example.com", "https://m.example.com/?k=1"]
)
def test_open_refuses_a_base_url_that_is_not_a_plain_http_address(base_url: str) -> None:
    with pytest.raises(ValueError, match="base URL"):
        UHP_MEMORIES.open({"base_url": base_url}, {"api_key": "k"}, namespace="hmem_" + "a" * 32)


@pytest.mark.parametrize("namespace", ["alice", "hmem_123", "hrec_" + "a" * 32, "hmem_" + "A" * 32])
async def test_a_namespace_is_a_memory_id(namespace: str, stage: Stage) -> None:
    with pytest.raises(ValueError, match="memory id"):
        async with UHP_MEMORIES.open({"base_url": stage.url}, {"api_key": "k"}, namespace=namespace):
            pass


async def test_the_store_is_a_record_store(alice: Client, memory: str, open_records: OpenRecords) -> None:
    async with open_records(alice, memory) as store:
        assert isinstance(store, RecordStore)
        assert isinstance(store, UhpRecordStore)


@pytest.mark.parametrize(
    "base_url", ["http://127.0.0.1:8080", "http://memories.example.com", "https://localhost:8443", "https://[::1]/v1"]
)
def test_without_a_client_of_its_own_open_refuses_what_that_client_never_reaches(base_url: str) -> None:
    """The harness's owned client reaches public HTTPS endpoints only: a local server is refused by open()
    itself, saying to pass `http=`, rather than by every tool later as `unavailable` (issue 28)."""
    with pytest.raises(ValueError, match=r"http=http") as refused:
        UHP_MEMORIES.open({"base_url": base_url}, {"api_key": "k"}, namespace="hmem_" + "a" * 32)
    assert base_url in str(refused.value)


async def test_a_public_https_address_opens_with_the_stores_own_client() -> None:
    async with UHP_MEMORIES.open(
        {"base_url": "https://abc123.execute-api.eu-west-1.amazonaws.com/v1"}, {"api_key": "k"},
        namespace="hmem_" + "a" * 32,
    ) as store:
        assert isinstance(store, UhpRecordStore)


@pytest.mark.slow
async def test_with_a_client_of_its_own_a_local_server_is_reached(
    alice: Client, memory: str, stage: Stage
) -> None:
    assert stage.url.startswith("http://127.0.0.1:")
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        UHP_MEMORIES.open({"base_url": stage.url}, {"api_key": alice.key}, namespace=memory, http=http) as store,
    ):
        await store.add("Alice drinks green tea.")
    assert [f["content"] for f in facts(alice, memory)] == ["Alice drinks green tea."]


# -- add, search, list ---------------------------------------------------------------------------------


@pytest.mark.slow
async def test_add_stores_exactly_the_text_as_a_fact_and_returns_it(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    text = "Alice drinks green tea, never coffee. <b>&</b>"
    async with open_records(alice, memory) as store:
        added = await store.add(text)

    assert RECORD_ID.match(added.id)
    assert added.text == text
    assert added.score is None
    assert added.updated_at is not None
    assert added.updated_at.tzinfo is not None
    (stored,) = facts(alice, memory)
    assert (stored["id"], stored["type"], stored["content"]) == (added.id, "fact", text)
    assert stored["written_by"] == {"kind": "user", "id": "alice"}


@pytest.mark.slow
async def test_search_answers_at_most_limit_records_closest_in_meaning_first(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        tea = await store.add("Alice drinks green tea every morning.")
        for text in ("The office moved to Berlin in 2024.", "Bob's birthday is in May.", "The build uses make."):
            await store.add(text)
        found = await store.search("What does Alice like to drink?", limit=2)

    assert len(found) == 2
    assert found[0] == MemoryRecord(tea.id, tea.text, found[0].score, tea.updated_at)
    scores = [record.score for record in found]
    assert all(isinstance(score, float) for score in scores)
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
async def test_search_with_no_records_finds_nothing(alice: Client, memory: str, open_records: OpenRecords) -> None:
    async with open_records(alice, memory) as store:
        assert await store.search("anything at all", limit=5) == ()


@pytest.mark.slow
async def test_list_pages_with_its_opaque_cursor_until_the_last_page(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        added = [await store.add(f"Fact number {n}.") for n in range(5)]
        pages = await every_page(store, limit=2)

    assert [len(page.records) for page in pages] == [2, 2, 1]
    assert pages[-1].next_cursor is None
    listed = [record for page in pages for record in page.records]
    # Newest first, each record once, as add returned it.
    assert listed == list(reversed(added))


@pytest.mark.slow
async def test_a_cursor_the_store_did_not_issue_is_invalid(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        await store.add("Alice drinks green tea.")
        with pytest.raises(MemoryStoreError) as refused:
            await store.list(limit=5, cursor="not-a-cursor")
    assert refused.value.code == "invalid_cursor"


@pytest.mark.slow
async def test_search_and_list_hold_the_memory_s_facts_only(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    """A note or an episode another client keeps in the memory is not a record of the store."""
    alice.remember(memory, "Meeting notes: Alice prefers tea.", type="note")
    alice.post(f"/v1/memories/{memory}/observe", {"episodes": [{"content": "user: I like tea"}]})
    async with open_records(alice, memory) as store:
        fact = await store.add("Alice drinks green tea.")
        assert [r.id for r in await store.search("tea", limit=10)] == [fact.id]
        assert [r.id for r in (await store.list(limit=10)).records] == [fact.id]


# -- update -------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_update_replaces_the_whole_text_and_keeps_the_id(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        added = await store.add("Alice drinks green tea.")
        first = await store.update(added.id, "Alice drinks oolong tea.")
        second = await store.update(added.id, "Alice drinks black tea.")
        listed = (await store.list(limit=10)).records
        found = await store.search("Which tea does Alice drink?", limit=5)

    assert first.id == second.id == added.id
    assert (first.text, second.text) == ("Alice drinks oolong tea.", "Alice drinks black tea.")
    assert second.updated_at is not None
    assert added.updated_at is not None
    assert second.updated_at >= added.updated_at
    assert [(r.id, r.text) for r in listed] == [(added.id, "Alice drinks black tea.")]
    assert [(r.id, r.text) for r in found] == [(added.id, "Alice drinks black tea.")]
    # Nothing is overwritten on the server: each update is a version of one chain.
    chain = history(alice, memory, added.id)
    assert [v["content"] for v in chain] == [
        "Alice drinks green tea.",
        "Alice drinks oolong tea.",
        "Alice drinks black tea.",
    ]


@pytest.mark.slow
async def test_another_store_names_a_revised_record_by_the_same_id(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    """A new conversation opens its own store: the record revised elsewhere keeps its first id."""
    async with open_records(alice, memory) as store:
        added = await store.add("Alice drinks green tea.")
        await store.update(added.id, "Alice drinks oolong tea.")
    revised = alice.patch(f"/v1/memories/{memory}/records/{facts(alice, memory)[0]['id']}", {"content": "Black tea."})
    assert revised.status_code == 200, revised.text

    async with open_records(alice, memory) as fresh:
        assert [(r.id, r.text) for r in (await fresh.list(limit=5)).records] == [(added.id, "Black tea.")]
        assert [(r.id, r.text) for r in await fresh.search("tea", limit=5)] == [(added.id, "Black tea.")]


@pytest.mark.slow
async def test_the_last_writer_wins(
    alice: Client, memory: str, make_client: ClientFactory, open_records: OpenRecords
) -> None:
    """Two conversations update the record one after the other, each from the id it saw: no conflict,
    and the later text is the record's."""
    alice.attach("assistant", memory)
    assistant = make_client("harness:assistant")
    async with open_records(alice, memory) as mine, open_records(assistant, memory) as theirs:
        added = await mine.add("The standup is at 9:00.")
        seen = (await theirs.list(limit=5)).records[0].id
        await mine.update(added.id, "The standup is at 9:30.")
        updated = await theirs.update(seen, "The standup is at 10:00.")
        listed = (await mine.list(limit=5)).records

    assert seen == added.id == updated.id
    assert [(r.id, r.text) for r in listed] == [(added.id, "The standup is at 10:00.")]
    assert [v["written_by"]["id"] for v in history(alice, memory, added.id)] == ["alice", "alice", "assistant"]


@pytest.mark.slow
async def test_concurrent_updates_each_land_and_the_last_one_wins(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    texts = [f"The standup is at {hour}:00." for hour in range(8, 14)]
    async with open_records(alice, memory) as first:
        added = await first.add("The standup is at 7:00.")
    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(open_records(alice, memory)) for _ in texts]
        updated = await asyncio.gather(*(s.update(added.id, t) for s, t in zip(stores, texts, strict=True)))

    assert {record.id for record in updated} == {added.id}
    chain = history(alice, memory, added.id)
    # Every update is a version of the one chain, none lost; the current text is the last one written.
    assert sorted(v["content"] for v in chain[1:]) == sorted(texts)
    assert [v["status"] for v in chain] == ["superseded"] * len(texts) + ["active"]
    assert [r["content"] for r in facts(alice, memory)] == [chain[-1]["content"]]


@pytest.mark.slow
async def test_update_accepts_any_version_s_id_and_writes_the_current_one(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        added = await store.add("v1")
        await store.update(added.id, "v2")
        version_two = history(alice, memory, added.id)[1]["id"]
        await store.update(added.id, "v3")
        updated = await store.update(version_two, "v4")

    assert updated.id == added.id
    assert [v["content"] for v in history(alice, memory, added.id)] == ["v1", "v2", "v3", "v4"]


@pytest.mark.slow
@pytest.mark.parametrize("text", ["", "   \n\t", "x" * (CONTENT_BYTES + 1), "é" * (CONTENT_BYTES // 2 + 1), "\ud800"])
async def test_text_the_server_would_refuse_is_invalid_before_anything_is_sent(
    text: str, alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        kept = await store.add("Alice drinks green tea.")
        for write in (store.add(text), store.update(kept.id, text)):
            with pytest.raises(MemoryStoreError) as refused:
                await write
            assert refused.value.code == "invalid_text"
    assert [(r["id"], r["content"]) for r in facts(alice, memory)] == [(kept.id, "Alice drinks green tea.")]


@pytest.mark.slow
async def test_text_at_the_server_s_limit_is_stored(alice: Client, memory: str, open_records: OpenRecords) -> None:
    text = "é" * (CONTENT_BYTES // 2)
    async with open_records(alice, memory) as store:
        added = await store.add(text)
    assert added.text == text


# -- delete ---------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_delete_forgets_the_record_and_it_no_longer_exists(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        gone = await store.add("Alice drinks green tea.")
        kept = await store.add("The office is in Berlin.")
        await store.update(gone.id, "Alice drinks oolong tea.")
        await store.delete(gone.id)

        assert [r.id for r in (await store.list(limit=10)).records] == [kept.id]
        assert [r.id for r in await store.search("tea", limit=10)] == [kept.id]
        for change in (store.update(gone.id, "again"), store.delete(gone.id)):
            with pytest.raises(MemoryStoreError) as refused:
                await change
            assert refused.value.code == "record_not_found"
    # Forget keeps the trace: the chain ends in a forgotten version.
    assert [v["status"] for v in history(alice, memory, gone.id)] == ["superseded", "forgotten"]


@pytest.mark.slow
async def test_a_record_forgotten_through_the_api_does_not_exist_for_the_store(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    """A forgotten record leaves GET (404; history's `include=all` still answers it); the store treats it
    as gone."""
    async with open_records(alice, memory) as store:
        added = await store.add("Alice drinks green tea.")
        assert alice.delete(f"/v1/memories/{memory}/records/{added.id}").status_code == 200
        assert alice.get(f"/v1/memories/{memory}/records/{added.id}").status_code == 404
        read = alice.get(f"/v1/memories/{memory}/records/{added.id}", include="all")
        assert (read.status_code, read.json()["status"]) == (200, "forgotten")

        for change in (store.update(added.id, "Alice drinks oolong tea."), store.delete(added.id)):
            with pytest.raises(MemoryStoreError) as refused:
                await change
            assert refused.value.code == "record_not_found"


# -- another namespace, other ids ---------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_record_of_another_memory_does_not_exist_for_the_store(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    other = str(alice.create_memory("Other")["id"])
    async with open_records(alice, memory) as store, open_records(alice, other) as elsewhere:
        theirs = await elsewhere.add("Bob drinks coffee.")
        for change in (store.update(theirs.id, "Bob drinks tea."), store.delete(theirs.id)):
            with pytest.raises(MemoryStoreError) as refused:
                await change
            assert refused.value.code == "record_not_found"
        assert await store.search("coffee", limit=5) == ()
        assert (await store.list(limit=5)).records == ()
    assert [(r["id"], r["content"], r["status"]) for r in facts(alice, other)] == [
        (theirs.id, "Bob drinks coffee.", "active")
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "record_id", [MISSING_RECORD, "..", "../../" + MISSING_RECORD, "hrec_x", "", "hrec_" + "0" * 33]
)
async def test_an_unknown_or_malformed_id_is_record_not_found(
    record_id: str, alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        await store.add("Alice drinks green tea.")
        for change in (store.update(record_id, "text"), store.delete(record_id)):
            with pytest.raises(MemoryStoreError) as refused:
                await change
            assert refused.value.code == "record_not_found"
    # The memory and its fact are untouched (an id like ".." must never reach the memory's own route).
    assert alice.get(f"/v1/memories/{memory}").status_code == 200
    assert len(facts(alice, memory)) == 1


@pytest.mark.slow
async def test_a_record_of_another_type_is_not_the_store_s(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    note = alice.remember(memory, "Meeting notes.", type="note")
    async with open_records(alice, memory) as store:
        for change in (store.update(note["id"], "Changed."), store.delete(note["id"])):
            with pytest.raises(MemoryStoreError) as refused:
                await change
            assert refused.value.code == "record_not_found"
    assert alice.get(f"/v1/memories/{memory}/records/{note['id']}").json()["status"] == "active"


# -- purge -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_purge_removes_every_record_of_the_namespace_and_only_those(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    other = str(alice.create_memory("Other")["id"])
    async with open_records(alice, memory) as store, open_records(alice, other) as elsewhere:
        revised = await store.add("Alice drinks green tea.")
        await store.update(revised.id, "Alice drinks oolong tea.")
        forgotten = await store.add("The office is in Berlin.")
        await store.delete(forgotten.id)
        await store.add("Bob's birthday is in May.")
        kept = await elsewhere.add("Carol drinks coffee.")

        await store.purge()

        assert (await store.list(limit=10)).records == ()
        assert await store.search("tea", limit=10) == ()
        assert [r.id for r in (await elsewhere.list(limit=10)).records] == [kept.id]
    # Erased, every version: not even history or include=all holds them.
    assert facts(alice, memory, include="all") == []
    assert alice.get(f"/v1/memories/{memory}/records/{revised.id}/history").status_code == 404


@pytest.mark.slow
async def test_purge_of_an_empty_memory_succeeds(alice: Client, memory: str, open_records: OpenRecords) -> None:
    async with open_records(alice, memory) as store:
        await store.purge()
        assert (await store.list(limit=10)).records == ()


# -- who may -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_read_grant_reads_and_cannot_write(
    alice: Client, memory: str, make_client: ClientFactory, open_records: OpenRecords
) -> None:
    alice.remember(memory, "Alice drinks green tea.")
    alice.grant(memory, "user:bob", "read")
    bob = make_client("user:bob")
    async with open_records(bob, memory) as store:
        (record,) = (await store.list(limit=5)).records
        writes = {
            "add": store.add("Bob was here."),
            "update": store.update(record.id, "Bob was here."),
            "delete": store.delete(record.id),
            "purge": store.purge(),
        }
        for name, write in writes.items():
            with pytest.raises(MemoryStoreError) as refused:
                await write
            assert refused.value.code == "forbidden", name
    assert [r["content"] for r in facts(alice, memory)] == ["Alice drinks green tea."]


@pytest.mark.slow
async def test_a_memory_the_key_cannot_see_is_reported_as_deleted(
    alice: Client, memory: str, make_client: ClientFactory, open_records: OpenRecords
) -> None:
    mallory = make_client("user:mallory")
    async with open_records(mallory, memory) as store:
        for call in (store.search("tea", limit=5), store.list(limit=5), store.add("Mallory was here.")):
            with pytest.raises(MemoryStoreError) as refused:
                await call
            assert refused.value.code == "memory_deleted"
    deleted = alice.delete(f"/v1/memories/{memory}")
    assert deleted.status_code in (200, 202), deleted.text
    async with open_records(alice, memory) as store:
        with pytest.raises(MemoryStoreError) as refused:
            await store.search("tea", limit=5)
    assert refused.value.code == "memory_deleted"


async def test_an_unknown_api_key_is_forbidden(alice: Client, memory: str, open_records: OpenRecords) -> None:
    stranger = Client(alice.base_url, "k-unknown", alice.tenant, "user:nobody", alice.session)
    async with open_records(stranger, memory) as store:
        with pytest.raises(MemoryStoreError) as refused:
            await store.list(limit=5)
    assert refused.value.code == "forbidden"
    assert error_code(stranger.get(f"/v1/memories/{memory}")) == "unauthenticated"
