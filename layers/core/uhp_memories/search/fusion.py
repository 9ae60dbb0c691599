"""What every adapter shares above its own queries: the words of a text query, and the fusion of
scored signals into one ranking (relative score fusion with episode context, or weighted reciprocal
rank fusion; see Fusion). Pure Python."""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from uhp_memories.search.ports import CONTEXT, SIGNALS, Fusion, Hit, SearchRequest

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


def query_terms(text: str | None) -> list[str]:
    """The distinct words of a text query, lowercased, stopwords dropped (unless nothing else is left)."""
    if not text:
        return []
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in words if w not in STOPWORDS] or words
    return kept[:MAX_TERMS]


class Ranked(NamedTuple):
    """One document as one signal ranked it (rank 1 is best). A named tuple: a search makes a
    thousand of them, and a frozen dataclass costs several times as much to build."""

    record_id: str
    chain_id: str
    score: float
    memory_id: str = ""  # "": the request's own memory


def candidate_depth(request: SearchRequest, fusion: Fusion) -> int:
    return max(fusion.candidates, request.limit)


def fuse(
    request: SearchRequest,
    fusion: Fusion,
    legs: Mapping[str, Sequence[Ranked]],
    context: Mapping[str, float] | None = None,
) -> list[Hit]:
    """One ranking from the signals asked for. `legs` maps "query" / "text" to their rankings, or
    "recency" to the newest-first ranking of a filters-only request. `context` maps an episode's
    record id to the best own score among the episodes logged around it (Fusion's context), when the
    adapter knows its memory's log."""
    if "recency" in legs or fusion.method == "rrf":
        own = _reciprocal_ranks(fusion, legs)
    else:
        own = relative_scores(legs, relative_factors(fusion, legs))
    scores: dict[str, float] = own
    lifted: set[str] = set()
    if context and fusion.uses_context:
        scores, lifted = _with_context(own, context, fusion.context_weight)
    chains: dict[str, str] = {}
    memories: dict[str, str] = {}
    matched: dict[str, dict[str, float]] = {}
    for name, ranking in legs.items():
        for item in ranking:
            chains[item.record_id] = item.chain_id
            memories[item.record_id] = item.memory_id or request.memory_id
            if name != "recency":
                matched.setdefault(item.record_id, {})[name] = item.score
    order = heapq.nsmallest(request.limit, scores, key=lambda rid: (-scores[rid], rid))
    hits = []
    for rid in order:
        signals = matched.get(rid, {})
        why = [s for s in SIGNALS if s in signals]
        if request.has_filters:
            why.append("filters")
        if rid in lifted:
            why.append(CONTEXT)
        hits.append(Hit(rid, chains[rid], round(scores[rid], 6), tuple(why), dict(signals), memories[rid]))
    return hits


def relative_factors(fusion: Fusion, legs: Mapping[str, Sequence[Ranked]]) -> dict[str, float]:
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


def relative_scores(legs: Mapping[str, Sequence[Ranked]], factors: Mapping[str, float]) -> dict[str, float]:
    """Each candidate's own score under relative fusion (before context): the sum over signals of
    factor * max(raw score, 0)."""
    own: dict[str, float] = {}
    for name, ranking in legs.items():
        factor = factors.get(name, 0.0)
        for item in ranking:
            own[item.record_id] = own.get(item.record_id, 0.0) + factor * max(item.score, 0.0)
    return own


def _reciprocal_ranks(fusion: Fusion, legs: Mapping[str, Sequence[Ranked]]) -> dict[str, float]:
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
