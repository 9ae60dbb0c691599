"""`uhp-memories tenants|keys` against a stage on moto: usage plans, API Gateway keys, the keys table,
and what the authorizer then finds."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("openapi_spec_validator", reason="moto's API Gateway needs moto[apigateway]")

import boto3
from moto import mock_aws

from uhp_memories import bootstrap, stage_outputs
from uhp_memories.adapters.dynamodb.apikeys import ApiKey, DynamoKeyRepository, KeyExists, hash_key, new_key_id
from uhp_memories.adapters.dynamodb.schema import KEYS_TABLE, MAIN_TABLE
from uhp_memories.admin.service import AdminError, StageAdmin
from uhp_memories.admin.target import (
    DEFAULT_TENANT_BURST,
    DEFAULT_TENANT_QUOTA_PER_MONTH,
    DEFAULT_TENANT_RATE,
    StageTarget,
    TargetError,
)
from uhp_memories.domain.model import Caller
from uhp_memories.local.cli import main
from uhp_memories.local.moto_env import KeyEntry, LocalAws
from uhp_memories.settings import Settings

REGION = "us-east-1"
KEY_ID = re.compile(r"^key_[0-9a-f]{24}$")


@dataclass
class Stage:
    apigateway: Any
    dynamodb: Any
    rest_api_id: str
    stage_name: str
    keys_table: str
    # API Gateway keys there before this test: moto's state is shared with any suite whose mock is
    # still active in this process (the session's local stage), so a nested mock starts from it.
    keys_before: frozenset[str] = frozenset()

    def new_api_keys(self) -> list[dict[str, Any]]:
        """The API Gateway keys made since this test began."""
        return [k for k in self.apigateway.get_api_keys(limit=500)["items"] if k["id"] not in self.keys_before]

    def args(self) -> list[str]:
        return [
            "--rest-api-id",
            self.rest_api_id,
            "--stage-name",
            self.stage_name,
            "--keys-table",
            self.keys_table,
            "--region",
            REGION,
        ]

    def target(self) -> StageTarget:
        return StageTarget(self.rest_api_id, self.stage_name, self.keys_table)


@pytest.fixture
def stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_SESSION_TOKEN", "testing"),
        ("AWS_DEFAULT_REGION", REGION),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        apigateway = boto3.client("apigateway", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        api = apigateway.create_rest_api(name="uhp-memories-test-" + secrets.token_hex(4))
        root = apigateway.get_resources(restApiId=api["id"])["items"][0]
        apigateway.put_method(restApiId=api["id"], resourceId=root["id"], httpMethod="GET", authorizationType="NONE")
        apigateway.put_integration(restApiId=api["id"], resourceId=root["id"], httpMethod="GET", type="MOCK")
        apigateway.create_deployment(restApiId=api["id"], stageName="v1")
        table = "uhp-memories-keys-" + secrets.token_hex(4)  # unique: another suite may share the mock
        dynamodb.create_table(**KEYS_TABLE.create_table_kwargs(table))
        before = frozenset(k["id"] for k in apigateway.get_api_keys(limit=500)["items"])
        yield Stage(apigateway, dynamodb, api["id"], "v1", table, before)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_tenants_create_makes_a_usage_plan_on_the_stage(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    made = run_json(
        capsys, "tenants", "create", "acme", "--rate", "25", "--burst", "50", "--quota", "1000", *stage.args()
    )

    plan = stage.apigateway.get_usage_plan(usagePlanId=made["usage_plan_id"])
    assert plan["apiStages"] == [{"apiId": stage.rest_api_id, "stage": "v1"}]
    assert plan["throttle"] == {"rateLimit": 25.0, "burstLimit": 50}
    assert plan["quota"]["limit"] == 1000
    assert plan["quota"]["period"] == "MONTH"
    assert made["created"] is True


@pytest.mark.slow
def test_tenants_create_twice_keeps_the_first_plan(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    first = run_json(capsys, "tenants", "create", "acme", *stage.args())
    again = run_json(capsys, "tenants", "create", "acme", "--rate", "999", *stage.args())

    assert again["usage_plan_id"] == first["usage_plan_id"]
    assert again["created"] is False
    assert (first["rate"], first["burst"], first["quota_per_month"]) == (
        DEFAULT_TENANT_RATE,
        DEFAULT_TENANT_BURST,
        DEFAULT_TENANT_QUOTA_PER_MONTH,
    )


@pytest.mark.slow
def test_keys_create_stores_only_the_hash_and_the_authorizer_finds_it(
    stage: Stage, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = run_json(capsys, "tenants", "create", "acme", *stage.args())
    made = run_json(
        capsys,
        "keys",
        "create",
        "--tenant",
        "acme",
        "--principal",
        "user:alice",
        "--group",
        "group:sales",
        *stage.args(),
    )
    key = made["key"]

    items = stage.dynamodb.scan(TableName=stage.keys_table)["Items"]
    assert len(items) == 1
    assert items[0]["key_hash"] == {"S": hash_key(key)}
    assert key not in json.dumps(items)
    found = DynamoKeyRepository(stage.dynamodb, stage.keys_table).find(hash_key(key))
    assert found is not None
    assert (found.key_id, found.tenant, found.principal, found.groups) == (
        made["key_id"],
        "acme",
        "user:alice",
        ("group:sales",),
    )
    # The API Gateway key carries the same value (the authorizer's usageIdentifierKey) in the tenant's plan.
    plan_keys = stage.apigateway.get_usage_plan_keys(usagePlanId=plan["usage_plan_id"])["items"]
    assert [k["value"] for k in plan_keys] == [key]


@pytest.mark.slow
def test_a_key_without_principal_acts_as_itself(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    run_json(capsys, "tenants", "create", "acme", *stage.args())
    made = run_json(capsys, "keys", "create", "--tenant", "acme", *stage.args())

    assert made["principal"] == f"key:{made['key_id']}"


@pytest.mark.slow
def test_keys_create_for_an_unknown_tenant_is_refused(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "--tenant", "nobody", *stage.args()]) == 2

    assert "tenants create nobody" in capsys.readouterr().err
    assert stage.new_api_keys() == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "value"), [("--principal", "alice"), ("--principal", "user:"), ("--group", "sales")]
)
def test_keys_create_refuses_malformed_names(
    stage: Stage, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    run_json(capsys, "tenants", "create", "acme", *stage.args())

    assert main(["keys", "create", "--tenant", "acme", option, value, *stage.args()]) == 2
    assert "is not valid" in capsys.readouterr().err


@pytest.mark.slow
def test_keys_list_shows_no_secret_and_filters_by_tenant(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    for tenant in ("acme", "globex"):
        run_json(capsys, "tenants", "create", tenant, *stage.args())
    made = [run_json(capsys, "keys", "create", "--tenant", t, *stage.args()) for t in ("acme", "acme", "globex")]

    everything = run_json(capsys, "keys", "list", *stage.args())
    acme = run_json(capsys, "keys", "list", "--tenant", "acme", *stage.args())

    assert sorted(k["key_id"] for k in everything) == sorted(m["key_id"] for m in made)
    assert sorted(k["key_id"] for k in acme) == sorted(m["key_id"] for m in made[:2])
    listing = json.dumps(everything)
    assert all(m["key"] not in listing and hash_key(m["key"]) not in listing for m in made)


@pytest.mark.slow
def test_keys_revoke_stops_the_key_in_both_places(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    run_json(capsys, "tenants", "create", "acme", *stage.args())
    made = run_json(capsys, "keys", "create", "--tenant", "acme", *stage.args())

    revoked = run_json(capsys, "keys", "revoke", made["key_id"], *stage.args())

    assert revoked["revoked"] is True
    assert DynamoKeyRepository(stage.dynamodb, stage.keys_table).find(hash_key(made["key"])) is None
    assert stage.new_api_keys() == []
    # Revoking again is harmless; the listing shows the key as revoked, for the record.
    assert run_json(capsys, "keys", "revoke", made["key_id"], *stage.args())["revoked"] is True
    assert [k["revoked"] for k in run_json(capsys, "keys", "list", *stage.args())] == [True]


def test_keys_revoke_of_an_unknown_key_is_refused(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "revoke", "key_nope", *stage.args()]) == 2
    assert "no key 'key_nope'" in capsys.readouterr().err


def test_a_failed_table_write_leaves_no_api_gateway_key(stage: Stage) -> None:
    admin = StageAdmin(stage.apigateway, stage.dynamodb, stage.target())
    admin.create_tenant("acme")
    broken = StageAdmin(
        stage.apigateway, stage.dynamodb, StageTarget(stage.rest_api_id, stage.stage_name, "no-such-table")
    )

    with pytest.raises(Exception, match=r"ResourceNotFound|not found|Requested resource"):
        broken.create_key("acme")
    assert stage.new_api_keys() == []


def test_the_stage_must_be_named(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "list", "--region", REGION]) == 2
    assert "--stack NAME" in capsys.readouterr().err


@pytest.mark.slow
def test_an_unknown_stack_is_refused(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "list", "--stack", "uhp-memories-nope", "--region", REGION]) == 2
    assert "cannot read stack 'uhp-memories-nope'" in capsys.readouterr().err


def test_no_aws_region_is_one_line_not_a_traceback(
    stage: Stage, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Issue 28: `keys create` where no region is configured printed botocore's NoRegionError traceback."""
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))

    assert main(["keys", "create", "--tenant", "acme", "--stack", "uhp-memories-prod"]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 1
    assert refused[0].startswith("uhp-memories: no AWS region")
    assert "--region" in refused[0]
    # Without a stage named at all, that is the mistake said, before any AWS client is made.
    assert main(["keys", "create", "--tenant", "acme"]) == 2
    assert "--stack NAME" in capsys.readouterr().err


def test_an_aws_refusal_is_one_line(stage: Stage, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--rest-api-id", "nope", "--stage-name", "v1", "--keys-table", "no-such-table", "--region", REGION]
    assert main(["keys", "list", *args]) == 2
    said = capsys.readouterr().err
    assert "Traceback" not in said
    # The step it was on, then the refusal in one line: AWS's error code and the call it refused (the
    # message after them is moto's own wording).
    step, refusal = said.strip().splitlines()
    assert step == "listing the keys table ..."
    assert re.fullmatch(
        r"uhp-memories: AWS refused: An error occurred \(ResourceNotFoundException\) when calling the Scan "
        r"operation: \S.*",
        refusal,
    ), refusal


# -- tenants list and delete ---------------------------------------------------------------------------


@pytest.fixture
def main_table(stage: Stage) -> str:
    name = "uhp-memories-main-" + secrets.token_hex(4)
    stage.dynamodb.create_table(**MAIN_TABLE.create_table_kwargs(name, with_stream=False))
    return name


@pytest.mark.slow
def test_tenants_list_names_the_stages_tenants_with_their_active_keys(
    stage: Stage, capsys: pytest.CaptureFixture[str]
) -> None:
    for tenant in ("globex", "acme"):
        run_json(capsys, "tenants", "create", tenant, *stage.args())
    run_json(capsys, "keys", "create", "--tenant", "acme", *stage.args())
    revoked = run_json(capsys, "keys", "create", "--tenant", "acme", *stage.args())
    run_json(capsys, "keys", "revoke", revoked["key_id"], *stage.args())

    listed = run_json(capsys, "tenants", "list", *stage.args())

    assert [(t["tenant"], t["active_keys"]) for t in listed] == [("acme", 1), ("globex", 0)]
    assert listed[0]["rate"] == DEFAULT_TENANT_RATE


@pytest.mark.slow
def test_tenants_delete_revokes_its_keys_and_removes_its_plan(
    stage: Stage, main_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = run_json(capsys, "tenants", "create", "acme", *stage.args())
    run_json(capsys, "tenants", "create", "globex", *stage.args())
    made = [run_json(capsys, "keys", "create", "--tenant", t, *stage.args()) for t in ("acme", "acme", "globex")]

    deleted = run_json(capsys, "tenants", "delete", "acme", *stage.args(), "--main-table", main_table)

    assert deleted["usage_plan_id"] == plan["usage_plan_id"]
    assert sorted(deleted["revoked"]) == sorted(m["key_id"] for m in made[:2])
    keys = DynamoKeyRepository(stage.dynamodb, stage.keys_table)
    assert [keys.find(hash_key(m["key"])) is None for m in made] == [True, True, False]
    assert [k["name"] for k in stage.new_api_keys()] == [made[2]["key_id"]]
    assert [t["tenant"] for t in run_json(capsys, "tenants", "list", *stage.args())] == ["globex"]
    assert main(["tenants", "delete", "acme", *stage.args(), "--main-table", main_table]) == 2
    assert "no tenant 'acme'" in capsys.readouterr().err


@pytest.mark.slow
def test_tenants_delete_is_refused_while_the_tenant_holds_memories(
    stage: Stage, main_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_json(capsys, "tenants", "create", "acme", *stage.args())
    made = run_json(capsys, "keys", "create", "--tenant", "acme", *stage.args())
    container = bootstrap.build(
        Settings(table_name=main_table, keys_table_name=stage.keys_table), stage.dynamodb, None,
        recall_engine=lambda: None,
    )
    memory = container.memories.create(Caller("acme", "user:alice"), name="Sales").memory
    container.memories.create(Caller("acme", "user:alice"), name="Q3", parent_id=memory.id)

    assert main(["tenants", "delete", "acme", *stage.args(), "--main-table", main_table]) == 2
    refused = capsys.readouterr().err
    assert "still holds memories" in refused
    assert "DELETE /v1/memories/{id}" in refused
    # Nothing was taken away.
    assert DynamoKeyRepository(stage.dynamodb, stage.keys_table).find(hash_key(made["key"])) is not None
    assert [t["tenant"] for t in run_json(capsys, "tenants", "list", *stage.args())] == ["acme"]
    # Without the main table it cannot tell, and says what to add.
    assert main(["tenants", "delete", "acme", *stage.args()]) == 2
    assert "--main-table" in capsys.readouterr().err


class FakeCloudFormation:
    def __init__(self, outputs: dict[str, str]) -> None:
        self.outputs = outputs

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        return {
            "Stacks": [
                {
                    "StackName": StackName,
                    "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()],
                }
            ]
        }


def test_the_target_comes_from_the_stack_outputs() -> None:
    target = StageTarget.from_stack(
        FakeCloudFormation(
            {
                stage_outputs.REST_API_ID: "abc123",
                stage_outputs.API_STAGE_NAME: "v1",
                stage_outputs.KEYS_TABLE_NAME: "keys-t",
                stage_outputs.TENANT_RATE_LIMIT: "12.5",
                stage_outputs.TENANT_BURST_LIMIT: "30",
                stage_outputs.TENANT_QUOTA_PER_MONTH: "777",
            }
        ),
        "uhp-memories-prod",
    )

    assert target == StageTarget("abc123", "v1", "keys-t", 12.5, 30, 777)


def test_a_stack_without_the_outputs_is_not_a_stage() -> None:
    with pytest.raises(TargetError, match=stage_outputs.REST_API_ID):
        StageTarget.from_stack(
            FakeCloudFormation({stage_outputs.API_STAGE_NAME: "v1", stage_outputs.KEYS_TABLE_NAME: "t"}), "other"
        )


def test_tenant_names_are_checked() -> None:
    admin = StageAdmin(None, None, StageTarget("a", "v1", "t"))
    with pytest.raises(AdminError, match="tenant"):
        admin.create_tenant("Acme Corp")


# -- the keys adapter: the one writer of key items ------------------------------------------------


def test_a_key_is_written_once_and_never_pointed_elsewhere(stage: Stage) -> None:
    keys = DynamoKeyRepository(stage.dynamodb, stage.keys_table)
    key_hash = hash_key("k-" + secrets.token_hex(8))
    keys.put(key_hash, "key_1", "acme", "user:alice", ["group:sales"])

    with pytest.raises(KeyExists):
        keys.put(key_hash, "key_2", "globex", "user:mallory", [])

    assert keys.find(key_hash) == ApiKey("key_1", "acme", "user:alice", ("group:sales",))
    keys.revoke(key_hash, "2026-01-01T00:00:00Z")
    keys.revoke(key_hash, "2026-02-02T00:00:00Z")
    assert keys.find(key_hash) is None
    ((found_hash, revoked),) = keys.with_id("key_1")
    assert (found_hash, revoked.revoked, revoked.revoked_at) == (key_hash, True, "2026-01-01T00:00:00Z")


@pytest.mark.slow
def test_admin_and_local_mode_write_one_item_shape_with_one_key_id_scheme(
    stage: Stage, capsys: pytest.CaptureFixture[str]
) -> None:
    run_json(capsys, "tenants", "create", "acme", *stage.args())
    made = run_json(capsys, "keys", "create", "--tenant", "acme", "--principal", "user:alice", *stage.args())
    local = LocalAws()  # not started: its container over this stage's keys table
    local.container = bootstrap.build(
        Settings(keys_table_name=stage.keys_table), stage.dynamodb, None, recall_engine=lambda: None
    )
    local_key = "k-" + secrets.token_hex(8)
    local.add_keys([KeyEntry(local_key, "acme", "user:bob", ("group:sales",))])

    items = {item["principal"]["S"]: item for item in stage.dynamodb.scan(TableName=stage.keys_table)["Items"]}
    admin_item, local_item = items["user:alice"], items["user:bob"]
    assert set(local_item) == {"key_hash", "key_id", "tenant", "principal", "groups"}
    assert set(local_item) | {"created_at", "api_key_id"} == set(admin_item)
    assert KEY_ID.match(made["key_id"])
    assert KEY_ID.match(local_item["key_id"]["S"])
    found = DynamoKeyRepository(stage.dynamodb, stage.keys_table).find(hash_key(local_key))
    assert found is not None
    assert (found.tenant, found.principal, found.groups) == ("acme", "user:bob", ("group:sales",))
    with pytest.raises(KeyExists):
        local.add_keys([KeyEntry(local_key, "globex", "user:mallory")])
    assert KEY_ID.match(new_key_id())


@pytest.mark.slow
def test_bootstrap_prints_the_api_url_and_a_first_administrator_key_that_works(
    stage: Stage, capsys: pytest.CaptureFixture[str]
) -> None:
    """After `cdk deploy`, one command: the stage's first tenant and an administrator key for it, with the
    URL to send it to (issue 37). It was a describe-stacks call, `tenants create` and `keys create`."""
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    outputs = {stage_outputs.REST_API_ID: stage.rest_api_id, stage_outputs.API_STAGE_NAME: stage.stage_name,
               stage_outputs.KEYS_TABLE_NAME: stage.keys_table,
               stage_outputs.API_URL: f"https://{stage.rest_api_id}.execute-api.{REGION}.amazonaws.com/v1/"}
    stack = "uhp-memories-boot-" + secrets.token_hex(3)
    cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps({
        "Resources": {"Alarms": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {name: {"Value": value} for name, value in outputs.items()},
    }))

    made = run_json(capsys, "bootstrap", "--stack", stack, "--region", REGION)
    assert made["api_url"] == f"https://{stage.rest_api_id}.execute-api.{REGION}.amazonaws.com/v1"
    assert (made["tenant"], made["tenant_created"], made["principal"], made["groups"]) == (
        "default", True, "user:admin", ["group:admins"])
    found = DynamoKeyRepository(stage.dynamodb, stage.keys_table).find(hash_key(made["key"]))
    assert found is not None
    assert (found.tenant, found.principal, found.groups) == (
        "default", "user:admin", ("group:admins",))

    # Again: the tenant is kept, and another key is made (a key is shown once, so a lost one is replaced).
    assert main(["bootstrap", "--stack", stack, "--region", REGION, "--tenant", "default"]) == 0
    text = capsys.readouterr().out
    assert "tenant default exists" in text
    assert made["key"] not in text
    assert "curl -H 'x-api-key: " in text
    assert f"{made['api_url']}/v1/memories" in text

    # Named piece by piece, the URL is API Gateway's own form.
    piecewise = run_json(capsys, "bootstrap", *stage.args(), "--tenant", "globex")
    assert piecewise["api_url"] == f"https://{stage.rest_api_id}.execute-api.{REGION}.amazonaws.com/v1"
