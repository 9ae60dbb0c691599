"""LoCoMo's conversations and questions, as the benchmarks read them.

The dev file (DEFAULT_DATA) parsed into conversations of turns and questions (load_locomo), and the
questions each conversation's memory is asked to calibrate and measure abstain (abstain_questions).
Imported by bench/recall_locomo.py and bench/calibrate_abstain.py (and, through recall_locomo, by
the other benchmarks); it imports no other bench script.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo" / "locomo-dev.json"


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    date: str  # RFC 3339

    @property
    def content(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]


def session_date(raw: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00Z' (LoCoMo gives no zone: taken as UTC)."""
    moment = datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def evidence_ids(raw: Sequence[str], known: set[str]) -> frozenset[str]:
    """LoCoMo's evidence lists hold a few malformed entries ('D8:6; D9:17', 'D:11:26', 'D'): split
    them, repair the obvious, and drop ids that name no turn."""
    found = set()
    for entry in raw:
        for part in re.split(r"[;,\s]+", entry):
            match = re.fullmatch(r"D:?(\d+):(\d+)", part.strip())
            if match:
                dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
                if dia_id in known:
                    found.add(dia_id)
    return frozenset(found)


def load_locomo(path: Path) -> list[Conversation]:
    conversations = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        sessions = sorted(
            int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)) and conv[key]
        )
        turns = [
            Turn(t["dia_id"], s, t["speaker"], t["text"], session_date(conv[f"session_{s}_date_time"]))
            for s in sessions
            for t in conv[f"session_{s}"]
        ]
        known = {t.dia_id for t in turns}
        questions = [
            Question(q["question"], int(q["category"]), evidence_ids(q.get("evidence", []), known))
            for q in sample["qa"]
        ]
        conversations.append(
            Conversation(sample["sample_id"], (conv["speaker_a"], conv["speaker_b"]), turns, questions)
        )
    return conversations


def abstain_questions(conversations: Sequence[Conversation], index: int) -> list[tuple[str, str]]:
    """The questions asked of conversation `index`'s memory to calibrate and measure abstain, with
    their kind: its own (answerable, or adversarial: category 5), and a sixth of the other
    conversations' answerable ones ("foreign": about people this memory never heard of)."""
    conv = conversations[index]
    own = [(("adversarial" if q.category == 5 else "answerable"), q.text) for q in conv.questions]
    foreign = [
        ("foreign", q.text)
        for other in conversations
        if other is not conv
        for n, q in enumerate(other.questions)
        if q.category != 5 and n % 6 == index % 6
    ]
    return own + foreign
