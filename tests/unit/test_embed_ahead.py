"""A write's texts are embedded while DynamoDB commits (RecallEngine.embed_ahead), over the in-memory
fakes, the embedded index and the hashing embedder: the vectors made ahead are the ones indexed, in
the order of the write, made once, beside the access read when the text is known before the checks;
a write that fails commits nothing to the index; a text the write no longer indexes as it was
embedded is embedded again."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.fakes import InMemoryTypeRepository
from tests.unit.conftest import World, caller
from uhp_memories.domain.errors import MemoryNotFound
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.records.service import RecordService
from uhp_memories.domain.types.builtin import BUILTIN_TYPES, TASK
from uhp_memories.domain.types.service import TypeService
from uhp_memories.local.embedded import EmbeddedSearchIndex
from uhp_memories.local.hashing import HashingEmbedder

ALICE = caller("user:alice")
BOB = caller("user:bob")


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds and the threads it embeds them on."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []
        self.threads: set[str] = set()
        self._embedding = threading.Condition()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._embedding:
            self.texts.extend(texts)
            self.threads.add(threading.current_thread().name)
            self._embedding.notify_all()
        return super().embed(texts)

    def reached(self, count: int, timeout_s: float) -> bool:
        """Whether `count` texts were handed to it by now or within `timeout_s`: woken by each embed,
        never polled."""
        with self._embedding:
            return self._embedding.wait_for(lambda: len(self.texts) >= count, timeout_s)


@pytest.fixture
def engine() -> Iterator[RecallEngine]:
    embedder = CountingEmbedder()
    index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    yield RecallEngine(index, embedder)
    index.close()


def counted(engine: RecallEngine) -> CountingEmbedder:
    assert isinstance(engine.embedder, CountingEmbedder)
    return engine.embedder


def test_an_observed_batch_is_embedded_once_and_indexed_in_order(world: World, engine: RecallEngine) -> None:
    records = RecordService(world.ports, world.memories, None, lambda: engine)
    memory = world.memories.create(ALICE, name="m").memory
    texts = [f"turn {n}: the renewal of contract {n} is in month {n % 12}" for n in range(9)]
    written = records.observe(ALICE, memory.id, [RecordInput("episode", t, {}) for t in texts])
    assert sorted(counted(engine).texts) == sorted(texts)  # each text once, nothing embedded again
    assert all(name.startswith("embed-write") for name in counted(engine).threads)
    reference = HashingEmbedder(64)
    for view, text in zip(written, texts, strict=True):
        document = engine.index.get(ALICE.tenant, memory.id, view.record.id)
        assert document is not None
        assert document.text == text
        assert list(document.embedding or ()) == pytest.approx(reference.embed([text])[0])


def test_a_remembered_record_is_found_by_its_meaning_right_after_the_write(world: World, engine: RecallEngine) -> None:
    records = RecordService(world.ports, world.memories, None, lambda: engine)
    memory = world.memories.create(ALICE, name="m").memory
    record = records.remember(ALICE, memory.id, RecordInput("fact", "Acme renews in March", {})).record
    hits = engine.search(ALICE.tenant, memory.id, query="Acme renews in March", limit=1)
    assert [h.record_id for h in hits] == [record.id]
    assert counted(engine).texts == ["Acme renews in March", "Acme renews in March"]  # the write, the query


def test_a_refused_write_indexes_nothing(world: World, engine: RecallEngine) -> None:
    records = RecordService(world.ports, world.memories, None, lambda: engine)
    memory = world.memories.create(ALICE, name="m").memory
    with pytest.raises(MemoryNotFound):
        records.remember(BOB, memory.id, RecordInput("fact", "not Bob's to write", {}))
    # Its text may have been embedded beside the access read; nothing reaches the index.
    assert engine.search(ALICE.tenant, memory.id, text="write", limit=5) == []
    assert engine.search(ALICE.tenant, memory.id, query="not Bob's to write", limit=5) == []


@pytest.mark.parametrize("write", ["remember", "observe"])
def test_a_write_is_embedded_while_its_access_is_read(
    world: World, engine: RecallEngine, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    """The text is embedded beside the access read, neither before nor after it: the embedding and the
    access read each wait until the other is under way too, which only two pieces of work in progress
    at once can do (one after the other, in either order, the wait times out and the write fails);
    the write still lands, indexed with that embedding."""
    both_under_way = threading.Barrier(2, timeout=5)
    met: set[str] = set()

    def under_way(side: str) -> None:
        if side not in met:  # the first call of each side meets the other
            met.add(side)
            both_under_way.wait()

    class MeetingTheAccessRead(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            under_way("embedding")
            return super().embed(texts)

    meeting = RecallEngine(engine.index, MeetingTheAccessRead())
    records = RecordService(world.ports, world.memories, None, lambda: meeting)
    memory = world.memories.create(ALICE, name="m").memory
    read_access = world.ports.memories.get_many_with_grants

    def access_while_embedding(tenant: str, memory_ids: Any, width: int) -> Any:
        under_way("access")
        return read_access(tenant, memory_ids, width)

    monkeypatch.setattr(world.ports.memories, "get_many_with_grants", access_while_embedding)
    text = "the launch moved to Friday"
    if write == "remember":
        written = records.remember(ALICE, memory.id, RecordInput("fact", text, {})).record
    else:
        written = records.observe(ALICE, memory.id, [RecordInput("episode", text, {})])[0].record
    assert counted(meeting).texts == [text]  # once, ahead
    hits = meeting.search(ALICE.tenant, memory.id, query=text, limit=1)
    assert [h.record_id for h in hits] == [written.id]


def test_a_text_known_only_after_the_checks_is_embedded_after_them(world: World, engine: RecallEngine) -> None:
    """An extension type is searched by its projection, which its definition gives: that text is
    embedded once the type is read, and only it (never the content the caller sent alone)."""
    types = TypeService(world.ports, InMemoryTypeRepository(), BUILTIN_TYPES)
    records = RecordService(world.ports, world.memories, None, lambda: engine, types=types)
    memory = world.memories.create(ALICE, name="m").memory
    task = RecordInput(TASK, "call them first", {"title": "renew Acme", "status": "open"})
    written = records.remember(ALICE, memory.id, task).record
    projected = "renew Acme. Status: open. Due: . Assignee: . call them first"
    assert counted(engine).texts == [projected]
    document = engine.index.get(ALICE.tenant, memory.id, written.id)
    assert document is not None
    assert document.text == projected


def test_a_revision_is_embedded_while_it_commits_and_its_previous_version_is_not_embedded_again(
    world: World, engine: RecallEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transaction waits here until the revision's text is being embedded; the version it
    closes keeps the vector it was indexed with."""
    records = RecordService(world.ports, world.memories, None, lambda: engine)
    memory = world.memories.create(ALICE, name="m").memory
    first = records.remember(ALICE, memory.id, RecordInput("fact", "Acme renews in March", {})).record
    commit = world.ports.records.append_revision

    def commit_once_embedding(*args: Any, **kwargs: Any) -> Any:
        assert counted(engine).reached(2, timeout_s=10), "the revision was embedded only after its commit"
        return commit(*args, **kwargs)

    monkeypatch.setattr(world.ports.records, "append_revision", commit_once_embedding)
    revised = records.revise(ALICE, memory.id, first.id, {"content": "Acme renews in April"}).record
    assert counted(engine).texts == ["Acme renews in March", "Acme renews in April"]
    hits = engine.search(ALICE.tenant, memory.id, query="Acme renews in April", limit=1)
    assert [h.record_id for h in hits] == [revised.id]


def test_vectors_made_ahead_for_other_texts_are_not_used(engine: RecallEngine, world: World) -> None:
    records = RecordService(world.ports, world.memories, None, lambda: engine)
    memory = world.memories.create(ALICE, name="m").memory
    first = records.remember(ALICE, memory.id, RecordInput("fact", "the first text", {})).record
    changed = first.evolve(content="a text changed after it was embedded")
    ahead = engine.embed_ahead([first])
    engine.index_versions([changed], ahead=ahead)
    document = engine.index.get(ALICE.tenant, memory.id, first.id)
    assert document is not None
    assert list(document.embedding or ()) == pytest.approx(HashingEmbedder(64).embed([changed.content])[0])


@pytest.mark.slow
def test_while_one_thread_embeds_a_long_text_the_other_takes_every_other_text(
    engine: RecallEngine, world: World
) -> None:
    """A write's texts are handed out one at a time, longest first, to whichever thread is free: a
    slow text holds up only itself (halves fixed in advance left one thread idle behind it)."""

    class SlowOnTheLongest(CountingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.thread_of: dict[str, str] = {}

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            for text in texts:
                self.thread_of[text] = threading.current_thread().name
                if text.startswith("long"):
                    threading.Event().wait(0.3)
            return super().embed(texts)

    embedder = SlowOnTheLongest()
    slow = RecallEngine(engine.index, embedder)
    records = RecordService(world.ports, world.memories, None, lambda: slow)
    memory = world.memories.create(ALICE, name="m").memory
    texts = ["short one", "long " + "words " * 40, "short two", "short three", "short four"]
    records.observe(ALICE, memory.id, [RecordInput("episode", t, {}) for t in texts])
    long_thread = embedder.thread_of[texts[1]]
    others = {embedder.thread_of[t] for t in texts if t != texts[1]}
    assert len(others) == 1  # the other thread took all four
    assert long_thread not in others
