"""`make deploy`'s first line (issue 37): without credentials it bundled for 44 s, then failed with the CDK's
message. The preflight says which account, region and identity the deploy will use, or in one line why it
cannot start, exit 2, before anything is built."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from moto import mock_aws

from uhp_memories.admin.preflight import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No credentials, no region, no AWS configuration of this machine's."""
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to find either
    return monkeypatch


def test_no_region_is_one_line(bare: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stage", "dev"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no AWS region" in err and "AWS_REGION" in err  # noqa: PT018


def test_no_credentials_is_one_line(bare: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bare.setenv("AWS_REGION", "eu-west-1")
    assert main(["--stage", "dev"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("uhp-memories: cannot deploy: no AWS credentials")


def test_with_credentials_it_names_the_account_region_and_identity(
    bare: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bare.setenv("AWS_REGION", "eu-west-1")
    bare.setenv("AWS_ACCESS_KEY_ID", "testing")
    bare.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        assert main(["--stage", "prod"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"deploying stage prod into account \d{12} \(eu-west-1\) as arn:aws:\S+\n", out), out


def test_make_deploy_runs_the_preflight_before_the_cdk() -> None:
    recipe = (ROOT / "Makefile").read_text().split("\ndeploy:", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in recipe.splitlines()[1:]]
    assert lines[0].endswith("-m uhp_memories.admin.preflight --stage $(STAGE)")
    assert lines[1].startswith("$(CDK) deploy")
