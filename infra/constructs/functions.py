"""One Lambda per function package, each with its own role, log group and nothing more.

A role starts with the right to write its own log group; every other permission is granted from the
function's Access entry (infra/catalog.py) with a fixed list of actions on named resources.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import LOG_RETENTION_DAYS, StageConfig
from infra.constructs.packaging import ARCHITECTURE, RUNTIME, Packaging
from infra.nag import acknowledge

# What the service does on the main table: items, GSI queries, batches and transactions (IAM checks
# each item operation inside TransactWriteItems, so there is no action for the transaction itself).
# A function that only reads gets the first list (recall reads its hits back in one BatchGetItem).
MAIN_TABLE_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")
MAIN_TABLE_WRITE_ACTIONS = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
)
MAIN_TABLE_ACTIONS = MAIN_TABLE_READ_ACTIONS + MAIN_TABLE_WRITE_ACTIONS
# What Powertools' DynamoDBPersistenceLayer does.
# BatchWriteItem: the pointers a kept answer leaves beside it, one per erasable id it names.
IDEMPOTENCY_TABLE_ACTIONS = (
    "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"
)
# What erase does to kept responses: query the mentions index for each erased id, delete the kept
# answers the pointers lead to, take the ids out of the write markers (read, then a conditional
# update) and delete the pointers (adapters/dynamodb/idempotency.py). Never a Scan.
IDEMPOTENCY_PURGE_ACTIONS = (
    "dynamodb:Query", "dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"
)
KEYS_TABLE_ACTIONS = ("dynamodb:GetItem",)
LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
# Traces and metrics on (uhp_memories.settings; uhp_memories/api/observability.py).
OBSERVABILITY_ENVIRONMENT = {"UHP_TRACING": "true", "UHP_METRICS": "true"}

_RETENTION = dict(zip(LOG_RETENTION_DAYS, list(logs.RetentionDays)[: len(LOG_RETENTION_DAYS)], strict=True))


def log_retention(days: int) -> logs.RetentionDays:
    return _RETENTION[days]


def removal_policy_of(config: StageConfig) -> RemovalPolicy:
    return RemovalPolicy.RETAIN if config.retain else RemovalPolicy.DESTROY


class ServiceFunction(Construct):
    """A function package deployed as one Lambda (arm64, Python 3.13, the shared layers; `mem0`: the mem0
    dependencies layer in place of the first)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        package: str,
        handler: str,
        packaging: Packaging,
        config: StageConfig,
        timeout: Duration,
        environment: Mapping[str, str],
        description: str,
        mem0: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        # The Powertools service: the `service` of each log line and the dimension of each metric.
        self.service_name = f"uhp-memories-{name.replace('.', '-')}"
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention(config.log_retention_days),
            removal_policy=removal_policy_of(config),
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"uhp-memories {config.name}: the {name} function, least privilege",
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(LOG_ACTIONS), resources=[self.log_group.log_group_arn])
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"functions.{package}.handler.{handler}",
            code=packaging.function_code(package),
            # mem0's library only where the function reaches mem0's records (infra/catalog.py).
            layers=packaging.layers_for(mem0=mem0),
            role=self.role,
            log_group=self.log_group,
            memory_size=config.lambda_memory_mb,
            timeout=timeout,
            description=description,
            # X-Ray traces each invocation (and the AWS calls in it: uhp_memories/api/observability.py).
            tracing=lambda_.Tracing.ACTIVE,
            environment={
                "POWERTOOLS_SERVICE_NAME": self.service_name,
                "POWERTOOLS_LOG_LEVEL": "INFO",
                **OBSERVABILITY_ENVIRONMENT,
                **environment,
            },
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's xray:PutTraceSegments and xray:PutTelemetryRecords, which active tracing adds, grant no "
            "resource-level permission.",
        )

        acknowledge(
            self.function,
            "AwsSolutions-L1",
            f"Pinned to {RUNTIME.name}, the newest runtime the pinned dependencies (pydantic-core wheels, "
            "Powertools) are built and tested for here; moving to a newer runtime is a deliberate upgrade.",
        )

    def allow(self, actions: tuple[str, ...] | list[str], resources: list[str]) -> None:
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=sorted(set(actions)), resources=resources))

    def allow_table(self, table: dynamodb.ITable, actions: tuple[str, ...], index_names: tuple[str, ...] = ()) -> None:
        """Actions on the table, and Query on each named index (named, not index/*)."""
        self.allow(actions, [table.table_arn])
        if index_names and "dynamodb:Query" in actions:
            self.allow(("dynamodb:Query",), [f"{table.table_arn}/index/{index}" for index in index_names])
