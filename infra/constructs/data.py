"""The data stores: the three DynamoDB tables built from the shared TableSpecs, and the versioned
bucket that will hold file bytes.

Every store is encrypted at rest, refuses plain HTTP where it can, and is retained when the stack is
deleted unless the stage says otherwise.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.encryption import StageKey
from infra.constructs.functions import removal_policy_of
from infra.nag import acknowledge
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, KEYS_TABLE, MAIN_TABLE, TableSpec
from uhp_memories.domain.files.model import UPLOADS_PREFIX

_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


class DataStores(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, key: StageKey | None = None
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._key = key
        self.main_table = self._build_table(MAIN_TABLE, point_in_time_recovery=config.point_in_time_recovery)
        self.keys_table = self._build_table(KEYS_TABLE, point_in_time_recovery=True)
        # No backups of the idempotency table: its cached answers hold record content, erase purges them,
        # and a backup would keep what erase removed. Losing it only forgets replays for a day.
        self.idempotency_table = self._build_table(IDEMPOTENCY_TABLE, point_in_time_recovery=False)
        acknowledge(
            self.idempotency_table,
            "AwsSolutions-DDB3",
            "The idempotency table is a 24-hour replay cache whose items hold record content; erase purges "
            "them, so it must not be backed up. Losing it only forgets replays.",
        )
        if not config.point_in_time_recovery:
            acknowledge(
                self.main_table,
                "AwsSolutions-DDB3",
                f"Point-in-time recovery is off for stage {config.name} by its cdk.json configuration "
                "(a throwaway stage); the erase report states that no backups exist.",
            )
        self.access_logs_bucket = self._build_access_logs_bucket()
        self.files_bucket = self._build_files_bucket()

    def _attribute(self, spec: TableSpec, name: str) -> dynamodb.Attribute:
        return dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[spec.attribute_types.get(name, "S")])

    def _build_table(self, spec: TableSpec, *, point_in_time_recovery: bool) -> dynamodb.Table:
        config = self._config
        table = dynamodb.Table(
            self,
            f"{spec.logical_name}Table",
            partition_key=self._attribute(spec, spec.partition_key),
            sort_key=self._attribute(spec, spec.sort_key) if spec.sort_key else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=(
                dynamodb.TableEncryption.CUSTOMER_MANAGED if self._key else dynamodb.TableEncryption.AWS_MANAGED
            ),
            encryption_key=self._key.key if self._key else None,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=point_in_time_recovery,
                recovery_period_in_days=config.backup_retention_days if point_in_time_recovery else None,
            ),
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES if spec.stream else None,
            time_to_live_attribute=spec.ttl_attribute,
            removal_policy=removal_policy_of(config),
            deletion_protection=config.retain,
        )
        for index in spec.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=self._attribute(spec, index.partition_key),
                sort_key=self._attribute(spec, index.sort_key),
                projection_type=dynamodb.ProjectionType.ALL,
            )
        return table

    def _build_access_logs_bucket(self) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            "AccessLogsBucket",
            # Server access logs can only be delivered to SSE-S3 buckets.
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(self._config.log_retention_days))],
            removal_policy=removal_policy_of(self._config),
        )
        acknowledge(
            bucket,
            "AwsSolutions-S1",
            "This bucket receives the files bucket's access logs; logging it would log its own log deliveries.",
        )
        return bucket

    def _build_files_bucket(self) -> s3.Bucket:
        return s3.Bucket(
            self,
            "FilesBucket",
            versioned=True,
            encryption=s3.BucketEncryption.KMS if self._key else s3.BucketEncryption.S3_MANAGED,
            encryption_key=self._key.key if self._key else None,
            bucket_key_enabled=True if self._key else None,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="files/",
            lifecycle_rules=[
                # Uploads a record never took are dropped; record bytes (every version) are history
                # and are removed only by erase and delete, never by age.
                s3.LifecycleRule(
                    prefix=UPLOADS_PREFIX,
                    expiration=Duration.days(self._config.upload_retention_days),
                    noncurrent_version_expiration=Duration.days(1),
                ),
                s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(1)),
            ],
            removal_policy=removal_policy_of(self._config),
        )
