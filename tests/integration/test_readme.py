"""The README's walkthrough works as written, against `uhp-memories serve` started as a user would:
in memory, and with a data dir (what `make dev` runs)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.serve_process import EXAMPLE_KEYS, ROOT, ServeProcess

pytestmark = pytest.mark.slow


def _walkthrough_script() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Walkthrough", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize("persistent", [False, True], ids=["in-memory", "data-dir"])
def test_readme_walkthrough_runs_as_written(persistent: bool, tmp_path: Path) -> None:
    args = ["--keys-file", str(EXAMPLE_KEYS)] + (["--data-dir", str(tmp_path)] if persistent else [])
    server = ServeProcess(*args).wait_listening()
    try:
        script = _walkthrough_script().replace("http://127.0.0.1:8080", server.url)
        answer = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                                timeout=120)
        assert answer.returncode == 0, answer.stderr
        statuses = re.findall(r" -> (\d{3})$", answer.stdout, re.M)
        # grant, snapshot, the stale revise, history, as_of, Bob's write, Mallory's read, the harness's list
        # before it is attached, the administrator naming its owner, the attach, the harness's write
        assert statuses == ["201", "201", "409", "200", "200", "403", "404", "404", "200", "200", "201"]
        assert re.findall(r" -> (\d{3})$", answer.stderr, re.M) == ["201", "201", "200"]  # create, remember, revise
        grant, snapshot, conflict, history, as_of, forbidden, hidden, unattached, owned, attached, agents = (
            _answers(answer.stdout)
        )
        assert owned["owners"] == ["user:alice"]
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
        assert unattached["error"]["code"] == "memories_not_attached"
        memory_id = history["data"][0]["memory_id"]
        assert attached["memories"] == [{"memory_id": memory_id, "access": "write", "default": True}]
        assert (agents["memory_id"], agents["written_by"]) == (memory_id, {"kind": "harness", "id": "chrn_41c0"})
    finally:
        assert server.stop() == 0


def _answers(out: str) -> list[dict]:
    """The JSON answers the walkthrough's curl commands print one after another, in order, each followed
    by its status (` -> 201`; the answers captured into variables are not printed)."""
    decoder, answers, at = json.JSONDecoder(), [], 0
    text = re.sub(r" -> \d{3}$", "", out, flags=re.M)
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        answers.append(value)
    return answers
