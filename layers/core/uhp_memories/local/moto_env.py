"""AWS in process, with moto: tables created from the shared definitions, keys loaded hashed."""

from __future__ import annotations

import copy
import json
import os
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uhp_memories import bootstrap, workflows
from uhp_memories.adapters.dynamodb.apikeys import hash_key
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, KEYS_TABLE, MAIN_TABLE
from uhp_memories.settings import Settings
from uhp_memories.workflows import STEPS, WORKFLOWS


class SerializedClient:
    """A boto3 client whose calls run one at a time. moto's backends are not thread-safe, while real
    DynamoDB makes each call atomic; serializing each call (never a whole request) keeps that
    guarantee and still lets concurrent requests interleave between calls, as they do in AWS."""

    _lock = threading.RLock()

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def serialized(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return serialized


@dataclass(frozen=True)
class KeyEntry:
    key: str
    tenant: str
    principal: str
    groups: tuple[str, ...] = ()


def load_keys_file(path: str | Path) -> list[KeyEntry]:
    """A keys file: {"keys": [{"key", "tenant", "principal", "groups"}]}."""
    data = json.loads(Path(path).read_text())
    entries = []
    for raw in data.get("keys", []):
        entries.append(
            KeyEntry(str(raw["key"]), str(raw["tenant"]), str(raw["principal"]), tuple(raw.get("groups", [])))
        )
    if not entries:
        raise ValueError(f"{path} holds no keys")
    return entries


def dev_key() -> KeyEntry:
    return KeyEntry("uhp_dev_" + secrets.token_hex(16), "dev", "user:dev")


def local_recall_engine() -> Any:
    """The embedded engine (sqlite3 FTS5 + numpy, in memory) with all-MiniLM-L6-v2 on onnxruntime:
    real search and a real embedding model, with nothing to download."""
    from uhp_memories.search.embedded import EmbeddedSearchIndex
    from uhp_memories.search.engine import RecallEngine
    from uhp_memories.search.minilm import MiniLmEmbedder

    embedder = MiniLmEmbedder()
    index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    return RecallEngine(index, embedder)


_FAULTS: dict[str, int] = {}


def _dispatch_step(
    self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
) -> bytes:
    """moto's Lambda invoke, answered by the real step handler in this process."""
    import importlib

    from uhp_memories.local.gateway import LambdaContext

    step = function_name.rsplit(":", 1)[-1].removeprefix("uhp-memories-step-")
    event = json.loads(body) if body else {}
    try:
        if _FAULTS.get(step, 0) > 0:
            _FAULTS[step] -= 1
            raise RuntimeError(f"injected failure of step {step}")
        handler = getattr(importlib.import_module("functions.steps.handler"), step)
        return json.dumps(handler(event, LambdaContext(f"uhp-memories-step-{step}", "local"))).encode()
    except Exception as error:
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": type(error).__name__, "errorMessage": "step failed"}).encode()


def _copy_without_executions(self: Any, memo: dict[int, Any]) -> Any:
    clone = copy.copy(self)
    clone.executions = []
    return clone


class LocalAws:
    """Starts moto, creates the tables and installs a container that uses them."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._mock: Any = None
        self._server: Any = None
        self.container: bootstrap.Container | None = None

    def start(self) -> LocalAws:
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_SESSION_TOKEN", "local"),
            ("AWS_DEFAULT_REGION", self.settings.region),
        ):
            os.environ.setdefault(name, value)
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        import boto3
        from moto import mock_aws
        from moto.server import ThreadedMotoServer

        # moto runs state machines for real, and hands each Lambda task to `_dispatch_step`.
        self._mock = mock_aws(
            config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        )
        self._mock.start()
        # A moto server in this process shares the mock's backends: presigned S3 addresses handed
        # to clients point at it, so large uploads and downloads work over real HTTP.
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        s3 = boto3.client("s3", region_name=self.settings.region)
        s3.create_bucket(Bucket=self.settings.files_bucket)
        s3.put_bucket_versioning(Bucket=self.settings.files_bucket, VersioningConfiguration={"Status": "Enabled"})
        presign = boto3.client("s3", region_name=self.settings.region, endpoint_url=f"http://{host}:{port}")
        raw = boto3.client("dynamodb", region_name=self.settings.region)
        for spec, name in (
            (MAIN_TABLE, self.settings.table_name),
            (KEYS_TABLE, self.settings.keys_table_name),
            (IDEMPOTENCY_TABLE, self.settings.idempotency_table_name),
        ):
            # No stream locally: nothing consumes it (records are indexed in process after each
            # commit), and a stream would keep erased content beyond erase's reach.
            raw.create_table(**spec.create_table_kwargs(name, with_stream=False))
        self.settings = self.settings.model_copy(update=self._create_workflows())
        self.container = bootstrap.build(
            self.settings, SerializedClient(raw), SerializedClient(s3), presign,
            boto3.client("stepfunctions", region_name=self.settings.region),
            recall_engine=bootstrap.lazy(local_recall_engine),
        )
        bootstrap.install(self.container)
        return self

    def _create_workflows(self) -> dict[str, str]:
        """Create the step functions in moto's Lambda and the state machines from the ASL files."""
        import boto3
        from moto.awslambda_simple.models import LambdaSimpleBackend
        from moto.stepfunctions.models import StateMachine

        LambdaSimpleBackend.invoke = _dispatch_step  # type: ignore[method-assign]
        # moto deep-copies a state machine for each execution, earlier executions (and their
        # threads' locks) included, so a second execution fails; the copy needs none of them.
        StateMachine.__deepcopy__ = _copy_without_executions  # type: ignore[attr-defined]
        iam = boto3.client("iam", region_name=self.settings.region)
        role = iam.create_role(RoleName="uhp-memories-local", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lambdas = boto3.client("lambda", region_name=self.settings.region)
        arns = {
            step: lambdas.create_function(
                FunctionName=f"uhp-memories-step-{step}", Runtime="python3.12", Role=role,
                Handler=f"functions.steps.handler.{step}", Code={"ZipFile": b"local"},
            )["FunctionArn"]
            for step in STEPS.values()
        }
        sfn = boto3.client("stepfunctions", region_name=self.settings.region)
        machines = {
            name: sfn.create_state_machine(
                name=f"uhp-memories-{name}", definition=workflows.definition(name, arns), roleArn=role
            )["stateMachineArn"]
            for name in WORKFLOWS
        }
        return {f"{name}_state_machine_arn": arn for name, arn in machines.items()}

    def fail_step(self, step: str, times: int) -> None:
        """Make a workflow step fail its next `times` invocations (tests of retries and reports)."""
        _FAULTS[step] = times

    def add_keys(self, entries: Sequence[KeyEntry]) -> None:
        assert self.container is not None
        for entry in entries:
            key_hash = hash_key(entry.key)
            self.container.keys.put(key_hash, "key_" + key_hash[:12], entry.tenant, entry.principal, entry.groups)

    def stop(self) -> None:
        bootstrap.install(None)
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
