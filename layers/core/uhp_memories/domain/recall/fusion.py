"""The maths of recall ranking, in one place for every adapter: the words of a text query, each
signal's share of its best (relative score fusion), weighted reciprocal rank fusion, and episode
context read from stretches of the log (see ports.Fusion). domain/recall/ranking.py decides what to ask the
index for; this module scores what it answered. Pure Python."""

from __future__ import annotations

import heapq
import re
from collections.abc import Container, Mapping, Sequence
from operator import itemgetter

from uhp_memories.domain.recall.model import CONTEXT, SIGNALS, Candidate, Fusion, Hit, SearchRequest

MAX_TERMS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
# Words that match nearly every English text: they add cost and noise, never ranking signal.
# (OpenSearch's `english` analyzer drops the same kind of words.)
_STOPWORD_TEXT = """
a about after again all am an and any are as at be been before being between both but by can could
did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not of off on
once only or other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_RECORD_ID, _SCORE = itemgetter(0), itemgetter(5)  # a Candidate's fields, read by C-level map


def query_terms(text: str | None) -> list[str]:
    """The distinct words of a text query, lowercased, stopwords dropped (unless nothing else is left)."""
    if not text:
        return []
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in words if w not in STOPWORDS] or words
    return kept[:MAX_TERMS]


def candidate_depth(request: SearchRequest, fusion: Fusion) -> int:
    return max(fusion.candidates, request.limit)


def fuse(
    request: SearchRequest,
    fusion: Fusion,
    legs: Mapping[str, Sequence[Candidate]],
    context: Mapping[str, float] | None = None,
) -> list[Hit]:
    """One ranking from the signals asked for. `legs` maps "query" / "text" to their rankings, or
    "recency" to the newest-first ranking of a filters-only request. `context` maps an episode's
    record id to the best own score among the episodes logged around it (Fusion's context:
    context_of)."""
    if "recency" in legs or fusion.method == "rrf":
        own = _reciprocal_ranks(fusion, legs)
    else:
        own = relative_scores(legs, relative_factors(fusion, legs))
    scores: dict[str, float] = own
    lifted: set[str] = set()
    if context and fusion.uses_context:
        scores, lifted = _with_context(own, context, fusion.context_weight)
    # Only the hits returned need their details: each leg by id, read for those alone (a recall
    # fuses about a thousand candidates and returns ten).
    by_leg = {name: {c.record_id: c for c in ranking} for name, ranking in legs.items()}
    order = heapq.nsmallest(request.limit, ((-score, rid) for rid, score in scores.items()))
    hits = []
    for _, rid in order:
        signals: dict[str, float] = {}
        for name, found in by_leg.items():
            doc = found.get(rid)
            if doc is not None:
                details = doc
                if name != "recency":
                    signals[name] = doc.score
        why = [s for s in SIGNALS if s in signals]
        if request.has_filters:
            why.append("filters")
        if rid in lifted:
            why.append(CONTEXT)
        memory_id = details.memory_id or request.memory_id
        hits.append(Hit(rid, details.chain_id, round(scores[rid], 6), tuple(why), signals, memory_id))
    return hits


def relative_factors(fusion: Fusion, legs: Mapping[str, Sequence[Candidate]]) -> dict[str, float]:
    """Relative fusion's factor per signal: a document's own score is the sum over signals of
    factor * max(raw score, 0), i.e. each signal's score as a share of its best in this request,
    weighted, averaged over the signals asked for; in [0, 1]."""
    weights = {"query": fusion.query_weight, "text": fusion.text_weight}
    asked = sum(weights[name] for name in legs if name in weights) or 1.0
    factors = {}
    for name, ranking in legs.items():
        top = max((item.score for item in ranking), default=0.0)
        if name in weights and top > 0:
            factors[name] = weights[name] / (top * asked)
    return factors


def relative_scores(legs: Mapping[str, Sequence[Candidate]], factors: Mapping[str, float]) -> dict[str, float]:
    """Each candidate's own score under relative fusion (before context): the sum over signals of
    factor * max(raw score, 0)."""
    own: dict[str, float] = {}
    for name, ranking in legs.items():
        factor = factors.get(name, 0.0)
        for item in ranking:
            own[item.record_id] = own.get(item.record_id, 0.0) + factor * max(item.score, 0.0)
    return own


def near_centres(stretch: Sequence[Candidate], centres: Container[str], window: int) -> list[int]:
    """The places in a stretch of the log within `window` of one of these centres (record ids), in
    order: the episodes a centre's context reaches."""
    near: list[int] = []
    end = 0
    is_centre = map(centres.__contains__, map(_RECORD_ID, stretch))  # C-level: a recall reads ~1,000
    for at, centre in enumerate(is_centre):
        if centre:
            near.extend(range(max(at - window, end), at + window + 1))
            end = at + window + 1
    while near and near[-1] >= len(stretch):
        near.pop()
    return near


def context_of(
    stretches: Sequence[Sequence[Candidate]],
    near: Sequence[Sequence[int]],
    window: int,
    factors: Mapping[str, float],
    words: Mapping[str, float],
    min_similarity: float | None,
) -> dict[str, float]:
    """Fusion's context from stretches of the log, each reaching twice the window beyond every
    centre in it, and the places in each within `window` of a centre (near_centres): each episode
    there mapped to the best own score among the episodes within `window` of it (itself left out),
    where that is above 0. Reading twice the window is what lets a neighbour of a centre be lifted
    by its own neighbours.

    An episode's own score is relative fusion's (relative_scores) from what is known of it: its
    similarity (the entry's score, which counts when it is above min_similarity and 0) and its BM25
    score (`words`, 0 when unknown)."""
    query_factor, text_factor = factors.get("query", 0.0), factors.get("text", 0.0)
    counted = max(min_similarity, 0.0) if min_similarity is not None else 0.0
    context: dict[str, float] = {}
    for stretch, places in zip(stretches, near, strict=True):
        if not places:
            continue
        own = [query_factor * s if s > counted else 0.0 for s in map(_SCORE, stretch)]
        if text_factor:
            for at, bm25 in enumerate(map(words.get, map(_RECORD_ID, stretch))):
                if bm25 is not None:
                    own[at] += text_factor * max(bm25, 0.0)
        padded = [0.0] * window + own + [0.0] * window
        size = len(own)
        # The best of the `window` places on either side of each place, in one pass of C-level max.
        shifted = [padded[window + d : window + d + size] for d in range(-window, window + 1) if d]
        best = list(map(max, *shifted)) if len(shifted) > 1 else shifted[0] if shifted else [0.0] * size
        for at in places:
            if best[at] > 0:
                context[stretch[at].record_id] = best[at]
    return context


def _reciprocal_ranks(fusion: Fusion, legs: Mapping[str, Sequence[Candidate]]) -> dict[str, float]:
    weights = {"query": fusion.query_weight, "text": fusion.text_weight, "recency": 1.0}
    best = sum(weights[name] / (fusion.k + 1) for name in legs) or 1.0
    totals: dict[str, float] = {}
    for name, ranking in legs.items():
        for rank, item in enumerate(ranking, start=1):
            totals[item.record_id] = totals.get(item.record_id, 0.0) + weights[name] / (fusion.k + rank)
    return {rid: total / best for rid, total in totals.items()}


def _with_context(
    own: Mapping[str, float], context: Mapping[str, float], weight: float
) -> tuple[dict[str, float], set[str]]:
    """Lift each document by the best of its neighbours: 1 - (1 - own) * (1 - weight * best). Stays
    in [0, 1] and keeps a perfect match at 1. `lifted`: the documents whose neighbours gave them more
    than they had of their own."""
    scores = dict(own)
    lifted: set[str] = set()
    for rid, best in context.items():
        score = own.get(rid)
        if score is None:
            continue  # no signal of its own: never returned
        gain = (1.0 - score) * weight * best
        scores[rid] = score + gain
        if gain > score:
            lifted.add(rid)
    return scores, lifted
