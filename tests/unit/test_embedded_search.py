"""What only the embedded engine promises, beyond the SearchIndex contract: erased text leaves no
bytes on disk, the per-memory vector cache and episode log stay exact through writes and reopening,
and the index can be shared by threads."""

from __future__ import annotations

import random
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from uhp_memories.domain.filters import parse_filter
from uhp_memories.domain.recall.model import Candidate, Fusion, SearchDocument, SearchRequest
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.local.embedded import EmbeddedSearchIndex

TENANT, MEMORY = "acme", "hmem_" + "a" * 32
DIMS = 16


def unit(rng: np.random.Generator) -> list[float]:
    vector = rng.standard_normal(DIMS)
    return (vector / np.linalg.norm(vector)).tolist()


def doc(n: int, text: str, vector: list[float] | None, **fields: object) -> SearchDocument:
    base: dict[str, object] = {
        "tenant": TENANT,
        "memory_id": MEMORY,
        "record_id": f"hrec_{n:032x}",
        "chain_id": f"hrec_{n:032x}",
        "type": "fact",
        "status": "active",
        "attributes": {},
        "valid_from": None,
        "valid_to": None,
        "written_at": "2026-10-01T00:00:00.000Z",
        "invalidated_at": None,
        "text": text,
        "embedding": vector,
    }
    base.update(fields)
    return SearchDocument(**base)  # type: ignore[arg-type]


def open_index(path: Path | str = ":memory:") -> EmbeddedSearchIndex:
    return EmbeddedSearchIndex(path, model_id="test-model", dimensions=DIMS)


def stored_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def test_erased_text_and_attributes_leave_no_bytes_in_the_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    index = open_index(tmp_path / "recall.db")
    index.index([doc(n, f"ordinary words number {n}", unit(rng)) for n in range(50)])
    secret = doc(99, "the zqxjvbnsecret password", unit(rng), attributes={"pin": "pwlmfhsecret"})
    index.index([secret])
    index.index([doc(n, f"more ordinary words {n}", unit(rng)) for n in range(100, 150)])
    assert b"zqxjvbnsecret" in stored_bytes(tmp_path)  # the probe can see it before the erase
    index.delete(TENANT, MEMORY, [secret.record_id])
    index.close()
    leftover = stored_bytes(tmp_path)
    assert b"zqxjvbnsecret" not in leftover
    assert b"pwlmfhsecret" not in leftover


def test_deleting_a_memory_drops_its_text_index(tmp_path: Path) -> None:
    index = open_index(tmp_path / "recall.db")
    index.index([doc(1, "uniquezzyword", None)])
    index.delete_memory(TENANT, MEMORY)
    index.close()
    tables = sqlite3.connect(tmp_path / "recall.db").execute("SELECT name FROM sqlite_master").fetchall()
    assert not [name for (name,) in tables if name.startswith("fts_")]
    assert b"uniquezzyword" not in stored_bytes(tmp_path)


def brute_force(docs: dict[str, SearchDocument], query: list[float], k: int) -> list[str]:
    scored = [(float(np.dot(d.embedding, query)), rid) for rid, d in docs.items() if d.embedding is not None]
    scored = [s for s in scored if s[0] > 0]
    return [rid for _, rid in sorted(scored, key=lambda s: (-s[0], s[1]))[:k]]


def test_the_vector_cache_stays_exact_through_inserts_replacements_deletes_and_reopening(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    pick = random.Random(2)
    index = open_index(tmp_path / "recall.db")
    rank(index, SearchRequest(TENANT, MEMORY, vector=unit(rng)))  # load the (empty) cache first
    live: dict[str, SearchDocument] = {}
    for step in range(400):
        n = pick.randrange(150)
        action = pick.random()
        if action < 0.6:
            item = doc(n, "text", unit(rng) if pick.random() < 0.9 else None)
            index.index([item])
            live[item.record_id] = item
        else:
            index.delete(TENANT, MEMORY, [f"hrec_{n:032x}"])
            live.pop(f"hrec_{n:032x}", None)
        if step % 50 == 0:
            query = unit(rng)
            hits = rank(index, SearchRequest(TENANT, MEMORY, vector=query, limit=20, fusion=Fusion(candidates=20)))
            assert [h.record_id for h in hits] == brute_force(live, query, 20)
    query = unit(rng)
    before = [h.record_id for h in rank(index, SearchRequest(TENANT, MEMORY, vector=query, limit=30))]
    index.close()
    reopened = open_index(tmp_path / "recall.db")
    after = [h.record_id for h in rank(reopened, SearchRequest(TENANT, MEMORY, vector=query, limit=30))]
    assert before == after == brute_force(live, query, 30)


@pytest.mark.slow
def test_the_episode_log_stays_exact_through_appends_late_writes_closes_erases_and_reopening(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    pick = random.Random(5)
    index = open_index(tmp_path / "recall.db")
    live: dict[str, SearchDocument] = {}
    query = unit(rng)
    bob = parse_filter({"field": "attributes.speaker", "op": "eq", "value": "bob"})
    for step in range(300):
        n, action = pick.randrange(80), pick.random()
        if action < 0.95:  # mostly appends in write order, sometimes a late one, sometimes a close
            written = step if pick.random() < 0.8 else pick.randrange(step + 1)
            item = live.get(f"hrec_{n:032x}")
            if item is not None and pick.random() < 0.5:
                item = replace(item, status="superseded", invalidated_at="2027-01-01T00:00:00.000Z")
            else:
                item = doc(
                    n, "words", unit(rng) if pick.random() < 0.9 else None,
                    type=pick.choice(["episode", "episode", "fact"]), written_at=_at(written),
                    attributes={"speaker": pick.choice(["bob", "carol"])},
                )
            index.index([item])
            live[item.record_id] = item
        else:  # an erase: the log is read again
            index.delete(TENANT, MEMORY, [f"hrec_{n:032x}"])
            live.pop(f"hrec_{n:032x}", None)
        if step % 10 == 9:
            centres = [_candidate(d) for d in live.values() if d.type == "episode" and d.status == "active"][:12]
            for flt in (None, bob):
                request = SearchRequest(TENANT, MEMORY, vector=query, filters=flt)
                got = index.log_around(request, centres, ("episode",), 3)
                fresh = open_index(tmp_path / "recall.db")  # reads the log from the table again
                assert got == fresh.log_around(request, centres, ("episode",), 3)
                fresh.close()
                for stretch in got.stretches:
                    for entry in stretch:
                        vector = live[entry.record_id].embedding
                        expected = 0.0 if vector is None else float(np.dot(vector, query))
                        assert entry.score == pytest.approx(expected, abs=1e-5)
    index.close()


def _at(seconds: int) -> str:
    return f"2026-10-01T00:{seconds // 60 % 60:02d}:{seconds % 60:02d}.000Z"


def _candidate(d: SearchDocument) -> Candidate:
    return Candidate(d.record_id, d.chain_id, d.memory_id, d.type, d.written_at)


@pytest.mark.slow
def test_threads_can_write_and_search_one_index_at_once() -> None:
    index = open_index()
    errors: list[BaseException] = []

    def writer(offset: int) -> None:
        rng = np.random.default_rng(offset)
        try:
            for n in range(offset, offset + 100):
                index.index([doc(n, f"shared word w{n}", unit(rng))])
        except BaseException as error:
            errors.append(error)

    def reader(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(100):
                hits = rank(index, SearchRequest(TENANT, MEMORY, vector=unit(rng), text="shared", limit=5))
                assert len({h.record_id for h in hits}) == len(hits)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(k * 1000,)) for k in range(3)]
    threads += [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    every = rank(index, SearchRequest(TENANT, MEMORY, text="shared", limit=1000, fusion=Fusion(candidates=1000)))
    assert len(every) == 300


def test_a_search_request_is_validated() -> None:
    with pytest.raises(ValueError, match="include"):
        SearchRequest(TENANT, MEMORY, include="some")
    with pytest.raises(ValueError, match="limit"):
        SearchRequest(TENANT, MEMORY, limit=0)
    with pytest.raises(ValueError, match="tenant"):
        SearchRequest("", MEMORY)
    assert SearchRequest(TENANT, MEMORY, as_of="2026-10-01T00:00:00Z").as_of == "2026-10-01T00:00:00.000Z"


def test_in_a_large_memory_common_words_only_score_documents_that_match_a_rarer_word() -> None:
    texts = [
        "alice said hello",
        "alice went home",
        "alice likes tea",
        "alice again",
        "alice research notes",
        "research",
    ]
    docs = [doc(n, text, None) for n, text in enumerate(texts)]
    pruned, exact = EmbeddedSearchIndex(model_id="m", dimensions=DIMS, common_docs=3), open_index()
    for index in (pruned, exact):
        index.index(docs)
    wide = Fusion(candidates=100)
    found = [h.record_id for h in rank(pruned, SearchRequest(TENANT, MEMORY, text="alice research", fusion=wide))]
    assert set(found) == {docs[4].record_id, docs[5].record_id}  # "alice" (in 5 documents) is common here
    everything = rank(exact, SearchRequest(TENANT, MEMORY, text="alice research", fusion=wide))
    assert [h.record_id for h in everything][:2] == found
    assert len(everything) == 6
    only_common = rank(pruned, SearchRequest(TENANT, MEMORY, text="alice", fusion=wide))
    assert len(only_common) == 5  # a query of common words only is scored in full


@pytest.mark.slow
@pytest.mark.parametrize(
    "raw",
    [
        {"field": "attributes.k", "op": "eq", "value": 3},  # a tenth of the memory
        {"field": "attributes.k", "op": "lt", "value": 6},  # most of it
        {"field": "attributes.rare", "op": "exists", "value": True},  # a handful
        {"field": "attributes.k", "op": "eq", "value": 99},  # nothing
    ],
)
def test_a_filtered_vector_search_returns_the_exact_top_of_the_filtered_set(raw: dict[str, object]) -> None:
    from uhp_memories.domain.filters import matches, parse_filter
    from uhp_memories.domain.records.model import RecordVersion

    rng = np.random.default_rng(3)
    index = open_index()
    docs = [
        doc(n, "t", unit(rng), attributes={"k": n % 10, **({"rare": True} if n % 397 == 0 else {})})
        for n in range(4000)
    ]
    index.index(docs)
    flt = parse_filter(raw)
    for _ in range(5):
        query = unit(rng)
        hits = rank(
            index, SearchRequest(TENANT, MEMORY, vector=query, filters=flt, limit=10, fusion=Fusion(candidates=10))
        )
        admitted = {
            d.record_id: d
            for d in docs
            if matches(
                flt,
                RecordVersion(
                    TENANT,
                    MEMORY,
                    d.record_id,
                    d.chain_id,
                    1,
                    "fact",
                    "t",
                    dict(d.attributes),
                    "active",
                    None,
                    None,
                    None,
                    None,
                    d.written_at,
                    None,
                    {},
                ),
            )
        }
        assert [h.record_id for h in hits] == brute_force(admitted, query, 10)
