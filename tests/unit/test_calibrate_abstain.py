"""bench/calibrate_abstain.py: the calibration for an embedding model by the rule recall's default
follows (the highest threshold, in 0.01 steps, that abstains on at most 0.5% of answerable questions;
the names rule's; the scale's `certain`), on conversations indexed in memories of their own, and the
rule checked by leave-one-conversation-out. Checked here on small conversations with the hashing
embedder and on questions made up for the purpose; on the LoCoMo dev set with MiniLM it gives the
calibration recall.CALIBRATIONS holds (tests/contract/test_recall_quality.py writes it out)."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import calibrate_abstain
import recall_locomo as locomo
from calibrate_abstain import Asked

from uhp_memories.local.hashing import HashingEmbedder

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
    assert {kind: measured["n"] for kind, measured in result["in_sample"].items()} == {
        "answerable": 15, "adversarial": 3, "foreign": 6
    }
    threshold = result["threshold"]
    assert result["in_sample"]["answerable"]["abstain"] <= calibrate_abstain.TARGET
    assert result["in_sample"]["foreign"]["abstain"] > 0  # other conversations' questions do fall below it
    assert threshold == _threshold_worked_out(conversations)
    assert 0 < threshold < result["calibration"]["certain"] <= 1
    held_out = [run["held_out"] for run in result["leave_one_out"]]
    assert [run["target"] for run in result["leave_one_out"]] == list(calibrate_abstain.TARGETS)
    assert all(h["answerable"]["n"] == 15 and h["foreign"]["n"] == 6 for h in held_out)
    assert "| 0.50% (the product's) |" in "\n".join(calibrate_abstain.render(result))


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
    chosen = calibrate_abstain.threshold_by_rule(answerable, 0.01)
    assert chosen == pytest.approx(threshold)
    if answerable:
        assert statistics.fmean(v < chosen for v in answerable) <= 0.01


def test_the_products_rule_abstains_on_at_most_half_a_percent() -> None:
    one_in_a_hundred = [0.1] + [0.5] * 99
    assert calibrate_abstain.threshold_by_rule(one_in_a_hundred, 0.01) == pytest.approx(0.5)
    assert calibrate_abstain.threshold_by_rule(one_in_a_hundred) == pytest.approx(0.1)
    assert calibrate_abstain.threshold_by_rule([0.1] + [0.5] * 199) == pytest.approx(0.5)


def asked(memory: int, kind: str, similarity: float, *, origin: int | None = None, unknown: bool = False) -> Asked:
    return Asked(memory, memory if origin is None else origin, kind, similarity, unknown)


def test_the_rule_chooses_threshold_names_and_certain_from_the_questions_it_is_given() -> None:
    def questions(named_at: float) -> list[Asked]:
        return [
            *[asked(0, "answerable", 0.6) for _ in range(197)],
            asked(0, "answerable", 0.45),  # 1 in 200 is 0.5%: the threshold may pass it, and no more
            asked(0, "answerable", 0.50),
            asked(0, "answerable", named_at, unknown=True),  # names someone unknown: the names rule stops at it
            asked(0, "foreign", 0.72, origin=1),
            asked(0, "foreign", 0.2, origin=1, unknown=True),
        ]

    chosen = calibrate_abstain.choose(questions(named_at=0.56))
    assert (chosen.threshold, chosen.named, chosen.certain) == pytest.approx((0.50, 0.56, 0.72))
    assert calibrate_abstain.measure(chosen, questions(0.56))["answerable"]["abstain"] == pytest.approx(1 / 200)
    # At the threshold already, any names threshold above it would abstain on a second question.
    assert calibrate_abstain.choose(questions(named_at=0.50)).named is None


def test_leave_one_out_calibrates_without_the_held_out_conversation_and_pools_what_it_measures() -> None:
    questions = [
        *[asked(0, "answerable", 0.6) for _ in range(10)],
        *[asked(1, "answerable", 0.3) for _ in range(10)],
        *[asked(2, "answerable", 0.6) for _ in range(10)],
        asked(0, "foreign", 0.95, origin=1),  # conversation 1's question, asked of memory 0
        asked(0, "foreign", 0.2, origin=2),
        asked(1, "foreign", 0.2, origin=0),
        asked(2, "foreign", 0.1, origin=0),
    ]
    run = calibrate_abstain.leave_one_out(questions, 0.005)
    folds = {fold["held_out"]: fold for fold in run["folds"]}
    # Without conversation 1 every answerable question is at 0.6, so the threshold goes there; and
    # conversation 1's own question asked of memory 0 (0.95) is left out of that fold's `certain`.
    assert (folds[1]["threshold"], folds[1]["certain"]) == pytest.approx((0.60, 0.61))
    assert (folds[0]["threshold"], folds[2]["threshold"]) == pytest.approx((0.30, 0.30))
    assert folds[2]["certain"] == pytest.approx(0.95)
    held = run["held_out"]
    assert (held["answerable"]["abstain"], held["answerable"]["n"]) == (pytest.approx(10 / 30), 30)
    assert (held["foreign"]["abstain"], held["foreign"]["n"]) == (pytest.approx(3 / 4), 4)
    assert held["adversarial"]["n"] == 0
