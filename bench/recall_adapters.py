"""Recall quality of the OpenSearch adapter beside the embedded engine, on LoCoMo dev conversations.

The OpenSearch adapter runs over the in-process stand-in of the contract tests
(tests/contract/opensearch_fake.py: exact k-NN, BM25 without stemming), with the same MiniLM vectors,
so the figures check that the adapter retrieves what the embedded engine does (both are ranked by
domain/recall/ranking.py: relative fusion, episode context read from the log around every candidate, exact
similarity for what the words found); they are not OpenSearch's own. Slow (the stand-in is pure
Python): a sample of questions.

    python bench/recall_adapters.py [--conversation N] [--questions N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import recall_locomo as locomo  # noqa: E402

import uhp_memories.adapters.opensearch as opensearch  # noqa: E402
from tests.contract.opensearch_fake import FakeOpenSearch  # noqa: E402
from uhp_memories.adapters.system import RandomIds  # noqa: E402
from uhp_memories.domain.recall.model import Fusion, SearchDocument, SearchRequest  # noqa: E402
from uhp_memories.domain.recall.ranking import rank  # noqa: E402
from uhp_memories.domain.timefmt import format_ms  # noqa: E402
from uhp_memories.local.embedded import EmbeddedSearchIndex  # noqa: E402
from uhp_memories.local.minilm import MiniLmEmbedder  # noqa: E402

T0 = 1_700_000_000_000
PER_OBSERVE = 20  # episodes sharing one written_at, as one observe call writes them


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--questions", type=int, default=40)
    args = parser.parse_args()
    conversation = locomo.load_locomo(locomo.DEFAULT_DATA)[args.conversation]
    embedder = MiniLmEmbedder()
    vectors = embedder.embed([t.content for t in conversation.turns])
    ids, dia_of, docs = RandomIds(), {}, []
    for i, (turn, vector) in enumerate(zip(conversation.turns, vectors, strict=True)):
        rid = ids.new("hrec_")
        dia_of[rid] = turn.dia_id
        docs.append(SearchDocument(
            tenant="t", memory_id="m", record_id=rid, chain_id=rid, type="episode", status="active",
            attributes={}, valid_from=None, valid_to=None, written_at=format_ms(T0 + (i // PER_OBSERVE) * 1000),
            invalidated_at=None, text=turn.content, embedding=vector,
        ))
    embedded = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    on_opensearch = opensearch.OpenSearchIndex(
        FakeOpenSearch(), "recall", model_id=embedder.model_id, dimensions=embedder.dimensions, refresh=True, replicas=0
    )
    on_opensearch.ensure_index()
    for index in (embedded, on_opensearch):
        index.index(docs)
    questions = [q for q in conversation.questions if q.evidence]
    random.Random(args.conversation).shuffle(questions)
    questions = questions[: args.questions]
    runs = {
        "embedded": (embedded, None),
        "opensearch": (on_opensearch, None),
        "opensearch, no context": (on_opensearch, Fusion(context_weight=0.0)),
    }
    found: dict[str, list[float]] = {name: [] for name in runs}
    start = time.perf_counter()
    for question in questions:
        vector = embedder.embed([question.text])[0]
        for name, (index, fusion) in runs.items():
            hits = rank(index, SearchRequest("t", "m", vector=vector, text=question.text, limit=10, fusion=fusion))
            ranked = {dia_of[h.record_id] for h in hits}
            found[name].append(len(question.evidence & ranked) / len(question.evidence))
    print(f"conversation {args.conversation}, {len(questions)} questions: R@10")
    for name, shares in found.items():
        print(f"  {name:24} {sum(shares) / len(shares):.3f}")
    print(f"  ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
