"""Local mode's runtime: AWS in process with moto (tables created from the shared definitions, state
machines from the ASL files, keys written by the keys adapter), the library patches local mode needs
installed while it runs and uninstalled when it stops (uhp_memories.local.patches), and the
container the composition root builds over it all (uhp_memories.bootstrap)."""

from __future__ import annotations

import importlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uhp_memories import bootstrap, workflows
from uhp_memories import stage_outputs as outputs
from uhp_memories.adapters.dynamodb.apikeys import KeyExists, hash_key, new_key_id
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, KEYS_TABLE, MAIN_TABLE
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.local.patches import (
    PatchModule,
    install_all,
    moto_action_names,
    moto_dynamodb_batch_sizes,
    moto_dynamodb_item_sizes,
    moto_dynamodb_journal,
    moto_dynamodb_queries,
    moto_dynamodb_transactions,
    moto_dynamodb_wire_json,
    moto_lambda_steps,
    moto_s3_journal,
    moto_state_machine_copies,
    moto_stepfunctions_journal,
    powertools_threads,
    uninstall_all,
)
from uhp_memories.local.schedules import LocalTicker
from uhp_memories.settings import Settings
from uhp_memories.workflows import STEPS, WORKFLOWS

if TYPE_CHECKING:
    from uhp_memories.admin.reindex import ReindexReport
    from uhp_memories.local.data_dir import DataDir, Restored

# Make moto's DynamoDB cost what DynamoDB does (in proportion to the items read or written, not to
# the table) without changing any answer: docs/benchmarks.md has the measurements.
# A clean stop waits this long for running workflows to end (they are run again at start otherwise).
STOP_WAIT_SECONDS = 30.0
MOTO_DYNAMODB_SPEEDUPS: tuple[PatchModule, ...] = (
    moto_action_names,
    moto_dynamodb_transactions,
    moto_dynamodb_queries,
    moto_dynamodb_wire_json,
    moto_dynamodb_batch_sizes,
    moto_dynamodb_item_sizes,
)


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


class KeysFileError(ValueError):
    """A keys file that cannot be used, said in one line: which file, which entry, which field."""


KEY_FIELDS = ("key", "tenant", "principal", "groups")


def load_keys_file(path: str | Path) -> list[KeyEntry]:
    """A keys file: {"keys": [{"key", "tenant", "principal", "groups"}]}; a key appears once. Tenants,
    principals and groups follow the rules the admin CLI applies to a deployed stage."""
    from uhp_memories.admin.service import GROUP_PATTERN, PRINCIPAL_PATTERN, TENANT_PATTERN

    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise KeysFileError(f"keys file {path} does not exist") from None
    except OSError as error:
        raise KeysFileError(f"keys file {path} cannot be read: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise KeysFileError(f"keys file {path} is not JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise KeysFileError(f'keys file {path}: expected {{"keys": [{{"key", "tenant", "principal", "groups"}}]}}')
    entries = []
    for number, raw in enumerate(data["keys"], 1):
        where = f"keys file {path}: entry {number}"
        if not isinstance(raw, dict):
            raise KeysFileError(f"{where} is not an object")
        unknown = sorted(set(raw) - set(KEY_FIELDS))
        if unknown:
            raise KeysFileError(f'{where} has an unknown field "{unknown[0]}" (fields: {", ".join(KEY_FIELDS)})')
        for field, pattern in (("key", None), ("tenant", TENANT_PATTERN), ("principal", PRINCIPAL_PATTERN)):
            value = raw.get(field)
            if not isinstance(value, str) or not value:
                raise KeysFileError(f'{where} has no "{field}" (a non-empty string)')
            if pattern is not None and not pattern.match(value):
                raise KeysFileError(f'{where}: "{field}" {value!r} is not valid (expected {pattern.pattern})')
        groups = raw.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) and GROUP_PATTERN.match(g) for g in groups):
            raise KeysFileError(f'{where}: "groups" must be a list of group:NAME')
        entries.append(KeyEntry(raw["key"], raw["tenant"], raw["principal"], tuple(groups)))
    if not entries:
        raise KeysFileError(f"keys file {path} holds no keys")
    seen: set[str] = set()
    for number, entry in enumerate(entries, 1):
        if entry.key in seen:
            raise KeysFileError(f"keys file {path}: entry {number} (tenant {entry.tenant}) repeats an earlier key")
        seen.add(entry.key)
    return entries


def dev_key(key: str | None = None) -> KeyEntry:
    """The development key (tenant dev, principal user:dev): this one, or a new one."""
    return KeyEntry(key or "uhp_dev_" + secrets.token_hex(16), "dev", "user:dev")


class _StepsAnsweredBy:
    """moto_lambda_steps as the runtime installs it: answered by one runtime's step runner."""

    def __init__(self, runner: moto_lambda_steps.StepRunner) -> None:
        self._runner = runner

    def install(self) -> None:
        moto_lambda_steps.install(self._runner)

    def uninstall(self) -> None:
        moto_lambda_steps.uninstall(self._runner)


class _ReportingTo:
    """A journal patch as the runtime installs it: reporting to one data dir's journal."""

    def __init__(self, hook: Any, listener: Any) -> None:
        self._hook = hook
        self._listener = listener

    def install(self) -> None:
        self._hook.install(self._listener)

    def uninstall(self) -> None:
        self._hook.uninstall(self._listener)


class _LocalIndex:
    """The embedded index of a local server as reindex's target (uhp_memories.admin.reindex)."""

    def __init__(self, engine: RecallEngine) -> None:
        self._engine = engine

    @property
    def description(self) -> str:
        return f"the embedded index ({self._engine.embedder.model_id})"

    def drop(self) -> None:
        raise NotImplementedError("a local index is caught up, never dropped")

    def engine(self) -> RecallEngine:
        return self._engine


class LocalAws:
    """Starts moto with the local patches installed, creates the tables and the workflows, and
    installs a container that uses them; `stop` undoes all of it. With a data dir (opened), moto's
    state is put back from its journal at start and journaled as it changes, and the search index
    lives in a file there (uhp_memories.local.data_dir); without one, everything lives in memory."""

    def __init__(self, settings: Settings | None = None, data_dir: DataDir | None = None) -> None:
        self.settings = settings or Settings()
        self.data_dir = data_dir
        self.restored: Restored | None = None
        self._mock: Any = None
        self._server: Any = None
        self._installed: list[PatchModule] = []
        self._step_faults: dict[str, int] = {}  # step -> failures still to inject
        self._step_faults_lock = threading.Lock()
        self.container: bootstrap.Container | None = None

    @property
    def patches(self) -> tuple[PatchModule, ...]:
        """The library patches `start` installs, in order (`stop` uninstalls them in reverse)."""
        journal = self.data_dir.journal if self.data_dir is not None else None
        journaled: tuple[PatchModule, ...] = (
            ()
            if journal is None
            else (
                _ReportingTo(moto_dynamodb_journal.HOOK, journal.record_items),
                _ReportingTo(moto_s3_journal.HOOK, journal.record_object),
                _ReportingTo(moto_stepfunctions_journal.HOOK, journal),
            )
        )
        return (
            *MOTO_DYNAMODB_SPEEDUPS,
            moto_state_machine_copies,
            _StepsAnsweredBy(self._run_step),
            powertools_threads,  # the local gateway resolves requests on a thread each
            *journaled,
        )

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
        from botocore import UNSIGNED
        from botocore.config import Config
        from moto import mock_aws
        from moto.server import ThreadedMotoServer

        # moto runs state machines for real, and hands each Lambda task to `_run_step`.
        self._mock = mock_aws(
            config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        )
        self._mock.start()
        try:
            patches = self.patches
            install_all(patches)
            self._installed = list(patches)
            # A moto server in this process shares the mock's backends: presigned S3 addresses handed
            # to clients point at it, so large uploads and downloads work over real HTTP.
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            self._server.start()
            host, port = self._server.get_host_and_port()
            s3 = boto3.client("s3", region_name=self.settings.region)
            s3.create_bucket(Bucket=self.settings.files_bucket)
            s3.put_bucket_versioning(
                Bucket=self.settings.files_bucket, VersioningConfiguration={"Status": "Enabled"}
            )
            presign = boto3.client("s3", region_name=self.settings.region, endpoint_url=f"http://{host}:{port}")
            # Unsigned: moto checks no signature, and signing cost a share of every DynamoDB call (measured:
            # docs/benchmarks.md, "Local mode and moto").
            raw = boto3.client(
                "dynamodb", region_name=self.settings.region, config=Config(signature_version=UNSIGNED)
            )
            for spec, name in (
                (MAIN_TABLE, self.settings.table_name),
                (KEYS_TABLE, self.settings.keys_table_name),
                (IDEMPOTENCY_TABLE, self.settings.idempotency_table_name),
            ):
                # No stream locally: nothing consumes it (records are indexed in process after each
                # commit), and a stream would keep erased content beyond erase's reach.
                raw.create_table(**spec.create_table_kwargs(name, with_stream=False))
            settings = self.settings = self.settings.model_copy(update=self._create_workflows())
            index_path = ":memory:"
            if self.data_dir is not None:
                self.restored = self.data_dir.restore(settings.region)
                index_path = str(self.data_dir.search_index_path)
            self.container = bootstrap.build(
                settings, SerializedClient(raw), SerializedClient(s3), presign,
                boto3.client("stepfunctions", region_name=settings.region),
                recall_engine=bootstrap.lazy(
                    lambda: bootstrap.build_recall_engine(settings, local=True, index_path=index_path)
                ),
            )
            if self.restored is not None:
                self._rearm_schedules(raw)
        except BaseException:
            self.stop()
            raise
        bootstrap.install(self.container)
        return self

    def _rearm_schedules(self, dynamodb: Any) -> None:
        """Consolidation schedules after a restart: moto's Scheduler is not journaled, the schedule items
        are, so each memory's timer is set again from its item, as the API set it."""
        timer = bootstrap.timer_of(self.settings)
        assert timer is not None
        pages = dynamodb.get_paginator("scan").paginate(
            TableName=self.settings.table_name, FilterExpression="entity = :s",
            ExpressionAttributeValues={":s": {"S": "schedule"}},
        )
        for item in (i for page in pages for i in page["Items"]):
            timer.set(item["tenant"]["S"], item["memory_id"]["S"], int(item["every_minutes"]["N"]))

    def _create_workflows(self) -> dict[str, str]:
        """Create the step functions in moto's Lambda and the state machines from the ASL files."""
        import boto3

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
        timer = lambdas.create_function(
            FunctionName="uhp-memories-consolidation-timer", Runtime="python3.12", Role=role,
            Handler="functions.consolidation_timer.handler.lambda_handler", Code={"ZipFile": b"local"},
        )["FunctionArn"]
        group = boto3.client("scheduler", region_name=self.settings.region).create_schedule_group(
            Name="uhp-memories-local"
        )["ScheduleGroupArn"].rsplit("/", 1)[-1]
        return {
            **{f"{name}_state_machine_arn": arn for name, arn in machines.items()},
            "schedule_group": group, "schedule_target_arn": timer, "schedule_role_arn": role,
        }

    def ticker(self) -> LocalTicker:
        """The stage's schedules, fired as EventBridge Scheduler fires them (local/schedules.py): by the
        timer function's own handler, in this process."""
        import boto3

        from uhp_memories.local.gateway import LambdaContext

        def fire(event: dict[str, Any]) -> Any:
            handler = importlib.import_module("functions.consolidation_timer.handler").lambda_handler
            return handler(event, LambdaContext("uhp-memories-consolidation-timer", "local"))

        return LocalTicker(boto3.client("scheduler", region_name=self.settings.region),
                           self.settings.schedule_group, fire)

    def _run_step(self, function_name: str, event: Any) -> Any:
        """A workflow's Lambda task (moto_lambda_steps), run by the real step handler in this process."""
        from uhp_memories.local.gateway import LambdaContext

        step = function_name.rsplit(":", 1)[-1].removeprefix("uhp-memories-step-")
        with self._step_faults_lock:
            if self._step_faults.get(step, 0) > 0:
                self._step_faults[step] -= 1
                raise RuntimeError(f"injected failure of step {step}")
        handler = getattr(importlib.import_module("functions.steps.handler"), step)
        return handler(event, LambdaContext(f"uhp-memories-step-{step}", "local"))

    def fail_step(self, step: str, times: int) -> None:
        """Make a workflow step fail its next `times` invocations (tests of retries and reports)."""
        with self._step_faults_lock:
            self._step_faults[step] = times

    def add_keys(self, entries: Sequence[KeyEntry], *, keep_stored: bool = False) -> None:
        """Add API keys as the admin CLI adds them to a stage (the keys adapter, a new key id each);
        fails with KeyExists for a key added before. With `keep_stored` (a persistent server reads its
        keys file at every start), a key stored before for the same tenant, principal and groups is
        kept as it is; one stored for another still fails: a key is never pointed elsewhere."""
        assert self.container is not None
        for number, entry in enumerate(entries, 1):
            if keep_stored:
                stored = self.container.keys.find(hash_key(entry.key))
                if stored is not None and (stored.tenant, stored.principal, stored.groups) == (
                    entry.tenant, entry.principal, entry.groups
                ):
                    continue
                if stored is not None:
                    raise KeyExists(
                        f"key {number} is stored already for tenant {stored.tenant}, principal {stored.principal}"
                        f"{' and groups ' + ', '.join(stored.groups) if stored.groups else ''}; a key is never "
                        "pointed at another tenant, principal or groups (use a new key, or another data dir)"
                    )
            self.container.keys.put(hash_key(entry.key), new_key_id(), entry.tenant, entry.principal, entry.groups)

    def outputs(self) -> dict[str, str]:
        """This stage, named as a deployed stage's outputs name it (uhp_memories.stage_outputs): the
        outputs local mode has an equivalent of."""
        return {
            outputs.MAIN_TABLE_NAME: self.settings.table_name,
            outputs.KEYS_TABLE_NAME: self.settings.keys_table_name,
            outputs.IDEMPOTENCY_TABLE_NAME: self.settings.idempotency_table_name,
            outputs.FILES_BUCKET_NAME: self.settings.files_bucket,
        }

    def catch_up_index(self, progress: Callable[[ReindexReport], None] | None = None) -> ReindexReport:
        """Index every record version the tables hold into the embedded index, reusing the vectors it
        has (only what it misses is embedded): after an unclean stop, the last writes may have
        reached the tables and not the index."""
        from uhp_memories.admin.reindex import reindex

        assert self.container is not None
        engine = self.container.recall_engine()
        assert engine is not None
        return reindex(
            self.container.dynamodb, self.settings.table_name, _LocalIndex(engine), reuse_vectors=True,
            progress=progress or (lambda report: None),
        )

    def resume_workflows(self) -> list[str]:
        """Start again, with the same name and input, every workflow execution of the journal that had
        not ended when the previous server stopped; answers their names."""
        if self.data_dir is None or self.data_dir.journal is None:
            return []
        import boto3

        sfn = boto3.client("stepfunctions", region_name=self.settings.region)
        resumed = []
        for execution in self.data_dir.journal.unfinished_executions():
            sfn.start_execution(
                stateMachineArn=execution.state_machine_arn, name=execution.name, input=execution.input
            )
            resumed.append(execution.name)
        return resumed

    def wait_for_workflows(self, seconds: float) -> bool:
        """Wait until no workflow execution runs (at most `seconds`); answers whether none does."""
        import boto3

        sfn = boto3.client("stepfunctions", region_name=self.settings.region)
        deadline = time.monotonic() + seconds
        while True:
            running = any(
                sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]
                for arn in self._state_machine_arns()
            )
            if not running or time.monotonic() >= deadline:
                return not running
            time.sleep(0.1)

    def _state_machine_arns(self) -> list[str]:
        return [getattr(self.settings, f"{name}_state_machine_arn") for name in WORKFLOWS]

    def stop(self) -> None:
        if self.data_dir is not None and self.container is not None:
            # A workflow cut short here would be run again at the next start; let it end first.
            self.wait_for_workflows(STOP_WAIT_SECONDS)
        bootstrap.install(None)
        self.container = None
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        uninstall_all(self._installed)
        self._installed = []
