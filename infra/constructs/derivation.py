"""The derivation model (infra/config.py DerivationConfig): the settings the functions read, and the
permission to call it, granted to the functions that call it and to no other.

Bedrock: bedrock:InvokeModel (which Converse needs) on the one foundation model; for an inference
profile (us.anthropic...), on the profile and on that foundation model in every region the profile
routes to. An OpenAI-compatible endpoint: secretsmanager:GetSecretValue on the one secret holding its
key, when it has one."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Stack
from constructs import Construct

from infra.config import DerivationConfig
from infra.constructs.functions import ServiceFunction
from infra.nag import acknowledge

INVOKE_ACTIONS = ("bedrock:InvokeModel",)
SECRET_ACTIONS = ("secretsmanager:GetSecretValue",)


class Derivation(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: DerivationConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config

    @property
    def derives(self) -> bool:
        return self.config.provider != "none"

    def declared_environment(self) -> dict[str, str]:
        """What a function that only needs to know whether the stage derives reads."""
        return {"UHP_DERIVATION": self.config.provider} if self.derives else {}

    def call_environment(self) -> dict[str, str]:
        return self.config.environment()

    def grant_call(self, function: ServiceFunction) -> None:
        config, stack = self.config, Stack.of(self)
        if config.provider == "bedrock":
            if config.inference_profile:
                # Pseudo parameters for the wildcard ARN: the acknowledgment below names it exactly, the
                # same whether or not the synth knows the stack's region (infra/constructs/schedules.py).
                foundation = f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{config.foundation_model_id}"
            else:
                foundation = stack.format_arn(
                    service="bedrock", account="", resource="foundation-model",
                    resource_name=config.foundation_model_id, arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                )
            resources = [foundation]
            if config.inference_profile:
                resources.append(stack.format_arn(
                    service="bedrock", resource="inference-profile", resource_name=config.model_id,
                    arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                ))
                acknowledge(
                    function.role,
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/"
                    f"{config.foundation_model_id}]",
                    "A cross-region inference profile routes each request to this one model in any region of its "
                    "geography; the role reaches this model only.",
                )
            function.allow(INVOKE_ACTIONS, resources)
        elif config.api_key_secret_arn:
            function.allow(SECRET_ACTIONS, [config.api_key_secret_arn])
