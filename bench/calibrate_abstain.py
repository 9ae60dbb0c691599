"""Calibrate recall's abstain threshold for an embedding model on the LoCoMo dev set.

Not a test. Recall abstains when the best cosine similarity of a `query` among the results is below a
threshold, and that threshold belongs to the embedding model: all-MiniLM-L6-v2 (local mode) is
calibrated in code (recall.CALIBRATED_SIMILARITY, by bench/recall_locomo.py through the public API).
A deployed stage embeds with Amazon Bedrock, which cannot be reached from the machines this project
is built on, so its threshold is calibrated where Bedrock answers, by the same rule on the same data:
each conversation's turns indexed in a memory of their own (the embedded engine, in memory, with the
model asked for), each question asked of it with `query` = `text` = the question and the default
limit, and the highest threshold (0.01 steps) that abstains on at most 1% of answerable questions.

Usage:
  python bench/calibrate_abstain.py                      # all-MiniLM-L6-v2, as local mode runs it
  python bench/calibrate_abstain.py --titan [--dimensions 1024] [--region eu-west-1]
      # Titan Text Embeddings v2 on Bedrock (AWS credentials allowed bedrock:InvokeModel on it)
Prints the threshold, the abstain rates it gives, and the stage setting to deploy it with
(cdk.json: "embeddings": {"abstain_similarity": ...}).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT / "bench")]

import recall_locomo as locomo  # noqa: E402

TENANT = "calibration"
T0_MS = 1_790_000_000_000


def turn_versions(memory_id: str, turns: Sequence[locomo.Turn]) -> list[Any]:
    """The turns as record versions, written in order (the episode log follows write order)."""
    from uhp_memories.domain.models import RecordVersion
    from uhp_memories.domain.timefmt import format_ms

    return [
        RecordVersion(
            tenant=TENANT, memory_id=memory_id, id=f"hrec_{n:032x}", chain_id=f"hrec_{n:032x}", version=1,
            type="episode", content=turn.content,
            attributes={"dia_id": turn.dia_id, "session": turn.session, "speaker": turn.speaker},
            status="active", supersedes=None, superseded_by=None, valid_from=turn.date, valid_to=None,
            written_at=format_ms(T0_MS + n), invalidated_at=None, written_by={"kind": "service", "id": "bench"},
        )
        for n, turn in enumerate(turns)
    ]


def calibrate(embedder: Any, conversations: Sequence[locomo.Conversation]) -> dict[str, Any]:
    """The threshold by the rule for this embedder, and the share of each kind of question it
    abstains on (answerable, adversarial, foreign: another conversation's)."""
    from uhp_memories.domain.recall import best_similarity
    from uhp_memories.search.embedded import EmbeddedSearchIndex
    from uhp_memories.search.engine import RecallEngine

    engine = RecallEngine(
        EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions), embedder
    )
    best: dict[str, list[float]] = {"answerable": [], "adversarial": [], "foreign": []}
    for index, conversation in enumerate(conversations):
        memory_id = f"hmem_{index:032x}"
        engine.index_versions(turn_versions(memory_id, conversation.turns))
        for kind, text in locomo.abstain_questions(conversations, index):
            hits = engine.search(TENANT, memory_id, query=text, text=text, limit=10)
            best[kind].append(best_similarity(hits))
    threshold = locomo.threshold_by_rule(best["answerable"])
    return {
        "model_id": embedder.model_id,
        "threshold": threshold,
        "rule": "highest threshold (0.01 steps) abstaining on <= 1% of answerable questions",
        "abstains": {kind: round(statistics.fmean(v < threshold for v in values), 4) for kind, values in best.items()},
        "questions": {kind: len(values) for kind, values in best.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--titan", action="store_true", help="Titan Text Embeddings v2 on Amazon Bedrock")
    parser.add_argument("--dimensions", type=int, default=1024, help="Titan's output size (256, 512 or 1024)")
    parser.add_argument("--region", help="Bedrock's region (default: the AWS configuration's)")
    args = parser.parse_args()
    if args.titan:
        import boto3

        from uhp_memories.search.bedrock import TitanEmbedder

        bedrock = boto3.client("bedrock-runtime", region_name=args.region)
        embedder: Any = TitanEmbedder(bedrock, dimensions=args.dimensions)
    else:
        from uhp_memories.search.minilm import MiniLmEmbedder

        embedder = MiniLmEmbedder()
    result = calibrate(embedder, locomo.load_locomo(args.data))
    print(json.dumps(result, indent=1))
    setting = {"embeddings": {"model_id": embedder.model_id, "abstain_similarity": result["threshold"]}}
    if args.titan:
        setting["embeddings"]["dimensions"] = args.dimensions
    print("stage setting (cdk.json, under the stage):", json.dumps(setting))
    return 0


if __name__ == "__main__":
    sys.exit(main())
