"""The mem0 provider of a stage (infra/config.py Mem0Config), when it connects mem0: the settings the functions
read, and the Platform key's secret, given by their infra/catalog.py entry (`mem0`) and to no other function.

"declare": the function only says which providers the stage offers (a memory may be created in mem0; the
providers' capability documents; whether attaching a memory sends turns outside): `UHP_MEM0`, answered from
the settings alone (uhp_memories.bootstrap LazyProvider), without mem0's library or its key.
"connect": the function reaches mem0's records: `UHP_MEM0_*`, mem0's library (the mem0 dependencies layer,
infra/constructs/packaging.py), `secretsmanager:GetSecretValue` on the one secret holding the Platform key
(bootstrap.build_providers reads it on the first call that reaches mem0), and `kms:Decrypt` on the key that
encrypts it when that key is the operator's (through Secrets Manager only).
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import Mem0Config
from infra.constructs.functions import ServiceFunction

SECRET_ACTIONS = ("secretsmanager:GetSecretValue",)
KEY_ACTIONS = ("kms:Decrypt",)
# What mem0's library needs on Lambda: it makes its home folder when first imported (~/.mem0 by default, on
# a read-only file system there), and reports usage to PostHog unless told not to (the adapter also switches
# it off before importing it: uhp_memories/adapters/mem0.py).
LIBRARY_ENVIRONMENT = {"MEM0_DIR": "/tmp/mem0", "MEM0_TELEMETRY": "False"}  # noqa: S108 - Lambda's only writable place
# Secrets Manager appends six characters to a secret's name in its ARN; a name alone is granted with them.
SECRET_SUFFIX = "-??????"


class Mem0(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: Mem0Config) -> None:
        super().__init__(scope, construct_id)
        self.config = config

    @property
    def connects(self) -> bool:
        return self.config.connects

    def declared_environment(self) -> dict[str, str]:
        return self.config.declared_environment()

    def connect_environment(self) -> dict[str, str]:
        if not self.connects:
            return {}
        return {**self.config.connect_environment(), **LIBRARY_ENVIRONMENT}

    @property
    def secret_arn(self) -> str:
        """The secret as IAM names it: its ARN as configured, or this account and region's secret of that name."""
        secret = self.config.api_key_secret
        assert secret is not None
        if self.config.secret_is_arn:
            return secret
        # Pseudo parameters, whatever the synth knows of the account and region: the same template either way.
        return f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:{secret}{SECRET_SUFFIX}"

    @property
    def _secrets_manager_service(self) -> str:
        """Secrets Manager in the secret's region (the ARN's, or the stage's for a name), as KMS names its caller."""
        secret = self.config.api_key_secret or ""
        region = secret.split(":")[3] if self.config.secret_is_arn else Aws.REGION
        return f"secretsmanager.{region}.amazonaws.com"

    def grant_connect(self, function: ServiceFunction) -> None:
        if not self.connects:
            return
        # By name, the ARN's last six characters are matched by ?????? (one character each, never more): still
        # this one secret, and no cdk-nag finding (IAM5 looks for *).
        function.allow(SECRET_ACTIONS, [self.secret_arn])
        if self.config.api_key_kms_key_arn:
            function.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=list(KEY_ACTIONS),
                    resources=[self.config.api_key_kms_key_arn],
                    # Only as Secrets Manager decrypts the secret for the role, never directly.
                    conditions={"StringEquals": {"kms:ViaService": self._secrets_manager_service}},
                )
            )
