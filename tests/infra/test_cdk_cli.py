"""`make synth` and `make diff` (docs/deploy.md steps 2 and 3) through the real cdk CLI, as a cloud team
runs them before it has an account: with no AWS credentials at all, with only a region, and with an
account and a region (what the CLI hands the app once credentials resolve one).

Each environment starts from nothing of the caller's: every AWS_* and CDK_* variable unset, the AWS
config and credentials files empty, the instance metadata service off and a HOME of its own, so
nothing can reach AWS. The CLI then picks the region itself (us-east-1 when none is given) and leaves
the account unknown, which is where an ARN rendered half literal once broke a cdk-nag acknowledgment
(issue 26): the in-process tests set both or neither.

`make synth` synthesizes both stages (cdk-nag fails it on any finding) and runs cfn-lint on both
templates (errors fail); `make diff` lists the prod stage (the larger) against an empty stack, in
the same place, after the synth. The three
environments run side by side (about 25 s each alone; the CLI and jsii spend most of it in node).

Beside them, a checkout whose cdk.json has a stage connected to mem0's Platform (as docs/deploy.md
"Connecting mem0" tells an operator to write it) goes through `make synth SYNTH_STAGES=<that stage>`
with no credentials: the secret named by name renders with pseudo parameters there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")

from infra.layout import REPO

pytestmark = pytest.mark.slow

CDK_CLI = REPO.root / "node_modules" / ".bin" / "cdk"
VENV_STAMP = ".venv/.installed-py3.13"  # the Makefile's $(STAMP): the dev install is up to date
ACCOUNT = "111111111111"
# name -> (variables set, the environment the CLI must hand the app: aws://ACCOUNT/REGION)
ENVIRONMENTS: dict[str, tuple[dict[str, str], str]] = {
    "no credentials": ({}, "aws://unknown-account/us-east-1"),
    "a region only": ({"AWS_REGION": "eu-west-1"}, "aws://unknown-account/eu-west-1"),
    "account and region": (
        {"AWS_REGION": "eu-west-1", "CDK_DEFAULT_ACCOUNT": ACCOUNT},
        f"aws://{ACCOUNT}/eu-west-1",
    ),
}
TIMEOUT_SECONDS = 600
MEM0_STAGE = "mem0"
# The stage an operator connects to mem0's Platform: dev, with the key's secret by name, encrypted with a
# key of the operator's.
MEM0 = {"mode": "platform", "api_key_secret": "uhp-memories/mem0-api-key",
        "api_key_kms_key_arn": "arn:aws:kms:us-east-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"}


@dataclass
class Run:
    process: subprocess.Popen[str]
    outdir: Path

    def wait(self) -> tuple[int, str]:
        output, _ = self.process.communicate(timeout=TIMEOUT_SECONDS)
        return self.process.returncode, output


def without_aws(home: Path, variables: dict[str, str]) -> dict[str, str]:
    """The caller's environment with nothing of AWS or the CDK in it, plus `variables`."""
    (home / "config").write_text("")
    (home / "credentials").write_text("")
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_", "JSII_"))}
    return {
        **kept,
        "HOME": str(home),
        "AWS_CONFIG_FILE": str(home / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        **variables,
    }


@pytest.fixture(scope="module")
def cdk_cli() -> Path:
    """The CLI the Makefile pins, installed by its own target when missing (npm is reachable here), and
    the venv brought up to pyproject.toml once, before the three runs below would each do it at once."""
    installed = subprocess.run(
        ["make", "--no-print-directory", VENV_STAMP, str(CDK_CLI.relative_to(REPO.root))], cwd=REPO.root,
        capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    assert CDK_CLI.exists(), "make did not install the cdk CLI"
    return CDK_CLI


def checkout_with_a_mem0_stage(clean_checkout: Path, root: Path) -> Path:
    """The checkout, its cdk.json with one more stage (dev, connected to mem0), and this one's venv and CLI."""
    shutil.copytree(clean_checkout, root)
    cdk = json.loads((root / "cdk.json").read_text())
    stages = cdk["context"]["uhp-memories:stages"]
    stages[MEM0_STAGE] = {**stages["dev"], "mem0": MEM0}
    (root / "cdk.json").write_text(json.dumps(cdk, indent=2))
    for installed in (".venv", "node_modules"):
        (root / installed).symlink_to(REPO.root / installed)
    return root


@pytest.fixture(scope="module")
def runs(cdk_cli: Path, clean_checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """`make synth` then `make diff` in each environment, all three started at once, and `make synth` of
    the mem0 stage beside them."""
    started: dict[str, Run] = {}
    for name, (variables, _) in ENVIRONMENTS.items():
        home = tmp_path_factory.mktemp("home")
        outdir = tmp_path_factory.mktemp("cdk-out")
        process = subprocess.Popen(
            ["make", "--no-print-directory", "synth", "diff", f"CDK_OUT={outdir}", "STAGE=prod"],
            cwd=REPO.root, env=without_aws(home, variables), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )
        started[name] = Run(process, outdir)
    root = checkout_with_a_mem0_stage(clean_checkout, tmp_path_factory.mktemp("mem0-checkout") / "repo")
    outdir = tmp_path_factory.mktemp("cdk-out-mem0")
    # STAMP= : the venv is this checkout's, brought up to date above; never installed from the copy.
    process = subprocess.Popen(
        ["make", "--no-print-directory", "synth", f"SYNTH_STAGES={MEM0_STAGE}", f"CDK_OUT={outdir}", "STAMP="],
        cwd=root, env=without_aws(tmp_path_factory.mktemp("home"), {}), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )
    started[MEM0_STAGE] = Run(process, outdir)
    yield started
    for run in started.values():
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()


@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_make_synth_and_diff_pass_through_the_cdk_cli(runs: dict[str, Run], environment: str) -> None:
    run = runs[environment]
    returncode, output = run.wait()

    assert returncode == 0, output[-6000:]
    for stage in ("dev", "prod"):
        assembly = run.outdir / stage
        manifest = json.loads((assembly / "manifest.json").read_text())["artifacts"]
        assert manifest[f"uhp-memories-{stage}"]["environment"] == ENVIRONMENTS[environment][1], stage
        template = json.loads((assembly / f"uhp-memories-{stage}.template.json").read_text())
        # cdk-nag ran on the stage (its acknowledgments are in the template; a finding fails the synth).
        assert any("cdk_nag" in r.get("Metadata", {}) for r in template["Resources"].values()), stage
    # cfn-lint ran on both templates (make stops on its errors), and diff listed the stage's resources.
    assert "cfn-lint --non-zero-exit-code error" in output
    assert "[+] AWS::Lambda::Function" in output
    assert "Number of stacks with differences: 1" in output


def test_make_synth_passes_a_stage_connected_to_mem0_through_the_cdk_cli(runs: dict[str, Run]) -> None:
    run = runs[MEM0_STAGE]
    returncode, output = run.wait()

    assert returncode == 0, output[-6000:]
    assembly = run.outdir / MEM0_STAGE
    template = json.loads((assembly / f"uhp-memories-{MEM0_STAGE}.template.json").read_text())
    resources = template["Resources"].values()
    assert any("cdk_nag" in r.get("Metadata", {}) for r in resources)
    assert "cfn-lint --non-zero-exit-code error" in output
    layers = [r for r in resources if r["Type"] == "AWS::Lambda::LayerVersion"]
    assert any("mem0-layer-requirements.txt" in r["Properties"]["Description"] for r in layers)
    named = {r["Properties"]["Environment"]["Variables"].get("UHP_MEM0_API_KEY_SECRET")
             for r in resources if r["Type"] == "AWS::Lambda::Function"}
    assert named == {MEM0["api_key_secret"], None}, "the functions that reach mem0's records name the key's secret"
