"""Which region the admin commands use (issue 37): docs/deploy.md says to export AWS_REGION, as the AWS
CLI v2 and every other AWS SDK read it, but boto3 reads only AWS_DEFAULT_REGION; and `reindex` with no
region at all printed botocore's 78-line NoRegionError traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from moto import mock_aws

from uhp_memories.admin.target import aws_session
from uhp_memories.local.cli import main


@pytest.fixture
def no_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    return monkeypatch


def test_aws_region_is_read_and_the_flag_comes_first(no_region: pytest.MonkeyPatch) -> None:
    assert aws_session(None, None).region_name is None
    no_region.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert aws_session(None, None).region_name == "eu-west-1"
    no_region.setenv("AWS_REGION", "eu-central-1")  # what docs/deploy.md exports wins over the older name
    assert aws_session(None, None).region_name == "eu-central-1"
    assert aws_session(None, "ap-south-1").region_name == "ap-south-1"


def test_keys_list_finds_its_stage_in_the_aws_region_exported(
    no_region: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI: with only AWS_REGION set, the stack is looked up in that region (moto answers
    'does not exist' for it), where before the command stopped at 'no AWS region'."""
    no_region.setenv("AWS_REGION", "eu-central-1")
    no_region.setenv("AWS_ACCESS_KEY_ID", "testing")
    no_region.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        assert main(["keys", "list", "--stack", "uhp-memories-nope"]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 1, refused
    assert "no AWS region" not in refused[0]
    assert "uhp-memories-nope" in refused[0]


def test_reindex_without_a_region_is_one_line_not_a_traceback(
    no_region: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reindex", "--stack", "uhp-memories-prod"]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 1, refused
    assert refused[0].startswith("uhp-memories: no AWS region")
    assert "AWS_REGION" in refused[0]
