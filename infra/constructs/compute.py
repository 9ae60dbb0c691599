"""Every Lambda of infra/catalog.py, its access granted from its catalog entry and nothing else."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.catalog import DERIVATION_WORKFLOWS, Access, LambdaEntry, access_of, lambda_entries
from infra.config import StageConfig
from infra.constructs.data import DataStores
from infra.constructs.derivation import Derivation
from infra.constructs.embeddings import Embeddings
from infra.constructs.encryption import StageKey
from infra.constructs.functions import (
    IDEMPOTENCY_PURGE_ACTIONS,
    IDEMPOTENCY_TABLE_ACTIONS,
    KEYS_TABLE_ACTIONS,
    MAIN_TABLE_ACTIONS,
    MAIN_TABLE_READ_ACTIONS,
    ServiceFunction,
)
from infra.constructs.mem0 import Mem0
from infra.constructs.packaging import Packaging
from infra.constructs.search import Search
from infra.constructs.workflows import Workflows
from infra.layout import AUTHORIZER, Layout
from infra.nag import acknowledge
from uhp_memories.adapters.dynamodb.items import RECORD_ENTITY
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, MAIN_TABLE

TIMEOUTS = {
    "api": Duration.seconds(28),  # under API Gateway's 29 s integration timeout
    "authorizer": Duration.seconds(10),
    "step": Duration.minutes(5),
    "worker": Duration.minutes(5),
}
# Objects hold file bytes; reading a version, copying an upload into place (GetObject on the source,
# PutObject on the target) and presigned uploads and downloads are all these three actions.
FILES_OBJECT_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion", "s3:PutObject")
FILES_PURGE_OBJECT_ACTIONS = ("s3:DeleteObject", "s3:DeleteObjectVersion")
FILES_PURGE_BUCKET_ACTIONS = ("s3:ListBucketVersions",)
# The stream consumer: up to 100 changes or 5 seconds a batch (the index is caught up after each commit
# already; the backstop may lag a little), 10 retries with bisection before a batch's position is
# given up to the dead-letter queue.
STREAM_BATCH_SIZE = 100
STREAM_BATCHING_WINDOW = Duration.seconds(5)
STREAM_RETRY_ATTEMPTS = 10


class ServiceFunctions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        layout: Layout,
        packaging: Packaging,
        data: DataStores,
        search: Search | None,
        embeddings: Embeddings,
        derivation: Derivation,
        mem0: Mem0,
        catalog: Mapping[str, Access],
        key: StageKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._key = key
        self._data = data
        self._search = search
        self._embeddings = embeddings
        self._derivation = derivation
        self._mem0 = mem0
        self.entries: dict[str, LambdaEntry] = {entry.name: entry for entry in lambda_entries(layout)}
        self.access: dict[str, Access] = {name: access_of(name, catalog) for name in self.entries}
        self.functions: dict[str, ServiceFunction] = {}
        self.stream_dead_letters: dict[str, sqs.Queue] = {}
        for name, entry in self.entries.items():
            self.functions[name] = self._build_function(entry, self.access[name], packaging)

    def of_kind(self, kind: str) -> dict[str, ServiceFunction]:
        return {name: fn for name, fn in self.functions.items() if self.entries[name].kind == kind}

    @property
    def authorizer(self) -> ServiceFunction:
        return self.functions[AUTHORIZER]

    def _build_function(self, entry: LambdaEntry, access: Access, packaging: Packaging) -> ServiceFunction:
        kind = {
            "api": f"the {entry.name} API resource",
            "authorizer": "the API-key authorizer",
            "step": f"workflow step {entry.handler}",
            "worker": f"the {entry.name} worker",
        }[entry.kind]
        function = ServiceFunction(
            self,
            _pascal(entry.name),
            name=entry.name,
            package=entry.package,
            handler=entry.handler,
            packaging=packaging,
            config=self._config,
            timeout=TIMEOUTS[entry.kind],
            environment=self._environment(access),
            description=f"uhp-memories {self._config.name}: {kind}",
            mem0=access.mem0 == "connect" and self._mem0.connects,
        )
        self._grant(function, access)
        return function

    def _environment(self, access: Access) -> dict[str, str]:
        data, env = self._data, {}
        # The table, and what the stage keeps of it beyond erase (the erase report states it). The
        # stream consumer reads images off the stream, never the table.
        if access.main_table:
            env["UHP_TABLE_NAME"] = data.main_table.table_name
        if access.main_table or access.erase_report:
            env.update(self._config.data_protection_environment(stream=MAIN_TABLE.stream))
        if access.keys_table:
            env["UHP_KEYS_TABLE_NAME"] = data.keys_table.table_name
        if access.idempotency_table or access.idempotency_purge:
            env["UHP_IDEMPOTENCY_TABLE_NAME"] = data.idempotency_table.table_name
            env["UHP_IDEMPOTENCY_SECONDS"] = str(self._config.idempotency_seconds)
        if access.files or access.files_purge:
            env["UHP_FILES_BUCKET"] = data.files_bucket.bucket_name
        # Without a domain the functions run without the index (recall answers memory_unavailable).
        if self._search is not None and (access.search or access.embeddings):
            env.update(self._search.environment)
            # The index is bound to one embedding model: whoever opens it names the model, even to delete.
            env.update(self._embeddings.environment)
        if access.derivation == "declare":
            env.update(self._derivation.declared_environment())
        elif access.derivation == "call":
            env.update(self._derivation.call_environment())
        if access.mem0 == "declare":
            env.update(self._mem0.declared_environment())
        elif access.mem0 == "connect":
            env.update(self._mem0.connect_environment())
        if self._search is not None and access.erase_report:
            # The report names the domain's segments as keeping deleted documents until a merge.
            env["UHP_SEARCH_ENDPOINT"] = self._search.url
        return env

    def _grant(self, function: ServiceFunction, access: Access) -> None:
        data = self._data
        if self._key is not None:
            self._grant_key(function, access)
        if access.main_table:
            actions = MAIN_TABLE_ACTIONS if access.main_table == "write" else MAIN_TABLE_READ_ACTIONS
            function.allow_table(data.main_table, actions, tuple(i.name for i in MAIN_TABLE.indexes))
        if access.keys_table:
            function.allow_table(data.keys_table, KEYS_TABLE_ACTIONS)
        if access.idempotency_table:
            function.allow_table(data.idempotency_table, IDEMPOTENCY_TABLE_ACTIONS)
        if access.idempotency_purge:
            function.allow_table(data.idempotency_table, IDEMPOTENCY_PURGE_ACTIONS,
                                 tuple(index.name for index in IDEMPOTENCY_TABLE.indexes))
        self._grant_files(function, access)
        if access.derivation == "call" and self._derivation.derives:
            self._derivation.grant_call(function)
        if access.mem0 == "connect":
            self._mem0.grant_connect(function)
        # A stage without a search domain has nothing to grant: the functions then run without the index,
        # never embed, and the indexer has nothing to keep in step.
        if self._search is not None:
            if access.search == "write":
                self._search.grant_read_write(function)
            elif access.search == "read":
                self._search.grant_read(function)
            if access.embeddings:
                self._embeddings.grant_invoke(function)
            if access.main_table_stream:
                self._consume_main_table_stream(function)

    def _grant_files(self, function: ServiceFunction, access: Access) -> None:
        bucket = self._data.files_bucket
        if access.files:
            function.allow(FILES_OBJECT_ACTIONS, [bucket.arn_for_objects("*")])
        if access.files_purge:
            function.allow(FILES_PURGE_OBJECT_ACTIONS, [bucket.arn_for_objects("*")])
            function.allow(FILES_PURGE_BUCKET_ACTIONS, [bucket.bucket_arn])
        if access.files or access.files_purge:
            acknowledge(
                function.role,
                f"AwsSolutions-IAM5[Resource::<{_logical_id(bucket)}.Arn>/*]",
                "Objects are keyed by tenant, memory and file id at run time; the role reaches the objects "
                "of this one bucket only.",
            )

    def _grant_key(self, function: ServiceFunction, access: Access) -> None:
        """The stage's key, as far as the stores the function uses are encrypted with it: decrypt to read
        a table, the files or the stream; encrypt and make data keys to write (the domain uses the key
        itself, and the dead-letter queue's grant comes with the queue)."""
        assert self._key is not None
        writes = (access.main_table == "write" or access.idempotency_table or access.idempotency_purge
                  or access.files)
        reads = writes or bool(access.main_table or access.keys_table or access.main_table_stream)
        if reads:
            self._key.grant(function.role, write=writes)

    def _consume_main_table_stream(self, function: ServiceFunction) -> None:
        """Changes of record items of the main table, in order per item; the function reports the
        changes that failed, Lambda retries from the first of them, bisects a batch that keeps failing,
        and after its retries sends the batch's position (never its content) to a dead-letter queue,
        which alarms (`uhp-memories reindex` takes it from there).

        TRIM_HORIZON: a consumer added to a running stage catches up the last 24 hours of changes
        (indexing is idempotent, and a replayed version reuses the vector the index holds)."""
        dead_letters = sqs.Queue(
            function,
            "StreamFailures",
            encryption=sqs.QueueEncryption.KMS if self._key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=self._key.key if self._key else None,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            dead_letters,
            "AwsSolutions-SQS3",
            "This queue is itself the on-failure destination of the stream consumer; it holds stream "
            "positions to reindex, not messages to redrive.",
        )
        function.function.add_event_source(
            event_sources.DynamoEventSource(
                self._data.main_table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=STREAM_BATCH_SIZE,
                max_batching_window=STREAM_BATCHING_WINDOW,
                bisect_batch_on_error=True,
                retry_attempts=STREAM_RETRY_ATTEMPTS,
                report_batch_item_failures=True,
                on_failure=event_sources.SqsDlq(dead_letters),
                # Only changes of record items reach the function (a REMOVE carries the old image).
                filters=[
                    lambda_.FilterCriteria.filter({"dynamodb": {image: {"entity": {"S": [RECORD_ENTITY]}}}})
                    for image in ("NewImage", "OldImage")
                ],
            )
        )
        acknowledge(
            function.role,
            "AwsSolutions-IAM5[Resource::*]",
            "dynamodb:ListStreams grants no resource-level permission; reading records is limited to "
            "the main table's stream.",
        )
        if self._key is not None:
            for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
                acknowledge(
                    function.role,
                    f"AwsSolutions-IAM5[Action::{action}]",
                    "CDK's grant to send to the dead-letter queue encrypted with the stage's key (SqsDlq); the "
                    "resource is that one key.",
                )
        self.stream_dead_letters[function.name] = dead_letters

    def grant_workflow_starts(self, workflows: Workflows) -> None:
        for name, access in self.access.items():
            for workflow in access.start_workflows:
                # A stage that derives nothing never starts a derivation: its starters get no right to.
                if workflow in DERIVATION_WORKFLOWS and not self._derivation.derives:
                    continue
                workflows.grant_start(self.functions[name], workflow)


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace(".", "_").split("_"))


def _logical_id(construct: Construct) -> str:
    stack = Stack.of(construct)
    return str(stack.resolve(stack.get_logical_id(construct.node.default_child)))  # type: ignore[arg-type]
