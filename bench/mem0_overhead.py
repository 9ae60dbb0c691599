"""What the server adds above mem0 (issue 29): remember and recall through a mem0-backed memory of a local
server, beside the same mem0 (`mem0.Memory`, OSS, the same store, the same MiniLM embedder) called
directly in the same process, call by call, interleaved.

Not a test. One LoCoMo conversation's turns are remembered one by one through HTTP into a memory whose
provider is mem0, and as many are added to mem0 directly under a user_id of their own; then each
question of the conversation is recalled both ways. The server's side crosses HTTP, the local gateway,
the authorizer, the access check (DynamoDB on moto), the adapter's mapping and the answer's views; mem0's
side is `Memory.add(..., infer=False)` and `Memory.search(...)` alone. The overhead is the difference of
the medians, in ms, and the ratio of the medians. Writes docs/benchmarks.md's "mem0 provider" section
when asked (--write).

Usage: python bench/mem0_overhead.py [--turns N] [--questions N] [--write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT / "bench"), str(ROOT)]

import recall_locomo as locomo  # noqa: E402

SECTION = "## mem0 provider: the server's overhead above mem0"


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def run(turns: int, questions: int) -> dict[str, Any]:
    os.environ["MEM0_TELEMETRY"] = "False"
    import requests

    from uhp_memories.local.gateway import LocalGateway
    from uhp_memories.local.moto_env import KeyEntry, LocalAws
    from uhp_memories.settings import Settings

    conversation = locomo.load_locomo(locomo.DEFAULT_DATA)[0]
    aws = LocalAws(Settings(mem0="oss")).start()
    gateway = LocalGateway("127.0.0.1", 0).start_background()
    try:
        aws.add_keys([KeyEntry("k-bench", "bench", "user:bench")])
        assert aws.container is not None
        aws.container.recall_engine().embedder.load()
        http = requests.Session()
        http.headers["x-api-key"] = "k-bench"
        memory = http.post(gateway.url + "/v1/memories", json={"name": "LoCoMo", "provider": "mem0"}).json()["id"]
        provider = aws.container.ports.providers.connected()[0]
        mem0 = provider._client  # the same Memory the adapter calls: its store, history and embedder
        direct_user = "bench-direct"
        times: dict[str, list[float]] = {"ours remember": [], "mem0 add": [], "ours recall": [], "mem0 search": []}

        def timed(name: str, call: Any) -> Any:
            start = time.perf_counter()
            out = call()
            times[name].append((time.perf_counter() - start) * 1000)
            return out

        for turn in conversation.turns[:turns]:
            answer = timed("ours remember", lambda t=turn: http.post(
                gateway.url + f"/v1/memories/{memory}/records", json={"type": "episode", "content": t.content}))
            assert answer.status_code == 201, answer.text
            timed("mem0 add", lambda t=turn: mem0.add([{"role": "user", "content": t.content}],
                                                       user_id=direct_user, infer=False))
        for question in conversation.questions[:questions]:
            answer = timed("ours recall", lambda q=question: http.post(
                gateway.url + f"/v1/memories/{memory}/recall", json={"query": q.text, "limit": 10}))
            assert answer.status_code == 200, answer.text
            timed("mem0 search", lambda q=question: mem0.search(q.text, filters={"user_id": direct_user},
                                                                top_k=10, threshold=0.0))
    finally:
        gateway.stop()
        aws.stop()
    return {name: {"p50": statistics.median(s), "p95": percentile(s, 0.95), "n": len(s)} for name, s in times.items()}


def render(figures: dict[str, Any]) -> str:
    rows = []
    for ours, theirs in (("ours remember", "mem0 add"), ("ours recall", "mem0 search")):
        a, b = figures[ours], figures[theirs]
        rows.append(
            f"| {ours.split()[1]} | {a['p50']:.1f} / {a['p95']:.1f} | {b['p50']:.1f} / {b['p95']:.1f} "
            f"| {a['p50'] - b['p50']:+.1f} | {a['p50'] / b['p50']:.2f}x | {a['n']} |"
        )
    return "\n".join([
        SECTION,
        "",
        "`python bench/mem0_overhead.py --write`: one LoCoMo conversation's turns remembered one by one into a",
        "mem0-backed memory through HTTP (local gateway, authorizer, access check on moto, the adapter), and",
        "the same turns added to the very same mem0 `Memory` directly (`infer=False`, the same MiniLM",
        "embedder), interleaved call by call; then each question recalled both ways (limit 10). Milliseconds,",
        "p50 / p95; the overhead is the difference of the medians.",
        "",
        "| operation | through the server | mem0 directly | overhead (ms, p50) | ratio (p50) | calls |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args()
    text = render(run(args.turns, args.questions))
    print(text)
    if args.write:
        path = ROOT / "docs" / "benchmarks.md"
        current = path.read_text()
        if SECTION in current:
            head, _, rest = current.partition(SECTION)
            tail = rest[rest.find("\n## "):] if "\n## " in rest else ""
            current = head + text + tail.lstrip("\n")
        else:
            current = current.rstrip("\n") + "\n\n" + text
        path.write_text(current)


if __name__ == "__main__":
    main()
