"""The app as the CDK CLI runs it (cdk.json "app": python -m infra.app), from a clean checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")


def test_cdk_json_runs_the_app_as_a_module() -> None:
    from infra.layout import REPO

    config = json.loads((REPO.root / "cdk.json").read_text())

    # As a module from the repository root: run as a script, infra/constructs would shadow `constructs`.
    assert config["app"].endswith("python -m infra.app")
    assert config["notices"] is False
    assert config["context"]["cli-telemetry"] is False


@pytest.mark.slow
def test_the_app_synthesizes_from_a_clean_checkout_as_the_cli_runs_it(clean_checkout: Path, tmp_path: Path) -> None:
    context = json.loads((clean_checkout / "cdk.json").read_text())["context"] | {"bundle": False}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CDK_", "AWS_"))},
        "CDK_OUTDIR": str(tmp_path),  # what the CLI hands the app
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_VALIDATION": "false",
    }
    result = subprocess.run(
        [sys.executable, "-m", "infra.app"], cwd=clean_checkout, env=env, capture_output=True, text=True, timeout=300
    )

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert "uhp-memories-dev" in manifest["artifacts"]
    assert (tmp_path / "uhp-memories-dev.template.json").is_file()
