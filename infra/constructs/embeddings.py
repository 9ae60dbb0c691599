"""Bedrock embeddings: invoke permission on the one configured foundation model, and the settings the
functions read to call it (model id and dimensions, so the index never mixes models; the abstain
threshold calibrated for the model, when the stage sets one)."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from constructs import Construct

from infra.config import EmbeddingsConfig
from infra.constructs.functions import ServiceFunction

INVOKE_ACTIONS = ("bedrock:InvokeModel",)


class Embeddings(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: EmbeddingsConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.model_arn = Stack.of(self).format_arn(
            service="bedrock",
            account="",  # foundation models belong to no account
            resource="foundation-model",
            resource_name=config.model_id,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    @property
    def environment(self) -> dict[str, str]:
        return self.config.environment()

    def grant_invoke(self, function: ServiceFunction) -> None:
        function.allow(INVOKE_ACTIONS, [self.model_arn])
