"""Recall ranking, above the SearchIndex port: what to ask the index for, in which order, and how
its answers become one ranking (ports.Fusion). Every adapter is ranked by this module, so local mode
ranks as production does; the adapters only store and retrieve.

A request costs at most three calls to the index: the signals' candidates (one round trip), then,
for relative fusion, the episode log around the candidate episodes with the similarity to the
query of each entry and of what the words found outside the query signal (OpenSearch: one round
trip for the log, one for the similarities). That step refines a ranking the signals have already
made: if the index does not answer it, the signals are fused alone, and that is logged.

Context is read around every candidate episode, not only the best: on the LoCoMo dev set (R@10,
default request, embedded engine) each widening, from the best max(30, 3 x limit) through the best
60 and 100 to every candidate (about 160 at the default 100 per signal), ranked a little better.
The price is OpenSearch's: two small sorted searches per candidate episode, all in one msearch.
The log's entries come with their similarity because ranking needs the own score of every one of
them: asking for a thousand similarities apart (10,000 records) cost more than the whole context
step had before ranking moved above the port (side by side). Both measured: docs/performance.md,
"Figures behind design choices in the code".
"""

from __future__ import annotations

import logging

from uhp_memories.domain.recall.fusion import (
    candidate_depth,
    context_of,
    fuse,
    near_centres,
    query_terms,
    relative_factors,
)
from uhp_memories.domain.recall.model import (
    Candidate,
    CandidateQuery,
    Fusion,
    Hit,
    LogStretches,
    SearchRequest,
    SearchUnavailable,
)
from uhp_memories.domain.recall.ports import SearchIndex

logger = logging.getLogger(__name__)
Legs = dict[str, list[Candidate]]


def rank(index: SearchIndex, request: SearchRequest, default: Fusion | None = None) -> list[Hit]:
    """At most `request.limit` hits, best first; every filter applies inside every signal.
    `default` is the fusion of a request that names none (Fusion() when None too). Raises what the
    index's `candidates` raises."""
    fusion = request.fusion or default or Fusion()
    legs = candidates(index, request, fusion)
    context = None
    if fusion.method == "relative" and legs and "recency" not in legs:
        try:
            context = complete(index, request, fusion, legs)
        except SearchUnavailable as error:
            logger.warning("recall context step failed; fused the signals alone", extra={"reason": str(error)})
    return fuse(request, fusion, legs, context)


def candidates(index: SearchIndex, request: SearchRequest, fusion: Fusion) -> Legs:
    """Each signal's candidates, in one call to the index: the query and text signals a request asks
    for (a signal weighted 0 is not asked), or the newest admitted documents when it asks neither."""
    by_meaning = request.vector is not None and fusion.query_weight > 0
    by_words = request.text is not None and fusion.text_weight > 0
    asked = CandidateQuery(
        depth=candidate_depth(request, fusion),
        by_meaning=by_meaning,
        terms=tuple(query_terms(request.text)) if by_words else (),
        newest=request.limit if request.vector is None and request.text is None else 0,
        min_similarity=fusion.min_similarity,
    )
    legs = index.candidates(request, asked) if (asked.by_meaning or asked.terms or asked.newest) else {}
    if by_words:
        legs.setdefault("text", [])  # asked for even when no word is left to match: it still weighs
    return legs


def complete(index: SearchIndex, request: SearchRequest, fusion: Fusion, legs: Legs) -> dict[str, float] | None:
    """What relative fusion reads beyond the signals' cuts, and the context it gives (None without).

    The log is read around every candidate episode, twice the window on either side, with every
    entry's similarity; the documents the words found, and those within the window of a candidate
    episode, join the query signal with their exact similarity: a document is never penalised for
    falling just outside the vector cut. `legs` gets those additions only once every answer is in."""
    window = fusion.context_window
    centres: dict[str, Candidate] = {}
    if fusion.uses_context:
        types = fusion.context_types
        centres = {c.record_id: c for leg in legs.values() for c in leg if c.type in types}
    scored = {c.record_id for c in legs.get("query", ())}
    unknown = [c for c in legs.get("text", ()) if "query" in legs and c.record_id not in scored]
    log = LogStretches([])
    if centres:  # the words' finds are scored in the same call
        log = index.log_around(request, list(centres.values()), fusion.context_types, 2 * window, unknown)
    elif unknown:
        log = LogStretches([], similarity=index.similarities(request, unknown))
    near = [near_centres(stretch, centres, window) for stretch in log.stretches]
    if "query" in legs:
        legs["query"] = legs["query"] + joining(fusion, scored, unknown, log, near)
    if not log.stretches:
        return None
    words = {c.record_id: c.score for c in legs.get("text", ())}
    return context_of(log.stretches, near, window, relative_factors(fusion, legs), words, fusion.min_similarity)


def joining(
    fusion: Fusion, scored: set[str], unknown: list[Candidate], log: LogStretches, near: list[list[int]]
) -> list[Candidate]:
    """The documents that join the query signal, each with its similarity as its score: those of the
    log within the window of a candidate episode (`near`; the log's entries carry their similarity)
    and those the words found outside the query signal (`unknown`, scored beside the log), that the
    query signal did not score, that have a vector, and whose similarity is above min_similarity."""
    found: dict[str, Candidate] = {}
    for stretch, places in zip(log.stretches, near, strict=True):
        for at in places:
            if stretch[at].record_id not in scored:
                found[stretch[at].record_id] = stretch[at]
    new = tuple.__new__  # (ports.Candidate: the fast way to build one)
    for doc in unknown:
        similarity = log.similarity.get(doc.record_id)
        if similarity is not None:
            found[doc.record_id] = new(Candidate, (*doc[:5], similarity))
    floor, without = fusion.min_similarity, log.without_vector
    return [doc for rid, doc in found.items() if rid not in without and (floor is None or doc.score > floor)]
