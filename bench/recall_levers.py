"""Quality levers beyond the default ranking, each measured alone and together on the LoCoMo dev
file, with its latency cost, through the running server's engine in process (the same memories as
bench/recall_locomo.py builds through the API). Not a test; the dev file only.

Levers (each a function of the question and the engine, above the index port):
- `second`: multi-hop by a second recall seeded from the first. The best `SEEDS` results of the
  default ranking each seed a search by the question's vector plus the seed's own (normalized) and
  the question's words plus the seed's; a document that search finds gains `GAIN` x its score in
  it x the seed's share of the best first score. The evidence of a multi-hop question is spread
  over turns that share little with the question but something with each other.
- `time`: the record's time, read at query time: a question that names a month and year ("in May
  2023", "on 3 May, 2023") is also ranked among the records whose `valid_from` falls in that month
  or the month after (what was said later about it), and what it finds there gains `TIME_GAIN` x
  its score there. A question that names no period is untouched. Measured, and not kept in the
  product for its latency (docs/decisions.md, Recall).

Usage: python bench/recall_levers.py   (writes bench/results/recall-levers.json)
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_locomo as locomo

SEEDS = 3
GAIN = 0.3
TIME_GAIN = 0.5
MONTH_NAMES = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
               "november", "december"]
MONTHS = {m: i for i, m in enumerate(MONTH_NAMES, 1)}
NAMED_MONTH = re.compile(r"\b(?:(\d{1,2})\s+)?(" + "|".join(MONTHS) + r")\b(?:\s+(\d{1,2}))?,?\s+(\d{4})\b", re.I)

Ranked = dict[str, float]  # record id -> score, best first


def default(engine: Any, memory_id: str, question: str, limit: int) -> Ranked:
    hits = engine.search(locomo.TENANT, memory_id, query=question, text=question, limit=limit)
    return {h.record_id: h.score for h in hits}


def second(engine: Any, memory_id: str, question: str, limit: int, first: Ranked | None = None) -> Ranked:
    first = first if first is not None else default(engine, memory_id, question, max(limit, 25))
    if not first:
        return first
    top = max(first.values())
    asked = np.asarray(engine.embed_query(question), dtype=np.float32)
    merged = dict(first)
    for seed, score in list(first.items())[:SEEDS]:
        doc = engine.index.get(locomo.TENANT, memory_id, seed)
        if doc is None or doc.embedding is None:
            continue
        vector = asked + np.asarray(doc.embedding, dtype=np.float32)
        vector /= max(float(np.linalg.norm(vector)), 1e-12)
        hits = engine.search(
            locomo.TENANT, memory_id, text=f"{question} {doc.text}", vector=vector.tolist(), limit=25
        )
        for hit in hits:
            if hit.record_id != seed:
                merged[hit.record_id] = merged.get(hit.record_id, 0.0) + GAIN * hit.score * score / top
    return dict(sorted(merged.items(), key=lambda item: -item[1]))


def period(question: str) -> tuple[str, str] | None:
    """The month a question names, with its year, and the month after: [start, end) as instants."""
    found = NAMED_MONTH.search(question)
    if not found:
        return None
    month, year = MONTHS[found.group(2).lower()], int(found.group(4))
    start = datetime(year, month, 1, tzinfo=UTC)
    after = month + 2
    end = datetime(year + (after - 1) // 12, (after - 1) % 12 + 1, 1, tzinfo=UTC)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")


def timed(engine: Any, memory_id: str, question: str, limit: int, first: Ranked | None = None) -> Ranked:
    from uhp_memories.domain.filters import parse_filter

    first = first if first is not None else default(engine, memory_id, question, max(limit, 25))
    window = period(question)
    if window is None:
        return first
    within = parse_filter({"and": [
        {"field": "time.valid_from", "op": "gte", "value": window[0]},
        {"field": "time.valid_from", "op": "lt", "value": window[1]},
    ]})
    hits = engine.search(locomo.TENANT, memory_id, query=question, text=question, filters=within, limit=25)
    merged = dict(first)
    for hit in hits:
        merged[hit.record_id] = merged.get(hit.record_id, 0.0) + TIME_GAIN * hit.score
    return dict(sorted(merged.items(), key=lambda item: -item[1]))


def both(engine: Any, memory_id: str, question: str, limit: int) -> Ranked:
    first = default(engine, memory_id, question, max(limit, 25))
    return timed(engine, memory_id, question, limit, second(engine, memory_id, question, limit, first))


LEVERS: dict[str, Callable[..., Ranked]] = {"default": default, "second": second, "time": timed, "both": both}


def main() -> int:
    conversations = locomo.load_locomo(locomo.DEFAULT_DATA)
    results: dict[str, Any] = {"machine": locomo.machine(), "seeds": SEEDS, "gain": GAIN, "time_gain": TIME_GAIN}
    with locomo.local_server() as local:
        memories = []
        for conv in conversations:
            memory_id = local.api.create_memory(conv.sample_id, "LoCoMo")
            memories.append((conv, memory_id, locomo.ingest(local.api, memory_id, conv.turns)))
        per_lever: dict[str, list[tuple[int, dict[int, float]]]] = {name: [] for name in LEVERS}
        spent: dict[str, list[float]] = {name: [] for name in LEVERS}
        for conv, memory_id, dia_of in memories:
            for question in conv.questions:
                if not question.evidence:
                    continue
                for name, lever in LEVERS.items():  # one after the other, question by question
                    start = time.perf_counter()
                    ranked = lever(local.engine, memory_id, question.text, max(locomo.KS))
                    spent[name].append((time.perf_counter() - start) * 1000)
                    found = [dia_of.get(rid, "") for rid in list(ranked)[: max(locomo.KS)]]
                    per_lever[name].append((question.category, locomo.recall_at(found, question.evidence)))
        for name in LEVERS:
            summary = locomo.summarise(per_lever[name])
            summary["engine_ms"] = {"p50": statistics.median(spent[name]), "p95": locomo.percentile(spent[name], 0.95)}
            results[name] = summary
            cats = " ".join(f"{c}:{summary[str(c)]['10']:.3f}" for c in locomo.CATEGORIES)
            print(f"{name:8s} R@10={summary['overall']['10']:.3f} {cats} "
                  f"p50 {summary['engine_ms']['p50']:.1f} ms p95 {summary['engine_ms']['p95']:.1f} ms", flush=True)
    (locomo.RESULTS / "recall-levers.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
