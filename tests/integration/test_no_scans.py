"""No request path Scans (issue: every erase Scanned the whole idempotency table, every tenant's kept
answers): a read grows with what the request asked for, never with a table. Every DynamoDB call the
deployed handlers make (the container's client, which Powertools' idempotency store and the authorizer
use too) is watched through botocore's events while the public HTTP API is driven through its request
paths, keyed and not, erase included (its workflow's steps run on the same client).

Also refused: a Query without `Limit` that pages past its first page (a continuation,
`ExclusiveStartKey`, of a Query that asked no `Limit`): such a read reads to the end of what the key
holds, however large. On moto's small tables no page passes 1 MB, so this one can only fail where a
path continues a Query it never bounded.

Scans that remain, outside request paths: `uhp-memories reindex` (admin/reindex.py, a whole-table
rebuild), the admin CLI's key listing (adapters/dynamodb/apikeys.py), local mode's restart
(local/moto_env.py re-arms schedules), and tests' own inspection of the tables."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.integration.conftest import Client
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow


@dataclass
class Watch:
    calls: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_call(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        """Each call's operation and parameters as the caller gave them (before-parameter-build)."""
        with self.lock:
            self.calls.append(model.name)
            if model.name == "Scan":
                self.refused.append(f"Scan of {params.get('TableName')}")
            if model.name == "Query" and "ExclusiveStartKey" in params and "Limit" not in params:
                self.refused.append(f"unbounded Query of {params.get('TableName')} {params.get('IndexName', '')}")


@pytest.fixture
def watch(local_aws: LocalAws) -> Iterator[Watch]:
    container = local_aws.container
    assert container is not None
    watched = Watch()
    client = container.dynamodb  # the handlers', the authorizer's and Powertools' idempotency store's
    client.meta.events.register("before-parameter-build.dynamodb", watched.on_call, unique_id="no-scans")
    try:
        yield watched
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb", unique_id="no-scans")


def ok(answer: Any, *statuses: int) -> dict[str, Any]:
    assert answer.status_code in (statuses or (200, 201)), answer.text[:300]
    return dict(answer.json()) if answer.content else {}


def keyed() -> dict[str, str]:
    return {"Idempotency-Key": "no-scan-" + secrets.token_hex(6)}


def test_no_request_path_scans_or_reads_a_query_to_its_end(alice: Client, bob: Client, watch: Watch) -> None:
    memory = ok(alice.post("/v1/memories", {"name": "watched"}, headers=keyed()))
    base = f"/v1/memories/{memory['id']}"
    ok(alice.get("/v1/memories"))
    ok(alice.get(base))
    ok(alice.put(base, {"description": "watched closely"}, headers=keyed()))
    grant = ok(alice.post(f"{base}/grants", {"principal": "user:bob", "privileges": ["read"]}, headers=keyed()))
    ok(alice.get(f"{base}/grants"))
    first = ok(alice.post(f"{base}/records", {"type": "fact", "content": "Acme renews in March"}))
    remember = (f"{base}/records", {"type": "fact", "content": "Globex prefers email"}, keyed())
    second = ok(alice.post(remember[0], remember[1], headers=remember[2]))
    assert ok(alice.post(remember[0], remember[1], headers=remember[2])) == second  # replayed
    observed = ok(alice.post(f"{base}/observe", {"episodes": [{"content": f"turn {n}"} for n in range(30)]},
                             headers=keyed()))
    ok(alice.get(f"{base}/records", limit=10))
    ok(alice.get(f"{base}/records/{first['id']}"))
    ok(alice.get(f"{base}/records/{first['id']}/history"))
    ok(bob.post(f"{base}/recall", {"query": "When does Acme renew?", "text": "Acme renews"}))
    ok(alice.post(f"{base}/snapshots", {"name": "before"}, headers=keyed()))
    revised = ok(alice.patch(f"{base}/records/{first['id']}", {"content": "Acme renews in April"}, headers=keyed()))
    ok(alice.delete(f"{base}/records/{second['id']}", headers=keyed()))
    ok(alice.delete(f"{base}/grants/{grant['id']}", headers=keyed()))
    erased = ok(alice.post(f"{base}/erase", {"record_ids": [revised["id"], observed["records"][3]["id"]]},
                           headers=keyed()))
    assert revised["id"] in erased["erased"], erased
    ok(alice.get(f"{base}/records", include="all"))
    ok(alice.delete(base, headers=keyed()), 200, 202)

    assert {"Query", "TransactWriteItems", "BatchWriteItem", "GetItem"} <= set(watch.calls)  # it watched
    assert watch.refused == []
