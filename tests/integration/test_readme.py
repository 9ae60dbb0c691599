"""The README's walkthrough works as written, against `uhp-memories serve` started as a user would."""

from __future__ import annotations

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
        out = answer.stdout
        assert '"principal":"user:bob"' in out
        assert '"code": "memory_conflict"' in out
        assert "current_record_id" in out
        assert out.count('"object":"memory.record"') >= 3  # history (2 versions) + as_of (1)
        assert "Acme renews in March." in out.split('"code": "memory_conflict"')[1]  # history and as_of
        assert '"code": "memory_forbidden"' in out
        assert '"code": "memory_not_found"' in out
    finally:
        server.terminate()
        server.wait(timeout=10)
