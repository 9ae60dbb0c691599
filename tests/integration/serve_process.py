"""`uhp-memories serve` run as a user runs it: a process of its own, read until `listening on`."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "uhp-memories"
EXAMPLE_KEYS = ROOT / "examples" / "keys.json"
START_SECONDS = 90  # a cold start on a busy machine: imports, the model, a data dir's catch-up


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServeProcess:
    """One server. Its output (stdout and stderr) is read on a thread, line by line, so a chatty
    server never blocks on a full pipe; `lines` holds what it printed so far."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [str(CLI), "serve", "--port", str(self.port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        )
        self.lines: list[str] = []
        self._seen: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._seen.put(line)
        self._seen.put(None)

    def wait_listening(self) -> ServeProcess:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                line = self._seen.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line is None:
                raise AssertionError("the server ended before listening:\n" + "\n".join(self.lines))
            if line.startswith("listening on "):
                assert line.strip() == f"listening on {self.url}"
                return self
            if time.monotonic() > deadline:
                raise AssertionError("the server did not start:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        """A clean stop (SIGTERM, as Ctrl-C or a service manager asks)."""
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(timeout=60)

    def kill(self) -> None:
        """kill -9: no chance to flush, close or say goodbye."""
        self.process.kill()
        self.process.wait(timeout=30)
