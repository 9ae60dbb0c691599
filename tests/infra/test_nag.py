"""cdk-nag (AwsSolutions) on every stage of cdk.json, and on a stage that uses every capability the
constructs offer (a stream consumer with search, embeddings and files). cfn-lint runs in `make synth`,
on both stages, in each environment tests/infra/test_cdk_cli.py runs it in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")

from infra.catalog import FUNCTION_ACCESS, Access
from infra.nag import MIN_REASON_CHARS
from tests.infra.conftest import Synth, render, synthesize


@pytest.fixture(scope="module")
def every_capability(clean_checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    root = tmp_path_factory.mktemp("every-capability") / "repo"
    shutil.copytree(clean_checkout, root)
    (root / "functions" / "worker").mkdir()
    (root / "functions" / "worker" / "__init__.py").write_text("")
    (root / "functions" / "worker" / "handler.py").write_text("def lambda_handler(event, context):\n    return {}\n")
    # A second stream consumer that uses every store, beside the real indexer.
    catalog = {
        **FUNCTION_ACCESS,
        "worker": Access(
            main_table="write",
            main_table_stream=True,
            idempotency_table=True,
            idempotency_purge=True,
            search="write",
            embeddings=True,
            erase_report=True,
            files=True,
            files_purge=True,
        ),
    }
    return synthesize(root, "prod", tmp_path_factory.mktemp("cdk-every-capability"), catalog=catalog)


@pytest.mark.parametrize("stage", ["prod", "dev"])
def test_cdk_nag_aws_solutions_passes(synth_stage, stage: str) -> None:
    synth = synth_stage(stage)

    assert synth.nag_error is None, "\n".join(synth.violations())
    assert synth.violations() == []
    assert [p["summary"]["status"] for p in synth.report.get("pluginReports", [])] in ([], ["success"])


def test_cdk_nag_passes_with_every_capability_in_use(every_capability: Synth) -> None:
    assert every_capability.nag_error is None, "\n".join(every_capability.violations())


@pytest.mark.parametrize("stage", ["prod", "dev"])
def test_every_acknowledgment_carries_a_reason(synth_stage, stage: str) -> None:
    acknowledged = [
        rule
        for resource in synth_stage(stage).resources.values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]

    assert acknowledged, "acknowledgments are written to the template (writeSuppressionsToCloudFormation)"
    for rule in acknowledged:
        assert rule["id"].startswith("AwsSolutions-")
        assert len(rule["reason"].strip()) >= MIN_REASON_CHARS, rule


def test_every_stream_consumer_has_a_dead_letter_queue_and_backlog_alarms(every_capability: Synth) -> None:
    mappings = [m["Properties"] for m in every_capability.of_type("AWS::Lambda::EventSourceMapping").values()]
    alarms = [a["Properties"] for a in every_capability.of_type("AWS::CloudWatch::Alarm").values()]

    assert len(mappings) == 2  # the indexer and the made-up worker
    for mapping in mappings:
        assert mapping["BisectBatchOnFunctionError"] is True
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert "OnFailure" in mapping["DestinationConfig"]
    assert sum(a.get("MetricName") == "IteratorAge" for a in alarms) == 2
    assert sum(a.get("MetricName") == "ApproximateNumberOfMessagesVisible" for a in alarms) == 2


def test_embeddings_permission_names_the_configured_model(every_capability: Synth) -> None:
    statements = [
        s
        for p in every_capability.of_type("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "bedrock:InvokeModel"
    ]

    assert len(statements) == len([a for a in FUNCTION_ACCESS.values() if a.embeddings]) + 1  # + the worker
    for statement in statements:
        assert render(statement["Resource"]).endswith(
            ":bedrock:eu-west-1::foundation-model/amazon.titan-embed-text-v2:0"
        )
