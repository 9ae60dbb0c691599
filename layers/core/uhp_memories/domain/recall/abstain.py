"""When a recall answers nothing (§6 `abstain`): calibrated scores and the named-word check."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uhp_memories.domain.recall.model import (
    RecallInput,
)
from uhp_memories.domain.recall.ports import RecallIndex, SearchHit

# Below this score recall abstains: the best result's score is the answer's confidence (see
# Calibration), so `abstain` and the scores a reader sees always agree.
logger = logging.getLogger(__name__)
ABSTAIN_BELOW = 0.5


@dataclass(frozen=True)
class Calibration:
    """How one embedding model's cosine similarities read as recall scores, comparable across requests.

    A score is `0.5 + 0.5 * (similarity - threshold) / (certain - threshold)`, clipped to [0, 1]: a
    straight line through 0.5 at `threshold` (below it recall abstains) and 1.0 at `certain`. A
    question that names someone or something no record of the memory mentions (named_words), and
    whose similarity is below `named`, is scored as if its similarity were `named - threshold` lower:
    below 0.5, so recall abstains on it (it asks about people this memory never met). Names are
    checked only then, in one index call that stops at each name's first document.

    Chosen on the LoCoMo dev split by leave-one-conversation-out (bench/calibrate_abstain.py,
    docs/benchmarks.md "Abstain"): `threshold` the highest that abstains on at most 0.5% of the
    calibration conversations' answerable questions (at 1% the held-out rate was 1.4%); `named` the
    highest that keeps them there; `certain` the best similarity any question about another
    conversation reached (a score of 1 is a match no off-topic question got). LoCoMo's adversarial
    questions, which name the wrong speaker for something that was said, look exactly as similar
    as answerable ones and are not caught: similarity cannot tell who said it."""

    threshold: float
    certain: float
    named: float | None = None

    def __post_init__(self) -> None:
        if not self.certain > self.threshold:
            raise ValueError("a calibration's certain similarity is above its threshold")

    def score(self, similarity: float, unknown_name: bool = False) -> float:
        """The score of a best cosine similarity (rounded as a result's score is: what abstain reads
        is what the reader sees); `unknown_name`: the question names someone no record mentions."""
        if unknown_name and self.named is not None and similarity < self.named:
            similarity -= self.named - self.threshold
        line = 0.5 + 0.5 * (similarity - self.threshold) / (self.certain - self.threshold)
        return round(min(1.0, max(0.0, line)), 6)

    def at(self, threshold: float) -> Calibration:
        """The same scale moved to another threshold (a stage's setting: `UHP_ABSTAIN_SIMILARITY`)."""
        shift = threshold - self.threshold
        named = self.named + shift if self.named is not None else None
        return Calibration(threshold, self.certain + shift, named)


# Each embedding model's calibration (bench/calibrate_abstain.py prints it). A model not listed has
# UNCALIBRATED's until a stage sets the threshold bench/calibrate_abstain.py measures for it.
CALIBRATIONS = {
    "sentence-transformers/all-MiniLM-L6-v2:onnx-int8-u8u8": Calibration(threshold=0.40, certain=0.66, named=0.54),
}


# A model not calibrated in code (Titan in AWS, which cannot be reached from where this is built): a
# placeholder, until a stage sets the threshold bench/calibrate_abstain.py measures for its model
# (cdk.json `embeddings.abstain_similarity`, read as UHP_ABSTAIN_SIMILARITY); the scale keeps the
# placeholder's width (0.30 from 0.5 to 1), and no names rule applies.
UNCALIBRATED_SIMILARITY = 0.30


UNCALIBRATED = Calibration(threshold=UNCALIBRATED_SIMILARITY, certain=0.60)


# Capitalized words that name no one: months and days (a question's dates), and titles.
_NOT_NAMES = frozenset(
    (
        *("january", "february", "march", "april", "may", "june", "july", "august", "september"),
        *("october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep"),
        *("sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday"),
        *("saturday", "sunday", "dr", "mr", "mrs", "ms"),
    )
)


_QUOTED = re.compile("\"[^\"]*\"|\u201c[^\u201d]*\u201d")  # "..." and the curly pair


_SENTENCE_END = re.compile(r"[.?!]\s+")


_WORD = re.compile("[^\\W\\d_][\\w'\u2019]*")  # a letter, then letters, digits, apostrophes


_POSSESSIVE = re.compile("['\u2019]s$")


def named_words(question: str) -> list[str]:
    """The names a question uses (lowercased, in order, once each): capitalized words that do not
    start a sentence, outside quotes (a title's words are capitalized for being a title), longer
    than a letter, neither a month, a day nor a title such as Dr; "Caroline's" names Caroline."""
    found: list[str] = []
    for sentence in _SENTENCE_END.split(_QUOTED.sub(" ", question)):
        for place, word in enumerate(_WORD.findall(sentence)):
            name = _POSSESSIVE.sub("", word)
            lowered = name.lower()
            if place and len(name) > 1 and name[0].isupper() and lowered not in _NOT_NAMES and lowered not in found:
                found.append(lowered)
    return found


def best_similarity(hits: Sequence[SearchHit]) -> float:
    """The best cosine similarity of the query among these hits (-1 when none has one): what the
    confidence of an answer is read from, and calibrated on."""
    return max((float(h.signals.get("query", -1.0)) for h in hits), default=-1.0)


@dataclass(frozen=True)
class Judgement:
    """How well an answer answers its request: `confidence`, the best result's score (0 to 1), and
    `abstain`, true when nothing was found for a query or words, or the confidence is below 0.5."""

    confidence: float
    abstain: bool


@dataclass(frozen=True)
class AbstainPolicy:
    """How sure an answer is, and when it does not answer the question (§6.3 `abstain`).

    For a `query`, the confidence is the model's Calibration of the best cosine similarity among
    the results returned (`min_query_similarity` moves the model's scale to that threshold; None:
    as calibrated), lowered for a question naming someone the memory never mentions. A request
    without a query (words, fields), or whose query could not be embedded, has no meaning to
    measure: what matched is certain (1.0). Nothing found for a query or words is 0, and abstains;
    nothing found for fields alone does not (an empty selection is an answer)."""

    min_query_similarity: float | None = None

    def calibration(self, model_id: str | None) -> Calibration:
        calibrated = CALIBRATIONS.get(model_id or "", UNCALIBRATED)
        if self.min_query_similarity is None:
            return calibrated
        return calibrated.at(self.min_query_similarity)

    def threshold(self, model_id: str | None) -> float:
        return self.calibration(model_id).threshold

    def judge(
        self,
        request: RecallInput,
        hits: Sequence[SearchHit],
        model_id: str | None = None,
        unmatched: Callable[[list[str]], list[str]] | None = None,
    ) -> Judgement:
        """`request` as searched (its query None when it was not embedded); `unmatched(words)`: the
        words no record the request admits contains (asked only of a weak match naming someone)."""
        if not hits:
            return Judgement(0.0, bool(request.query or request.text))
        if not request.query:
            return Judgement(1.0, False)
        calibration = self.calibration(model_id)
        best = best_similarity(hits)
        confidence = calibration.score(best)
        if calibration.named is not None and best < calibration.named and unmatched is not None:
            names = named_words(request.query)
            if names and unmatched(names):
                confidence = calibration.score(best, unknown_name=True)
        return Judgement(confidence, confidence < ABSTAIN_BELOW)

    def abstain(
        self,
        request: RecallInput,
        hits: Sequence[SearchHit],
        model_id: str | None = None,
        unmatched: Callable[[list[str]], list[str]] | None = None,
    ) -> bool:
        return self.judge(request, hits, model_id, unmatched).abstain


def unmatched_names(index: RecallIndex, tenant: str, memory_id: str, words: list[str], **request: Any) -> list[str]:
    """The names no record mentions; none when the index cannot say (a recall that found its
    results is not failed, nor abstained on, for the names check alone)."""
    try:
        return index.unmatched(tenant, memory_id, words, **request)
    except Exception as error:  # the search has answered already: this only refines abstain
        logger.warning("recall names check failed", extra={"error_type": type(error).__name__})
        return []
