"""Operating a deployed stage: traces, metrics and correlated logs from every entry point, the alarms
(each function's errors and its invocations near its timeout, the search domain's recommended alarms,
degraded recall answers, Bedrock throttling the stage's models, the account's Lambda concurrency), the
dashboard's request phases, per-method
API metrics off unless a stage turns them on, a customer managed KMS key when a stage asks for one,
and the recall index's shard count from the stage to the index the functions create."""

from __future__ import annotations

import gzip
import io
import json
import logging
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")

from infra.catalog import FUNCTION_ACCESS, lambda_entries
from infra.constructs.encryption import KEY_READ_ACTIONS, KEY_WRITE_ACTIONS
from infra.layout import REPO
from tests.infra.conftest import Synth, render, synthesize
from tests.infra.test_stack import environment, lambda_id, role_permissions
from tests.integration.conftest import Client, purge_tenant
from uhp_memories.api import observability
from uhp_memories.domain.recall.model import SearchUnavailable
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws


@pytest.fixture(scope="module")
def keyed(clean_checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The small stage with a customer managed key and API Gateway's per-method metrics on."""
    root = tmp_path_factory.mktemp("keyed") / "repo"
    shutil.copytree(clean_checkout, root)
    cdk = json.loads((root / "cdk.json").read_text())
    stages = cdk["context"]["uhp-memories:stages"]
    dev = stages["dev"]
    stages["keyed"] = {**dev, "encryption": {"customer_managed_key": True},
                       "api": {**dev["api"], "detailed_metrics": True}, "alarm_account_concurrency": 2400}
    (root / "cdk.json").write_text(json.dumps(cdk))
    return synthesize(root, "keyed", tmp_path_factory.mktemp("cdk-keyed"))


def alarms(synth: Synth) -> list[dict[str, Any]]:
    return [a["Properties"] for a in synth.of_type("AWS::CloudWatch::Alarm").values()]


# -- traces, metrics and logs --------------------------------------------------------------------


def test_every_function_is_traced_and_writes_metrics(prod: Synth) -> None:
    for name in FUNCTION_ACCESS:
        props = prod.resources[lambda_id(prod, name)]["Properties"]
        assert props["TracingConfig"] == {"Mode": "Active"}, name
        assert {k: environment(prod, name)[k] for k in ("UHP_TRACING", "UHP_METRICS")} == {
            "UHP_TRACING": "true", "UHP_METRICS": "true"}, name
    (stage,) = prod.of_type("AWS::ApiGateway::Stage").values()
    assert stage["Properties"]["TracingEnabled"] is True


def test_per_method_api_metrics_are_off_unless_the_stage_turns_them_on(prod: Synth, keyed: Synth) -> None:
    def settings(synth: Synth) -> dict[str, Any]:
        (stage,) = synth.of_type("AWS::ApiGateway::Stage").values()
        (method_settings,) = stage["Properties"]["MethodSettings"]
        return dict(method_settings)

    assert settings(prod)["MetricsEnabled"] is False
    assert settings(keyed)["MetricsEnabled"] is True


@pytest.mark.slow
def test_nothing_is_traced_or_written_outside_a_deployed_function() -> None:
    """Local mode and tests: the tracer is off, so the X-Ray SDK patched no client and sends nothing,
    and no metric is written. Even with tracing asked for, outside Lambda it stays off."""
    import botocore.client
    import wrapt
    from aws_xray_sdk.core import patcher

    assert observability.tracer.disabled is True
    assert not isinstance(botocore.client.BaseClient._make_api_call, wrapt.ObjectProxy), "X-Ray patched botocore"
    assert not patcher._PATCHED_MODULES
    script = "from uhp_memories.api import observability as o; print(o.tracer.disabled)"
    env = {"PATH": "/usr/bin:/bin", "UHP_TRACING": "true", "UHP_METRICS": "true",
           "PYTHONPATH": str(REPO.root / "layers" / "core")}
    ran = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "True"


def test_an_invocations_log_lines_carry_its_correlation_id(capsys: pytest.CaptureFixture[str]) -> None:
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(observability.logger.registered_formatter)
    observability.logger.addHandler(handler)

    @observability.observed
    def entry(event: dict[str, Any], context: Any) -> None:
        observability.logger.warning("something happened")

    try:
        entry({"requestContext": {"requestId": "req-123"}, "body": "secret content"}, None)
        observability.logger.warning("after the invocation")
    finally:
        observability.logger.removeHandler(handler)
    during, after = (json.loads(line) for line in lines.getvalue().splitlines())
    assert during["correlation_id"] == "req-123"
    assert "correlation_id" not in after
    assert "secret content" not in lines.getvalue() + capsys.readouterr().out


@pytest.fixture
def owner(local_aws: LocalAws, gateway: LocalGateway) -> Iterator[Client]:
    tenant = "t-" + secrets.token_hex(6)
    key = "k-" + secrets.token_hex(16)
    local_aws.add_keys([KeyEntry(key, tenant, "user:alice", ())])
    yield Client(gateway.url, key, tenant, "user:alice", requests.Session())
    purge_tenant(local_aws, tenant)


def test_a_degraded_recall_writes_the_metric_the_alarm_reads(
    prod: Synth, local_aws: LocalAws, owner: Client, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The recall function, as deployed (metrics on, its service named as the template names it),
    answering with the embedder down: the count it writes is the one the RecallDegraded alarm reads."""
    from aws_lambda_powertools import Metrics

    from uhp_memories.settings import Settings

    service = environment(prod, "recall")["POWERTOOLS_SERVICE_NAME"]
    monkeypatch.setattr(observability, "_settings", Settings(metrics=True))
    monkeypatch.setattr(observability, "metrics", Metrics(namespace=observability.NAMESPACE, service=service))
    memory = owner.create_memory("operated")["id"]
    owner.remember(memory, "Globex prefers email over calls.")
    engine = local_aws.container.recall_engine()  # type: ignore[union-attr]

    def down(texts: Any) -> Any:
        raise SearchUnavailable("injected: the model is down")

    capsys.readouterr()
    monkeypatch.setattr(engine.embedder, "embed", down)
    answer = owner.post(f"/v1/memories/{memory}/recall", {"query": "globex email"})
    monkeypatch.undo()
    assert answer.status_code == 200, answer.text
    assert answer.json()["degraded"]
    written = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]

    (blob,) = written
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    assert (blob[observability.RECALLS], blob[observability.RECALLS_DEGRADED]) == ([1.0], [1.0])
    (alarm,) = [a for a in alarms(prod) if a.get("MetricName") == observability.RECALLS_DEGRADED]
    assert alarm["Namespace"] == directive["Namespace"] == observability.NAMESPACE
    assert alarm["Dimensions"] == [{"Name": name, "Value": blob[name]} for (name,) in directive["Dimensions"]]
    assert alarm["Statistic"] == "Sum"
    assert "Globex" not in json.dumps(written)


# -- alarms ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["prod", "dev"])
def test_every_function_alarms_on_its_errors(synth_stage, stage: str) -> None:
    synth = synth_stage(stage)
    errors = {
        render(dimension["Value"])
        for alarm in alarms(synth) if alarm.get("MetricName") == "Errors" and alarm["Namespace"] == "AWS/Lambda"
        for dimension in alarm["Dimensions"]
    }

    assert errors == {f"<{lambda_id(synth, entry.name)}>" for entry in lambda_entries(REPO)}


def test_every_function_alarms_when_an_invocation_nears_its_timeout(prod: Synth) -> None:
    """At 90 % of the timeout each function has in the template (the API's 28 s, the steps' 5 minutes)."""
    timeouts = {name: props["Properties"]["Timeout"] for name, props in prod.of_type("AWS::Lambda::Function").items()}
    near = {
        render(alarm["Dimensions"][0]["Value"]).strip("<>"): alarm
        for alarm in alarms(prod) if alarm.get("MetricName") == "Duration" and alarm["Namespace"] == "AWS/Lambda"
    }

    assert set(near) == set(timeouts)
    for function, alarm in near.items():
        assert (alarm["Statistic"], alarm["ComparisonOperator"], alarm["Period"], alarm["EvaluationPeriods"]) == (
            "Maximum", "GreaterThanOrEqualToThreshold", 300, 1), function
        assert alarm["Threshold"] == pytest.approx(timeouts[function] * 1000 * 0.9), function
        assert "timeout" in render(alarm["AlarmDescription"])
    assert {timeouts[lambda_id(prod, "recall")], timeouts[lambda_id(prod, "steps.derive")]} == {28, 300}


def bedrock_throttle_alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    found = {}
    for alarm in alarms(synth):
        if (alarm.get("Namespace"), alarm.get("MetricName")) == ("AWS/Bedrock", "InvocationThrottles"):
            (dimension,) = alarm["Dimensions"]
            assert dimension["Name"] == "ModelId"
            found[dimension["Value"]] = alarm
    return found


def test_bedrock_throttling_the_stages_models_alarms(prod: Synth, dev: Synth) -> None:
    """The embedding model (a stage with a search domain), and the derivation model where it is Bedrock's."""
    config = dev.stack.config
    assert config.derivation.provider == "bedrock"
    assert prod.stack.config.derivation.provider == "none"
    small, big = bedrock_throttle_alarms(dev), bedrock_throttle_alarms(prod)

    assert set(small) == {config.embeddings.model_id, config.derivation.model_id}
    assert set(big) == {prod.stack.config.embeddings.model_id}
    topic = next(iter(dev.of_type("AWS::SNS::Topic")))
    for alarm in small.values():
        assert (alarm["Statistic"], alarm["Threshold"], alarm["Period"], alarm["ComparisonOperator"]) == (
            "Sum", 1, 300, "GreaterThanOrEqualToThreshold")
        assert alarm["AlarmActions"] == alarm["OKActions"] == [{"Ref": topic}]
        assert render(alarm["AlarmDescription"]).startswith("uhp-memories dev: Bedrock throttled")


def test_the_accounts_lambda_concurrency_alarms_at_the_stages_threshold(prod: Synth, keyed: Synth) -> None:
    def concurrency(synth: Synth) -> dict[str, Any]:
        (alarm,) = [a for a in alarms(synth) if a.get("MetricName") == "ConcurrentExecutions"]
        return alarm

    default, chosen = concurrency(prod), concurrency(keyed)
    assert (default["Namespace"], default["Statistic"], default["Threshold"]) == ("AWS/Lambda", "Maximum", 800)
    assert "Dimensions" not in default  # the account's, in the stage's region: every function
    assert chosen["Threshold"] == keyed.stack.config.alarm_account_concurrency == 2400


def test_the_dashboard_shows_every_alarm_and_the_request_phases(prod: Synth) -> None:
    (dashboard,) = prod.of_type("AWS::CloudWatch::Dashboard").values()
    widgets = json.loads(render(dashboard["Properties"]["DashboardBody"]))["widgets"]
    shown = [w["properties"]["alarms"] for w in widgets if w["type"] == "alarm"]

    # CloudWatch takes at most 100 alarms a status widget; together they show every alarm.
    assert all(len(some) <= 100 for some in shown)
    assert len(alarms(prod)) > 100
    assert sorted(a for some in shown for a in some) == sorted(f"<{name}.Arn>" for name in
                                                               prod.of_type("AWS::CloudWatch::Alarm"))
    graphed = [
        metric for w in widgets if w["type"] == "metric" for metric in w["properties"]["metrics"]
        if metric[0] == observability.NAMESPACE
    ]
    recall = environment(prod, "recall")["POWERTOOLS_SERVICE_NAME"]
    assert {m[1] for m in graphed if m[2:4] == ["service", recall]} >= set(observability.PHASE_METRICS.values())


SEARCH_ALARMS = {  # metric -> (statistic, comparison, threshold, period, evaluation periods)
    "ClusterStatus.red": ("Maximum", "GreaterThanOrEqualToThreshold", 1, 60, 1),
    "ClusterStatus.yellow": ("Maximum", "GreaterThanOrEqualToThreshold", 1, 60, 5),
    "ClusterIndexWritesBlocked": ("Maximum", "GreaterThanOrEqualToThreshold", 1, 300, 1),
    "AutomatedSnapshotFailure": ("Maximum", "GreaterThanOrEqualToThreshold", 1, 60, 1),
    "CPUUtilization": ("Maximum", "GreaterThanOrEqualToThreshold", 80, 300, 3),
    "JVMMemoryPressure": ("Maximum", "GreaterThanOrEqualToThreshold", 95, 60, 3),
    "OldGenJVMMemoryPressure": ("Maximum", "GreaterThanOrEqualToThreshold", 80, 60, 3),
}


def search_alarms(synth: Synth) -> dict[str, tuple[Any, ...]]:
    return {
        a["MetricName"]: (a["Statistic"], a["ComparisonOperator"], a["Threshold"], a["Period"],
                          a["EvaluationPeriods"])
        for a in alarms(synth) if a.get("Namespace") == "AWS/ES"
    }


def test_the_search_domain_has_the_recommended_alarms(prod: Synth, dev: Synth) -> None:
    big, small = search_alarms(prod), search_alarms(dev)

    for found in (big, small):
        assert {metric: found[metric] for metric in SEARCH_ALARMS} == SEARCH_ALARMS
    # Dedicated masters (prod), burstable instances (dev's t3) and free storage by the node's volume.
    assert big["MasterCPUUtilization"] == ("Maximum", "GreaterThanOrEqualToThreshold", 50, 300, 3)
    assert big["MasterJVMMemoryPressure"] == ("Maximum", "GreaterThanOrEqualToThreshold", 95, 60, 3)
    assert "MasterCPUUtilization" not in small
    assert small["CPUCreditBalance"] == ("Minimum", "LessThanThreshold", 1, 300, 3)
    assert "CPUCreditBalance" not in big
    assert big["FreeStorageSpace"][2] == 100 * 1024 / 4
    assert small["FreeStorageSpace"][2] == 10 * 1024 / 4
    assert big["Nodes"] == ("Minimum", "LessThanThreshold", 6, 86400, 1)  # 3 data nodes, 3 masters
    assert "KMSKeyError" not in big


# -- a customer managed key ----------------------------------------------------------------------


def test_a_stage_may_encrypt_its_data_with_its_own_key(keyed: Synth, prod: Synth) -> None:
    (key_id,) = keyed.of_type("AWS::KMS::Key")
    key = keyed.resources[key_id]
    assert key["Properties"]["EnableKeyRotation"] is True
    uses_key = {"Fn::GetAtt": [key_id, "Arn"]}

    for table in keyed.of_type("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"] == {"KMSMasterKeyId": uses_key, "SSEEnabled": True,
                                                           "SSEType": "KMS"}
    files = next(b for n, b in keyed.of_type("AWS::S3::Bucket").items() if n.startswith("DataFilesBucket"))
    (rule,) = files["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule == {"BucketKeyEnabled": True, "ServerSideEncryptionByDefault": {
        "KMSMasterKeyID": uses_key, "SSEAlgorithm": "aws:kms"}}
    (domain,) = keyed.of_type("AWS::OpenSearchService::Domain").values()
    assert render(domain["Properties"]["EncryptionAtRestOptions"]["KmsKeyId"]) in (f"<{key_id}>", f"<{key_id}.Arn>")
    for queue in keyed.of_type("AWS::SQS::Queue").values():
        assert queue["Properties"]["KmsMasterKeyId"] == uses_key
    groups = keyed.of_type("AWS::Logs::LogGroup")
    assert groups
    assert all(g["Properties"]["KmsKeyId"] == uses_key for g in groups.values())
    # CloudWatch Logs may use the key for this account's log groups only.
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    (logs,) = [s for s in statements if "logs." in render(s.get("Principal", {}).get("Service", ""))]
    assert list(logs["Condition"]["ArnLike"]) == ["kms:EncryptionContext:aws:logs:arn"]
    assert keyed.nag_error is None, keyed.violations()
    # The default stays AWS managed.
    assert prod.of_type("AWS::KMS::Key") == {}
    assert all("KMSMasterKeyId" not in t["Properties"]["SSESpecification"]
               for t in prod.of_type("AWS::DynamoDB::Table").values())


def test_functions_may_use_the_key_as_far_as_they_read_or_write_what_it_encrypts(keyed: Synth) -> None:
    (key_id,) = keyed.of_type("AWS::KMS::Key")

    def key_actions(name: str) -> set[str]:
        role = keyed.resources[lambda_id(keyed, name)]["Properties"]["Role"]["Fn::GetAtt"][0]
        return {a for a, r in role_permissions(keyed, role) if r == f"<{key_id}.Arn>"}

    assert key_actions("recall") == set(KEY_READ_ACTIONS)  # reads the main table only
    assert key_actions("authorizer") == set(KEY_READ_ACTIONS)
    assert key_actions("records") == set(KEY_WRITE_ACTIONS)  # writes the tables and the files
    assert key_actions("indexer") >= set(KEY_READ_ACTIONS)  # reads the stream (and sends to its queue)
    assert key_actions("discovery") == set()
    assert key_actions("steps.erase_from_index") == set()  # the domain uses the key itself
    for name, access in FUNCTION_ACCESS.items():
        # Only CDK's grant to send to a stream consumer's encrypted dead-letter queue names actions by
        # wildcard (SqsDlq: kms:GenerateDataKey*, kms:ReEncrypt*), acknowledged to cdk-nag.
        wildcards = {a for a in key_actions(name) if "*" in a}
        assert wildcards == ({"kms:GenerateDataKey*", "kms:ReEncrypt*"} if access.main_table_stream else set()), name


# -- the recall index's shards -----------------------------------------------------------------


class CreatesTheIndex(BaseHTTPRequestHandler):
    """A domain without the recall index: what the first writer sends to create it."""

    created: list[dict[str, Any]]

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        status, answer = 200, {}
        if self.command == "HEAD":
            status = 404 if not self.created else 200
        elif self.command == "PUT":
            self.created.append(json.loads(body))
            answer = {"acknowledged": True}
        elif self.path.split("?")[0].endswith("/_mapping"):
            index = self.path.strip("/").split("/")[0]
            answer = {index: {"mappings": self.created[-1]["mappings"]}}
        elif self.path.startswith("/_bulk"):
            answer = {"errors": False, "items": []}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_POST = do_PUT = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_the_index_a_function_creates_has_the_stages_shards(prod: Synth, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage's search.shards, through the function's environment and its settings, to the index it
    creates on a domain that has none yet."""
    from uhp_memories import bootstrap
    from uhp_memories.adapters.opensearch import connect
    from uhp_memories.domain.recall.model import SearchDocument
    from uhp_memories.settings import Settings

    handler = type("Handler", (CreatesTheIndex,), {"created": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for name, value in environment(prod, "records").items():
            monkeypatch.setenv(name, render(value))
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        settings = Settings.from_env()

        class Embedder:
            model_id, dimensions = settings.embedding_model_id, settings.embedding_dimensions

            def embed(self, texts: Any) -> list[list[float]]:
                return [[0.0] * self.dimensions for _ in texts]

        engine = bootstrap.build_recall_engine(settings, embedder=Embedder(), search_client=connect(endpoint))
        assert engine is not None
        record = "hrec_" + "2" * 32
        engine.index.index([SearchDocument(
            tenant="t", memory_id="hmem_" + "1" * 32, record_id=record, chain_id=record, type="fact", status="active",
            attributes={}, valid_from=None, valid_to=None, written_at="2026-01-01T00:00:00.000Z", invalidated_at=None,
            text="a fact",
        )])
    finally:
        server.shutdown()

    (created,) = handler.created
    assert created["settings"]["index"]["number_of_shards"] == prod.stack.config.search.shards == 3
    assert created["settings"]["index"]["number_of_replicas"] == 1
