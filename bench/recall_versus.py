"""Recall latency of this checkout against an earlier commit, side by side on the same machine.

Not a test. This machine's speed drifts by half from one hour to the next, so a latency measured
today cannot be compared with one measured yesterday; a ratio measured in one run can. Two local
servers run at once, one on the code of this checkout and one on the code of BASELINE (checked out
in a git worktree); each remembers the same LoCoMo turns, cycled to SIZE records in one memory,
through its own gateway; then one client alternates the same questions between them (which goes
first alternates too), for each kind of request. The benchmark harness (bench/recall_locomo.py) is
this checkout's for both, so only the service's code differs.

Usage: python bench/recall_versus.py BASELINE [--size 10000] [--searches 400]
Prints p50/p95 for each and the ratio of the medians (this checkout / baseline); the run is added
to bench/results/recall-versus-runs.jsonl and shown in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import recall_locomo as locomo  # noqa: E402

ASKS = {"default": lambda q: {"query": q, "text": q}, "text only": lambda q: {"text": q}}


def serve(tree: Path, size: int) -> None:
    """A server on the code of `tree`, with `size` records in one memory; prints where, then waits
    for its standard input to close."""
    sys.path[:0] = [str(tree / "layers" / "core"), str(tree)]
    every = [t for c in locomo.load_locomo(locomo.DEFAULT_DATA) for t in c.turns]
    with locomo.local_server() as local:
        memory_id = local.api.create_memory("versus", f"{size} LoCoMo turns, cycled")
        locomo.ingest_cycled(local.api, memory_id, every, size)
        import uhp_memories

        code = str(Path(uhp_memories.__file__).resolve())
        print(json.dumps({"url": local.api.base_url, "memory": memory_id, "code": code}), flush=True)
        sys.stdin.read()


def side_by_side_writes(
    session: Any, where: dict[str, Any], names: list[str], count: int
) -> dict[tuple[str, str], list[float]]:
    """`count` turns remembered one at a time, then observed in session batches, into each server's
    memory, alternating which server goes first: each write's time, by server and kind."""
    turns = [t for c in locomo.load_locomo(locomo.DEFAULT_DATA) for t in c.turns][:count]
    samples: dict[tuple[str, str], list[float]] = {(n, k): [] for n in names for k in ("remember", "observe")}

    def post(name: str, path: str, body: Any) -> float:
        url = f"{where[name]['url']}/v1/memories/{where[name]['memory']}{path}"
        start = time.perf_counter()
        answer = session.post(url, json=body, headers={"x-api-key": locomo.KEY}, timeout=120)
        answer.raise_for_status()
        return (time.perf_counter() - start) * 1000

    for n, turn in enumerate(turns):
        body = {**locomo.episodes_of([turn])[0], "type": "fact"}
        for name in names if n % 2 else list(reversed(names)):
            samples[(name, "remember")].append(post(name, "/records", body))
    for n, batch in enumerate(locomo.session_batches(turns)):
        body = {"episodes": locomo.episodes_of(batch)}
        for name in names if n % 2 else list(reversed(names)):
            samples[(name, "observe")].append(post(name, "/observe", body))
    return samples


def report(args: Any, baseline: str, trees: list[str], samples: dict[tuple[str, str], list[float]]) -> None:
    """Print the run, add it to the log and rebuild docs/benchmarks.md."""
    print(f"{args.size:,} records in one memory, {args.searches} questions, through each local gateway")
    for (name, kind), values in samples.items():
        p50, p95 = statistics.median(values), locomo.percentile(values, 0.95)
        print(f"  {name:28s} {kind:10s} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    run: dict[str, Any] = {
        "size": args.size,
        "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "baseline": baseline,
        "commit": locomo._commit(),
        "searches": args.searches,
    }
    for kind in [*ASKS, *(("remember", "observe") if args.writes else ())]:
        base, now = ([statistics.median(v), locomo.percentile(v, 0.95)] for v in (samples[(n, kind)] for n in trees))
        run[kind] = {"baseline": [round(x, 1) for x in base], "now": [round(x, 1) for x in now]}
        print(f"  {kind}: this checkout / baseline = {now[0] / base[0]:.2f}x (p50)")
    run["load"] = [round(v, 2) for v in os.getloadavg()]
    with locomo.VERSUS_LOG.open("a") as log:
        log.write(json.dumps(run) + "\n")
    locomo.render()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", nargs="?", help="a commit (the baseline)")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=400)
    parser.add_argument("--writes", type=int, default=0, help="then remember, and observe, this many turns on each")
    parser.add_argument("--serve", metavar="TREE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve), args.size)
        return 0
    if not args.baseline:
        parser.error("name the baseline commit")
    import requests

    baseline = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="uhp-versus-") as scratch:
        worktree = Path(scratch) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), baseline], cwd=ROOT, check=True,
                       capture_output=True)
        trees = {f"baseline ({baseline})": worktree, "this checkout": ROOT}
        servers = {
            name: subprocess.Popen(
                [sys.executable, __file__, "--serve", str(tree), "--size", str(args.size)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=scratch,
            )
            for name, tree in trees.items()
        }
        try:
            where: dict[str, Any] = {}
            for name, server in servers.items():
                assert server.stdout is not None
                where[name] = json.loads(server.stdout.readline())
                if not where[name]["code"].startswith(str(trees[name].resolve())):
                    raise RuntimeError(f"{name} ran {where[name]['code']}, not its own code")
            questions = [q.text for c in locomo.load_locomo(locomo.DEFAULT_DATA) for q in c.questions]
            random.Random(args.size).shuffle(questions)
            session = requests.Session()

            def recall(name: str, body: dict[str, Any]) -> float:
                url = f"{where[name]['url']}/v1/memories/{where[name]['memory']}/recall"
                start = time.perf_counter()
                answer = session.post(url, json=body, headers={"x-api-key": locomo.KEY}, timeout=60)
                answer.raise_for_status()
                return (time.perf_counter() - start) * 1000

            for name in trees:  # warm: the first search loads the memory's vectors
                for question in questions[:5]:
                    recall(name, ASKS["default"](question))
            samples: dict[tuple[str, str], list[float]] = {(n, k): [] for n in trees for k in ASKS}
            for turn, question in enumerate(questions[: args.searches]):
                order = list(trees) if turn % 2 else list(reversed(trees))
                for kind, body in ASKS.items():
                    for name in order:
                        samples[(name, kind)].append(recall(name, body(question)))
            if args.writes:
                writes = side_by_side_writes(session, where, list(trees), args.writes)
                samples.update(writes)
        finally:
            for server in servers.values():
                if server.stdin:
                    server.stdin.close()
                server.wait(timeout=60)
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
    report(args, baseline, list(trees), samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
