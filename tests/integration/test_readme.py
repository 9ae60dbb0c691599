"""The README's walkthrough works as written, against `uhp-memories serve` started as a user would."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _walkthrough_script() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Walkthrough", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_readme_walkthrough_runs_as_written() -> None:
    port = _free_port()
    cli = Path(sys.executable).parent / "uhp-memories"
    server = subprocess.Popen(
        [str(cli), "serve", "--port", str(port), "--keys-file", str(ROOT / "examples" / "keys.json")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        assert server.stdout is not None
        for line in server.stdout:
            if line.startswith("listening on"):
                break
            assert time.monotonic() < deadline, "server did not start"
        script = _walkthrough_script().replace("http://127.0.0.1:8080", f"http://127.0.0.1:{port}")
        answer = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                                timeout=120)
        assert answer.returncode == 0, answer.stderr
        grant, snapshot, conflict, history, as_of, forbidden, hidden = _answers(answer.stdout)
        assert grant["principal"] == "user:bob"
        assert snapshot["name"] == "before-call"
        assert conflict["error"]["code"] == "memory_conflict"
        current = history["data"][1]["id"]
        assert conflict["error"]["current_record_id"] == current
        assert [(v["content"], v["status"], v["version"]) for v in history["data"]] == [
            ("Acme renews in March.", "superseded", 1),
            ("Acme renews in April and wants the annual discount kept.", "active", 2),
        ]
        # As the memory stood at the snapshot: the first version alone, still active then.
        assert [(r["id"], r["content"], r["status"]) for r in as_of["data"]] == [
            (history["data"][0]["id"], "Acme renews in March.", "active")
        ]
        assert forbidden["error"]["code"] == "memory_forbidden"
        assert hidden["error"]["code"] == "memory_not_found"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _answers(out: str) -> list[dict]:
    """The JSON answers the walkthrough's curl commands print one after another, in order (the
    answers captured into variables are not printed)."""
    decoder, answers, at = json.JSONDecoder(), [], 0
    while at < len(out):
        if out[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(out, at)
        answers.append(value)
    return answers

