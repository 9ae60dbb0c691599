"""The `uhp-memories` command (DESIGN.md: the local CLI is a contract).

`serve` says what it does as it starts, and prints `listening on http://HOST:PORT` once, when the
server accepts requests (tools wait for that line). An operator's mistake (a port in use, a keys
file that does not exist or does not read, a data dir that cannot be used) is one line on stderr
and exit status 2, found before anything is printed as if the server were starting."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from uhp_memories.adapters.dynamodb.apikeys import KeyExists
from uhp_memories.admin import cli as admin
from uhp_memories.admin import reindex
from uhp_memories.admin.local import ControlEndpoint, LocalKeys
from uhp_memories.local.data_dir import DataDir, DataDirError
from uhp_memories.local.moto_env import KeyEntry, KeysFileError, LocalAws, dev_key, load_keys_file
from uhp_memories.settings import Settings

if TYPE_CHECKING:
    from uhp_memories.local.gateway import LocalGateway

EXIT_OPERATOR_ERROR = 2


class OperatorError(Exception):
    """Said as one line on stderr; the command exits with status 2."""


def say(text: str) -> None:
    print(text, flush=True)


def _bind(args: argparse.Namespace) -> LocalGateway:
    from uhp_memories.local.gateway import LocalGateway

    try:
        return LocalGateway(args.host, args.port, authorizer_cache_seconds=args.authorizer_cache_seconds)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise OperatorError(
                f"port {args.port} on {args.host} is in use (another server?); choose another with --port"
            ) from None
        raise OperatorError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None


def serve(args: argparse.Namespace) -> int:
    """Check what the operator gave (keys file, port, data dir), start moto (and put a data dir's
    state back), load the embedding model, then serve until interrupted (Ctrl-C, SIGTERM)."""
    data_dir: DataDir | None = None
    try:
        entries = load_keys_file(args.keys_file) if args.keys_file else None
        gateway = _bind(args)  # held from now on: nothing else can take the port while we start
        if args.data_dir:
            try:
                data_dir = DataDir(args.data_dir).open()
            except DataDirError:
                gateway.stop()
                raise
    except (KeysFileError, DataDirError, OperatorError) as error:
        print(f"uhp-memories: {error}", file=sys.stderr, flush=True)
        return EXIT_OPERATOR_ERROR
    _log_requests_to_stderr()
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    local = LocalAws(_settings(args), data_dir=data_dir)
    clean = False
    ticker = None
    control: ControlEndpoint | None = None
    try:
        started = time.monotonic()
        if data_dir is not None:
            say(f"starting with the state kept in {data_dir.path}")
        local.start()
        if local.restored is not None:
            say(
                f"restored {local.restored.items} items and {local.restored.objects} files "
                f"in {local.restored.seconds:.1f} s"
            )
        _load_model(local)
        if data_dir is not None and not data_dir.clean_start:
            _catch_up(local)
        resumed = local.resume_workflows()
        if resumed:
            say(f"resumed {len(resumed)} workflows that had not ended: {', '.join(resumed)}")
        try:
            _add_keys(local, args.keys_file, entries, data_dir)
        except KeyExists as error:  # the data dir holds this key for someone else
            print(f"uhp-memories: keys file {args.keys_file}: {error}", file=sys.stderr, flush=True)
            return EXIT_OPERATOR_ERROR
        for line in _connected(local.settings):
            say(line)
        if data_dir is not None:  # `uhp-memories keys ... --data-dir DIR` adds and revokes keys while it runs
            assert local.container is not None
            control = ControlEndpoint(data_dir.path, LocalKeys(local.container.keys, gateway.authorizer_cache.clear))
            control.start()
        gateway.start_background()
        ticker = local.ticker().start(args.schedule_tick_seconds)  # consolidation schedules, as Scheduler fires them
        say(f"listening on {gateway.url}")
        pid = os.getpid()
        kept = (
            f"state is kept in {data_dir.path}; `uhp-memories keys create --data-dir {data_dir.path} --tenant T` "
            "adds a key" if data_dir is not None
            else "state lives in this process and is gone when it stops (--data-dir DIR keeps it)"
        )
        say(f"ready in {time.monotonic() - started:.1f} s (pid {pid}: Ctrl-C, or kill {pid}, stops it); {kept}")
        stopping.wait()
        say("stopping")
        clean = True
    finally:
        if control is not None:
            control.stop()
        if ticker is not None:
            ticker.stop()
        gateway.stop()
        local.stop()
        if data_dir is not None:
            data_dir.close(clean=clean)
    return 0


def _connected(settings: Settings) -> list[str]:
    """What the server is connected to beyond its own parts, a line each."""
    lines = []
    if settings.derivation != "none":
        lines.append(f"observe derives with {settings.derivation_model} at {settings.derivation_base_url}")
        if settings.derivation == "openai":
            from uhp_memories.adapters.openai_compat import endpoint_answers

            # Said at start, once: an endpoint that is not there shows only as jobs retrying, minutes later.
            silent = endpoint_answers(settings.derivation_base_url)
            if silent is not None:
                lines.append(f"the derivation endpoint {settings.derivation_base_url} does not answer ({silent}): "
                             "derive jobs will retry, then fail, until it does")
    if settings.mem0 != "none":
        lines.append(f"mem0 ({settings.mem0}) is connected: memories created with \"provider\": \"mem0\" keep "
                     "their records there")
    return lines


def _settings(args: argparse.Namespace) -> Settings:
    """The local stage's settings: the defaults, with a derivation model when one is named (its key from
    the environment, UHP_DERIVATION_API_KEY, never from the command line, where any process sees it), and
    an OpenSearch cluster for recall when one is named (its index UHP_SEARCH_INDEX, default uhp-recall-v1,
    with UHP_SEARCH_REPLICAS replicas, default 1)."""
    env = Settings.from_env()
    chosen: dict[str, object] = {}
    if args.search_url:
        chosen.update(search_endpoint=args.search_url, search_index=env.search_index,
                      search_replicas=env.search_replicas)
    if args.derive_url:
        chosen.update(derivation="openai", derivation_base_url=args.derive_url, derivation_model=args.derive_model,
                      derivation_api_key=env.derivation_api_key)
    if args.mem0 != "none":
        # mem0 beside the native provider (§10): OSS keeps its stores in the data dir when there is one;
        # with --derive-url it derives with that model (infer=True); the Platform's key from the
        # environment, UHP_MEM0_API_KEY, never the command line.
        folder = str(Path(args.data_dir) / "mem0") if args.data_dir else ""
        chosen.update(mem0=args.mem0, mem0_folder=folder, mem0_infer=bool(args.derive_url),
                      mem0_api_key=env.mem0_api_key, mem0_host=env.mem0_host)
    return Settings.model_validate(chosen)


def _log_requests_to_stderr() -> None:
    from uhp_memories.local.gateway import REQUEST_LOG

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    REQUEST_LOG.addHandler(handler)
    REQUEST_LOG.setLevel(logging.INFO)
    REQUEST_LOG.propagate = False


def _load_model(local: LocalAws) -> None:
    assert local.container is not None
    started = time.monotonic()
    say("loading the embedding model (all-MiniLM-L6-v2 on onnxruntime)")
    engine = local.container.recall_engine()
    assert engine is not None
    load: Callable[[], None] | None = getattr(engine.embedder, "load", None)
    if load is not None:
        load()
    say(f"embedding model loaded in {time.monotonic() - started:.1f} s")
    settings = local.settings
    if settings.search_endpoint:
        say(f"recall searches the OpenSearch index {settings.search_index} at {settings.search_endpoint}")


def _catch_up(local: LocalAws) -> None:
    from uhp_memories.admin.progress import reindex_progress

    say("the last server did not stop cleanly: catching the search index up with the tables")
    with reindex_progress("catching up") as progress:
        report = local.catch_up_index(progress)
    say(f"search index caught up: {report.indexed_versions} record versions checked in {report.seconds:.1f} s")


def _add_keys(local: LocalAws, keys_file: str | None, entries: list[KeyEntry] | None, data_dir: DataDir | None) -> None:
    if entries is not None:
        local.add_keys(entries, keep_stored=data_dir is not None)
        say(f"loaded {len(entries)} API keys from {keys_file}: " + ", ".join(
            f"{entry.key} ({entry.tenant}, {entry.principal})" for entry in entries
        ))
        return
    entry = dev_key(data_dir.dev_key() if data_dir is not None else None)
    local.add_keys([entry], keep_stored=data_dir is not None)
    say(f"dev API key (tenant {entry.tenant}, principal {entry.principal}): {entry.key}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="uhp-memories", description="Harness Memories server")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="run the API locally over moto")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=8080)
    serve_cmd.add_argument("--keys-file", help='JSON: {"keys": [{"key", "tenant", "principal", "groups"}]}')
    serve_cmd.add_argument(
        "--data-dir",
        help="keep tables, files, the search index and workflows in this folder across restarts "
        "(created if missing); without it, state lives in the process",
    )
    serve_cmd.add_argument(
        "--authorizer-cache-seconds",
        type=float,
        default=300,
        help="reuse the authorizer's answer per API key this long, as the deployed stage does (0: ask every time)",
    )
    serve_cmd.add_argument(
        "--derive-url",
        help="an OpenAI-compatible chat endpoint (llama.cpp, vLLM, Ollama: http://127.0.0.1:11434) that "
        "derives facts from observed episodes and helps consolidation; its key, if any, in UHP_DERIVATION_API_KEY",
    )
    serve_cmd.add_argument("--derive-model", default="", help="the model the --derive-url endpoint serves")
    serve_cmd.add_argument(
        "--search-url",
        help="recall on the OpenSearch cluster at this address (http://127.0.0.1:9200, unsigned), as a deployed "
        "stage recalls, instead of the embedded engine; the same local model embeds; its index in UHP_SEARCH_INDEX",
    )
    serve_cmd.add_argument(
        "--mem0",
        choices=["none", "oss", "platform"],
        default="none",
        help="connect mem0 as a provider beside the native one (memories created with provider \"mem0\"): oss runs "
        "mem0's library in this process with the local model (with --derive-url, mem0 derives with it); platform "
        "calls mem0's hosted service with the key in UHP_MEM0_API_KEY",
    )
    serve_cmd.add_argument(
        "--schedule-tick-seconds", type=float, default=30, help="how often consolidation schedules are checked"
    )
    serve_cmd.set_defaults(run=serve)
    admin.add_commands(commands)  # tenants, keys: administration of a deployed stage
    reindex.add_command(commands)  # reindex: rebuild a deployed stage's recall index from DynamoDB
    args = parser.parse_args(argv)
    if args.command == "serve" and bool(args.derive_url) != bool(args.derive_model):
        parser.error("--derive-url and --derive-model go together")
    if args.command in ("tenants", "keys"):
        return admin.run(args)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
