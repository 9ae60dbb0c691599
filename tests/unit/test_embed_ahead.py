"""A write's texts are embedded while DynamoDB commits (RecallEngine.embed_ahead), over the in-memory
fakes, the embedded index and the hashing embedder: the vectors made ahead are the ones indexed, in
the order of the write, made once; a write that fails commits nothing to the index; a text the write
no longer indexes as it was embedded is embedded again."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest

from tests.unit.conftest import World, caller
from uhp_memories.domain.errors import MemoryNotFound
from uhp_memories.domain.records import RecordInput, RecordService
from uhp_memories.search.embedded import EmbeddedSearchIndex
from uhp_memories.search.engine import RecallEngine
from uhp_memories.search.hashing import HashingEmbedder

ALICE = caller("user:alice")
BOB = caller("user:bob")


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds and the threads it embeds them on."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.texts.extend(texts)
            self.threads.add(threading.current_thread().name)
        return super().embed(texts)


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
    assert counted(engine).texts == []  # access is checked before anything is embedded
    assert engine.search(ALICE.tenant, memory.id, text="write", limit=5) == []


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
