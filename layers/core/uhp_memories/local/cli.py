"""The `uhp-memories` command (DESIGN.md: the local CLI is a contract)."""

from __future__ import annotations

import argparse
import sys

from uhp_memories.admin import cli as admin
from uhp_memories.admin import reindex
from uhp_memories.local.moto_env import LocalAws, dev_key, load_keys_file


def serve(args: argparse.Namespace) -> int:
    from uhp_memories.local.gateway import LocalGateway

    local = LocalAws().start()
    if args.keys_file:
        entries = load_keys_file(args.keys_file)
        local.add_keys(entries)
        print(f"loaded {len(entries)} API keys from {args.keys_file}", flush=True)
    else:
        entry = dev_key()
        local.add_keys([entry])
        print(f"dev API key (tenant {entry.tenant}, principal {entry.principal}): {entry.key}", flush=True)
    gateway = LocalGateway(args.host, args.port, authorizer_cache_seconds=args.authorizer_cache_seconds)
    print(f"listening on {gateway.url}", flush=True)
    print("local state lives in this process and is gone when it stops", flush=True)
    try:
        gateway.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        gateway.stop()
        local.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="uhp-memories", description="Harness Memories server")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="run the API locally over moto")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=8080)
    serve_cmd.add_argument("--keys-file", help='JSON: {"keys": [{"key", "tenant", "principal", "groups"}]}')
    serve_cmd.add_argument(
        "--authorizer-cache-seconds",
        type=float,
        default=300,
        help="reuse the authorizer's answer per API key this long, as the deployed stage does (0: ask every time)",
    )
    serve_cmd.set_defaults(run=serve)
    admin.add_commands(commands)  # tenants, keys: administration of a deployed stage
    reindex.add_command(commands)  # reindex: rebuild a deployed stage's recall index from DynamoDB
    args = parser.parse_args(argv)
    if args.command in ("tenants", "keys"):
        return admin.run(args)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
