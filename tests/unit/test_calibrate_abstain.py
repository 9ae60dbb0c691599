"""bench/calibrate_abstain.py: the threshold for an embedding model by the rule recall's default
follows (the highest, in 0.01 steps, that abstains on at most 1% of answerable questions), on
conversations indexed in memories of their own. Checked here on small conversations with the hashing
embedder; on the LoCoMo dev set with MiniLM it gives the threshold recall.CALIBRATED_SIMILARITY holds."""

from __future__ import annotations

import math
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
    assert threshold == _threshold_worked_out(conversations)
    assert 0 < threshold < 1


def _threshold_worked_out(conversations: list[locomo.Conversation]) -> float:
    """The same threshold reached without the calibrator or the search engine: each answerable
    question's best cosine similarity to a turn of its own conversation (five turns, all within the
    ten results recall returns), and, with 15 questions, "at most 1% below" means none below: the
    highest 0.01 step at or under the smallest of them."""
    embedder = HashingEmbedder(64)
    best = []
    for conv in conversations:
        turns = embedder.embed([turn.content for turn in conv.turns])
        for question in conv.questions:
            if question.category != 5:
                (asked,) = embedder.embed([question.text])
                best.append(max(_cosine(asked, turn) for turn in turns))
    assert len(best) == 15
    return min(math.floor(min(best) * 100) / 100, 0.99)


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


@pytest.mark.parametrize(
    ("answerable", "threshold"),
    [([0.5] * 200, 0.5), ([0.1] + [0.5] * 199, 0.5), ([0.1, 0.1, 0.1] + [0.5] * 97, 0.1)],
)
def test_the_rule_is_the_highest_threshold_abstaining_on_at_most_one_percent(answerable, threshold) -> None:
    chosen = locomo.threshold_by_rule(answerable)
    assert chosen == pytest.approx(threshold)
    if answerable:
        assert statistics.fmean(v < chosen for v in answerable) <= 0.01
