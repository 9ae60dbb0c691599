"""The API surface: the committed OpenAPI document is fresh, every route has its handler, deployed
handlers stay light, and the deployed code holds no test double."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.lambda_env import run_like_lambda
from uhp_memories.api import openapi
from uhp_memories.api.routes import FUNCTIONS, ROUTES

ROOT = Path(__file__).resolve().parents[2]
HEAVY_OR_DEV_ONLY = ("moto", "numpy", "onnxruntime", "onnx", "tokenizers", "pytest", "hypothesis", "requests")
# Left out of the Lambda layer (infra/constructs/packaging.py CORE_EXCLUDED_SUBPACKAGES): local mode
# (moto, its patches) and the operator's CLI.
NOT_DEPLOYED = ("uhp_memories.local", "uhp_memories.admin")
DEPLOYED_HANDLERS = [f"functions.{name}.handler" for name in (*FUNCTIONS, "authorizer", "indexer", "steps")]


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


@pytest.mark.slow
def test_deployed_handlers_import_nothing_heavy_or_dev_only() -> None:
    # Every deployed Lambda: the API functions, the authorizer, the workers and the workflow steps.
    probe = (
        "import importlib, sys\n"
        f"for name in {DEPLOYED_HANDLERS!r}:\n"
        "    importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY_OR_DEV_ONLY!r})\n"
        "print(','.join(bad))\n"
    )
    answer = run_like_lambda(["-c", probe])
    assert answer.stdout.strip() == ""


def _deployed_sources() -> list[Path]:
    return sorted(p for folder in ("layers", "functions") for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.slow
def test_the_lambda_layer_and_functions_hold_no_fake_and_import_nothing_from_tests() -> None:
    # Fakes live in tests/fakes: nothing in a deployed import path exists only for tests.
    offenders = []
    for path in _deployed_sources():
        where = path.relative_to(ROOT)
        if path.stem in ("inmemory", "fakes", "fake"):
            offenders.append(f"{where}: a module of fakes")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name.startswith(("InMemory", "Fake")):
                offenders.append(f"{where}: class {node.name}")
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            for module in modules:
                if module.split(".")[0] == "tests" or module.endswith(".inmemory"):
                    offenders.append(f"{where}: imports {module}")
    assert _deployed_sources(), "no deployed sources found"
    assert offenders == []


@pytest.mark.slow
def test_deployed_handlers_run_nothing_that_exists_only_for_local_mode() -> None:
    """No deployed handler imports local mode or the admin CLI (the layer leaves them out), and the
    resolver every API function runs is Powertools' own: the local gateway's per-thread request state
    is a patch local mode installs (uhp_memories.local.patches.powertools_threads), not deployed code."""
    probe = (
        "import importlib, sys\n"
        "from aws_lambda_powertools.event_handler import APIGatewayRestResolver\n"
        f"handlers = [importlib.import_module(name) for name in {DEPLOYED_HANDLERS!r}]\n"
        f"bad = sorted(m for m in sys.modules if m.startswith({NOT_DEPLOYED!r}))\n"
        "apps = [h.app for h in handlers if hasattr(h, 'app')]\n"
        "bad += sorted({type(a).__qualname__ for a in apps if type(a) is not APIGatewayRestResolver})\n"
        "patched = ('current_event', 'lambda_context', 'context', 'resolve', '_to_proxy_event')\n"
        "bad += [n for n in patched if n in vars(APIGatewayRestResolver)]\n"
        "print(','.join(bad), len(apps))\n"
    )
    answer = run_like_lambda(["-c", probe])
    bad, apps = answer.stdout.split()[:-1], int(answer.stdout.split()[-1])
    assert bad == []
    assert apps == len(FUNCTIONS)  # every API function's resolver was looked at
