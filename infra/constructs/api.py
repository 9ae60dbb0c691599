"""The REST API: every route of uhp_memories.api.routes wired to its function's Lambda, behind the
API-key authorizer, with usage-plan keys from the authorizer, gateway errors in the API's own error
shape, access and execution logs (never bodies), and an optional WAF web ACL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import log_retention, removal_policy_of
from infra.nag import acknowledge
from uhp_memories.api.errors import CHALLENGE
from uhp_memories.api.routes import Route

# API Gateway's own answers, in the API's error body: (status, code, message). None keeps the status.
GATEWAY_RESPONSES: dict[str, tuple[str | None, str, str]] = {
    "UNAUTHORIZED": ("401", "unauthenticated", "missing or unknown API key"),
    "ACCESS_DENIED": ("401", "unauthenticated", "missing or unknown API key"),
    "INVALID_API_KEY": ("401", "unauthenticated", "missing or unknown API key"),
    "MISSING_AUTHENTICATION_TOKEN": ("404", "not_found", "no such route"),
    "RESOURCE_NOT_FOUND": ("404", "not_found", "no such route"),
    "THROTTLED": ("429", "rate_limited", "too many requests; retry later"),
    "QUOTA_EXCEEDED": ("429", "rate_limited", "the tenant's request quota is used up for this period"),
    "REQUEST_TOO_LARGE": ("413", "request_too_large", "the request is larger than API Gateway accepts (10 MB)"),
    "WAF_FILTERED": ("403", "forbidden", "the request was blocked by the web application firewall"),
    "DEFAULT_4XX": (None, "invalid_request", "the request was refused"),
    "DEFAULT_5XX": (None, "internal_error", "the server failed; the request may be retried"),
}
ERROR_CONTENT_TYPE = "application/json"
# Access log fields: who and what, never the key, a body or a query string.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "time": "$context.requestTimeEpoch",
    "ip": "$context.identity.sourceIp",
    "method": "$context.httpMethod",
    "resource": "$context.resourcePath",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "latencyMs": "$context.responseLatency",
    "integrationLatencyMs": "$context.integrationLatency",
    "errorType": "$context.error.responseType",
    "tenant": "$context.authorizer.tenant",
    "keyId": "$context.authorizer.key_id",
    "apiKeyId": "$context.identity.apiKeyId",
    "wafStatus": "$context.waf.status",
}
# Memory content is free text (code, markup, notes about attacks): rules that inspect bodies would
# block legitimate records, and the functions enforce their own size limits, so these only count.
# API clients (SDKs, harnesses, scripts) need not send a User-Agent.
WAF_COMMON_RULES_COUNTED = (
    "NoUserAgent_HEADER",
    "SizeRestrictions_BODY",
    "CrossSiteScripting_BODY",
    "GenericLFI_BODY",
    "GenericRFI_BODY",
    "EC2MetaDataSSRF_BODY",
)
WAF_RATE_LIMITED_BODY_KEY = "rate_limited"


def error_body(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}})


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        routes: Sequence[Route],
        functions: Mapping[str, lambda_.IFunction],
        authorizer: apigw.IAuthorizer,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=log_retention(config.log_retention_days),
            removal_policy=removal_policy_of(config),
        )
        self.rest_api = self._build_rest_api(authorizer)
        self.methods = self._build_routes(routes, functions)
        self._build_gateway_responses()
        self.web_acl = self._build_waf() if config.api.waf else None
        self._acknowledge_findings()

    @property
    def stage(self) -> apigw.Stage:
        return self.rest_api.deployment_stage

    def _build_rest_api(self, authorizer: apigw.IAuthorizer) -> apigw.RestApi:
        api_config = self._config.api
        return apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"uhp-memories-{self._config.name}",
            description="Harness Memories API (uhp-memories)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # File uploads and downloads are binary; Lambda proxy bodies then arrive base64-encoded,
            # which the handlers decode.
            binary_media_types=["*/*"],
            # The authorizer names the tenant's key (usageIdentifierKey): usage plans apply per tenant.
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER,
            cloud_watch_role=api_config.cloudwatch_role,
            deploy_options=apigw.StageOptions(
                stage_name=api_config.stage_name,
                throttling_rate_limit=api_config.throttle_rate,
                throttling_burst_limit=api_config.throttle_burst,
                # Per-method CloudWatch metrics (each route's count, errors and latency) are billed as
                # custom metrics, about 60 routes times seven; the API's own metrics come without them.
                metrics_enabled=api_config.detailed_metrics,
                # X-Ray from the gateway on, so a trace starts at the request (the functions continue it).
                tracing_enabled=True,
                # Errors only, and never request or response bodies: they carry record content.
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS)),
            ),
            default_method_options=apigw.MethodOptions(
                authorizer=authorizer,
                authorization_type=apigw.AuthorizationType.CUSTOM,
                api_key_required=True,
            ),
        )

    def _build_routes(
        self, routes: Sequence[Route], functions: Mapping[str, lambda_.IFunction]
    ) -> dict[tuple[str, str], apigw.Method]:
        integrations = {
            name: apigw.LambdaIntegration(function, proxy=True, allow_test_invoke=False)
            for name, function in functions.items()
        }
        methods = {}
        for route in routes:
            resource = self.rest_api.root.resource_for_path(route.path)
            methods[(route.method, route.path)] = resource.add_method(route.method, integrations[route.function])
        return methods

    def _build_gateway_responses(self) -> None:
        for name, (status, code, message) in GATEWAY_RESPONSES.items():
            self.rest_api.add_gateway_response(
                f"{name.title().replace('_', '')}Response",
                type=apigw.ResponseType.of(name),
                status_code=status,
                templates={ERROR_CONTENT_TYPE: error_body(code, message)},
                # A 401 says how to authenticate, as the local gateway's does (local/gateway.py CHALLENGE).
                response_headers={k: f"'{v}'" for k, v in CHALLENGE.items()} if status == "401" else None,
            )

    def _build_waf(self) -> wafv2.CfnWebACL:
        api_config = self._config.api
        prefix = f"uhp-memories-{self._config.name}"

        def visibility(metric: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
            # Sampled requests would show request headers, x-api-key among them, in the console.
            return wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True, metric_name=f"{prefix}-{metric}", sampled_requests_enabled=False
            )

        rate_limited = wafv2.CfnWebACL.RuleActionProperty(
            block=wafv2.CfnWebACL.BlockActionProperty(
                custom_response=wafv2.CfnWebACL.CustomResponseProperty(
                    response_code=429, custom_response_body_key=WAF_RATE_LIMITED_BODY_KEY
                )
            )
        )
        web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=visibility("web-acl"),
            custom_response_bodies={
                WAF_RATE_LIMITED_BODY_KEY: wafv2.CfnWebACL.CustomResponseBodyProperty(
                    content_type="APPLICATION_JSON",
                    content=error_body("rate_limited", "too many requests from this address; retry later"),
                )
            },
            rules=[
                wafv2.CfnWebACL.RuleProperty(
                    name="rate-per-ip",
                    priority=0,
                    action=rate_limited,
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            limit=api_config.waf_requests_per_5_minutes_per_ip, aggregate_key_type="IP"
                        )
                    ),
                    visibility_config=visibility("rate-per-ip"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    name="aws-common",
                    priority=1,
                    override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS",
                            name="AWSManagedRulesCommonRuleSet",
                            rule_action_overrides=[
                                wafv2.CfnWebACL.RuleActionOverrideProperty(
                                    name=rule, action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={})
                                )
                                for rule in WAF_COMMON_RULES_COUNTED
                            ],
                        )
                    ),
                    visibility_config=visibility("aws-common"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    name="aws-known-bad-inputs",
                    priority=2,
                    override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS",
                            name="AWSManagedRulesKnownBadInputsRuleSet",
                            rule_action_overrides=[
                                wafv2.CfnWebACL.RuleActionOverrideProperty(
                                    name=rule, action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={})
                                )
                                for rule in ("Log4JRCE_BODY", "JavaDeserializationRCE_BODY")
                            ],
                        )
                    ),
                    visibility_config=visibility("aws-known-bad-inputs"),
                ),
            ],
        )
        wafv2.CfnWebACLAssociation(
            self, "WebAclAssociation", resource_arn=self.stage.stage_arn, web_acl_arn=web_acl.attr_arn
        )
        return web_acl

    def _acknowledge_findings(self) -> None:
        acknowledge(
            self.rest_api,
            "AwsSolutions-APIG2",
            "Each function validates its request against its pydantic model and answers the API's own "
            "errors (400 invalid_request, 422 memory_invalid); an API Gateway validator would answer "
            "another shape.",
        )
        acknowledge(
            self.rest_api,
            "AwsSolutions-COG4",
            "Callers are tenants' services and harnesses holding API keys, not Cognito users: every "
            "method uses the API-key REQUEST authorizer and a usage-plan key.",
        )
        if not self._config.api.waf:
            acknowledge(
                self.rest_api,
                "AwsSolutions-APIG3",
                f"WAF is off for stage {self._config.name} by its cdk.json configuration; usage plans "
                "and the authorizer still limit every caller.",
            )
        if self._config.api.cloudwatch_role:
            acknowledge(
                self.rest_api,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                "API Gateway's account-wide logging role needs exactly this AWS managed policy.",
            )
