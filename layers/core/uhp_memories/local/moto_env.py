"""AWS in process, with moto: tables created from the shared definitions, keys loaded hashed."""

from __future__ import annotations

import bisect
import copy
import functools
import json
import os
import secrets
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uhp_memories import bootstrap, workflows
from uhp_memories.adapters.dynamodb.apikeys import hash_key
from uhp_memories.adapters.dynamodb.schema import IDEMPOTENCY_TABLE, KEYS_TABLE, MAIN_TABLE
from uhp_memories.settings import Settings
from uhp_memories.workflows import STEPS, WORKFLOWS


class SerializedClient:
    """A boto3 client whose calls run one at a time. moto's backends are not thread-safe, while real
    DynamoDB makes each call atomic; serializing each call (never a whole request) keeps that
    guarantee and still lets concurrent requests interleave between calls, as they do in AWS."""

    _lock = threading.RLock()

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def serialized(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return serialized


@dataclass(frozen=True)
class KeyEntry:
    key: str
    tenant: str
    principal: str
    groups: tuple[str, ...] = ()


def load_keys_file(path: str | Path) -> list[KeyEntry]:
    """A keys file: {"keys": [{"key", "tenant", "principal", "groups"}]}."""
    data = json.loads(Path(path).read_text())
    entries = []
    for raw in data.get("keys", []):
        entries.append(
            KeyEntry(str(raw["key"]), str(raw["tenant"]), str(raw["principal"]), tuple(raw.get("groups", [])))
        )
    if not entries:
        raise ValueError(f"{path} holds no keys")
    return entries


def dev_key() -> KeyEntry:
    return KeyEntry("uhp_dev_" + secrets.token_hex(16), "dev", "user:dev")


def local_recall_engine() -> Any:
    """The embedded engine (sqlite3 FTS5 + numpy, in memory) with all-MiniLM-L6-v2 on onnxruntime:
    real search and a real embedding model, with nothing to download."""
    from uhp_memories.search.embedded import EmbeddedSearchIndex
    from uhp_memories.search.engine import RecallEngine
    from uhp_memories.search.minilm import MiniLmEmbedder

    embedder = MiniLmEmbedder()
    index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    return RecallEngine(index, embedder)


_FAULTS: dict[str, int] = {}


def _dispatch_step(
    self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
) -> bytes:
    """moto's Lambda invoke, answered by the real step handler in this process."""
    import importlib

    from uhp_memories.local.gateway import LambdaContext

    step = function_name.rsplit(":", 1)[-1].removeprefix("uhp-memories-step-")
    event = json.loads(body) if body else {}
    try:
        if _FAULTS.get(step, 0) > 0:
            _FAULTS[step] -= 1
            raise RuntimeError(f"injected failure of step {step}")
        handler = getattr(importlib.import_module("functions.steps.handler"), step)
        return json.dumps(handler(event, LambdaContext(f"uhp-memories-step-{step}", "local"))).encode()
    except Exception as error:
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": type(error).__name__, "errorMessage": "step failed"}).encode()


def _copy_without_executions(self: Any, memo: dict[int, Any]) -> Any:
    clone = copy.copy(self)
    clone.executions = []
    return clone


def _item_key(table: Any, op: dict[str, Any]) -> tuple[Any, Any] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    key = op.get("Item") or op.get("Key") or {}
    if table.hash_key_attr not in key:
        return None
    range_value = None
    if table.range_key_attr is not None:
        if table.range_key_attr not in key:
            return None
        range_value = DynamoType(key[table.range_key_attr])
    return DynamoType(key[table.hash_key_attr]), range_value


def _restore_item(table: Any, hash_value: Any, range_value: Any, item: Any) -> None:
    if range_value is None:
        if item is None:
            table.items.pop(hash_value, None)
        else:
            table.items[hash_value] = item
    elif item is None:
        table.items.get(hash_value, {}).pop(range_value, None)
    else:
        table.items[hash_value][range_value] = item
        _note_sort_key(table, item)


def _transactions_back_up_items_not_tables() -> None:
    """moto backs up a whole table (copy.deepcopy) for every item of every transaction, to roll a
    failed one back: an observe of 50 episodes copied the table a hundred times, so writing grew
    quadratically with the table (3,435 records took minutes and 17 GB). Back up only the items a
    transaction touches, and put them back if it fails: the same all-or-nothing outcome."""
    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.models.table import Table

    backend = dynamodb_models.DynamoDBBackend
    if getattr(backend.transact_write_items, "items_backed_up", False):
        return
    original = backend.transact_write_items

    class TablesAreNotCopied:
        """The `copy` module as moto's DynamoDB backend sees it: a table copies as itself."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = []
        for entry in transact_items:
            op = next(iter(entry.values()))
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            key = _item_key(table, op)
            if key is not None:
                saved.append((table, *key, copy.deepcopy(table.get_item(*key))))
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, item in reversed(saved):
                _restore_item(table, hash_value, range_value, item)
                _note_item(table, item)
            raise

    transact_write_items.items_backed_up = True  # type: ignore[attr-defined]
    dynamodb_models.copy = TablesAreNotCopied  # type: ignore[assignment]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]


_PARTITIONS = "uhp_index_partitions"


def _table_items(table: Any) -> Iterator[Any]:
    for stored in table.items.values():
        if table.range_key_attr is None:
            yield stored
        else:
            yield from stored.values()


def _note_item(table: Any, item: Any) -> None:
    """Add an item to the index partitions of its table, if they are kept yet (stale entries are
    dropped when read)."""
    partitions = table.__dict__.get(_PARTITIONS)
    if partitions is None or item is None:
        return
    for attribute, by_value in partitions.items():
        value = item.attrs.get(attribute)
        if value is not None:
            by_value.setdefault(value, {})[(item.hash_key, item.range_key)] = None


def _index_partitions(table: Any) -> dict[str, dict[Any, dict[tuple[Any, Any], None]]]:
    partitions = table.__dict__.get(_PARTITIONS)
    if partitions is None:
        hash_attributes = [
            key["AttributeName"] for index in table.global_indexes for key in index.schema if key["KeyType"] == "HASH"
        ]
        partitions = {attribute: {} for attribute in hash_attributes}
        table.__dict__[_PARTITIONS] = partitions
        for item in _table_items(table):
            _note_item(table, item)
    return partitions


_SORT_KEYS = "uhp_sort_keys"


def _sort_keys(table: Any, hash_key: Any) -> list[str] | None:
    """A partition's sort keys in order (None unless they are all strings): built when the partition
    is first queried by sort key, then kept as items are put (keys of deleted items are dropped when
    a query meets them)."""
    by_partition = table.__dict__.setdefault(_SORT_KEYS, {})
    ordered = by_partition.get(hash_key)
    if ordered is None:
        stored = table.items.get(hash_key, {})
        if any(key.type != "S" for key in stored):
            return None
        ordered = by_partition[hash_key] = sorted(key.value for key in stored)
    return ordered


def _note_sort_key(table: Any, item: Any) -> None:
    by_partition = table.__dict__.get(_SORT_KEYS)
    if not by_partition or item is None or item.range_key is None or item.hash_key not in by_partition:
        return
    if item.range_key.type != "S":
        del by_partition[item.hash_key]
        return
    ordered, value = by_partition[item.hash_key], item.range_key.value
    at = bisect.bisect_left(ordered, value)
    if at == len(ordered) or ordered[at] != value:
        ordered.insert(at, value)


def _sort_key_span(comparison: str, values: Sequence[Any]) -> tuple[str | None, str | None, str | None] | None:
    """Where the sort keys a key condition can match lie: (lowest, highest, prefix), None for open;
    None when the condition is not on strings."""
    if not values or any(value.type != "S" for value in values):
        return None
    first, operator = values[0].value, comparison.upper()
    if operator in ("=", "EQ"):
        return first, first, None
    if operator == "BETWEEN" and len(values) == 2:
        return first, values[1].value, None
    if operator in ("<", "<=", "LT", "LE"):
        return None, first, None
    if operator in (">", ">=", "GT", "GE"):
        return first, None, None
    if operator == "BEGINS_WITH":
        return first, None, first
    return None


def _partition_candidates(table: Any, hash_key: Any, arguments: dict[str, Any]) -> list[Any]:
    """The items of one partition whose sort key lies where the query's key condition can match
    (a superset: moto still applies the condition itself). A memory's partition holds its records:
    reading a memory with its grants must not walk 10,000 records, as DynamoDB does not."""
    stored = table.items.get(hash_key)
    if stored is None:
        return []
    if table.range_key_attr is None:
        return [stored]
    comparison = arguments.get("range_comparison")
    span = _sort_key_span(comparison, arguments.get("range_objs") or []) if comparison else None
    ordered = _sort_keys(table, hash_key) if span is not None else None
    if span is None or ordered is None:
        return list(stored.values())
    from moto.dynamodb.models.dynamo_type import DynamoType

    lowest, highest, prefix = span
    found, gone = [], []
    for at in range(bisect.bisect_left(ordered, lowest) if lowest is not None else 0, len(ordered)):
        value = ordered[at]
        if (highest is not None and value > highest) or (prefix is not None and not value.startswith(prefix)):
            break
        item = stored.get(DynamoType({"S": value}))
        if item is None:
            gone.append(value)
        else:
            found.append(item)
    for value in gone:
        ordered.remove(value)
    return found


def _query_candidates(table: Any, arguments: dict[str, Any]) -> list[Any] | None:
    """The items a query can match (None: let moto look at every item)."""
    if not arguments.get("index_name"):
        hash_key = arguments.get("hash_key")
        if hash_key is None:
            return None
        return _partition_candidates(table, hash_key, arguments)
    conditions = arguments.get("hash_key_conditions") or []
    if len(conditions) != 1:
        return None
    attribute, value = conditions[0]
    partitions = _index_partitions(table)
    if attribute not in partitions:
        return None
    keys = partitions[attribute].get(value, {})
    found = []
    for key in list(keys):
        stored = table.items.get(key[0])
        item = stored if table.range_key_attr is None or stored is None else stored.get(key[1])
        current = None if item is None else item.attrs.get(attribute)
        if current is None or current != value:
            del keys[key]  # deleted, or its index key changed since
        else:
            found.append(item)
    return found


def _queries_read_only_what_can_match() -> None:
    """moto answers every query by sorting every item of the table, and a query on a global
    secondary index by then testing each of them: a recall (the caller's grants, the memory's
    children) spent ~350 ms in moto at 10,000 records. Give a query only the items that can match:
    for a table query, those of its partition within its sort key condition (from the partition's
    sort keys, kept in order); for an index query, the items whose index hash key has the value
    asked, from a map kept as items are written and checked again when read. The rest of moto's
    query (key conditions, order, pages, filters, projections) runs unchanged on them."""
    import inspect

    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.models.table import Table

    if getattr(Table.query, "reads_what_can_match", False):
        return
    original_query, original_put = Table.query, Table.put_item
    original_update = dynamodb_models.DynamoDBBackend.update_item
    signature = inspect.signature(original_query)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        candidates = _query_candidates(self, signature.bind(self, *args, **kwargs).arguments)
        if candidates is None:
            return original_query(self, *args, **kwargs)
        self.all_items = lambda: candidates  # calls are serialized (SerializedClient)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            del self.all_items

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = original_put(self, *args, **kwargs)
        _note_item(self, item)
        _note_sort_key(self, item)
        return item

    def update_item(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
        item = original_update(self, table_name, *args, **kwargs)
        _note_item(self.get_table(table_name), item)  # updated in place: its index keys may have changed
        return item

    query.reads_what_can_match = True  # type: ignore[attr-defined]
    Table.query = query  # type: ignore[method-assign]
    Table.put_item = put_item  # type: ignore[method-assign]
    dynamodb_models.DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


FAST_ANSWERS = frozenset({"GetItem", "BatchGetItem", "Query"})


def _item_reads_answer_in_wire_json() -> None:
    """moto builds each DynamoDB answer with a generic serializer driven by the service model, which
    costs more than the read itself (14 of the 18 ms a BatchGetItem of ten records took). The answer
    of an item read is DynamoDB's wire JSON already (items as attribute values, binaries in base64):
    send it as it is. Anything json cannot write goes through moto's serializer, as before."""
    from moto.dynamodb.responses import DynamoResult

    if getattr(DynamoResult.execute_result, "original", None) is not None:
        return
    original = DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        if context.operation_model.name in FAST_ANSWERS:
            try:
                body = json.dumps(self.result, separators=(",", ":"))
            except (TypeError, ValueError):
                return original(self, context)
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return original(self, context)

    execute_result.original = original  # type: ignore[attr-defined]
    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]


class _SizedOnce:
    """A stored item as BatchGetItem sees it: its size computed once (the item does not change
    while a call runs: calls are serialized)."""

    def __init__(self, item: Any) -> None:
        self._item = item
        self._size: int | None = None

    def size(self) -> int:
        if self._size is None:
            self._size = self._item.size()
        return self._size

    def __getattr__(self, name: str) -> Any:
        return getattr(self._item, name)


def _batch_reads_size_each_item_once() -> None:
    """moto's BatchGetItem sizes every item it returns twice (against the 16 MB answer limit), walking
    each attribute: a fifth of recall's read-back of ten records. While one runs, the items it reads
    come sized once; the answer, and the limit, are moto's."""
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.batch_get_item, "sizes_once", False):
        return
    original = DynamoHandler.batch_get_item

    def batch_get_item(self: Any) -> Any:
        backend = self.dynamodb_backend
        read = backend.get_item

        def get_item(*args: Any, **kwargs: Any) -> Any:
            item = read(*args, **kwargs)
            return None if item is None else _SizedOnce(item)

        backend.get_item = get_item  # this backend object only, for this call (calls are serialized)
        try:
            return original(self)
        finally:
            del backend.get_item

    batch_get_item.sizes_once = True  # type: ignore[attr-defined]
    batch_get_item.__wrapped__ = original  # type: ignore[attr-defined]
    DynamoHandler.batch_get_item = batch_get_item  # type: ignore[method-assign]


def _action_names_listed_once() -> None:
    """moto finds the handler of every call by listing its response class's methods anew
    (inspect.getmembers over a few hundred attributes): a tenth of a GetItem. The classes do not
    change while moto runs, so each is listed once."""
    import moto.core.responses as responses

    if hasattr(responses.method_names_from_class, "cache_info"):
        return
    responses.method_names_from_class = functools.lru_cache(maxsize=None)(responses.method_names_from_class)


def speed_up_moto_dynamodb() -> None:
    """Make moto's DynamoDB cost what DynamoDB does (in proportion to the items read or written,
    not to the table) without changing any answer. Idempotent; call it once moto's mock is started."""
    _action_names_listed_once()
    _transactions_back_up_items_not_tables()
    _queries_read_only_what_can_match()
    _item_reads_answer_in_wire_json()
    _batch_reads_size_each_item_once()


class LocalAws:
    """Starts moto, creates the tables and installs a container that uses them."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._mock: Any = None
        self._server: Any = None
        self.container: bootstrap.Container | None = None

    def start(self) -> LocalAws:
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_SESSION_TOKEN", "local"),
            ("AWS_DEFAULT_REGION", self.settings.region),
        ):
            os.environ.setdefault(name, value)
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
        from moto import mock_aws
        from moto.server import ThreadedMotoServer

        # moto runs state machines for real, and hands each Lambda task to `_dispatch_step`.
        self._mock = mock_aws(
            config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        )
        self._mock.start()
        speed_up_moto_dynamodb()
        # A moto server in this process shares the mock's backends: presigned S3 addresses handed
        # to clients point at it, so large uploads and downloads work over real HTTP.
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        s3 = boto3.client("s3", region_name=self.settings.region)
        s3.create_bucket(Bucket=self.settings.files_bucket)
        s3.put_bucket_versioning(Bucket=self.settings.files_bucket, VersioningConfiguration={"Status": "Enabled"})
        presign = boto3.client("s3", region_name=self.settings.region, endpoint_url=f"http://{host}:{port}")
        # Unsigned: moto checks no signature, and signing cost a tenth of every DynamoDB call.
        raw = boto3.client("dynamodb", region_name=self.settings.region, config=Config(signature_version=UNSIGNED))
        for spec, name in (
            (MAIN_TABLE, self.settings.table_name),
            (KEYS_TABLE, self.settings.keys_table_name),
            (IDEMPOTENCY_TABLE, self.settings.idempotency_table_name),
        ):
            # No stream locally: nothing consumes it (records are indexed in process after each
            # commit), and a stream would keep erased content beyond erase's reach.
            raw.create_table(**spec.create_table_kwargs(name, with_stream=False))
        self.settings = self.settings.model_copy(update=self._create_workflows())
        self.container = bootstrap.build(
            self.settings, SerializedClient(raw), SerializedClient(s3), presign,
            boto3.client("stepfunctions", region_name=self.settings.region),
            recall_engine=bootstrap.lazy(local_recall_engine),
        )
        bootstrap.install(self.container)
        return self

    def _create_workflows(self) -> dict[str, str]:
        """Create the step functions in moto's Lambda and the state machines from the ASL files."""
        import boto3
        from moto.awslambda_simple.models import LambdaSimpleBackend
        from moto.stepfunctions.models import StateMachine

        LambdaSimpleBackend.invoke = _dispatch_step  # type: ignore[method-assign]
        # moto deep-copies a state machine for each execution, earlier executions (and their
        # threads' locks) included, so a second execution fails; the copy needs none of them.
        StateMachine.__deepcopy__ = _copy_without_executions  # type: ignore[attr-defined]
        iam = boto3.client("iam", region_name=self.settings.region)
        role = iam.create_role(RoleName="uhp-memories-local", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lambdas = boto3.client("lambda", region_name=self.settings.region)
        arns = {
            step: lambdas.create_function(
                FunctionName=f"uhp-memories-step-{step}", Runtime="python3.12", Role=role,
                Handler=f"functions.steps.handler.{step}", Code={"ZipFile": b"local"},
            )["FunctionArn"]
            for step in STEPS.values()
        }
        sfn = boto3.client("stepfunctions", region_name=self.settings.region)
        machines = {
            name: sfn.create_state_machine(
                name=f"uhp-memories-{name}", definition=workflows.definition(name, arns), roleArn=role
            )["stateMachineArn"]
            for name in WORKFLOWS
        }
        return {f"{name}_state_machine_arn": arn for name, arn in machines.items()}

    def fail_step(self, step: str, times: int) -> None:
        """Make a workflow step fail its next `times` invocations (tests of retries and reports)."""
        _FAULTS[step] = times

    def add_keys(self, entries: Sequence[KeyEntry]) -> None:
        assert self.container is not None
        for entry in entries:
            key_hash = hash_key(entry.key)
            self.container.keys.put(key_hash, "key_" + key_hash[:12], entry.tenant, entry.principal, entry.groups)

    def stop(self) -> None:
        bootstrap.install(None)
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
