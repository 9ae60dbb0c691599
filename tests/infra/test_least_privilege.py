"""Least privilege, held to what each function really does.

Every route of uhp_memories/api/routes.py is served through the local gateway (the deployed handlers,
unchanged, on moto), and everything each function asks of AWS is recorded: botocore's own calls on
every client (DynamoDB, S3 and its presigned addresses, Step Functions, Scheduler), and the calls at
the search index and embedder ports (OpenSearch and Bedrock in AWS). A call is the function's whose
handler is running (its request, and the threads it hands work to); a workflow step's calls are the
step's. Each OpenSearch port call is also replayed on the real OpenSearch adapter, over real HTTP, to
a server that records what it is sent (method and path) and answers as a domain would: what each
function would send to the domain.

Then each function's role in the synthesized production stage is held to that record:

- enough: every action on every resource the function used is allowed by its role;
- no more: its role reaches a store (a table, the files bucket, the recall index, the embedding
  model, a workflow, the schedules) only if the function used it, and writes it only if the function
  wrote it. A function that only reads gets no write or delete on a table and no ESHttpPut, _bulk or
  _delete_by_query on the domain.

The expectations come from the record, never from a list written here: a function that starts to
write where it only read fails the first check until its catalog entry (infra/catalog.py) says so, and
one that stops writing fails the second. Every request but a GET carries an Idempotency-Key, as
clients may, so the idempotency table is held to what make_handler does with one (it keeps the
answer of a request that may write, never a read's, by POST or not).
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import re
import secrets
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")

from infra.catalog import FUNCTION_ACCESS
from tests.infra.attribution import Attribution, attribute_calls
from tests.infra.conftest import Synth, as_list, render
from tests.integration.conftest import Client, answering_at_once, purge_tenant
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, KEYS_TABLE, MAIN_TABLE
from uhp_memories.adapters.opensearch import OpenSearchIndex, connect
from uhp_memories.adapters.opensearch.free_query import FreeQueries
from uhp_memories.api.routes import FUNCTIONS, ROUTES
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws

INDEX = "uhp-recall-v1"  # the production stage's search.index_name
SEARCH_PORT = ("index", "get", "delete", "delete_memory", "candidates", "mentioned", "similarities", "log_around")
ADMINS = "group:admins"  # who may register a tenant's types (domain/types/service.py)

# -- what a call needs -----------------------------------------------------------------------------

Permission = tuple[str, str]  # (IAM action, resource as a key: table:main, files/*, search:/_bulk, ...)


@dataclass(frozen=True)
class Names:
    """The local stage's resource names, as the keys the template's resources render to."""

    tables: dict[str, str]  # table name -> main | keys | idempotency
    workflows: dict[str, str]  # state machine name -> workflow

    def table(self, name: str) -> str:
        return f"table:{self.tables[name]}"


def dynamodb_permissions(operation: str, params: dict[str, Any], names: Names) -> set[Permission]:
    if operation == "TransactWriteItems":
        kinds = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                 "ConditionCheck": "ConditionCheckItem"}
        return {
            (f"dynamodb:{kinds[kind]}", names.table(item["TableName"]))
            for entry in params["TransactItems"] for kind, item in entry.items()
        }
    if operation == "TransactGetItems":
        return {("dynamodb:GetItem", names.table(entry["Get"]["TableName"])) for entry in params["TransactItems"]}
    if "RequestItems" in params:
        return {(f"dynamodb:{operation}", names.table(table)) for table in params["RequestItems"]}
    resource = names.table(params["TableName"])
    if params.get("IndexName"):
        resource += f"/index/{params['IndexName']}"
    return {(f"dynamodb:{operation}", resource)}


def s3_permissions(operation: str, params: dict[str, Any]) -> set[Permission]:
    versioned = "Version" if params.get("VersionId") else ""
    if operation in ("GetObject", "HeadObject"):
        return {(f"s3:GetObject{versioned}", "files/*")}
    if operation == "PutObject":
        return {("s3:PutObject", "files/*")}
    if operation == "CopyObject":
        source = params["CopySource"]
        read = "s3:GetObjectVersion" if isinstance(source, dict) and source.get("VersionId") else "s3:GetObject"
        return {("s3:PutObject", "files/*"), (read, "files/*")}
    if operation in ("DeleteObject", "DeleteObjects"):
        objects = params["Delete"]["Objects"] if operation == "DeleteObjects" else [params]
        return {("s3:DeleteObjectVersion" if o.get("VersionId") else "s3:DeleteObject", "files/*") for o in objects}
    if operation == "ListObjectVersions":
        return {("s3:ListBucketVersions", "files")}
    raise AssertionError(f"no IAM mapping for s3 {operation}: add it here")


def states_permissions(operation: str, params: dict[str, Any], names: Names) -> set[Permission]:
    if operation == "StartExecution":
        return {("states:StartExecution", f"workflow:{names.workflows[params['stateMachineArn'].split(':')[-1]]}")}
    if operation == "DescribeExecution":
        machine = params["executionArn"].split(":")[-2]
        return {("states:DescribeExecution", f"executions:{names.workflows[machine]}")}
    raise AssertionError(f"no IAM mapping for states {operation}: add it here")


def permissions_of(service: str, operation: str, params: dict[str, Any], names: Names) -> set[Permission]:
    if service == "dynamodb":
        return dynamodb_permissions(operation, params, names)
    if service == "s3":
        return s3_permissions(operation, params)
    if service == "stepfunctions":
        return states_permissions(operation, params, names)
    if service == "scheduler":
        # Creating or updating a schedule passes Scheduler the role it invokes the timer with.
        passes = operation in ("CreateSchedule", "UpdateSchedule")
        return {(f"scheduler:{operation}", "schedules")} | ({("iam:PassRole", "schedules-role")} if passes else set())
    return set()  # moto's own (IAM, Lambda of the local stage): nothing a deployed function calls


# -- the record ------------------------------------------------------------------------------------


class Recorder(Attribution):
    """What each function (and step) did, as the permissions it needed."""

    def __init__(self, names: Names) -> None:
        super().__init__()
        self.names = names
        self.used: defaultdict[str, set[Permission]] = defaultdict(set)
        self.lock = threading.Lock()

    def add(self, permissions: set[Permission], who: str | None = None) -> None:
        who = who or self.who()
        if who is not None and permissions:
            with self.lock:
                self.used[who] |= permissions


class RecordingDomain(BaseHTTPRequestHandler):
    """What an OpenSearch domain is sent, each request answered as a domain holding the recall index
    (created, the local embedder's model recorded in its mapping) and no documents."""

    requests: list[tuple[str, str]]
    meta: dict[str, Any]

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.requests.append((self.command, path))
        answer: Any = {}
        if path.endswith("/_mapping"):
            answer = {INDEX: {"mappings": {"_meta": {"uhp": self.meta}}}}
        elif path == "/_msearch":
            # A header line ({"index": ...}) before each search.
            searches = sum(set(json.loads(line)) == {"index"} for line in body.splitlines() if line.strip())
            empty = {"hits": {"total": {"value": 0, "relation": "eq"}, "hits": []}}
            answer = {"responses": [empty for _ in range(searches)]}
        elif path == "/_bulk":
            answer = {"errors": False, "items": []}
        elif path.endswith("/_search"):
            answer = {"hits": {"total": {"value": 0, "relation": "eq"}, "hits": []}, "timed_out": False}
        elif "/_doc/" in path:
            answer = {"found": False}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def domain() -> Iterator[tuple[str, list[tuple[str, str]], dict[str, Any]]]:
    handler = type("Handler", (RecordingDomain,), {"requests": [], "meta": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests, handler.meta
    server.shutdown()


class Shadows:
    """One OpenSearch adapter per function on the recording domain: each port call the embedded index
    answers locally is sent there too, and what it sent is the function's."""

    def __init__(self, url: str, sent: list[tuple[str, str]], recorder: Recorder, model_id: str, dimensions: int):
        self.recorder = recorder
        self._url, self._sent = url, sent
        self._model = (model_id, dimensions)
        self._indexes: dict[str, OpenSearchIndex] = {}
        self._lock = threading.Lock()

    def sent_by(self, who: str | None, work: Callable[[], Any]) -> Any:
        """Run `work`, and record what it sent the domain as `who`'s."""
        with self._lock:  # one at a time: what the domain is sent meanwhile is this work's
            start = len(self._sent)
            try:
                return work()
            finally:
                self.recorder.add({(f"es:ESHttp{m.title()}", f"search:{p}") for m, p in self._sent[start:]}, who)

    def replay(self, who: str | None, method: str, *args: Any, **kwargs: Any) -> None:
        if who is not None:
            if who not in self._indexes:
                model_id, dimensions = self._model
                self._indexes[who] = OpenSearchIndex(connect(self._url), INDEX, model_id=model_id,
                                                     dimensions=dimensions)
            self.sent_by(who, lambda: getattr(self._indexes[who], method)(*args, **kwargs))

    def free_queries(self) -> FreeQueries:
        return RecordedFreeQueries(connect(self._url), INDEX, self)


class RecordedFreeQueries(FreeQueries):
    """Free queries on the recording domain (local mode has none: the embedded index cannot confine a
    statement), so the queries function's free query is sent as in AWS."""

    def __init__(self, client: Any, index_name: str, shadows: Shadows) -> None:
        super().__init__(client, index_name)
        self._shadows = shadows

    def free_query(self, tenant: str, memory_id: str, language: str, statement: Any, limit: int
                   ) -> tuple[list[str], list[str]]:
        run = super().free_query
        return self._shadows.sent_by(
            self._shadows.recorder.who(), lambda: run(tenant, memory_id, language, statement, limit)
        )


@pytest.fixture(scope="module")
def recorder(
    local_aws: LocalAws, domain: tuple[str, list[tuple[str, str]], dict[str, Any]]
) -> Iterator[Recorder]:
    import botocore.client

    container = local_aws.container
    assert container is not None
    settings = container.settings
    machines = {
        arn.split(":")[-1]: name
        for name, arn in (
            ("erase", settings.erase_state_machine_arn), ("delete", settings.delete_state_machine_arn),
            ("consolidate", settings.consolidate_state_machine_arn), ("derive", settings.derive_state_machine_arn),
        )
    }
    names = Names(
        tables={settings.table_name: "main", settings.keys_table_name: "keys",
                settings.idempotency_table_name: "idempotency"},
        workflows=machines,
    )
    record = Recorder(names)
    patches = pytest.MonkeyPatch()

    make_api_call = botocore.client.BaseClient._make_api_call

    def recorded_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
        who = record.who()
        if who is not None:  # not the test's own calls (waiting for workflows, say)
            record.add(permissions_of(client.meta.service_model.service_name, operation, params, names), who)
        return make_api_call(client, operation, params)

    patches.setattr(botocore.client.BaseClient, "_make_api_call", recorded_call)
    presign = container.files._objects._presign  # type: ignore[attr-defined]
    generate = presign.generate_presigned_url

    def recorded_presign(ClientMethod: str, Params: dict[str, Any], **kwargs: Any) -> Any:
        operation = "".join(part.title() for part in ClientMethod.split("_"))
        record.add(s3_permissions(operation, Params))
        return generate(ClientMethod=ClientMethod, Params=Params, **kwargs)

    patches.setattr(presign, "generate_presigned_url", recorded_presign)

    attribute_calls(patches, record)

    engine = container.recall_engine()
    assert engine is not None
    url, sent, meta = domain
    meta.update(model_id=engine.index.model_id, dimensions=engine.index.dimensions)
    shadows = Shadows(url, sent, record, engine.index.model_id, engine.index.dimensions)
    for method in SEARCH_PORT:
        local = getattr(engine.index, method)

        def both(*args: Any, _local: Callable[..., Any] = local, _method: str = method, **kwargs: Any) -> Any:
            answer = _local(*args, **kwargs)
            shadows.replay(record.who(), _method, *args, **kwargs)
            return answer

        patches.setattr(engine.index, method, both)
    embed = engine.embedder.embed

    def embedded(texts: Any) -> Any:
        record.add({("bedrock:InvokeModel", "model:embeddings")})
        return embed(texts)

    patches.setattr(engine.embedder, "embed", embedded)
    patches.setattr(container.queries, "_free_index", shadows.free_queries)
    yield record
    patches.undo()


# -- serving every route ---------------------------------------------------------------------------

CRM_DEAL = {
    "description": "A sales opportunity.",
    "schema": {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
    "text": "Deal with {account}. {content}",
    "operations": [{"name": "close", "description": "Close it.", "requires": "write", "set": {"account": "-"}}],
}
NAMED_QUERY = {"description": "Facts.", "params": {"type": "object", "properties": {}}, "requires": "read",
               "language": "uhp-recall", "body": {"query": "When does Acme renew?", "text": "Acme", "limit": 5}}


@dataclass
class Drive:
    """Serves routes and remembers which it served, and how each answered."""

    owner: Client
    harness: Client
    answered: dict[tuple[str, str], int] = field(default_factory=dict)

    def send(self, client: Client, method: str, route: str, path: str, body: Any = None, ok: tuple[int, ...] = (),
             **headers: str) -> requests.Response:
        if method != "GET":
            headers.setdefault("Idempotency-Key", secrets.token_hex(8))
        answer = client.request(method, path, body, headers=headers)
        expected = ok or (200, 201, 202, 204)
        assert answer.status_code in expected, f"{method} {route}: {answer.status_code} {answer.text[:500]}"
        self.answered[(method, route)] = answer.status_code
        return answer

    def __call__(self, method: str, route: str, body: Any = None, ok: tuple[int, ...] = (),
                 client: Client | None = None, **ids: str) -> Any:
        answer = self.send(client or self.owner, method, route, route.format(**ids), body, ok)
        return answer.json() if answer.headers.get("Content-Type", "").startswith("application/json") else None

    def upload(self, name: str, data: bytes) -> str:
        """POST /v1/files, multipart as curl -F sends it."""
        owner = self.owner
        answer = owner.session.post(owner.base_url + "/v1/files", files={"file": (name, data, "text/plain")},
                                    headers={"x-api-key": owner.key, "Idempotency-Key": secrets.token_hex(8)},
                                    timeout=30)
        assert answer.status_code == 201, answer.text
        self.answered[("POST", "/v1/files")] = answer.status_code
        return str(answer.json()["id"])


def mcp(drive: Drive, memory_id: str) -> None:
    """The agent's tools: remember, then recall (POST /mcp, stateless JSON-RPC)."""
    calls = [("memory_remember", {"memory_id": memory_id, "content": "Initech renews in May.", "type": "fact"}),
             ("memory_recall", {"memory_id": memory_id, "query": "When does Initech renew?"})]
    for number, (tool, arguments) in enumerate(calls, 1):
        message = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}}
        answer = drive.send(drive.harness, "POST", "/mcp", "/mcp", message,
                            Accept="application/json, text/event-stream")
        result = answer.json()
        assert "error" not in result, result
        assert not result["result"].get("isError"), result


def serve_every_route(drive: Drive, local_aws: LocalAws) -> None:
    m = "/v1/memories/{memory_id}"
    r = m + "/records/{record_id}"
    drive("GET", "/v1/capabilities")
    drive("GET", "/v1/memories/providers")
    drive("GET", "/v1/memories/types")
    drive("PUT", "/v1/memories/types/{type_name}", CRM_DEAL, type_name="x.crm.deal")
    memory = drive("POST", "/v1/memories", {"name": "least privilege"})["id"]
    ids = {"memory_id": memory}
    drive("GET", "/v1/memories")
    drive("GET", m, **ids)
    drive("PUT", m, {"description": "what the functions are held to"}, **ids)
    grant = drive("POST", m + "/grants", {"principal": "user:bob", "privileges": ["read"]}, **ids)["id"]
    drive("GET", m + "/grants", **ids)
    drive("DELETE", m + "/grants/{grant_id}", grant_id=grant, **ids)
    record = drive("POST", m + "/records", {"type": "fact", "content": "Acme renews in March."}, **ids)["id"]
    drive("GET", m + "/records", **ids)
    drive("GET", r, record_id=record, **ids)
    revised = drive("PATCH", r, {"content": "Acme renews in April."}, record_id=record, **ids)["id"]
    drive("GET", r + "/history", record_id=revised, **ids)
    forgotten = drive("POST", m + "/records", {"type": "fact", "content": "Globex left."}, **ids)["id"]
    drive("DELETE", r, record_id=forgotten, **ids)
    drive("PUT", m + "/prime", {"record_ids": [revised]}, **ids)
    drive("GET", m + "/prime", **ids)
    drive("POST", m + "/records", {"type": "note", "content": "# Plan\nAcme first.", "path": "notes/plan.md"}, **ids)
    drive("GET", m + "/paths", **ids)
    drive("GET", m + "/changes", **ids)
    drive("POST", m + "/grep", {"pattern": "Acme"}, **ids)
    drive("POST", m + "/snapshots", {"name": "before"}, **ids)
    drive("GET", m + "/snapshots", **ids)
    drive("POST", m + "/recall", {"query": "When does Acme renew?"}, **ids)
    drive("PUT", m + "/queries/{name}", NAMED_QUERY, name="facts", **ids)
    drive("GET", m + "/queries", **ids)
    drive("POST", m + "/queries/{name}", {"params": {}}, name="facts", **ids)
    drive("POST", m + "/query", {"language": "opensearch-dsl", "statement": {"match_all": {}}}, **ids)
    drive("POST", m + "/observe", {"episodes": [{"content": "The customer asked about renewal."}]}, **ids)
    upload = drive.upload("plan.txt", b"Acme renews in April.")
    drive("GET", "/v1/files/{file_id}", file_id=upload)
    held = drive("POST", m + "/records", {"type": "note", "content": {"file": {"id": upload}}}, **ids)["id"]
    drive("GET", r + "/content", record_id=held, **ids)
    task = drive("POST", m + "/records", {"type": "x.task", "content": "call them",
                                          "attributes": {"title": "renew Acme"}}, **ids)["id"]
    drive("POST", r + "/operations/{name}", {}, record_id=task, name="complete", **ids)
    run = drive("POST", m + "/consolidations", {}, **ids)["id"]
    drive("GET", m + "/consolidations", **ids)
    drive("GET", m + "/consolidations/{run_id}", run_id=run, **ids)
    drive("GET", m + "/consolidations/{run_id}/changes", run_id=run, **ids)
    drive("POST", m + "/consolidations/{run_id}/revert", {}, run_id=run, **ids)
    drive("PUT", m + "/consolidation-schedule", {"every_minutes": 60}, **ids)
    drive("GET", m + "/consolidation-schedule", **ids)
    drive("DELETE", m + "/consolidation-schedule", **ids)
    harness = {"harness_id": "h1"}
    drive("PUT", "/v1/harnesses/{harness_id}/memories",
          {"memories": [{"memory_id": memory, "access": "write", "default": True}]}, **harness)
    drive("GET", "/v1/harnesses/{harness_id}/memories", **harness)
    drive("PUT", "/v1/harnesses/{harness_id}/owners", {"owners": [drive.owner.principal]}, **harness)
    drive("GET", "/v1/harnesses/{harness_id}/owners", **harness)
    drive("GET", "/v1/harnesses/{harness_id}/prime", client=drive.harness, **harness)
    drive("POST", "/v1/harnesses/{harness_id}/turns", {"asked": "When?", "answered": "In April."},
          client=drive.harness, **harness)
    mcp(drive, memory)
    doomed = drive("POST", m + "/records", {"type": "fact", "content": "to be erased"}, **ids)["id"]
    with answering_at_once(local_aws):
        job = drive("POST", m + "/erase", {"record_ids": [doomed]}, ok=(202,), **ids)["job"]["id"]
    assert local_aws.wait_for_workflows(120)
    drive("GET", m + "/jobs/{job_id}", job_id=job, **ids)
    spare = drive("POST", "/v1/memories", {"name": "spare"})["id"]
    drive("POST", m + "/records", {"type": "fact", "content": "goes with its memory"}, memory_id=spare)
    drive("DELETE", m, memory_id=spare)
    assert local_aws.wait_for_workflows(120)


@pytest.fixture(scope="module")
def served(local_aws: LocalAws, gateway: LocalGateway, recorder: Recorder) -> dict[str, set[Permission]]:
    """Every route served once, in a tenant of its own; what each function (and step) used."""
    tenant = "t-" + secrets.token_hex(6)
    clients = {}
    for principal, groups in (("user:alice", (ADMINS,)), ("harness:h1", ())):
        key = "k-" + secrets.token_hex(16)
        local_aws.add_keys([KeyEntry(key, tenant, principal, groups)])
        clients[principal] = Client(gateway.url, key, tenant, principal, requests.Session())
    drive = Drive(clients["user:alice"], clients["harness:h1"])
    try:
        serve_every_route(drive, local_aws)
    finally:
        purge_tenant(local_aws, tenant)
    assert set(drive.answered) == {(route.method, route.path) for route in ROUTES}, "serve every route once"
    return dict(recorder.used)


# -- the role of each function, as its resources render --------------------------------------------


def resource_key(synth: Synth, resource: str) -> str:
    """A rendered template resource as the key a recorded call names (table:main, files/*, ...)."""
    logical = {name: kind for kind, spec in (("main", MAIN_TABLE), ("keys", KEYS_TABLE),
                                            ("idempotency", IDEMPOTENCY_TABLE))
               for name, table in synth.of_type("AWS::DynamoDB::Table").items()
               if table["Properties"]["KeySchema"][0]["AttributeName"] == spec.partition_key}
    found = re.fullmatch(r"<([A-Za-z0-9]+)\.(Arn|StreamArn)>(.*)", resource)
    if found:
        name, attribute, rest = found.groups()
        if name in logical:
            return f"table:{logical[name]}{'/stream' if attribute == 'StreamArn' else ''}{rest}"
        kind = synth.resources[name]["Type"]
        if kind == "AWS::IAM::Role" and name.startswith("SchedulesInvokeTimer"):
            return "schedules-role"
        if kind == "AWS::S3::Bucket":
            return "files" + rest
        if kind == "AWS::OpenSearchService::Domain":
            return "search:" + rest
        return f"{kind}{rest}"
    machine = re.fullmatch(r"<([A-Za-z0-9]+)>", resource)
    if machine and synth.resources[machine.group(1)]["Type"] == "AWS::StepFunctions::StateMachine":
        name = synth.resources[machine.group(1)]["Properties"]["StateMachineName"]
        return "workflow:" + name.removeprefix(f"uhp-memories-{synth.stage}-")
    execution = re.search(rf":execution:uhp-memories-{synth.stage}-([a-z_]+):\*$", resource)
    if execution:
        return f"executions:{execution.group(1)}"
    if ":scheduler:" in resource:
        return "schedules"
    if ":foundation-model/" in resource and synth.stack.config.embeddings.model_id in resource:
        return "model:embeddings"
    return resource


def granted(synth: Synth, function_name: str) -> set[Permission]:
    from tests.infra.test_stack import lambda_id

    role = synth.resources[lambda_id(synth, function_name)]["Properties"]["Role"]["Fn::GetAtt"][0]
    pairs = set()
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                pairs |= {(a, resource_key(synth, render(r))) for a in as_list(statement["Action"])
                          for r in as_list(statement["Resource"])}
    return {(a, r) for a, r in pairs if not a.startswith("logs:")}


def allows(grants: set[Permission], needed: Permission) -> bool:
    action, resource = needed
    return any(a == action and fnmatch.fnmatchcase(resource, r) for a, r in grants)


SEARCH_READS = {("es:ESHttpPost", "search:/_msearch"), ("es:ESHttpPost", f"search:/{INDEX}/_search")}
TABLE_READS = {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:Scan"}
FILES_PURGE = {"s3:DeleteObject", "s3:DeleteObjectVersion", "s3:ListBucketVersions"}


def in_store(resource: str, store: str) -> bool:
    if store == "search":
        return resource.startswith("search:")
    if store == "files":
        return resource == "files" or resource.startswith("files/")
    if store.startswith("table:"):
        return resource == store or resource.startswith(f"{store}/index/")
    return resource == store


def level(permissions: set[Permission], store: str) -> str:
    """How far a set of permissions reaches into one store: none, read, write (a table, the index), or
    for the files bucket read, write, purge or purge+write; use (a model, the schedules)."""
    mine = {(a, r) for a, r in permissions if in_store(r, store)}
    actions = {a for a, _ in mine}
    if not mine:
        return "none"
    if store == "search":
        reads = {(a, r) for a, r in mine if a in ("es:ESHttpGet", "es:ESHttpHead")} | (mine & SEARCH_READS)
        return "write" if mine - reads else "read"
    if store.startswith("table:"):
        return "write" if actions - TABLE_READS else "read"
    if store == "files":
        wrote = "write" if "s3:PutObject" in actions else "read"
        return f"purge+{wrote}" if actions & FILES_PURGE else wrote
    return "use"


STORES = ("table:main", "table:keys", "table:idempotency", "files", "search", "model:embeddings", "schedules")


def reach(permissions: set[Permission]) -> dict[str, str]:
    levels = {store: level(permissions, store) for store in STORES}
    levels |= {r: "start" for a, r in permissions if r.startswith("workflow:")}
    return {store: value for store, value in levels.items() if value != "none"}


# -- the checks -----------------------------------------------------------------------------------

SERVED = sorted({*FUNCTIONS, "authorizer"})


@pytest.mark.parametrize("name", SERVED)
def test_each_role_allows_everything_its_function_did(prod: Synth, served: dict[str, set[Permission]], name: str
                                                      ) -> None:
    grants = granted(prod, name)
    missing = sorted(needed for needed in served.get(name, set()) if not allows(grants, needed))

    assert missing == [], f"{name} did what its role does not allow (infra/catalog.py): {missing}"


@pytest.mark.parametrize("name", SERVED)
def test_each_role_reaches_only_the_stores_its_function_used_and_writes_only_what_it_wrote(
    prod: Synth, served: dict[str, set[Permission]], name: str
) -> None:
    assert reach(granted(prod, name)) == reach(served.get(name, set())), name


def test_every_workflow_step_that_ran_was_allowed_what_it_did(prod: Synth, served: dict[str, set[Permission]]) -> None:
    steps = {name: used for name, used in served.items() if name.startswith("steps.")}
    assert {"steps.resolve_erase_targets", "steps.purge_subtree", "steps.consolidate"} <= set(steps)
    for name, used in steps.items():
        grants = granted(prod, name)
        assert [p for p in sorted(used) if not allows(grants, p)] == [], name


def test_the_functions_that_only_read_are_those_whose_record_shows_no_write(served: dict[str, set[Permission]]) -> None:
    """Whatever they are today, the read-only functions are granted no table write and no index write;
    this names them in the failure when one starts or stops writing."""
    readers = sorted(name for name in FUNCTIONS if reach(served.get(name, set())).get("table:main") == "read")
    for name in readers:
        access = FUNCTION_ACCESS[name]
        assert access.main_table == "read", name
        assert access.search in ("", "read"), name
