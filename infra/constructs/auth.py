"""The REQUEST authorizer in front of every route: header x-api-key -> tenant, principal, groups.

Its answer names the tenant's API Gateway key (usageIdentifierKey), so the tenant's usage plan
(throttle and quota) applies to the request. Answers are cached per key for
`api.authorizer_cache_seconds`: a revoked key can live that long, unless its API Gateway key is
deleted too (which `uhp-memories keys revoke` does, and which takes effect at once).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import ServiceFunction

API_KEY_HEADER = "x-api-key"


class Auth(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, function: ServiceFunction, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.function = function
        self.authorizer = apigw.RequestAuthorizer(
            self,
            "ApiKeyAuthorizer",
            handler=function.function,
            identity_sources=[apigw.IdentitySource.header(API_KEY_HEADER)],
            results_cache_ttl=Duration.seconds(config.api.authorizer_cache_seconds),
        )
