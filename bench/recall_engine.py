"""Latency of the embedded recall engine at 10,000 and 100,000 documents in one memory.

Not a test. Random unit vectors (384 dimensions, as MiniLM's) and synthetic text drawn from a
Zipf-like vocabulary whose head is the English stopwords; 10% of the documents are closed versions,
every document carries two attributes. Measures, per size: ingest rate, then p50/p95 of search for each kind of request
(query only, text only, query + text, query + text + a field filter, filters only), engine only
(no HTTP, no embedding of the query). Every text starts with one of four speakers' names and half
the text queries name a speaker, so those match a quarter of the memory: BM25's worst common case.

Usage: python bench/recall_engine.py [sizes...] [--searches N] [--disk]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from uhp_memories.domain.filters import parse_filter
from uhp_memories.domain.recall import ranking
from uhp_memories.domain.recall.fusion import STOPWORDS
from uhp_memories.domain.recall.model import SearchDocument, SearchRequest
from uhp_memories.domain.timefmt import format_ms
from uhp_memories.local.embedded import EmbeddedSearchIndex

DIMS = 384
TENANT, MEMORY = "bench", "hmem_" + "0" * 32
T0 = 1_790_000_000_000
SPEAKERS = ["alice", "bob", "carol", "dave"]  # a conversation's speakers: in every text, as in a chat log


def vocabulary(size: int, rng: random.Random) -> list[str]:
    """English-like: the most frequent words are the stopwords, then made-up words."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    head = sorted(STOPWORDS)
    rng.shuffle(head)
    return head + ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size - len(head))]


def documents(count: int, seed: int = 1) -> list[SearchDocument]:
    rng = random.Random(seed)
    words = vocabulary(20_000, rng)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf: a few words are everywhere
    vectors = np.random.default_rng(seed).standard_normal((count, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = []
    for n in range(count):
        closed = rng.random() < 0.1
        speaker = rng.choice(SPEAKERS)
        docs.append(
            SearchDocument(
                tenant=TENANT,
                memory_id=MEMORY,
                record_id=f"hrec_{n:032x}",
                chain_id=f"hrec_{n:032x}",
                type=rng.choice(["episode", "fact", "note"]),
                status="superseded" if closed else "active",
                attributes={"speaker": speaker, "session": rng.randint(1, 50)},
                valid_from=None,
                valid_to=None,
                written_at=format_ms(T0 + n * 1000),
                invalidated_at=format_ms(T0 + n * 1000 + 500) if closed else None,
                text=speaker + ": " + " ".join(rng.choices(words, weights=weights, k=rng.randint(8, 40))),
                embedding=vectors[n],
            )
        )
    return docs


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(run: Callable[[], object], searches: int) -> tuple[float, float]:
    run()  # warm
    samples = []
    for _ in range(searches):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), percentile(samples, 0.95)


def bench(size: int, searches: int, disk: bool) -> None:
    docs = documents(size)
    folder = tempfile.mkdtemp(prefix="recall-bench-")
    path = Path(folder) / "recall.db" if disk else ":memory:"
    index = EmbeddedSearchIndex(path, model_id="bench-random-384", dimensions=DIMS)
    start = time.perf_counter()
    for at in range(0, size, 1000):
        index.index(docs[at : at + 1000])
    ingest = size / (time.perf_counter() - start)

    rng = np.random.default_rng(7)
    text_rng = random.Random(7)
    sample_texts = [d.text for d in docs[:: max(1, size // 500)]]

    def query_vector() -> list[float]:
        vector = rng.standard_normal(DIMS)
        return (vector / np.linalg.norm(vector)).tolist()

    def words() -> str:
        # Four words of a stored text, and half the time a speaker's name ("what did alice say about ...").
        chosen = text_rng.sample(text_rng.choice(sample_texts).split()[1:], 4)
        return " ".join(chosen + ([text_rng.choice(SPEAKERS)] if text_rng.random() < 0.5 else []))

    speaker = parse_filter({"field": "attributes.speaker", "op": "eq", "value": "alice"})
    kinds: dict[str, Callable[[], SearchRequest]] = {
        "query": lambda: SearchRequest(TENANT, MEMORY, vector=query_vector(), limit=10),
        "text": lambda: SearchRequest(TENANT, MEMORY, text=words(), limit=10),
        "query+text": lambda: SearchRequest(TENANT, MEMORY, vector=query_vector(), text=words(), limit=10),
        "query+text+filter": lambda: SearchRequest(
            TENANT, MEMORY, vector=query_vector(), text=words(), filters=speaker, limit=10
        ),
        "filters only": lambda: SearchRequest(TENANT, MEMORY, filters=speaker, types=("fact",), limit=10),
    }
    first = time.perf_counter()
    ranking.rank(index, kinds["query"]())
    cache_ms = (time.perf_counter() - first) * 1000
    print(
        f"\n{size:,} documents in one memory ({'disk, WAL' if disk else 'in memory'}): "
        f"ingest {ingest:,.0f} docs/s; first search (loads the vector cache) {cache_ms:.0f} ms"
    )
    print("| request | p50 ms | p95 ms |")
    print("|---|---|---|")
    for name, make in kinds.items():
        p50, p95 = measure(lambda make=make: ranking.rank(index, make()), searches)
        print(f"| {name} | {p50:.1f} | {p95:.1f} |")
    index.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[10_000, 100_000])
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--disk", action="store_true", help="an on-disk index (WAL) instead of :memory:")
    args = parser.parse_args()
    for size in args.sizes:
        bench(size, args.searches, args.disk)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
