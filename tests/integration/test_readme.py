"""The README's walkthrough works as written, against `uhp-memories serve` started as a user would:
in memory, and with a data dir (what `make dev` runs)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.serve_process import EXAMPLE_KEYS, ROOT, ServeProcess


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
        out = answer.stderr + answer.stdout  # what `tee /dev/stderr` shows, then the rest
        statuses = re.findall(r" -> (\d{3})$", answer.stdout, re.M)
        # grant, snapshot, the stale revise, history, as_of, Bob's write, Mallory's read
        assert statuses == ["201", "201", "409", "200", "200", "403", "404"]
        assert re.findall(r" -> (\d{3})$", answer.stderr, re.M) == ["201", "201", "200"]  # create, remember, revise
        assert '"principal":"user:bob"' in out
        assert '"code": "memory_conflict"' in out
        assert "current_record_id" in out
        assert answer.stdout.count('"object":"memory.record"') >= 3  # history (2 versions) + as_of (1)
        assert "Acme renews in March." in answer.stdout.split('"code": "memory_conflict"')[1]  # history and as_of
        assert '"code": "memory_forbidden"' in out
        assert '"code": "memory_not_found"' in out
    finally:
        assert server.stop() == 0
