"""The text signal of the embedded engine: BM25 over each memory's FTS5 table (porter stemming,
unicode61, diacritics removed), every filter joined before the cut."""

# SQL text in this module is built from constants and integer table names only; every value is bound
# as a parameter, so string-built statements (S608) are safe here.
# ruff: noqa: S608

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from uhp_memories.domain.recall.model import Candidate
from uhp_memories.local.embedded.sql import Where
from uhp_memories.local.embedded.store import fts_table
from uhp_memories.local.embedded.vectors import VectorBlock

# A word found in more documents of a memory than this is common: it adds to the BM25 score of the
# documents that match a rarer word of the same query, and finds no document on its own (as
# Elasticsearch's common-terms query). A query of common words only is scored in full.
COMMON_DOCS = 2000
_new = tuple.__new__  # builds a Candidate by the hundred (ports.Candidate)


def best_by_words(
    db: sqlite3.Connection,
    scope: int,
    memory_id: str,
    terms: Sequence[str],
    probe: Where,
    depth: int,
    common_docs: int | None,
    current: VectorBlock | None,
) -> list[Candidate]:
    """The best `depth` documents by BM25 that pass `probe` (the request's correlated filter).
    `current`: the memory's vector block, when the request admits exactly the current active
    versions (no filter, no as_of), whose flags then answer admission without a join."""
    if not terms:
        return []
    fts = fts_table(scope)
    count = f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?"
    found = {t: db.execute(count, (_phrase(t),)).fetchone()[0] for t in terms}
    present = [t for t in terms if found[t]]
    if not present:
        return []
    rare = [t for t in present if common_docs is None or found[t] <= common_docs]
    match, match_args = f"{fts} MATCH ?", [_any_of(present)]
    if rare and len(rare) < len(present):
        # Common words score only the documents that match a rarer word of the query: scoring
        # every document that holds a common word is what makes BM25 slow on a large memory.
        match += f" AND +{fts}.rowid IN (SELECT rowid FROM {fts} WHERE {fts} MATCH ?)"
        match_args.append(_any_of(rare))
    if current is not None:
        best = _best_current(db, fts, match, match_args, depth, current, memory_id)
        if best is not None:
            return best
    where, params = probe
    rows = db.execute(
        f"SELECT d.record_id, d.chain_id, d.type, d.written_at, -bm25({fts}) AS s FROM {fts} "
        f"JOIN docs d ON d.id = {fts}.rowid WHERE {match} AND {where} ORDER BY s DESC, d.record_id LIMIT ?",
        [*match_args, *params, depth],
    ).fetchall()
    return [_new(Candidate, (r[0], r[1], memory_id, r[2], r[3], float(r[4]))) for r in rows]


def mentioned(db: sqlite3.Connection, scope: int, terms: Sequence[str], probe: Where) -> set[str]:
    """The terms that some document passing `probe` contains: each query stops at its first row.
    CROSS JOIN keeps the FTS index the outer loop: left to choose, SQLite walked every document and
    matched each against the word, slowest for a word no document holds (measured: docs/performance.md,
    "Figures behind design choices in the code")."""
    fts = fts_table(scope)
    where, params = probe
    found = set()
    for term in terms:
        row = db.execute(
            f"SELECT 1 FROM {fts} CROSS JOIN docs d ON d.id = {fts}.rowid WHERE {fts} MATCH ? AND {where} LIMIT 1",
            [_phrase(term), *params],
        ).fetchone()
        if row is not None:
            found.add(term)
    return found


def _best_current(
    db: sqlite3.Connection,
    fts: str,
    match: str,
    match_args: list[Any],
    depth: int,
    block: VectorBlock,
    memory_id: str,
) -> list[Candidate] | None:
    """The text signal's best `depth` current active documents, read from the FTS index alone and
    checked against the vector block's flags: joining every match to its row costs as much as
    scoring it (measured: docs/benchmarks.md, "Latency targets"). Exact: a cut is kept only when
    its last score is above every score the LIMIT left out. None when the block cannot tell (a
    document without a vector) or the best are too far down: the join answers then."""
    wanted = 2 * depth
    while wanted <= 32 * depth:
        rows = db.execute(
            f"SELECT rowid, -bm25({fts}) AS s FROM {fts} WHERE {match} ORDER BY s DESC LIMIT ?",
            [*match_args, wanted],
        ).fetchall()
        kept = []
        for doc, score in rows:
            row = block.row_of.get(doc)
            if row is None:
                return None
            if block.active[row]:
                kept.append((float(score), block.record_ids[row], row))
        kept.sort(key=lambda k: (-k[0], k[1]))
        if len(rows) < wanted or (len(kept) >= depth and kept[depth - 1][0] > rows[-1][1]):
            return [block.candidate(row, memory_id, score) for score, _, row in kept[:depth]]
        wanted *= 4
    return None


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _any_of(terms: list[str]) -> str:
    return " OR ".join(_phrase(t) for t in terms)
