"""Consolidation without a model, measured on a synthetic corpus whose truth is recorded.

Not a test. The corpus plants, among unrelated facts about many companies:
- near duplicates of a fact (case, punctuation, spacing, one filler word), which a run should forget;
- restatements: a fact with `attributes.key` and a later `valid_from`, which should supersede the older;
- expired facts (`valid_to` in the past), which a run should forget;
- near misses, which a run must leave alone: the same sentence with another value ("email" -> "phone"),
  negated ("never"), about another company, or a restatement that is *older* than what it restates.

Part 1 calibrates the near-duplicate rule (domain/consolidation/merging.py): every planted pair and near miss scored
with the real embedder (MiniLM int8, as recall uses it), precision and recall at a grid of thresholds.
Part 2 runs a real consolidation through the public API on the local server, reports the precision and
recall of what it forgot and superseded, then reverts it and compares a scan of the memory before and
after. Writes bench/results/consolidation-<commit>.json and prints a Markdown table for
docs/benchmarks.md.

Usage: python bench/consolidation_corpus.py [--facts N] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_locomo as locomo

from uhp_memories.domain.consolidation import merging
from uhp_memories.domain.records.model import RecordVersion

COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Wonka", "Tyrell", "Cyberdyne",
             "Soylent", "Vandelay", "Gringotts", "Oscorp", "Aperture", "Massive", "Duff", "Pied Piper"]
CHANNELS = ["email", "phone", "chat", "post", "fax", "video calls"]
TOPICS = ["invoices", "renewals", "support tickets", "contract changes", "security reviews", "onboarding"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]
FILLERS = ["really", "usually", "still", "always"]


@dataclass
class Corpus:
    records: list[dict[str, Any]] = field(default_factory=list)  # in write order: {"body", "label", "ref"}
    pairs: list[tuple[str, str, bool]] = field(default_factory=list)  # (older text, newer text, same thing)


def sentence(company: str, channel: str, topic: str) -> str:
    return f"{company} prefers {channel} for {topic}."


def near_variant(text: str, pick: random.Random) -> str:
    kind = pick.randrange(4)
    if kind == 0:
        return text.upper() if pick.random() < 0.3 else text.lower()
    if kind == 1:
        return text.rstrip(".") + "!"
    if kind == 2:
        return "  " + text.replace(" ", "   ", 1) + " "
    words = text.split()
    words.insert(2, pick.choice(FILLERS))  # "Acme prefers really email..." -> close, one word more
    return " ".join(words)


def near_miss(text: str, company: str, channel: str, topic: str, pick: random.Random) -> str:
    kind = pick.randrange(3)
    if kind == 0:
        other = pick.choice([c for c in CHANNELS if c != channel])
        return sentence(company, other, topic)
    if kind == 1:
        return f"{company} never prefers {channel} for {topic}."
    other_company = pick.choice([c for c in COMPANIES if c != company])
    return sentence(other_company, channel, topic)


def build(facts: int, seed: int) -> Corpus:
    pick = random.Random(seed)
    corpus = Corpus()

    def add(body: dict[str, Any], label: str, ref: int | None = None) -> int:
        corpus.records.append({"body": body, "label": label, "ref": ref})
        return len(corpus.records) - 1

    # Every fact that is not a planted duplicate is unique (folded), so the truth is exactly what was planted.
    combos = [(c, ch, t) for c in COMPANIES for ch in CHANNELS for t in TOPICS]
    pick.shuffle(combos)
    used: set[str] = set()

    def fresh(text: str) -> bool:
        key = " ".join(text.split()).casefold()
        if key in used:
            return False
        used.add(key)
        return True

    for n in range(facts):
        company, channel, topic = combos[n % len(combos)]
        text = sentence(company, channel, topic) if n % 7 else f"{company} reported issue {n} about {topic}."
        if not fresh(text):
            continue
        base = add({"type": "fact", "content": text}, "keep")
        roll = pick.random()
        if roll < 0.15:
            dup = near_variant(text, pick)
            add({"type": "fact", "content": dup}, "duplicate", base)
            corpus.pairs.append((text, dup, True))
        elif roll < 0.35:
            miss = near_miss(text, company, channel, topic, pick)
            if fresh(miss):
                add({"type": "fact", "content": miss}, "keep")
                corpus.pairs.append((text, miss, False))
    for n, company in enumerate(COMPANIES):
        key = f"{company.lower()}.renewal_month"
        first, second = pick.sample(MONTHS, 2)
        older = add({"type": "fact", "content": f"{company}'s renewal month is {first}.", "attributes": {"key": key},
                     "time": {"valid_from": "2026-01-01T00:00:00Z"}}, "superseded")
        if n % 3 == 2:  # an older statement arriving later: it must not supersede the newer one
            corpus.records[older]["label"] = "keep"
            add({"type": "fact", "content": f"{company}'s renewal month was {second}.", "attributes": {"key": key},
                 "time": {"valid_from": "2025-01-01T00:00:00Z"}}, "keep")
        else:
            add({"type": "fact", "content": f"{company}'s renewal month is {second}.", "attributes": {"key": key},
                 "time": {"valid_from": "2026-06-01T00:00:00Z"}}, "restates", older)
    for n in range(max(3, facts // 20)):
        company = pick.choice(COMPANIES)
        add({"type": "fact", "content": f"{company}'s 2025 price list number {n} applies.",
             "time": {"valid_from": "2025-01-01T00:00:00Z", "valid_to": "2025-12-31T00:00:00Z"}}, "expired")
        add({"type": "fact", "content": f"{company}'s 2027 price list number {n} applies.",
             "time": {"valid_from": "2027-01-01T00:00:00Z", "valid_to": "2027-12-31T00:00:00Z"}}, "keep")
    return corpus


def _version(text: str) -> RecordVersion:
    return RecordVersion("t", "m", "r", "r", 1, "fact", text, {}, "active", None, None, None, None, "", None,
                         {"kind": "user", "id": "x"})


def calibrate(corpus: Corpus, engine: Any) -> list[dict[str, Any]]:
    texts = sorted({t for pair in corpus.pairs for t in pair[:2]})
    vectors = dict(zip(texts, engine.embedder.embed(texts), strict=True))
    scored = []
    for older, newer, same in corpus.pairs:
        cosine = sum(a * b for a, b in zip(vectors[older], vectors[newer], strict=True))
        overlap = merging.word_overlap(_version(newer), _version(older))
        scored.append((cosine, overlap, same))
    grid = []
    for similarity in (0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96):
        for words in (0.5, 0.6, 0.7, 0.8, 0.9):
            merged = [(c >= similarity and w >= words, same) for c, w, same in scored]
            true_pos = sum(m and s for m, s in merged)
            predicted = sum(m for m, _ in merged)
            actual = sum(s for _, s in merged)
            grid.append({"similarity": similarity, "words": words,
                         "precision": true_pos / predicted if predicted else 1.0,
                         "recall": true_pos / actual if actual else 1.0})
    return grid


def run_through_api(corpus: Corpus, local: Any) -> dict[str, Any]:
    api = local.api
    memory_id = api.create_memory("Consolidation corpus", "planted duplicates, restatements and expiries")
    ids = [api.post(f"/v1/memories/{memory_id}/records", r["body"])["id"] for r in corpus.records]

    def scan() -> dict[str, Any]:
        held, cursor = [], None
        while True:
            query = f"?limit=100{'&cursor=' + cursor if cursor else ''}"
            page = api.session.get(api.base_url + f"/v1/memories/{memory_id}/records{query}",
                                   headers={"x-api-key": locomo.KEY}, timeout=60).json()
            held += [(r["type"], r["content"], json.dumps(r["attributes"], sort_keys=True), r["time"]["valid_from"],
                      r["time"]["valid_to"]) for r in page["data"]]
            cursor = page["next_cursor"]
            if cursor is None:
                return {"records": sorted(held)}

    before = scan()
    run = api.post(f"/v1/memories/{memory_id}/consolidations", {})
    changes = api.session.get(api.base_url + f"/v1/memories/{memory_id}/consolidations/{run['id']}/changes?limit=100",
                              headers={"x-api-key": locomo.KEY}, timeout=60).json()["data"]
    forgotten = {c["record_id"] for c in changes if c["action"] == "forgotten"}
    superseded = {c["record_id"] for c in changes if c["action"] == "superseded"}
    truth_forget = {ids[i] for i, r in enumerate(corpus.records) if r["label"] in ("duplicate", "expired", "restates")}
    truth_supersede = {ids[i] for i, r in enumerate(corpus.records) if r["label"] == "superseded"}

    def pr(found: set[str], truth: set[str]) -> dict[str, float]:
        hit = len(found & truth)
        return {"precision": hit / len(found) if found else 1.0, "recall": hit / len(truth) if truth else 1.0,
                "found": len(found), "planted": len(truth)}

    by_label: dict[str, dict[str, float]] = {}
    for label in ("duplicate", "expired", "restates"):
        truth = {ids[i] for i, r in enumerate(corpus.records) if r["label"] == label}
        by_label[label] = {"recall": len(forgotten & truth) / len(truth) if truth else 1.0, "planted": len(truth)}
    api.post(f"/v1/memories/{memory_id}/consolidations/{run['id']}/revert", {})
    after = scan()
    return {
        "records": len(corpus.records),
        "run": {k: run[k] for k in ("status", "read", "changes", "usage", "budget")},
        "forgotten": pr(forgotten, truth_forget),
        "superseded": pr(superseded, truth_supersede),
        "by_label": by_label,
        "revert_restores_every_record": before == after,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=400)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    corpus = build(args.facts, args.seed)
    with locomo.local_server() as local:
        grid = calibrate(corpus, local.engine)
        result = {"commit": locomo._commit(), "seed": args.seed, "thresholds": {
            "similarity": merging.NEAR_SIMILARITY, "words": merging.NEAR_WORDS}, "grid": grid,
            "api": run_through_api(corpus, local)}
    out = Path(__file__).parent / "results" / f"consolidation-{result['commit']}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("| similarity | words | precision | recall |\n|---|---|---|---|")
    for row in grid:
        print(f"| {row['similarity']} | {row['words']} | {row['precision']:.3f} | {row['recall']:.3f} |")
    print(json.dumps(result["api"], indent=2))


if __name__ == "__main__":
    main()
