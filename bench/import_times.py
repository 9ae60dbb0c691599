"""Cold import time of each deployed handler module (`python -X importtime`), as a Markdown table.

Each module is imported in a fresh interpreter, several times; the median of the self-reported
cumulative time of the handler module is kept. Usage: python bench/import_times.py [runs]"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.lambda_env import run_like_lambda
from uhp_memories.api.routes import FUNCTIONS


def cold_import_us(module: str) -> int:
    answer = run_like_lambda(["-X", "importtime", "-c", f"import {module}"])
    for line in answer.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    raise RuntimeError(f"no import time for {module}")


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    baseline = statistics.median(cold_import_us("json") for _ in range(runs))
    print(f"| handler module | cold import (ms, median of {runs}) | ratio to `import boto3` |")
    print("|---|---|---|")
    boto = statistics.median(cold_import_us("boto3") for _ in range(runs))
    for name in (*FUNCTIONS, "authorizer"):
        module = f"functions.{name}.handler"
        value = statistics.median(cold_import_us(module) for _ in range(runs))
        print(f"| `{module}` | {value / 1000:.0f} | {value / boto:.1f}x |")
    print(f"\nBaselines on the same machine, same run: `import boto3` {boto / 1000:.0f} ms, "
          f"`import json` {baseline / 1000:.1f} ms.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
