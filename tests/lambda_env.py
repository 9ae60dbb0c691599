"""A fresh interpreter that imports packages as a deployed Lambda does.

The dev venv holds packages no Lambda has: the `harness` extra brings pydantic-ai and with it logfire,
which registers a pydantic plugin (an entry point pydantic loads on its first model) that imports
requests and more. A probe of what a handler imports, or of how long it takes, turns plugins off so
it measures the handler and not the venv."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAMBDA_LIKE_ENV = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}


def run_like_lambda(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a fresh interpreter at the repository root, pydantic plugins off."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=True, cwd=ROOT, env=LAMBDA_LIKE_ENV
    )
