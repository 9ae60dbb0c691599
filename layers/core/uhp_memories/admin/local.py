"""`uhp-memories keys create|list|revoke --data-dir DIR`: the API keys of a local server's data dir.

A local stage has no API Gateway: a key is its item in the keys table, written by the keys adapter
exactly as on a deployed stage (uhp_memories.adapters.dynamodb.apikeys), and its tenant is whatever
it names. A key made here is shown once, as `keys create` shows a deployed one, and works at once.

The keys table lives in the process that holds DIR, so the command reaches it one of two ways:
- a server runs on DIR: the command asks it. `serve --data-dir DIR` opens a control endpoint for
  its keys once it listens: loopback HTTP on a port of its own, with a random token, both written to
  `DIR/control.json`, readable by its owner only (whoever may read the data dir may read its keys
  table anyway). The key is added to the running server, which answers with it at once; a revoked
  key is refused at once too (the server forgets its cached authorizer answers).
- no server runs on DIR: the command opens DIR itself (taking its lock, as a server does), writes
  through its journal and lets go, leaving DIR as clean or unclean as it found it, so a server
  started later catches up exactly as it would have.
A server that holds DIR but has not opened its endpoint yet (it is starting) is said so: run again
once it prints `listening on`.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib import error as urlerror
from urllib import request as urlrequest

from uhp_memories.adapters.dynamodb.apikeys import DynamoKeyRepository, hash_key, new_key_id
from uhp_memories.admin.service import AdminError, KeyInfo, NewKey, check_key_names, key_info, new_key, now

if TYPE_CHECKING:
    from uhp_memories.local.data_dir import DataDir

CONTROL_FILE = "control.json"
CONTROL_PATH = "/keys"
TOKEN_HEADER = "x-uhp-control-token"
# A command's request is a few hundred bytes; anything larger is not one.
MAX_REQUEST_BYTES = 64 * 1024
# How long the command waits for the server's answer (a key is one DynamoDB write on moto).
ANSWER_SECONDS = 30.0


class LocalKeys:
    """create, list and revoke over a local stage's keys table. `forget_answers` drops the answers the
    gateway's authorizer cache holds, so a revoked key is refused at once (a deployed stage refuses it at
    once by deleting its API Gateway key)."""

    def __init__(self, keys: DynamoKeyRepository, forget_answers: Callable[[], None] = lambda: None) -> None:
        self._keys = keys
        self._forget_answers = forget_answers

    def create(self, tenant: str, principal: str | None, groups: Sequence[str]) -> NewKey:
        check_key_names(tenant, principal, groups)
        key_id = new_key_id()
        principal = principal or f"key:{key_id}"
        key = new_key()
        info = KeyInfo(key_id, tenant, principal, tuple(groups), now())
        self._keys.put(hash_key(key), key_id, tenant, principal, groups, created_at=info.created_at)
        return NewKey(key, info)

    def list(self, tenant: str | None) -> list[KeyInfo]:
        keys = [key_info(key) for _, key in self._keys.scan(tenant)]
        return sorted(keys, key=lambda k: (k.created_at, k.key_id))

    def revoke(self, key_id: str) -> KeyInfo:
        found = self._keys.with_id(key_id)
        if not found:
            raise AdminError(f"no key {key_id!r} in this data dir")
        revoked_at = now()
        for key_hash, _ in found:
            self._keys.revoke(key_hash, revoked_at)
        self._forget_answers()
        key = found[0][1]
        return key_info(key, revoked=True, revoked_at=key.revoked_at or revoked_at)

    def run(self, command: str, arguments: Mapping[str, Any]) -> Any:
        """One command as JSON, the same whichever way it reached the keys table."""
        if command == "create":
            groups = arguments.get("groups") or []
            made = self.create(str(arguments["tenant"]), arguments.get("principal"), [str(g) for g in groups])
            return {**made.info.as_dict(), "key": made.key}
        if command == "list":
            return [k.as_dict() for k in self.list(arguments.get("tenant"))]
        if command == "revoke":
            return self.revoke(str(arguments["key_id"])).as_dict()
        raise AdminError(f"unknown keys command {command!r}")


class ControlEndpoint:
    """A running server's door for `keys --data-dir`: see the module's docstring."""

    def __init__(self, data_dir: Path, keys: LocalKeys) -> None:
        self._file = data_dir / CONTROL_FILE
        self._token = secrets.token_urlsafe(32)
        token, run = self._token, keys.run

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                given = self.headers.get(TOKEN_HEADER, "")
                length = int(self.headers.get("Content-Length") or 0)
                if self.path != CONTROL_PATH or not hmac.compare_digest(given.encode(), token.encode()):
                    return self._reply(403, {"error": "not this server's control token"})
                if not 0 < length <= MAX_REQUEST_BYTES:
                    return self._reply(400, {"error": "not a keys command"})
                try:
                    asked = json.loads(self.rfile.read(length))
                    return self._reply(200, {"answer": run(str(asked["command"]), asked.get("arguments") or {})})
                except AdminError as refused:
                    return self._reply(422, {"error": str(refused)})
                except (ValueError, KeyError, TypeError):
                    return self._reply(400, {"error": "not a keys command"})

            def _reply(self, status: int, body: object) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return  # a key is never logged, nor that one was asked for

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{CONTROL_PATH}"

    def start(self) -> ControlEndpoint:
        self._thread.start()
        # Written whole under another name, then renamed: a reader never sees half a file, and it is
        # the owner's only from the start.
        partial = self._file.with_name(CONTROL_FILE + ".partial")
        partial.unlink(missing_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump({"url": self.url, "token": self._token, "pid": os.getpid()}, out)
        partial.replace(self._file)
        return self

    def stop(self) -> None:
        self._file.unlink(missing_ok=True)
        self._server.shutdown()
        self._server.server_close()


def ask_server(data_dir: Path, command: str, arguments: Mapping[str, Any]) -> tuple[bool, Any]:
    """(True, its answer) from the server running on `data_dir`; (False, None) when none answers there
    (no control file, or one a server that stopped uncleanly left behind)."""
    try:
        control = json.loads((data_dir / CONTROL_FILE).read_text())
        url, token = str(control["url"]), str(control["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return False, None
    if not url.startswith("http://127.0.0.1:"):  # only ever the loopback address a server wrote
        return False, None
    body = json.dumps({"command": command, "arguments": dict(arguments)}).encode()
    headers = {TOKEN_HEADER: token, "Content-Type": "application/json"}
    sent = urlrequest.Request(url, data=body, method="POST", headers=headers)  # noqa: S310 (loopback, checked)
    try:
        with urlrequest.urlopen(sent, timeout=ANSWER_SECONDS) as response:  # noqa: S310 (loopback, checked)
            return True, json.loads(response.read())["answer"]
    except urlerror.HTTPError as refused:
        try:
            message = json.loads(refused.read())["error"]
        except (ValueError, KeyError, TypeError):
            message = f"the server on {data_dir} answered {refused.code}"
        raise AdminError(str(message)) from None
    except (urlerror.URLError, ConnectionError, TimeoutError):
        return False, None


def run_on_data_dir(path: str, command: str, arguments: Mapping[str, Any]) -> Any:
    """A keys command on a local data dir, through the server running on it or, when none does, on the
    data dir itself."""
    from uhp_memories.local.data_dir import DataDir, DataDirError, DataDirInUse

    data_dir = Path(path).expanduser()
    if not data_dir.is_dir():
        raise AdminError(f"data dir {data_dir} does not exist (`uhp-memories serve --data-dir {data_dir}` makes it)")
    asked, answer = ask_server(data_dir, command, arguments)
    if asked:
        return answer
    try:
        opened = DataDir(data_dir).open()
    except DataDirInUse:
        raise AdminError(
            f"the server on {data_dir} is starting and does not take keys commands yet: run this again once "
            "it prints `listening on`"
        ) from None
    except DataDirError as error:
        raise AdminError(str(error)) from None
    return _run_offline(opened, command, arguments)


def _run_offline(data_dir: DataDir, command: str, arguments: Mapping[str, Any]) -> Any:
    from uhp_memories.local.moto_env import LocalAws

    (data_dir.path / CONTROL_FILE).unlink(missing_ok=True)  # left by a server that did not stop cleanly
    local = LocalAws(data_dir=data_dir)
    try:
        local.start()
        assert local.container is not None
        return LocalKeys(local.container.keys).run(command, arguments)
    finally:
        local.stop()
        # As found: a data dir a server left uncleanly is still caught up by the next server.
        data_dir.close(clean=data_dir.clean_start)


def migrate_data_dir(path: str, *, dry_run: bool) -> dict[str, Any]:
    """`uhp-memories migrate --data-dir DIR`, on the data dir itself: refused while a server runs on it
    (stop it, migrate, start it again), so nothing writes while its items are brought forward."""
    from uhp_memories.adapters.dynamodb.migrate import Migration
    from uhp_memories.adapters.dynamodb.table import DynamoTable
    from uhp_memories.local.data_dir import DataDir, DataDirError, DataDirInUse
    from uhp_memories.local.moto_env import LocalAws

    data_dir = Path(path).expanduser()
    if not data_dir.is_dir():
        raise AdminError(f"data dir {data_dir} does not exist")
    try:
        opened = DataDir(data_dir).open()
    except DataDirInUse:
        raise AdminError(f"a server runs on {data_dir}: stop it, migrate, then start it again") from None
    except DataDirError as error:
        raise AdminError(str(error)) from None
    local = LocalAws(data_dir=opened)
    try:
        local.start()
        assert local.container is not None
        table = DynamoTable(local.container.dynamodb, local.settings.table_name)
        return Migration(table, settle_s=0.0).run(dry_run=dry_run).as_dict()  # moto's indexes are immediate
    finally:
        local.stop()
        opened.close(clean=opened.clean_start)
