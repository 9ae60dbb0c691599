"""Infra tests: the CDK app synthesized in process, offline, from a clean copy of the checkout (what
git tracks or would track; no caches, no cdk.out, no virtualenv), as CI sees it.

Each stage is synthesized once per session, with cdk-nag on and assets not bundled (bundling would
download the dependency layer); CDK's CloudFormation validation is off (CDK_VALIDATION=false), which
takes synth from ~12 s to ~4 s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Before the jsii runtime starts (the first import of aws_cdk).
os.environ.setdefault("CDK_VALIDATION", "false")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
# jsii warns on end-of-life Node majors unless the major is listed here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20,22")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

REPO_ROOT = Path(__file__).resolve().parents[2]


def checkout_files(root: Path) -> list[Path]:
    """The files a fresh clone would have, plus new files not ignored (work in progress)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [root / name for name in listed.split("\0") if name and (root / name).is_file()]


@pytest.fixture(scope="session")
def clean_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("checkout")
    for source in checkout_files(REPO_ROOT):
        destination = target / source.relative_to(REPO_ROOT)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
    return target


@dataclass
class Synth:
    stage: str
    template: dict[str, Any]
    report: dict[str, Any]
    nag_error: str | None
    stack: Any  # infra.stacks.memory_service.MemoryServiceStack

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    def violations(self) -> list[str]:
        found = []
        for plugin in self.report.get("pluginReports", []):
            for violation in plugin.get("violations", []):
                paths = [r.get("constructPath") for r in violation.get("violatingResources", [])]
                found.append(f"{violation['ruleName']}: {violation['description']} at {paths}")
        return found


def synthesize(root: Path, stage: str, outdir: Path, catalog: Mapping[str, Any] | None = None) -> Synth:
    from infra.app import cdk_json_context, create_app
    from infra.layout import Layout

    context = cdk_json_context(root) | {"stage": stage, "bundle": False}
    extra: dict[str, Any] = {} if catalog is None else {"catalog": catalog}
    # A concrete account and region, as the CLI passes them when it has credentials: some ARNs then
    # render as literals, which is where acknowledgments that name them go wrong.
    saved = {name: os.environ.get(name) for name in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")}
    os.environ.update(CDK_DEFAULT_ACCOUNT="111111111111", CDK_DEFAULT_REGION="eu-west-1")
    try:
        app = create_app(context, outdir=str(outdir), layout=Layout(root), **extra)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    stack_name = f"uhp-memories-{stage}"
    stack = app.node.find_child(stack_name)
    nag_error = None
    try:
        app.synth()
    except RuntimeError as error:  # cdk-nag findings fail the synth after the templates are written
        nag_error = str(error)
    report_path = outdir / "validation-report.json"
    return Synth(
        stage=stage,
        template=json.loads((outdir / f"{stack_name}.template.json").read_text()),
        report=json.loads(report_path.read_text()) if report_path.exists() else {},
        nag_error=nag_error,
        stack=stack,
    )


@pytest.fixture(scope="session")
def synth_stage(clean_checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Synth]:
    pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")
    cache: dict[str, Synth] = {}

    def get(stage: str) -> Synth:
        if stage not in cache:
            cache[stage] = synthesize(clean_checkout, stage, tmp_path_factory.mktemp(f"cdk-{stage}"))
        return cache[stage]

    return get


@pytest.fixture(scope="session")
def prod(synth_stage: Callable[[str], Synth]) -> Synth:
    """The production stage of cdk.json: what the issue calls production-ready."""
    return synth_stage("prod")


@pytest.fixture(scope="session")
def dev(synth_stage: Callable[[str], Synth]) -> Synth:
    """The small, throwaway stage."""
    return synth_stage("dev")


def render(value: Any) -> str:
    """A CloudFormation value as text: {"Fn::GetAtt": [X, "Arn"]} is <X.Arn>, {"Ref": X} is <X>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((name, argument),) = value.items()
        if name == "Fn::GetAtt":
            return f"<{argument[0]}.{argument[1]}>"
        if name == "Ref":
            return f"<{argument}>"
        if name == "Fn::Join":
            return argument[0].join(render(part) for part in argument[1])
    return json.dumps(value, sort_keys=True)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
