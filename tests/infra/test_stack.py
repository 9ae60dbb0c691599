"""The synthesized production stage: routes, functions, roles, data stores, API Gateway, workflows,
monitoring."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")

from aws_cdk.assertions import Match, Template

from infra.catalog import FUNCTION_ACCESS, Access, lambda_entries
from infra.layout import REPO
from tests.infra.conftest import Synth, as_list, render, synthesize
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, KEYS_TABLE, MAIN_TABLE, TableSpec
from uhp_memories.api.routes import FUNCTIONS, ROUTES
from uhp_memories.workflows import STEPS

# What each kind of access permits, written out here independently of the constructs.
LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
# Active tracing: X-Ray's actions take no resource.
XRAY = {("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*")}
MAIN_READ = {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
MAIN = MAIN_READ | {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
}
IDEMPOTENCY = {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
               "dynamodb:BatchWriteItem"}
# Never a Scan: erase finds kept answers through the mentions index.
IDEMPOTENCY_PURGE = {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem",
                     "dynamodb:BatchWriteItem"}
FILES = {"s3:GetObject", "s3:GetObjectVersion", "s3:PutObject"}
FILES_PURGE = {"s3:DeleteObject", "s3:DeleteObjectVersion"}
# (action, path under the domain): reads never PUT, _bulk or _delete_by_query; nothing deletes by DELETE.
SEARCH_READ = {
    ("es:ESHttpGet", "uhp-recall-v1"), ("es:ESHttpGet", "uhp-recall-v1/*"),
    ("es:ESHttpHead", "uhp-recall-v1"), ("es:ESHttpHead", "uhp-recall-v1/*"),
    ("es:ESHttpPost", "_msearch"), ("es:ESHttpPost", "uhp-recall-v1/_search"),
}
SEARCH_WRITE = SEARCH_READ | {
    ("es:ESHttpPut", "uhp-recall-v1"), ("es:ESHttpPost", "_bulk"), ("es:ESHttpPost", "uhp-recall-v1/_delete_by_query"),
}
STREAM_READ = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
DEAD_LETTER_SEND = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
SEARCH_ENV = {"UHP_SEARCH_ENDPOINT", "UHP_SEARCH_INDEX", "UHP_SEARCH_REPLICAS", "UHP_SEARCH_SHARDS"}
EMBEDDING_ENV = {"UHP_EMBEDDING_MODEL_ID", "UHP_EMBEDDING_DIMENSIONS"}


@pytest.fixture(scope="module")
def no_search(clean_checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The small stage with `search.enabled: false`: no domain, so nothing reaches an index."""
    root = tmp_path_factory.mktemp("no-search") / "repo"
    shutil.copytree(clean_checkout, root)
    cdk = json.loads((root / "cdk.json").read_text())
    stages = cdk["context"]["uhp-memories:stages"]
    stages["nosearch"] = {**stages["dev"], "search": {"enabled": False}}
    (root / "cdk.json").write_text(json.dumps(cdk))
    return synthesize(root, "nosearch", tmp_path_factory.mktemp("cdk-no-search"))


DERIVATION_VARIANTS = {
    "profile": {"provider": "bedrock", "model_id": "us.anthropic.claude-haiku-4-5-20251001-v1:0"},
    "openai": {"provider": "openai", "model_id": "qwen2.5-7b-instruct", "base_url": "https://llm.example.com",
               "api_key_secret_arn": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:llm-key-AbCdEf"},
}


@pytest.fixture(scope="module", params=sorted(DERIVATION_VARIANTS))
def derive_variant(request: pytest.FixtureRequest, clean_checkout: Path, tmp_path_factory: pytest.TempPathFactory
                   ) -> Synth:
    """The small stage with another derivation model: an inference profile, an OpenAI-compatible endpoint."""
    root = tmp_path_factory.mktemp(f"derive-{request.param}") / "repo"
    shutil.copytree(clean_checkout, root)
    cdk = json.loads((root / "cdk.json").read_text())
    stages = cdk["context"]["uhp-memories:stages"]
    stages[request.param] = {**stages["dev"], "derivation": DERIVATION_VARIANTS[request.param]}
    (root / "cdk.json").write_text(json.dumps(cdk))
    return synthesize(root, request.param, tmp_path_factory.mktemp(f"cdk-derive-{request.param}"))


def table_id(synth: Synth, spec: TableSpec) -> str:
    matches = [
        name
        for name, table in synth.of_type("AWS::DynamoDB::Table").items()
        if table["Properties"]["KeySchema"][0]["AttributeName"] == spec.partition_key
    ]
    assert len(matches) == 1, f"one table keyed by {spec.partition_key}, found {matches}"
    return matches[0]


def functions_by_handler(synth: Synth) -> dict[str, str]:
    """handler (functions.<package>.handler.<entry>) -> logical id of its Lambda."""
    return {fn["Properties"]["Handler"]: name for name, fn in synth.of_type("AWS::Lambda::Function").items()}


def handlers_in_the_source(functions_dir: Path) -> set[str]:
    """Every handler the functions/ folder holds, read from the source (not from infra/catalog.py,
    which the stack is built from): each package's module-level `lambda_handler`, and in
    functions/steps each function its `@step(...)` decorator makes a workflow step."""
    handlers: set[str] = set()
    for handler_py in sorted(functions_dir.glob("*/handler.py")):
        package = handler_py.parent.name
        module = ast.parse(handler_py.read_text())
        if package == "steps":
            handlers |= {
                f"functions.steps.handler.{node.name}"
                for node in module.body
                if isinstance(node, ast.FunctionDef)
                and any(
                    isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "step"
                    for d in node.decorator_list
                )
            }
            continue
        bound = {node.name for node in module.body if isinstance(node, ast.FunctionDef)} | {
            target.id
            for node in module.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        if "lambda_handler" in bound:
            handlers.add(f"functions.{package}.handler.lambda_handler")
    return handlers


def lambda_id(synth: Synth, catalog_name: str) -> str:
    entry = next(e for e in lambda_entries(REPO) if e.name == catalog_name)
    return functions_by_handler(synth)[f"functions.{entry.package}.handler.{entry.handler}"]


def dead_letter_queue(synth: Synth, name: str) -> str:
    """The on-failure queue of a stream consumer's event source mapping."""
    function = lambda_id(synth, name)
    (mapping,) = [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function}
    ]
    return render(mapping["DestinationConfig"]["OnFailure"]["Destination"]).strip("<>").removesuffix(".Arn")


def environment(synth: Synth, name: str) -> dict[str, Any]:
    return synth.resources[lambda_id(synth, name)]["Properties"]["Environment"]["Variables"]


def resource_paths(synth: Synth) -> dict[str, str]:
    """API Gateway resource logical id -> its full path."""
    resources = synth.of_type("AWS::ApiGateway::Resource")
    paths: dict[str, str] = {}

    def path_of(name: str) -> str:
        if name not in paths:
            props = resources[name]["Properties"]
            parent = props["ParentId"]
            prefix = path_of(parent["Ref"]) if "Ref" in parent else ""
            paths[name] = f"{prefix}/{props['PathPart']}"
        return paths[name]

    for name in resources:
        path_of(name)
    return paths


def permissions(synth: Synth, function_id: str) -> set[tuple[str, str]]:
    """Every (action, resource) the function's role is allowed, from every policy attached to it."""
    return role_permissions(synth, synth.resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0])


def role_permissions(synth: Synth, role: str) -> set[tuple[str, str]]:
    pairs = set()
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            pairs |= {(a, render(r)) for a in as_list(statement["Action"]) for r in as_list(statement["Resource"])}
    return pairs


def expected_permissions(synth: Synth, name: str, access: Access) -> set[tuple[str, str]]:
    function = synth.resources[lambda_id(synth, name)]
    log_group = render(function["Properties"]["LoggingConfig"]["LogGroup"]).strip("<>")
    main, keys, idem = (table_id(synth, s) for s in (MAIN_TABLE, KEYS_TABLE, IDEMPOTENCY_TABLE))
    bucket = next(n for n in synth.of_type("AWS::S3::Bucket") if n.startswith("DataFilesBucket"))
    pairs = {(a, f"<{log_group}.Arn>") for a in LOGS} | XRAY
    if access.main_table:
        pairs |= {(a, f"<{main}.Arn>") for a in (MAIN if access.main_table == "write" else MAIN_READ)}
        pairs |= {("dynamodb:Query", f"<{main}.Arn>/index/{index.name}") for index in MAIN_TABLE.indexes}
    if access.keys_table:
        pairs |= {("dynamodb:GetItem", f"<{keys}.Arn>")}
    if access.idempotency_table:
        pairs |= {(a, f"<{idem}.Arn>") for a in IDEMPOTENCY}
    if access.idempotency_purge:
        pairs |= {(a, f"<{idem}.Arn>") for a in IDEMPOTENCY_PURGE}
        pairs |= {("dynamodb:Query", f"<{idem}.Arn>/index/{index.name}") for index in IDEMPOTENCY_TABLE.indexes}
    if access.files:
        pairs |= {(a, f"<{bucket}.Arn>/*") for a in FILES}
    if access.files_purge:
        pairs |= {(a, f"<{bucket}.Arn>/*") for a in FILES_PURGE} | {("s3:ListBucketVersions", f"<{bucket}.Arn>")}
    domains = list(synth.of_type("AWS::OpenSearchService::Domain"))
    # Without a domain, nothing of the index is granted: no search, no embeddings, no stream consumer.
    if access.search and domains:
        pairs |= {(a, f"<{domains[0]}.Arn>/{path}") for a, path in (SEARCH_WRITE if access.search == "write"
                                                                    else SEARCH_READ)}
    if access.embeddings and domains:
        model = synth.stack.config.embeddings.model_id
        pairs.add(("bedrock:InvokeModel", f"arn:aws:bedrock:{synth.stack.region}::foundation-model/{model}"))
    pairs |= derivation_permissions(synth, access) | schedule_permissions(synth, name, access)
    if access.main_table_stream and domains:
        pairs |= {(a, f"<{main}.StreamArn>") for a in STREAM_READ} | {("dynamodb:ListStreams", "*")}
        pairs |= {(a, f"<{dead_letter_queue(synth, name)}.Arn>") for a in DEAD_LETTER_SEND}
    for workflow in access.start_workflows:
        if workflow == "derive" and synth.stack.config.derivation.provider == "none":
            continue  # a stage that derives nothing starts no derivation
        machine = next(
            n
            for n, m in synth.of_type("AWS::StepFunctions::StateMachine").items()
            if m["Properties"]["StateMachineName"] == f"uhp-memories-{synth.stage}-{workflow}"
        )
        pairs.add(("states:StartExecution", f"<{machine}>"))
        pairs.add(
            (
                "states:DescribeExecution",
                "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
                f"execution:uhp-memories-{synth.stage}-{workflow}:*",
            )
        )
    return pairs


def derivation_permissions(synth: Synth, access: Access) -> set[tuple[str, str]]:
    derivation, stack = synth.stack.config.derivation, synth.stack
    if access.derivation != "call" or derivation.provider == "none":
        return set()
    if derivation.provider == "openai":
        secret = derivation.api_key_secret_arn
        return {("secretsmanager:GetSecretValue", secret)} if secret else set()
    if not derivation.inference_profile:
        return {("bedrock:InvokeModel", f"arn:aws:bedrock:{stack.region}::foundation-model/{derivation.model_id}")}
    return {
        ("bedrock:InvokeModel", f"arn:<AWS::Partition>:bedrock:*::foundation-model/{derivation.foundation_model_id}"),
        ("bedrock:InvokeModel",
         f"arn:aws:bedrock:{stack.region}:{stack.account}:inference-profile/{derivation.model_id}"),
    }


def schedule_permissions(synth: Synth, name: str, access: Access) -> set[tuple[str, str]]:
    if not access.schedules:
        return set()
    stack = synth.stack
    # Pseudo parameters whatever the synth knows of the account and region (the acknowledgment names it).
    schedules = f"arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/uhp-memories-{synth.stage}/*"
    if name == "consolidation_timer":  # it only clears the schedule of a memory that is gone
        return {("scheduler:DeleteSchedule", schedules)}
    actions = ("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule")
    manage = {(action, schedules) for action in actions}
    return manage | {("iam:PassRole", render(stack.resolve(stack.schedules.role.role_arn)))}


# -- routes ------------------------------------------------------------------------------------


def test_every_route_has_its_method_wired_to_its_function(prod: Synth) -> None:
    paths = resource_paths(prod)
    handlers = functions_by_handler(prod)
    methods = {}
    for method in prod.of_type("AWS::ApiGateway::Method").values():
        props = method["Properties"]
        path = paths[props["ResourceId"]["Ref"]] if "Ref" in props["ResourceId"] else "/"
        methods[(props["HttpMethod"], path)] = props

    assert set(methods) == {(route.method, route.path) for route in ROUTES}
    for route in ROUTES:
        props = methods[(route.method, route.path)]
        integration = props["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        target = f"<{handlers[f'functions.{route.function}.handler.lambda_handler']}.Arn>"
        assert target in render(integration["Uri"]), f"{route.method} {route.path} -> {route.function}"
        assert props["AuthorizationType"] == "CUSTOM"
        assert props["ApiKeyRequired"] is True


def test_api_gateway_may_invoke_each_function_only_for_its_own_routes(prod: Synth) -> None:
    handlers = functions_by_handler(prod)
    granted: dict[str, set[str]] = {}
    for permission in prod.of_type("AWS::Lambda::Permission").values():
        props = permission["Properties"]
        assert props["Principal"] == "apigateway.amazonaws.com"
        function = render(props["FunctionName"]).strip("<>").removesuffix(".Arn")
        # arn:...:execute-api:REGION:ACCOUNT:API/STAGE/METHOD/PATH, path parameters as *
        granted.setdefault(function, set()).add(render(props["SourceArn"]).split("/", 2)[2])
    authorizer = lambda_id(prod, "authorizer")

    authorizer_id = next(iter(prod.of_type("AWS::ApiGateway::Authorizer")))
    assert granted.pop(authorizer) == {f"<{authorizer_id}>"}  # API/authorizers/ID: this API's authorizer only
    for name in FUNCTIONS:
        routes = {f"{r.method}{re.sub(r'{[^}]+}', '*', r.path)}" for r in ROUTES if r.function == name}
        assert granted.pop(handlers[f"functions.{name}.handler.lambda_handler"]) == routes, name
    assert granted == {}


def test_the_authorizer_reads_the_api_key_header_and_names_usage_plan_keys(prod: Synth) -> None:
    template = Template.from_json(prod.template)
    authorizer_fn = lambda_id(prod, "authorizer")

    template.has_resource_properties(
        "AWS::ApiGateway::Authorizer",
        {
            "Type": "REQUEST",
            "IdentitySource": "method.request.header.x-api-key",
            "AuthorizerResultTtlInSeconds": 300,
            "AuthorizerUri": Match.object_like(
                {
                    "Fn::Join": Match.array_with(
                        [Match.array_with([Match.object_like({"Fn::GetAtt": [authorizer_fn, "Arn"]})])]
                    )
                }
            ),
        },
    )
    template.has_resource_properties("AWS::ApiGateway::RestApi", {"ApiKeySourceType": "AUTHORIZER"})


def test_the_stage_is_throttled_and_logs_without_bodies(prod: Synth) -> None:
    stage = next(iter(prod.of_type("AWS::ApiGateway::Stage").values()))["Properties"]
    settings = stage["MethodSettings"][0]

    assert settings["ThrottlingRateLimit"] == 2000
    assert settings["ThrottlingBurstLimit"] == 4000
    assert settings["LoggingLevel"] == "ERROR"
    assert settings["DataTraceEnabled"] is False
    access_log = json.loads(stage["AccessLogSetting"]["Format"])
    assert "$context.identity.apiKey" not in access_log.values()
    assert access_log["tenant"] == "$context.authorizer.tenant"


@pytest.mark.parametrize(
    ("response_type", "status", "code"),
    [
        ("UNAUTHORIZED", "401", "unauthenticated"),
        ("ACCESS_DENIED", "401", "unauthenticated"),
        ("INVALID_API_KEY", "401", "unauthenticated"),
        ("MISSING_AUTHENTICATION_TOKEN", "404", "not_found"),
        ("THROTTLED", "429", "rate_limited"),
        ("QUOTA_EXCEEDED", "429", "rate_limited"),
        ("REQUEST_TOO_LARGE", "413", "request_too_large"),
        ("DEFAULT_5XX", None, "internal_error"),
    ],
)
def test_gateway_errors_have_the_api_error_shape(
    prod: Synth, response_type: str, status: str | None, code: str
) -> None:
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in prod.of_type("AWS::ApiGateway::GatewayResponse").values()
    }

    response = responses[response_type]
    assert response.get("StatusCode") == status
    body = json.loads(response["ResponseTemplates"]["application/json"])
    assert body == {"error": {"code": code, "message": body["error"]["message"]}}
    assert body["error"]["message"]
    # A 401 says how to authenticate (the MCP authorization spec asks it of /mcp), as the local gateway's.
    challenge = response.get("ResponseParameters", {}).get("gatewayresponse.header.WWW-Authenticate")
    assert challenge == ("'ApiKey realm=\"uhp-memories\", header=\"x-api-key\"'" if status == "401" else None)


def test_waf_rate_limits_per_address_and_never_blocks_on_body_content(prod: Synth) -> None:
    acl = next(iter(prod.of_type("AWS::WAFv2::WebACL").values()))["Properties"]
    association = next(iter(prod.of_type("AWS::WAFv2::WebACLAssociation").values()))["Properties"]
    rules = {rule["Name"]: rule for rule in acl["Rules"]}

    assert rules["rate-per-ip"]["Statement"]["RateBasedStatement"] == {"Limit": 20000, "AggregateKeyType": "IP"}
    assert rules["rate-per-ip"]["Action"]["Block"]["CustomResponse"]["ResponseCode"] == 429
    common = rules["aws-common"]["Statement"]["ManagedRuleGroupStatement"]
    counted = {o["Name"] for o in common["RuleActionOverrides"] if "Count" in o["ActionToUse"]}
    assert {"SizeRestrictions_BODY", "CrossSiteScripting_BODY"} <= counted
    stage = next(iter(prod.of_type("AWS::ApiGateway::Stage")))
    assert render(association["ResourceArn"]).endswith(f"/stages/<{stage}>")


# -- functions and roles ---------------------------------------------------------------------


def test_one_lambda_per_function_package_and_step_on_arm64_python_313(prod: Synth) -> None:
    functions = prod.of_type("AWS::Lambda::Function")
    layers = prod.of_type("AWS::Lambda::LayerVersion")

    expected = handlers_in_the_source(REPO.root / "functions")
    assert {"functions.records.handler.lambda_handler", "functions.steps.handler.erase_records"} <= expected
    assert len(functions) == len(expected)  # one each: no handler deployed twice
    assert set(functions_by_handler(prod)) == expected
    for fn in functions.values():
        props = fn["Properties"]
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert sorted(render(layer).strip("<>") for layer in props["Layers"]) == sorted(layers)
    for layer in layers.values():
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_every_function_package_and_step_is_declared(prod: Synth) -> None:
    names = {entry.name for entry in lambda_entries(REPO)}

    assert names == set(FUNCTION_ACCESS), "infra/catalog.py must declare exactly the Lambdas functions/ asks for"
    assert set(FUNCTIONS) <= names
    assert {f"steps.{handler}" for handler in STEPS.values()} <= names


def test_one_role_per_function_without_managed_policies(prod: Synth) -> None:
    roles = [fn["Properties"]["Role"]["Fn::GetAtt"][0] for fn in prod.of_type("AWS::Lambda::Function").values()]

    assert len(set(roles)) == len(roles)
    for role in roles:
        props = prod.resources[role]["Properties"]
        assert "ManagedPolicyArns" not in props
        assert props["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
        ]


@pytest.mark.parametrize("name", sorted(FUNCTION_ACCESS))
def test_each_function_has_only_the_permissions_it_uses(prod: Synth, name: str) -> None:
    assert permissions(prod, lambda_id(prod, name)) == expected_permissions(prod, name, FUNCTION_ACCESS[name])


@pytest.mark.parametrize("name", sorted(FUNCTION_ACCESS))
def test_without_a_search_domain_no_function_reaches_the_index(no_search: Synth, name: str) -> None:
    assert permissions(no_search, lambda_id(no_search, name)) == expected_permissions(
        no_search, name, FUNCTION_ACCESS[name]
    )
    assert not (SEARCH_ENV | EMBEDDING_ENV) & set(environment(no_search, name)), name


DERIVATION_ENV = {"UHP_DERIVATION_MODEL", "UHP_DERIVATION_BASE_URL", "UHP_DERIVATION_API_KEY_SECRET",
                  "UHP_DERIVATION_MAX_TOKENS"}


def test_only_the_derive_and_consolidate_steps_may_call_the_derivation_model(dev: Synth, derive_variant: Synth
                                                                             ) -> None:
    callers = {name for name, access in FUNCTION_ACCESS.items() if access.derivation == "call"}
    assert callers == {"steps.derive", "steps.consolidate"}
    for synth in (dev, derive_variant):
        for name, access in FUNCTION_ACCESS.items():
            assert permissions(synth, lambda_id(synth, name)) == expected_permissions(synth, name, access), name
            env = environment(synth, name)
            # Those that start a derivation or declare one know that the stage derives, and nothing of the model.
            assert ("UHP_DERIVATION" in env) == (access.derivation != ""), name
            assert bool(DERIVATION_ENV & set(env)) == (name in callers), name
    assert environment(dev, "steps.derive")["UHP_DERIVATION_MODEL"] == "amazon.nova-lite-v1:0"
    assert derive_variant.nag_error is None, derive_variant.violations()


def test_a_stage_without_a_derivation_model_grants_and_declares_none(prod: Synth) -> None:
    assert prod.stack.config.derivation.provider == "none"
    for name in FUNCTION_ACCESS:
        env = environment(prod, name)
        assert not {"UHP_DERIVATION", *DERIVATION_ENV} & set(env), name
        assert not any(action.startswith(("bedrock:", "secretsmanager:")) and "embed" not in resource
                       for action, resource in permissions(prod, lambda_id(prod, name))), name


def test_the_functions_that_index_search_or_embed_are_exactly_those_the_code_paths_need() -> None:
    """bootstrap builds the recall engine lazily: only code paths that call it need the domain."""
    uses_index = {name for name, access in FUNCTION_ACCESS.items() if access.search}
    embeds = {name for name, access in FUNCTION_ACCESS.items() if access.embeddings}

    # RecordService indexes after each commit; recall and named queries embed the query; the indexer
    # indexes stream images; erase and memory delete remove documents without embedding anything.
    assert uses_index == {
        "records",
        "mcp",  # its tools run remember (indexes after the commit), recall and named queries
        "observe",
        "harnesses",  # a turn's episodes are indexed after the commit, as observe's
        "recall",
        "queries",
        "operations",  # a write operation revises (indexes after the commit); a read one may run a recall
        "steps.consolidate",  # asks the index for each new record's neighbours, indexes what it changes
        "indexer",
        "steps.derive",  # indexes the records it derives after the commit
        "steps.erase_from_index",
        "steps.erase_records",  # drops the documents of records a derivation wrote while the erase ran
        "steps.purge_subtree",
    }
    assert embeds == uses_index - {"steps.erase_from_index", "steps.erase_records", "steps.purge_subtree"}
    assert not FUNCTION_ACCESS["memories"].search, "memory delete drops documents in the workflow's purge step"


@pytest.mark.parametrize("stage", ["prod", "dev"])
def test_functions_that_use_the_index_are_told_where_it_is_and_which_model_made_it(synth_stage, stage: str) -> None:
    synth = synth_stage(stage)
    config = synth.stack.config
    domain = next(iter(synth.of_type("AWS::OpenSearchService::Domain")))
    expected = {
        "UHP_SEARCH_ENDPOINT": f"https://<{domain}.DomainEndpoint>",
        "UHP_SEARCH_INDEX": config.search.index_name,
        "UHP_SEARCH_REPLICAS": "1" if config.search.instance_count > 1 else "0",
        "UHP_SEARCH_SHARDS": str(config.search.shards),
        "UHP_EMBEDDING_MODEL_ID": config.embeddings.model_id,
        "UHP_EMBEDDING_DIMENSIONS": str(config.embeddings.dimensions),
    }

    for name, access in FUNCTION_ACCESS.items():
        env = {k: render(v) for k, v in environment(synth, name).items() if k in SEARCH_ENV | EMBEDDING_ENV}
        if access.search or access.embeddings:
            assert env == expected, name
        elif access.erase_report:
            assert env == {"UHP_SEARCH_ENDPOINT": expected["UHP_SEARCH_ENDPOINT"]}, name
        else:
            assert env == {}, name


def test_the_settings_read_what_the_stack_sets_for_search(prod: Synth, monkeypatch: pytest.MonkeyPatch) -> None:
    from uhp_memories.settings import Settings

    for name, value in environment(prod, "indexer").items():
        monkeypatch.setenv(name, render(value))
    settings = Settings.from_env()

    assert settings.search_endpoint.startswith("https://<")
    assert (settings.search_index, settings.search_replicas, settings.search_shards) == ("uhp-recall-v1", 1, 3)
    assert (settings.embedding_model_id, settings.embedding_dimensions) == ("amazon.titan-embed-text-v2:0", 1024)


def test_the_authorizer_only_reads_keys_and_no_api_function_can(prod: Synth) -> None:
    keys = table_id(prod, KEYS_TABLE)

    assert {p for p in permissions(prod, lambda_id(prod, "authorizer")) if p[0].startswith("dynamodb:")} == {
        ("dynamodb:GetItem", f"<{keys}.Arn>")
    }
    for name in FUNCTIONS:
        assert not any(keys in resource for _, resource in permissions(prod, lambda_id(prod, name))), name


def test_functions_are_told_their_tables_and_the_stage_data_protection(prod: Synth) -> None:
    env = {
        name: prod.resources[lambda_id(prod, name)]["Properties"]["Environment"]["Variables"]
        for name in ("authorizer", "records", "erase", "memories", "discovery")
    }
    main, keys = table_id(prod, MAIN_TABLE), table_id(prod, KEYS_TABLE)

    assert render(env["authorizer"]["UHP_KEYS_TABLE_NAME"]) == f"<{keys}>"
    assert "UHP_TABLE_NAME" not in env["authorizer"]
    assert render(env["records"]["UHP_TABLE_NAME"]) == f"<{main}>"
    assert "UHP_FILES_BUCKET" in env["records"]
    assert "UHP_ERASE_STATE_MACHINE_ARN" in env["erase"]
    assert "UHP_DELETE_STATE_MACHINE_ARN" in env["memories"]
    assert {
        k: env["erase"][k]
        for k in (
            "UHP_PITR_ENABLED",
            "UHP_PITR_RETENTION_DAYS",
            "UHP_STREAM_ENABLED",
            "UHP_SEARCH_SNAPSHOT_RETENTION_DAYS",
        )
    } == {
        "UHP_PITR_ENABLED": "true",
        "UHP_PITR_RETENTION_DAYS": "35",
        "UHP_STREAM_ENABLED": "true",
        "UHP_SEARCH_SNAPSHOT_RETENTION_DAYS": "14",
    }
    assert env["discovery"] == {"POWERTOOLS_SERVICE_NAME": "uhp-memories-discovery", "POWERTOOLS_LOG_LEVEL": "INFO",
                                "UHP_TRACING": "true", "UHP_METRICS": "true"}


def test_a_small_stage_reports_no_backups(dev: Synth) -> None:
    erase = dev.resources[lambda_id(dev, "erase")]["Properties"]["Environment"]["Variables"]

    assert (erase["UHP_PITR_ENABLED"], erase["UHP_PITR_RETENTION_DAYS"]) == ("false", "0")


def erase_report(synth: Synth, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What the deployed finish_erase step reports as unreachable for one erased version: its
    environment read by Settings, its Retention built by bootstrap as in Lambda."""
    from uhp_memories import bootstrap
    from uhp_memories.settings import Settings

    for name in list(os.environ):
        if name.startswith("UHP_"):
            monkeypatch.delenv(name)
    for name, value in environment(synth, "steps.finish_erase").items():
        monkeypatch.setenv(name, render(value))
    container = bootstrap.build(Settings.from_env(), dynamodb_client=None, s3_client=None)
    entries = container.removal._retention.unreachable("hrec_" + "1" * 32, "hmem_" + "2" * 32, 0)
    return {entry["where"]: entry["until"] for entry in entries}


def test_the_erase_report_states_what_the_deployed_stage_keeps(
    prod: Synth, dev: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prod: 35 days of PITR, the main table's stream (24 hours), the domain's automated snapshots
    # (14 days) and its segments (deleted documents until a merge).
    assert erase_report(prod, monkeypatch) == {
        "dynamodb_point_in_time_recovery": "1970-02-05T00:00:00.000Z",
        "dynamodb_stream": "1970-01-02T00:00:00.000Z",
        "opensearch_snapshots": "1970-01-15T00:00:00.000Z",
        "opensearch_segments": "the next segment merge",
    }
    # dev: no PITR; the same stream and domain.
    assert set(erase_report(dev, monkeypatch)) == {"dynamodb_stream", "opensearch_snapshots", "opensearch_segments"}


def test_a_stage_without_a_search_domain_reports_no_search_copies(
    no_search: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(erase_report(no_search, monkeypatch)) == {"dynamodb_stream"}


# -- data stores -----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [MAIN_TABLE, KEYS_TABLE, IDEMPOTENCY_TABLE], ids=lambda s: s.logical_name)
def test_tables_are_built_from_the_shared_specs(prod: Synth, spec: TableSpec) -> None:
    props = prod.resources[table_id(prod, spec)]["Properties"]
    expected = spec.create_table_kwargs("ignored")

    assert props["KeySchema"] == expected["KeySchema"]
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        expected["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert [(g["IndexName"], g["KeySchema"], g["Projection"]) for g in props.get("GlobalSecondaryIndexes", [])] == [
        (g["IndexName"], g["KeySchema"], g["Projection"]) for g in expected.get("GlobalSecondaryIndexes", [])
    ]
    stream = expected.get("StreamSpecification")
    assert props.get("StreamSpecification") == ({"StreamViewType": stream["StreamViewType"]} if stream else None)
    if spec.ttl_attribute:
        assert props["TimeToLiveSpecification"] == {"AttributeName": spec.ttl_attribute, "Enabled": True}


def test_data_stores_are_encrypted_and_retained(prod: Synth) -> None:
    tables = prod.of_type("AWS::DynamoDB::Table")
    buckets = prod.of_type("AWS::S3::Bucket")
    stateful = {**tables, **buckets, **prod.of_type("AWS::OpenSearchService::Domain")}

    for table in tables.values():
        assert table["Properties"]["SSESpecification"] == {"SSEEnabled": True}
        assert table["Properties"]["DeletionProtectionEnabled"] is True
    for bucket in buckets.values():
        encryption = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert encryption[0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    for name, resource in stateful.items():
        assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == ("Retain", "Retain"), name
    for group in prod.of_type("AWS::Logs::LogGroup").values():
        assert group["DeletionPolicy"] == "Retain"
        assert group["Properties"]["RetentionInDays"] == 90


def test_backups_follow_the_stage(prod: Synth, dev: Synth) -> None:
    def pitr(synth: Synth, spec: TableSpec) -> Any:
        return synth.resources[table_id(synth, spec)]["Properties"].get("PointInTimeRecoverySpecification")

    assert pitr(prod, MAIN_TABLE) == {"PointInTimeRecoveryEnabled": True, "RecoveryPeriodInDays": 35}
    assert pitr(prod, KEYS_TABLE)["PointInTimeRecoveryEnabled"] is True
    assert pitr(dev, MAIN_TABLE)["PointInTimeRecoveryEnabled"] is False
    # Backups of kept responses would keep what erase removes.
    assert pitr(prod, IDEMPOTENCY_TABLE)["PointInTimeRecoveryEnabled"] is False
    assert all(t.get("DeletionPolicy") == "Delete" for t in dev.of_type("AWS::DynamoDB::Table").values())


def test_the_files_bucket_is_versioned_private_and_tls_only(prod: Synth) -> None:
    template = Template.from_json(prod.template)
    name, bucket = next((n, b) for n, b in prod.of_type("AWS::S3::Bucket").items() if n.startswith("DataFilesBucket"))
    props = bucket["Properties"]

    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    # Only stale uploads expire; every version of a record's bytes is history, removed by erase alone.
    rules = props["LifecycleConfiguration"]["Rules"]
    expiring = [r for r in rules if "ExpirationInDays" in r or "NoncurrentVersionExpiration" in r]
    assert [r["Prefix"] for r in expiring] == ["uploads/"]
    assert expiring[0]["ExpirationInDays"] == 7
    assert "LoggingConfiguration" in props
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": name},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            },
        },
    )


def test_the_search_domain_is_encrypted_https_only_and_has_no_resource_policy(prod: Synth) -> None:
    props = next(iter(prod.of_type("AWS::OpenSearchService::Domain").values()))["Properties"]

    assert props["EncryptionAtRestOptions"] == {"Enabled": True}
    assert props["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    assert props["DomainEndpointOptions"]["EnforceHTTPS"] is True
    assert props["DomainEndpointOptions"]["TLSSecurityPolicy"] == "Policy-Min-TLS-1-2-2019-07"
    assert "AccessPolicies" not in props
    cluster = props["ClusterConfig"]
    assert (cluster["InstanceCount"], cluster["InstanceType"], cluster["ZoneAwarenessEnabled"]) == (
        3,
        "r7g.large.search",
        True,
    )
    assert (cluster["DedicatedMasterEnabled"], cluster["DedicatedMasterCount"]) == (True, 3)
    assert props["EngineVersion"] == "OpenSearch_2.19"


# -- workflows -------------------------------------------------------------------------------


# Each state machine of the stage, the ASL file it runs and the step handler behind each task's
# substitution, written out by hand from the files (the starters read the ARN of the name).
STATE_MACHINES = {
    "uhp-memories-prod-erase": (
        "erase.asl.json",
        {
            "ResolveEraseTargets": "resolve_erase_targets",
            "EraseFromIndex": "erase_from_index",
            "EraseFiles": "erase_files",
            "EraseCachedResponses": "erase_cached_responses",
            "EraseRecords": "erase_records",
            "FinishErase": "finish_erase",
            "RecordFailure": "record_failure",
        },
    ),
    "uhp-memories-prod-delete": (
        "delete_memory.asl.json",
        {"PurgeSubtree": "purge_subtree", "FinishDelete": "finish_delete", "RecordFailure": "record_failure"},
    ),
    "uhp-memories-prod-consolidate": (
        "consolidate.asl.json",
        {"Consolidate": "consolidate", "RecordConsolidationFailure": "record_consolidation_failure"},
    ),
    "uhp-memories-prod-derive": (
        "derive.asl.json",
        {"Derive": "derive", "RecordDerivationFailure": "record_derivation_failure"},
    ),
}


def task_resources(states: dict[str, Any]) -> set[str]:
    """The Resource of every Task state, in branches and item processors too."""
    found: set[str] = set()
    for state in states.values():
        if state.get("Type") == "Task":
            found.add(state["Resource"])
        for branch in state.get("Branches", []):
            found |= task_resources(branch["States"])
        for nested in ("Iterator", "ItemProcessor"):
            if nested in state:
                found |= task_resources(state[nested]["States"])
    return found


def test_the_state_machines_are_the_asl_files_of_uhp_memories_workflows(prod: Synth, clean_checkout: Any) -> None:
    machines = {
        m["Properties"]["StateMachineName"]: m["Properties"]
        for m in prod.of_type("AWS::StepFunctions::StateMachine").values()
    }
    workflows_dir = clean_checkout / "layers" / "core" / "uhp_memories" / "workflows"
    files = {f.name for f in workflows_dir.glob("*.asl.json")}
    handlers = functions_by_handler(prod)

    assert files == {file for file, _ in STATE_MACHINES.values()}, "the ASL files ship as package data"
    assert set(machines) == set(STATE_MACHINES)
    for name, (file, steps) in STATE_MACHINES.items():
        props = machines[name]
        definition = json.loads(props["DefinitionString"])
        # The definition deployed is the file local mode runs, unchanged.
        assert definition == json.loads((workflows_dir / file).read_text())
        assert task_resources(definition["States"]) == {f"${{{substitution}}}" for substitution in steps}
        assert {sub: render(value) for sub, value in props["DefinitionSubstitutions"].items()} == {
            sub: f"<{handlers[f'functions.steps.handler.{handler}']}.Arn>" for sub, handler in steps.items()
        }
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        assert props["LoggingConfiguration"]["IncludeExecutionData"] is False


def test_a_state_machine_may_invoke_only_its_own_steps(prod: Synth) -> None:
    for machine in prod.of_type("AWS::StepFunctions::StateMachine").values():
        props = machine["Properties"]
        role = props["RoleArn"]["Fn::GetAtt"][0]
        invoked = set()
        for policy in prod.of_type("AWS::IAM::Policy").values():
            if {"Ref": role} in policy["Properties"]["Roles"]:
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                    if "lambda:InvokeFunction" in as_list(statement["Action"]):
                        invoked |= {render(r) for r in as_list(statement["Resource"])}
        assert invoked == {render(v) for v in props["DefinitionSubstitutions"].values()}


# -- the search indexer ----------------------------------------------------------------------


def test_the_indexer_consumes_record_changes_of_the_main_table_stream(prod: Synth) -> None:
    (mapping,) = [m["Properties"] for m in prod.of_type("AWS::Lambda::EventSourceMapping").values()]
    queue = dead_letter_queue(prod, "indexer")

    assert mapping["FunctionName"] == {"Ref": lambda_id(prod, "indexer")}
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table_id(prod, MAIN_TABLE), "StreamArn"]}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert (mapping["BatchSize"], mapping["MaximumBatchingWindowInSeconds"]) == (100, 5)
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == 10
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert prod.resources[queue]["Type"] == "AWS::SQS::Queue"
    # Only record items: the new image of an INSERT or MODIFY, the old image of a REMOVE.
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == [
        {"dynamodb": {"NewImage": {"entity": {"S": ["record"]}}}},
        {"dynamodb": {"OldImage": {"entity": {"S": ["record"]}}}},
    ]
    assert prod.resources[lambda_id(prod, "indexer")]["Properties"]["Handler"] == (
        "functions.indexer.handler.lambda_handler"
    )


def test_the_indexer_backlog_and_given_up_changes_alarm(prod: Synth) -> None:
    indexer = lambda_id(prod, "indexer")
    queue = dead_letter_queue(prod, "indexer")
    alarms = [a["Properties"] for a in prod.of_type("AWS::CloudWatch::Alarm").values()]

    (backlog,) = [a for a in alarms if a.get("MetricName") == "IteratorAge"]
    assert backlog["Namespace"] == "AWS/Lambda"
    assert backlog["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": indexer}}]
    assert (backlog["Statistic"], backlog["Threshold"]) == ("Maximum", 5 * 60 * 1000)
    (given_up,) = [a for a in alarms if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"]
    assert given_up["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
    assert given_up["Threshold"] == 1


def test_a_stage_without_a_search_domain_has_no_indexer_stream(no_search: Synth) -> None:
    assert no_search.of_type("AWS::OpenSearchService::Domain") == {}
    assert no_search.of_type("AWS::Lambda::EventSourceMapping") == {}
    assert "SearchEndpoint" not in no_search.template["Outputs"]


# -- monitoring ------------------------------------------------------------------------------


def test_alarms_cover_5xx_throttles_workflows_and_search(prod: Synth) -> None:
    alarms = {
        render(a["Properties"].get("AlarmDescription", "")) for a in prod.of_type("AWS::CloudWatch::Alarm").values()
    }
    topic = next(iter(prod.of_type("AWS::SNS::Topic")))

    assert any("5xx" in a for a in alarms)
    assert any("main table were throttled" in a for a in alarms)
    # Every Lambda of the template, and nothing else, is watched by its own throttle alarm.
    throttle_alarms = [
        a["Properties"] for a in prod.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "Throttles"
    ]
    watched = [render(a["Dimensions"][0]["Value"]).strip("<>") for a in throttle_alarms]
    assert sorted(watched) == sorted(prod.of_type("AWS::Lambda::Function"))
    for alarm in throttle_alarms:
        assert (alarm["Namespace"], alarm["Statistic"], alarm["Threshold"]) == ("AWS/Lambda", "Sum", 1)
        assert [d["Name"] for d in alarm["Dimensions"]] == ["FunctionName"]
        assert "was throttled" in render(alarm["AlarmDescription"])
    # Every state machine is watched for failed, timed-out and aborted executions, each of its own.
    workflow_alarms = [
        a["Properties"] for a in prod.of_type("AWS::CloudWatch::Alarm").values()
        if "workflow execution failed" in render(a["Properties"].get("AlarmDescription", ""))
    ]
    watched_machines = []
    for alarm in workflow_alarms:
        stats = {m["Id"]: m["MetricStat"]["Metric"] for m in alarm["Metrics"] if "MetricStat" in m}
        assert {m["MetricName"] for m in stats.values()} == {
            "ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"
        }
        machines = {render(m["Dimensions"][0]["Value"]).strip("<>") for m in stats.values()}
        assert len(machines) == 1
        watched_machines += machines
    assert sorted(watched_machines) == sorted(prod.of_type("AWS::StepFunctions::StateMachine"))
    assert any("search domain is red" in a for a in alarms)
    for alarm in prod.of_type("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
    assert len(prod.of_type("AWS::CloudWatch::Dashboard")) == 1


def test_the_stack_names_what_reindex_reads(prod: Synth) -> None:
    from infra.stacks.memory_service import SEARCH_OUTPUTS

    outputs = prod.template["Outputs"]
    domain = next(iter(prod.of_type("AWS::OpenSearchService::Domain")))

    assert set(SEARCH_OUTPUTS) <= set(outputs)
    assert render(outputs["SearchEndpoint"]["Value"]) == f"https://<{domain}.DomainEndpoint>"
    assert outputs["SearchIndexName"]["Value"] == "uhp-recall-v1"
    assert (outputs["EmbeddingModelId"]["Value"], outputs["EmbeddingDimensions"]["Value"]) == (
        "amazon.titan-embed-text-v2:0",
        "1024",
    )
    assert render(outputs["MainTableName"]["Value"]) == f"<{table_id(prod, MAIN_TABLE)}>"


def test_the_stack_names_what_the_admin_commands_read(prod: Synth) -> None:
    from infra.config import ApiConfig
    from uhp_memories.admin.target import (
        DEFAULT_TENANT_BURST,
        DEFAULT_TENANT_QUOTA_PER_MONTH,
        DEFAULT_TENANT_RATE,
    )

    outputs = prod.template["Outputs"]
    assert {"RestApiId", "ApiStageName", "KeysTableName", "ApiUrl", "TenantRateLimit"} <= set(outputs)
    assert outputs["ApiStageName"]["Value"] == {"Ref": next(iter(prod.of_type("AWS::ApiGateway::Stage")))}
    assert outputs["TenantQuotaPerMonth"]["Value"] == "50000000"
    defaults = ApiConfig()
    assert (defaults.tenant_rate, defaults.tenant_burst, defaults.tenant_quota_per_month) == (
        DEFAULT_TENANT_RATE,
        DEFAULT_TENANT_BURST,
        DEFAULT_TENANT_QUOTA_PER_MONTH,
    )


def test_schedules_live_in_the_stages_group_and_scheduler_may_invoke_only_the_timer(prod: Synth) -> None:
    (group,) = prod.of_type("AWS::Scheduler::ScheduleGroup").values()
    assert group["Properties"]["Name"] == "uhp-memories-prod"
    role_id = prod.stack.resolve(prod.stack.schedules.role.role_arn)["Fn::GetAtt"][0]
    trust = prod.resources[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [(t["Principal"], t["Condition"]) for t in trust] == [
        ({"Service": "scheduler.amazonaws.com"}, {"StringEquals": {"aws:SourceAccount": prod.stack.account}})
    ]
    timer = lambda_id(prod, "consolidation_timer")
    assert role_permissions(prod, role_id) == {("lambda:InvokeFunction", f"<{timer}.Arn>")}
    env = environment(prod, "consolidations")
    assert env["UHP_SCHEDULE_GROUP"] == "uhp-memories-prod"
    assert render(env["UHP_SCHEDULE_TARGET_ARN"]) == f"<{timer}.Arn>"
    assert set(environment(prod, "consolidation_timer")) & {"UHP_SCHEDULE_TARGET_ARN", "UHP_SCHEDULE_ROLE_ARN"} == set()
