"""`uhp-memories tenants ...` and `uhp-memories keys ...`: administration of a deployed stage, and the
keys of a local server's data dir (`keys ... --data-dir DIR`, uhp_memories.admin.local).

An operator's mistake or a refusal is one line on stderr and exit status 2, AWS's included (no
region, no credentials, a profile that does not exist, an API refusal): never a traceback."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from uhp_memories.admin.progress import step
from uhp_memories.admin.service import AdminError, StageAdmin
from uhp_memories.admin.target import StageTarget, TargetError, aws_refusal, aws_session


def add_commands(commands: Any) -> None:
    """Add the tenants and keys commands to the `uhp-memories` parser's subcommands."""
    target = argparse.ArgumentParser(add_help=False)
    where = target.add_argument_group("deployed stage (a stack name, or the three resources)")
    where.add_argument("--stack", help="CloudFormation stack of the stage, e.g. uhp-memories-prod")
    where.add_argument("--rest-api-id", help="API Gateway REST API id (instead of --stack)")
    where.add_argument("--stage-name", help="API Gateway stage name (instead of --stack)")
    where.add_argument("--keys-table", help="DynamoDB keys table name (instead of --stack)")
    where.add_argument("--main-table", help="DynamoDB main table name (instead of --stack; tenants delete)")
    where.add_argument("--region", help="AWS region (default: the AWS configuration's)")
    where.add_argument("--profile", help="AWS profile (default: the AWS configuration's)")
    target.add_argument("--json", action="store_true", help="print JSON")
    local = argparse.ArgumentParser(add_help=False)
    local.add_argument(
        "--data-dir",
        help="a local server's data dir (serve --data-dir), instead of a deployed stage: through the server "
        "running on it (the key works at once), or on the folder itself when none does",
    )

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
    list_tenants = tenant_commands.add_parser("list", parents=[target], help="the stage's tenants and their plans")
    list_tenants.set_defaults(run=_list_tenants)
    delete_tenant = tenant_commands.add_parser(
        "delete",
        parents=[target],
        help="revoke every key of a tenant and remove its usage plan; refused while it holds memories",
    )
    delete_tenant.add_argument("tenant")
    delete_tenant.set_defaults(run=_delete_tenant)

    keys = commands.add_parser("keys", help="API keys of a deployed stage, or of a local data dir (--data-dir)")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create_key = key_commands.add_parser("create", parents=[target, local], help="create a key (shown once)")
    create_key.add_argument("--tenant", required=True)
    create_key.add_argument("--principal", help="user:NAME, harness:ID, service:NAME (default: key:<key id>)")
    create_key.add_argument("--group", action="append", default=[], help="group:NAME (repeatable)")
    create_key.set_defaults(run=_create_key)
    list_keys = key_commands.add_parser(
        "list", parents=[target, local], help="list keys (never the keys themselves)"
    )
    list_keys.add_argument("--tenant")
    list_keys.set_defaults(run=_list_keys)
    revoke_key = key_commands.add_parser("revoke", parents=[target, local], help="revoke a key by its id")
    revoke_key.add_argument("key_id")
    revoke_key.set_defaults(run=_revoke_key)

    migrate = commands.add_parser(
        "migrate", parents=[target, local],
        help="bring a stage's table (or a local data dir) to the item schema this release writes",
    )
    migrate.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    migrate.set_defaults(run=_migrate)

    first = commands.add_parser(
        "bootstrap", parents=[target],
        help="after a deploy: the stage's first tenant and an administrator key for it, with the API URL",
    )
    first.add_argument("--tenant", default=FIRST_TENANT, help=f"the tenant to create (default: {FIRST_TENANT})")
    first.add_argument("--principal", default=FIRST_ADMIN,
                       help=f"the administrator's principal (default: {FIRST_ADMIN}), in {ADMINS}")
    first.set_defaults(run=_bootstrap)


# `bootstrap`'s defaults: a tenant, and an administrator of it (a key in group:admins, docs/decisions.md).
FIRST_TENANT = "default"
FIRST_ADMIN = "user:admin"
ADMINS = "group:admins"

STAGE_OPTIONS = ("stack", "rest_api_id", "stage_name", "keys_table", "main_table", "region", "profile")


def _clients(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    session = aws_session(args.profile, args.region)
    return session.client("cloudformation"), session.client("apigateway"), session.client("dynamodb")


def _target(args: argparse.Namespace, cloudformation: Any) -> StageTarget:
    if args.stack:
        return StageTarget.from_stack(cloudformation, args.stack)
    return StageTarget(args.rest_api_id, args.stage_name, args.keys_table, main_table=args.main_table or "")


def _admin(args: argparse.Namespace) -> StageAdmin:
    # The stage is named before any AWS client is made: its absence is the mistake to report first.
    if not args.stack and not (args.rest_api_id and args.stage_name and args.keys_table):
        raise TargetError(
            "name the stage: --stack NAME, or --rest-api-id, --stage-name and --keys-table"
            + ("; or a local server's keys with --data-dir DIR" if args.command == "keys" else "")
        )
    cloudformation, apigateway, dynamodb = _clients(args)
    return StageAdmin(apigateway, dynamodb, _target(args, cloudformation))


def _on_data_dir(args: argparse.Namespace) -> bool:
    """Whether a keys command acts on a local data dir; naming a deployed stage too is a mistake."""
    if getattr(args, "data_dir", None) is None:
        return False
    named = [f"--{name.replace('_', '-')}" for name in STAGE_OPTIONS if getattr(args, name, None)]
    if named:
        raise TargetError(f"--data-dir names a local server's keys; {', '.join(named)} a deployed stage: give one")
    return True


def _local(args: argparse.Namespace, command: str, arguments: dict[str, Any]) -> Any:
    from uhp_memories.admin.local import run_on_data_dir

    return run_on_data_dir(args.data_dir, command, arguments)


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2) if args.json else text, flush=True)


def _create_tenant(args: argparse.Namespace) -> int:
    admin = _admin(args)  # a stage not named, no region: said before any step
    with step(f"creating tenant {args.tenant} (its usage plan) on the stage"):
        tenant = admin.create_tenant(args.tenant, args.rate, args.burst, args.quota)
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


def _list_tenants(args: argparse.Namespace) -> int:
    admin = _admin(args)
    with step("listing the stage's usage plans"):
        tenants = admin.list_tenants()
        active = Counter(k.tenant for k in admin.list_keys() if not k.revoked)
    rows = [
        {"tenant": t.name, "usage_plan_id": t.usage_plan_id, "rate": t.rate, "burst": t.burst,
         "quota_per_month": t.quota_per_month, "active_keys": active[t.name]}
        for t in tenants
    ]
    text = "\n".join(
        f"{r['tenant']}  {r['usage_plan_id']}  {r['rate']:g} req/s (burst {r['burst']})  "
        f"{r['quota_per_month']} a month  {r['active_keys']} active keys"
        for r in rows
    )
    _print(args, rows, text or "no tenants")
    return 0


def _delete_tenant(args: argparse.Namespace) -> int:
    admin = _admin(args)
    with step(f"deleting tenant {args.tenant}: its keys revoked, then its usage plan"):
        deleted = admin.delete_tenant(args.tenant)
    _print(
        args,
        {"tenant": deleted.name, "usage_plan_id": deleted.usage_plan_id, "revoked": list(deleted.revoked_key_ids)},
        f"tenant {deleted.name} deleted: {len(deleted.revoked_key_ids)} keys revoked, usage plan "
        f"{deleted.usage_plan_id} removed",
    )
    return 0


def _create_key(args: argparse.Namespace) -> int:
    if _on_data_dir(args):
        made = _local(args, "create", {"tenant": args.tenant, "principal": args.principal, "groups": args.group})
    else:
        admin = _admin(args)
        with step(f"creating a key for tenant {args.tenant} (API Gateway key, then its item in the keys table)"):
            new = admin.create_key(args.tenant, args.principal, args.group)
        made = {**new.info.as_dict(), "key": new.key}
    _print(
        args,
        made,
        f"key {made['key_id']} for tenant {made['tenant']}, principal {made['principal']}"
        + (f", groups {','.join(made['groups'])}" if made["groups"] else "")
        + f"\n{made['key']}\nThis is the only time the key is shown: hand it over now (header x-api-key).",
    )
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    """One command from `cdk deploy` to a working key: the tenant (kept if it exists), then a key of an
    administrator of it, printed once with the stage's URL and a first request to make."""
    admin = _admin(args)
    with step(f"creating tenant {args.tenant} (its usage plan) on the stage"):
        tenant = admin.create_tenant(args.tenant)
    with step(f"creating an administrator key for {args.principal} ({ADMINS})"):
        new = admin.create_key(args.tenant, args.principal, [ADMINS])
    url = admin.target.invoke_url(admin.region)
    made = {"api_url": url, "tenant": tenant.name, "tenant_created": tenant.created, **new.info.as_dict(),
            "key": new.key}
    _print(
        args,
        made,
        f"API: {url}\n"
        f"tenant {tenant.name} {'created' if tenant.created else 'exists'}; administrator key {made['key_id']} "
        f"for {made['principal']} ({ADMINS}):\n{new.key}\n"
        "This is the only time the key is shown: keep it now (header x-api-key). A first request:\n"
        f"  curl -H 'x-api-key: {new.key}' {url}/v1/memories",
    )
    return 0


def _migrate(args: argparse.Namespace) -> int:
    """Every item of the main table at this release's schema: idempotent (a second run changes nothing)
    and resumable (a run stopped anywhere is finished by the next)."""
    from uhp_memories.adapters.dynamodb.migrate import Migration
    from uhp_memories.adapters.dynamodb.table import DynamoTable

    if _on_data_dir(args):
        from uhp_memories.admin.local import migrate_data_dir

        report = migrate_data_dir(args.data_dir, dry_run=args.dry_run)
    else:
        if not args.stack and not args.main_table:
            raise TargetError("name the stage: --stack NAME, or --main-table; or a local data dir with --data-dir DIR")
        session = aws_session(args.profile, args.region)
        table = args.main_table or StageTarget.from_stack(session.client("cloudformation"), args.stack).main_table
        if not table:
            raise TargetError(f"stack {args.stack!r} names no main table")
        with step(f"{'reading' if args.dry_run else 'migrating'} table {table}"):
            report = Migration(DynamoTable(session.client("dynamodb"), table)).run(dry_run=args.dry_run).as_dict()
    verb = "would bring" if args.dry_run else "brought"
    busy = f"; {len(report['busy'])} memories kept changing, run again" if report["busy"] else ""
    _print(args, report, f"{verb} {report['stamped'] + report['counted']} of {report['seen']} items to schema "
           f"{report['schema']} ({report['counted']} memories count their children){busy}"
           + (f"; {report['newer']} items are of a newer release" if report["newer"] else ""))
    return 0


def _describe(key: dict[str, Any]) -> str:
    state = f"revoked {key['revoked_at']}" if key["revoked"] else "active"
    groups = ",".join(key["groups"]) or "-"
    return f"{key['key_id']}  {key['tenant']}  {key['principal']}  {groups}  {key['created_at'] or '-'}  {state}"


def _list_keys(args: argparse.Namespace) -> int:
    if _on_data_dir(args):
        keys = _local(args, "list", {"tenant": args.tenant})
    else:
        admin = _admin(args)
        with step("listing the keys table"):
            keys = [k.as_dict() for k in admin.list_keys(args.tenant)]
    text = "\n".join(_describe(k) for k in keys) if keys else "no keys"
    _print(args, keys, text)
    return 0


def _revoke_key(args: argparse.Namespace) -> int:
    if _on_data_dir(args):
        key = _local(args, "revoke", {"key_id": args.key_id})
    else:
        admin = _admin(args)
        with step(f"revoking {args.key_id} (its API Gateway key, then its item)"):
            key = admin.revoke_key(args.key_id).as_dict()
    _print(args, key, f"revoked {key['key_id']} (tenant {key['tenant']}, principal {key['principal']})")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run an admin command; an operator's error is one line on stderr and exit status 2."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return int(args.run(args))
    except (AdminError, TargetError) as error:
        return _refused(str(error))
    except (BotoCoreError, ClientError) as error:
        return _refused(aws_refusal(error) or str(error))


def _refused(message: str) -> int:
    print(f"uhp-memories: {message}", file=sys.stderr)
    return 2
