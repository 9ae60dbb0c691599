"""Consolidation steps at growing memory sizes: a step's work must not grow with the memory (§9.2; the
bounded steps of domain/consolidation/service.py), so each fits a Lambda whatever the size.

Not a test. On the local server (moto, the embedded index, MiniLM), for each size: a new memory of that
many facts (LoCoMo dev turns as facts, written in process through RecordService.remember, so each is
indexed as a write through the API is), then one consolidation run over all of it through the
workflow, with every step timed where the state machine calls it. Reports, per size, the steps, the
records each read, and the median and slowest step time; the ratio of the slowest steps between sizes
is the figure (the same machine, the same run). Writes bench/results/consolidation-scale-<commit>.json.

Usage: python bench/consolidation_scale.py [--sizes 2000 20000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_locomo as locomo

from uhp_memories.domain.model import Caller
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.local.moto_env import LocalAws

CALLER = Caller(locomo.TENANT, "user:bench")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    args = parser.parse_args()
    turns = [t for conversation in locomo.load_locomo(locomo.DEFAULT_DATA) for t in conversation.turns]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    results: dict[str, Any] = {"commit": commit, "sizes": {}}
    aws = LocalAws()
    step_times: list[float] = []
    real_run_step = aws._run_step

    def timed(function_name: str, event: Any) -> Any:
        start = time.perf_counter()
        try:
            return real_run_step(function_name, event)
        finally:
            if function_name.endswith("-consolidate"):
                step_times.append(time.perf_counter() - start)

    aws._run_step = timed  # type: ignore[method-assign]  # where the state machine calls each step (before start)
    aws.start()
    container = aws.container
    assert container is not None
    container.recall_engine().embedder.load()  # the model loads once, before anything is timed
    try:
        for size in args.sizes:
            memory = container.memories.create(CALLER, name=f"scale-{size}").memory.id
            start = time.perf_counter()
            for n in range(size):
                turn = turns[n % len(turns)]
                fact = RecordInput("fact", turn.content, {"copy": n // len(turns)})
                container.records.remember(CALLER, memory, fact)
            ingest_s = time.perf_counter() - start
            step_times.clear()
            run = container.consolidation.start(CALLER, memory, 10_000_000)
            while run.status == "running":
                time.sleep(0.5)
                run = container.consolidation.get(CALLER, memory, run.id)
            results["sizes"][str(size)] = {
                "ingest_s": round(ingest_s, 1),
                "status": run.status,
                "records_read": run.records_read,
                "steps": len(step_times),
                "step_s_p50": round(statistics.median(step_times), 3),
                "step_s_max": round(max(step_times), 3),
                "changes": len(run.changes),
            }
            print(json.dumps({size: results["sizes"][str(size)]}), flush=True)
    finally:
        aws.stop()
    sizes = [str(s) for s in args.sizes]
    if len(sizes) > 1:
        first, last = results["sizes"][sizes[0]], results["sizes"][sizes[-1]]
        results["slowest_step_ratio"] = round(last["step_s_max"] / first["step_s_max"], 2)
        results["median_step_ratio"] = round(last["step_s_p50"] / first["step_s_p50"], 2)
    out = Path(__file__).parent / "results" / f"consolidation-scale-{commit}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
