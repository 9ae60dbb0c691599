"""The stage's customer managed KMS key, when its cdk.json asks for one (`encryption.customer_managed_key`);
without it every store keeps its AWS managed encryption.

With it, one key (rotated yearly, kept as long as the stage's data) encrypts the three tables, the files
bucket (with an S3 bucket key, so each object does not cost a KMS call), the search domain at rest, the
indexer's dead-letter queue and every log group of the stage (the functions', the API's access log,
the workflows' and the search domain's). The access-log bucket stays SSE-S3: S3 delivers server access
logs only to such buckets.

Who may use the key is granted as any other access (infra/constructs/compute.py): a function that reads
a table or the files decrypts, one that writes also encrypts and makes data keys; the domain, the
stream and the queue use it through their services. CloudWatch Logs may use it for this account's log
groups only (the key policy's statement, by encryption context).
"""

from __future__ import annotations

import jsii
from aws_cdk import Aws, Duration, IAspect, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from infra.config import StageConfig

# What a caller of a store encrypted with the key needs: to read, decrypt; to write, encrypt and make data
# keys too (DynamoDB, S3 and SQS call KMS with the caller's own permission). No wildcard actions.
KEY_READ_ACTIONS = ("kms:Decrypt", "kms:DescribeKey")
KEY_WRITE_ACTIONS = (*KEY_READ_ACTIONS, "kms:Encrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom", "kms:ReEncryptTo")
# A key scheduled for deletion waits this long (the longest KMS allows): a stage destroyed by mistake
# can cancel it and read its retained data again.
PENDING_DELETION = Duration.days(30)


class StageKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, removal_policy: RemovalPolicy):
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            alias=f"alias/uhp-memories-{config.name}",
            description=f"uhp-memories {config.name}: tables, files, search domain, queues and logs",
            enable_key_rotation=True,
            pending_window=PENDING_DELETION,
            removal_policy=removal_policy,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
                         "kms:DescribeKey"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn":
                            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
                    }
                },
            )
        )

    def grant(self, grantee: iam.IGrantable, *, write: bool) -> None:
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(KEY_WRITE_ACTIONS if write else KEY_READ_ACTIONS),
            resource_arns=[self.key.key_arn],
        )


@jsii.implements(IAspect)
class LogGroupsEncryptedWith:
    """Every log group of the stage encrypted with the stage's key (one place, whoever made the group)."""

    def __init__(self, key: kms.IKey) -> None:
        self._key = key

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, logs.CfnLogGroup):
            node.kms_key_id = self._key.key_arn
