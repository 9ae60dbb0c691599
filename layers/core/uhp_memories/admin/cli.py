"""`uhp-memories tenants ...` and `uhp-memories keys ...`: administration of a deployed stage."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from uhp_memories.admin.progress import step
from uhp_memories.admin.service import AdminError, KeyInfo, StageAdmin
from uhp_memories.admin.target import StageTarget, TargetError


def add_commands(commands: Any) -> None:
    """Add the tenants and keys commands to the `uhp-memories` parser's subcommands."""
    target = argparse.ArgumentParser(add_help=False)
    where = target.add_argument_group("deployed stage (a stack name, or the three resources)")
    where.add_argument("--stack", help="CloudFormation stack of the stage, e.g. uhp-memories-prod")
    where.add_argument("--rest-api-id", help="API Gateway REST API id (instead of --stack)")
    where.add_argument("--stage-name", help="API Gateway stage name (instead of --stack)")
    where.add_argument("--keys-table", help="DynamoDB keys table name (instead of --stack)")
    where.add_argument("--region", help="AWS region (default: the AWS configuration's)")
    where.add_argument("--profile", help="AWS profile (default: the AWS configuration's)")
    target.add_argument("--json", action="store_true", help="print JSON")

    tenants = commands.add_parser("tenants", help="tenants of a deployed stage (API Gateway usage plans)")
    tenant_commands = tenants.add_subparsers(dest="tenants_command", required=True)
    create_tenant = tenant_commands.add_parser(
        "create", parents=[target], help="create a tenant: its usage plan (throttle, monthly quota) on the stage"
    )
    create_tenant.add_argument("tenant", help="tenant name: lowercase letters, digits, - and _")
    create_tenant.add_argument("--rate", type=float, help="requests per second (default: the stage's)")
    create_tenant.add_argument("--burst", type=int, help="burst requests (default: the stage's)")
    create_tenant.add_argument("--quota", type=int, help="requests per month (default: the stage's)")
    create_tenant.set_defaults(run=_create_tenant)

    keys = commands.add_parser("keys", help="API keys of a deployed stage")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create_key = key_commands.add_parser("create", parents=[target], help="create a key (shown once)")
    create_key.add_argument("--tenant", required=True)
    create_key.add_argument("--principal", help="user:NAME, harness:ID, service:NAME (default: key:<key id>)")
    create_key.add_argument("--group", action="append", default=[], help="group:NAME (repeatable)")
    create_key.set_defaults(run=_create_key)
    list_keys = key_commands.add_parser("list", parents=[target], help="list keys (never the keys themselves)")
    list_keys.add_argument("--tenant")
    list_keys.set_defaults(run=_list_keys)
    revoke_key = key_commands.add_parser("revoke", parents=[target], help="revoke a key by its id")
    revoke_key.add_argument("key_id")
    revoke_key.set_defaults(run=_revoke_key)


def _clients(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    import boto3

    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    return session.client("cloudformation"), session.client("apigateway"), session.client("dynamodb")


def _target(args: argparse.Namespace, cloudformation: Any) -> StageTarget:
    if args.stack:
        return StageTarget.from_stack(cloudformation, args.stack)
    if args.rest_api_id and args.stage_name and args.keys_table:
        return StageTarget(args.rest_api_id, args.stage_name, args.keys_table)
    raise TargetError("name the stage: --stack NAME, or --rest-api-id, --stage-name and --keys-table")


def _admin(args: argparse.Namespace) -> StageAdmin:
    cloudformation, apigateway, dynamodb = _clients(args)
    return StageAdmin(apigateway, dynamodb, _target(args, cloudformation))


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2) if args.json else text, flush=True)


def _create_tenant(args: argparse.Namespace) -> int:
    with step(f"creating tenant {args.tenant} (its usage plan) on the stage"):
        tenant = _admin(args).create_tenant(args.tenant, args.rate, args.burst, args.quota)
    verb = "created" if tenant.created else "exists"
    _print(
        args,
        {
            "tenant": tenant.name,
            "usage_plan_id": tenant.usage_plan_id,
            "rate": tenant.rate,
            "burst": tenant.burst,
            "quota_per_month": tenant.quota_per_month,
            "created": tenant.created,
        },
        f"tenant {tenant.name} {verb}: usage plan {tenant.usage_plan_id}, {tenant.rate:g} req/s "
        f"(burst {tenant.burst}), {tenant.quota_per_month} requests a month",
    )
    return 0


def _create_key(args: argparse.Namespace) -> int:
    with step(f"creating a key for tenant {args.tenant} (API Gateway key, then its item in the keys table)"):
        new = _admin(args).create_key(args.tenant, args.principal, args.group)
    info = new.info
    _print(
        args,
        {**info.as_dict(), "key": new.key},
        f"key {info.key_id} for tenant {info.tenant}, principal {info.principal}"
        + (f", groups {','.join(info.groups)}" if info.groups else "")
        + f"\n{new.key}\nThis is the only time the key is shown: hand it over now (header x-api-key).",
    )
    return 0


def _describe(key: KeyInfo) -> str:
    state = f"revoked {key.revoked_at}" if key.revoked else "active"
    groups = ",".join(key.groups) or "-"
    return f"{key.key_id}  {key.tenant}  {key.principal}  {groups}  {key.created_at}  {state}"


def _list_keys(args: argparse.Namespace) -> int:
    with step("listing the keys table"):
        keys = _admin(args).list_keys(args.tenant)
    text = "\n".join(_describe(k) for k in keys) if keys else "no keys"
    _print(args, [k.as_dict() for k in keys], text)
    return 0


def _revoke_key(args: argparse.Namespace) -> int:
    with step(f"revoking {args.key_id} (its API Gateway key, then its item)"):
        key = _admin(args).revoke_key(args.key_id)
    _print(args, key.as_dict(), f"revoked {key.key_id} (tenant {key.tenant}, principal {key.principal})")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run an admin command; an operator's error is one line on stderr and exit status 2."""
    try:
        return int(args.run(args))
    except (AdminError, TargetError) as error:
        print(f"uhp-memories: {error}", file=sys.stderr)
        return 2
