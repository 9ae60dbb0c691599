"""bench/calibrate_abstain.py: the threshold for an embedding model by the rule recall's default
follows (the highest, in 0.01 steps, that abstains on at most 1% of answerable questions), on
conversations indexed in memories of their own. Checked here on small conversations with the hashing
embedder; on the LoCoMo dev set with MiniLM it gives the threshold recall.CALIBRATED_SIMILARITY holds."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import calibrate_abstain
import recall_locomo as locomo

from uhp_memories.search.hashing import HashingEmbedder

TOPICS = [
    ("Ana", "Ben", ["painting", "sunrise", "lake", "canvas", "brushes"]),
    ("Caro", "Dev", ["adoption", "agency", "counselor", "family", "papers"]),
    ("Eli", "Fay", ["marathon", "training", "shoes", "knee", "finish"]),
]


def conversation(n: int) -> locomo.Conversation:
    first, second, words = TOPICS[n]
    turns = [
        locomo.Turn(f"D1:{i}", 1, (first, second)[i % 2], f"We talked about the {w} and the {w} again.",
                    "2023-05-08T13:56:00Z")
        for i, w in enumerate(words)
    ]
    questions = [locomo.Question(f"What about the {w}?", 4, frozenset({f"D1:{i}"})) for i, w in enumerate(words)]
    questions.append(locomo.Question(f"Why did {first} mention the {words[0]}?", 5, frozenset()))
    return locomo.Conversation(f"conv-{n}", (first, second), turns, questions)


def test_the_threshold_follows_the_rule_and_reports_what_it_abstains_on() -> None:
    conversations = [conversation(n) for n in range(3)]
    result = calibrate_abstain.calibrate(HashingEmbedder(64), conversations)
    assert result["questions"] == {"answerable": 15, "adversarial": 3, "foreign": 6}
    threshold = result["threshold"]
    assert result["abstains"]["answerable"] <= 0.01
    assert result["abstains"]["foreign"] > 0  # other conversations' questions do fall below it
    assert threshold == locomo.threshold_by_rule(_best_answerable(conversations))


def _best_answerable(conversations: list[locomo.Conversation]) -> list[float]:
    """The same measure, taken again without the calibrator: the best query similarity of each
    answerable question among its memory's default results."""
    from uhp_memories.search.embedded import EmbeddedSearchIndex
    from uhp_memories.search.engine import RecallEngine

    embedder = HashingEmbedder(64)
    engine = RecallEngine(EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=64), embedder)
    best = []
    for index, conv in enumerate(conversations):
        memory_id = f"hmem_{index:032x}"
        engine.index_versions(calibrate_abstain.turn_versions(memory_id, conv.turns))
        for q in conv.questions:
            if q.category != 5:
                hits = engine.search(calibrate_abstain.TENANT, memory_id, query=q.text, text=q.text, limit=10)
                best.append(max(float(h.signals.get("query", -1.0)) for h in hits))
    return best


@pytest.mark.parametrize(
    ("answerable", "threshold"),
    [([0.5] * 200, 0.5), ([0.1] + [0.5] * 199, 0.5), ([0.1, 0.1, 0.1] + [0.5] * 97, 0.1)],
)
def test_the_rule_is_the_highest_threshold_abstaining_on_at_most_one_percent(answerable, threshold) -> None:
    chosen = locomo.threshold_by_rule(answerable)
    assert chosen == pytest.approx(threshold)
    if answerable:
        assert statistics.fmean(v < chosen for v in answerable) <= 0.01
