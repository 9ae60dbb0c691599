"""Start-up cost of a persistent local server (`uhp-memories serve --data-dir`) holding N records.

Writes N episodes into one memory through the API (observe, 50 a call), stops the server cleanly,
then starts it again a few times and reports: time to `listening on`, the restore itself (the
server's own line), and the same after a kill -9 (the search index caught up from the tables).

    .venv/bin/python bench/persistent_start.py [--records 10000] [--starts 3]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.serve_process import EXAMPLE_KEYS, ServeProcess

ALICE = {"x-api-key": "k-alice"}


def start(data_dir: str) -> tuple[ServeProcess, float]:
    began = time.monotonic()
    server = ServeProcess("--keys-file", str(EXAMPLE_KEYS), "--data-dir", data_dir).wait_listening()
    return server, time.monotonic() - began


def restore_line(server: ServeProcess) -> str:
    return next((line for line in server.lines if line.startswith("restored")), "")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="uhp-start-")
    server, _ = start(data_dir)
    began = time.monotonic()
    memory = requests.post(server.url + "/v1/memories", json={"name": "bench"}, headers=ALICE, timeout=60).json()["id"]
    for first in range(0, args.records, 50):
        episodes = [{"content": f"episode {n}: the customer asked about invoice {n % 97} and shipping to city {n % 13}"}
                    for n in range(first, min(first + 50, args.records))]
        answer = requests.post(f"{server.url}/v1/memories/{memory}/observe", json={"episodes": episodes},
                               headers=ALICE, timeout=120)
        answer.raise_for_status()
    print(f"wrote {args.records} records in {time.monotonic() - began:.0f} s", flush=True)
    server.stop()
    size = sum(p.stat().st_size for p in Path(data_dir).iterdir())
    print(f"data dir: {size / 1e6:.1f} MB", flush=True)
    for _ in range(args.starts):
        server, seconds = start(data_dir)
        print(f"clean start: listening after {seconds:.1f} s; {restore_line(server)}", flush=True)
        server.stop()
    server, _ = start(data_dir)
    server.kill()
    server, seconds = start(data_dir)
    caught = next((line for line in server.lines if line.startswith("search index caught up")), "")
    print(f"after kill -9: listening after {seconds:.1f} s; {restore_line(server)}; {caught}", flush=True)
    count = requests.get(f"{server.url}/v1/memories/{memory}", headers=ALICE, timeout=60).json()["records"]["count"]
    assert count == args.records, count
    server.stop()
    return 0 if re.search(r"\d", restore_line(server)) else 1


if __name__ == "__main__":
    sys.exit(main())
