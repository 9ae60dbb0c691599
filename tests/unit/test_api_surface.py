"""The API surface: the committed OpenAPI document is fresh, every route has its handler, and
deployed handlers stay light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from uhp_memories.api import openapi
from uhp_memories.api.routes import FUNCTIONS, ROUTES

ROOT = Path(__file__).resolve().parents[2]
HEAVY_OR_DEV_ONLY = ("moto", "numpy", "onnxruntime", "onnx", "tokenizers", "pytest", "hypothesis", "requests")


def test_committed_openapi_document_is_fresh() -> None:
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert committed == json.loads(json.dumps(openapi.build())), "run `make openapi` and commit docs/openapi.json"


def test_every_route_is_documented_by_its_function() -> None:
    documented = {
        (method.upper(), path)
        for path, item in openapi.build()["paths"].items()
        for method in item
    }
    expected = {(route.method, route.path) for route in ROUTES}
    assert documented == expected


def test_deployed_handlers_import_nothing_heavy_or_dev_only() -> None:
    # Every deployed Lambda: the API functions, the authorizer, the workers and the workflow steps.
    modules = [f"functions.{name}.handler" for name in (*FUNCTIONS, "authorizer", "indexer", "steps")]
    probe = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY_OR_DEV_ONLY!r})\n"
        "print(','.join(bad))\n"
    )
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert answer.stdout.strip() == ""
