"""What every adapter shares above its own queries: the words of a text query, and the fusion of
ranked signals into one ranking (weighted reciprocal rank fusion). Pure Python."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from uhp_memories.search.ports import SIGNALS, Fusion, Hit, SearchRequest

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


@dataclass(frozen=True)
class Ranked:
    """One document as one signal ranked it (rank 1 is best)."""

    record_id: str
    chain_id: str
    score: float


def candidate_depth(request: SearchRequest, fusion: Fusion) -> int:
    return max(fusion.candidates, request.limit)


def fuse(
    request: SearchRequest,
    fusion: Fusion,
    legs: Mapping[str, Sequence[Ranked]],
) -> list[Hit]:
    """One ranking from the signals asked for. `legs` maps "query" / "text" to their rankings, or
    "recency" to the newest-first ranking of a filters-only request."""
    weights = {"query": fusion.query_weight, "text": fusion.text_weight, "recency": 1.0}
    best = sum(weights[name] / (fusion.k + 1) for name in legs) or 1.0
    totals: dict[str, float] = {}
    chains: dict[str, str] = {}
    matched: dict[str, dict[str, float]] = {}
    for name, ranking in legs.items():
        for rank, item in enumerate(ranking, start=1):
            totals[item.record_id] = totals.get(item.record_id, 0.0) + weights[name] / (fusion.k + rank)
            chains[item.record_id] = item.chain_id
            if name != "recency":
                matched.setdefault(item.record_id, {})[name] = item.score
    order = sorted(totals, key=lambda rid: (-totals[rid], rid))[: request.limit]
    hits = []
    for rid in order:
        signals = matched.get(rid, {})
        why = [s for s in SIGNALS if s in signals]
        if request.has_filters:
            why.append("filters")
        hits.append(Hit(rid, chains[rid], round(totals[rid] / best, 6), tuple(why), dict(signals)))
    return hits
