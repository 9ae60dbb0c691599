"""The AWS calls each operation makes, counted through the local gateway: DynamoDB, S3 and Step
Functions from botocore's own events on the clients the deployed handlers use, the search index
(OpenSearch in AWS) and the embedder (Bedrock in AWS) at their ports, where each call is one request
to the service in AWS (the OpenSearch adapter answers each port call with one request; Bedrock
embeds one text a call). docs/performance.md shows these counts in a table that this test reads:
a row that no longer matches what an operation does fails here.

Whatever the size of a write or the limit of a recall, the calls stay the same: no store is called
once per hit, per episode or per record (the second test). Issue 18 asked for one round trip per
store; DynamoDB takes two in a remember (the access read, then the transaction) and in a recall
(the access reads, then the read-back of the hits), since the second needs the first's answer:
docs/performance.md says so under the table.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Client
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow

PERFORMANCE = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
SEARCH_PORT_CALLS = ("index", "get", "candidates", "log_around", "similarities", "delete")


@dataclass
class Calls:
    """What the requests made since the last `clear`, by store: `DynamoDB <table>` (operation
    names), `S3`, `Step Functions`, `search index` (port calls) and `embedder` (InvokeModel, one
    per text, as Bedrock embeds)."""

    tables: dict[str, str]
    made: dict[str, Counter[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self.lock:
            self.made = {}

    def count(self, store: str, what: str, times: int = 1) -> None:
        with self.lock:
            self.made.setdefault(store, Counter())[what] += times

    def on_aws_call(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        if service == "dynamodb":
            for table in sorted(_tables_of(params)):
                self.count(f"DynamoDB {self.tables.get(table, table)}", model.name)
        else:
            self.count({"s3": "S3", "stepfunctions": "Step Functions"}.get(service, service), model.name)

    def table(self) -> dict[str, str]:
        """Each store as docs/performance.md writes it: `BatchGetItem + 2 x Query`."""
        return {
            store: " + ".join(_times(n, what) for what, n in sorted(ops.items())) for store, ops in self.made.items()
        }


def _times(n: int, what: str) -> str:
    return what if n == 1 else f"{n} x {what}"


def _tables_of(params: dict[str, Any]) -> set[str]:
    if "TableName" in params:
        return {params["TableName"]}
    if "RequestItems" in params:
        return set(params["RequestItems"])
    if "TransactItems" in params:
        return {next(iter(item.values()))["TableName"] for item in params["TransactItems"]}
    return set()


@pytest.fixture
def calls(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Calls]:
    container = local_aws.container
    assert container is not None
    # The session's stage is shared: a workflow an earlier test started (an erase, a memory's deletion)
    # would be counted as this test's calls if it were still running.
    assert local_aws.wait_for_workflows(120), "an earlier test's workflow did not end"
    settings = container.settings
    counted = Calls(
        {settings.table_name: "main", settings.idempotency_table_name: "idempotency", settings.keys_table_name: "keys"}
    )
    clients = [container.dynamodb, container.files._objects._client, container.removal._workflows._client]
    for client in clients:
        client.meta.events.register("before-parameter-build", counted.on_aws_call, unique_id="count-aws-calls")
    engine = container.recall_engine()
    assert engine is not None
    for name in SEARCH_PORT_CALLS:
        monkeypatch.setattr(engine.index, name, _counting(counted, "search index", name, getattr(engine.index, name)))
    embed = engine.embedder.embed

    def counted_embed(texts: Any) -> Any:
        counted.count("embedder", "InvokeModel", len(texts))  # Bedrock embeds one text a call
        return embed(texts)

    monkeypatch.setattr(engine.embedder, "embed", counted_embed)
    yield counted
    for client in clients:
        client.meta.events.unregister("before-parameter-build", unique_id="count-aws-calls")


def _counting(calls: Calls, store: str, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.count(store, name)
        return method(*args, **kwargs)

    return counted


def documented() -> dict[str, dict[str, str]]:
    """docs/performance.md's table of AWS calls: operation -> store -> calls."""
    text = PERFORMANCE.read_text()
    section = text.split("## AWS calls per operation", 1)[1]
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in section.splitlines():
        if not line.startswith("|"):
            if header:
                break
            continue
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if not header:
            header = cells
        elif not set(cells[0]) <= {"-"}:
            rows[cells[0]] = {store: value for store, value in zip(header[1:], cells[1:], strict=True) if value}
    return rows


def post(client: Client, path: str, body: Any, method: str = "POST", **headers: str) -> dict[str, Any]:
    answer = client.request(method, path, body, headers=headers or None)
    assert answer.status_code in (200, 201), answer.text
    return dict(answer.json())


def test_each_operation_makes_the_aws_calls_the_performance_page_shows(alice: Client, calls: Calls) -> None:
    memory = alice.create_memory("counted")["id"]
    for n in range(12):  # more hits than one page of ten: the read-back is one call whatever the count
        alice.remember(memory, f"Acme's renewal note number {n}: the contract renews in March")
    measured: dict[str, dict[str, str]] = {}

    def measure(operation: str, path: str, body: Any, method: str = "POST", **headers: str) -> dict[str, Any]:
        calls.clear()
        answer = post(alice, path, body, method, **headers)
        measured[operation] = calls.table()
        return answer

    base = f"/v1/memories/{memory}"
    measure("remember", f"{base}/records", {"type": "fact", "content": "Globex prefers email"})
    measure("remember with Idempotency-Key", f"{base}/records", {"type": "fact", "content": "Initech"},
            **{"Idempotency-Key": "counted-1"})
    measure("observe (40 episodes)", f"{base}/observe", {"episodes": [{"content": f"turn {n}"} for n in range(40)]})
    asked = {"query": "When does Acme renew?", "text": "Acme renews"}
    found = measure("recall (query + text)", f"{base}/recall", asked)
    assert len(found["results"]) == 10
    measure("recall (text only)", f"{base}/recall", {"text": "Acme renews"})
    revised = found["results"][0]["record"]["id"]
    revision = measure("revise", f"{base}/records/{revised}", {"content": "Acme renews in April"}, "PATCH")
    measure("forget", f"{base}/records/{revision['id']}", None, "DELETE")
    calls.clear()

    expected = documented()
    assert set(expected) == set(measured), "the table names these operations"
    for operation, stores in measured.items():
        assert stores == expected[operation], operation


def test_no_write_or_recall_calls_a_store_once_per_record(alice: Client, calls: Calls) -> None:
    memory = alice.create_memory("per-record")["id"]
    base = f"/v1/memories/{memory}"
    for size in (5, 40):
        calls.clear()
        post(alice, f"{base}/observe", {"episodes": [{"content": f"episode {n} of {size}"} for n in range(size)]})
        made = calls.made
        assert made["DynamoDB main"] == Counter({"BatchGetItem": 2, "TransactWriteItems": 1})  # access + write
        assert made["search index"] == Counter({"index": 1})
        assert made["embedder"] == Counter({"InvokeModel": size})  # Bedrock embeds one text a call
    for limit in (3, 30):
        calls.clear()
        answer = post(alice, f"{base}/recall", {"query": "episode", "text": "episode", "limit": limit})
        assert len(answer["results"]) == limit
        made = calls.made
        assert made["DynamoDB main"]["BatchGetItem"] == 3  # two for access, one read-back of every hit
        assert "GetItem" not in made["DynamoDB main"]
        assert sum(made["search index"].values()) <= 2
        assert made["embedder"] == Counter({"InvokeModel": 1})
        assert "S3" not in made
        assert "Step Functions" not in made
