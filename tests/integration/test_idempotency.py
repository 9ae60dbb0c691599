"""Idempotency-Key on writes (§5.1 "Every write accepts an Idempotency-Key"): a replay answers the
first answer and writes nothing; a reused key with another body is refused; keys are scoped to the
tenant, the principal, the method and the path."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

import pytest
import requests

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow


def new_key() -> str:
    return "idem-" + secrets.token_hex(8)


def key_header(key: str, name: str = "Idempotency-Key") -> dict[str, str]:
    return {name: key}


def tenant_items(local_aws: LocalAws, tenant: str) -> set[tuple[str, str]]:
    """Every item of the main table that belongs to `tenant` (every key starts with the tenant)."""
    assert local_aws.container is not None
    client = local_aws.container.dynamodb
    found: set[tuple[str, str]] = set()
    kwargs: dict[str, Any] = {
        "TableName": local_aws.settings.table_name,
        "FilterExpression": "begins_with(PK, :t)",
        "ExpressionAttributeValues": {":t": {"S": f"T#{tenant}#"}},
    }
    while True:
        page = client.scan(**kwargs)
        found.update((item["PK"]["S"], item["SK"]["S"]) for item in page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def tenant_item_bodies(local_aws: LocalAws, tenant: str) -> list[dict[str, Any]]:
    assert local_aws.container is not None
    client = local_aws.container.dynamodb
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": local_aws.settings.table_name,
        "FilterExpression": "begins_with(PK, :t)",
        "ExpressionAttributeValues": {":t": {"S": f"T#{tenant}#"}},
    }
    while True:
        page = client.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def same_answer(first: requests.Response, again: requests.Response) -> None:
    assert again.status_code == first.status_code, again.text
    assert again.json() == first.json()
    assert again.headers.get("Content-Type") == first.headers.get("Content-Type")


def records(client: Client, memory_id: str, **params: Any) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/memories/{memory_id}/records", limit=100, **params)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def record_count(client: Client, memory_id: str) -> int:
    answer = client.get(f"/v1/memories/{memory_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()["records"]["count"]


# -- replays -----------------------------------------------------------------------------------


def test_replayed_remember_answers_the_first_answer_and_writes_nothing(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "Acme renews in March", "attributes": {"account": "acme"}}
    key = new_key()
    first = alice.post(path, body, headers=key_header(key))
    assert first.status_code == 201, first.text
    items_before = tenant_item_bodies(local_aws, alice.tenant)

    for _ in range(3):
        same_answer(first, alice.post(path, body, headers=key_header(key)))
    assert tenant_item_bodies(local_aws, alice.tenant) == items_before, "a replay wrote to the table"
    assert [r["id"] for r in records(alice, memory["id"])] == [first.json()["id"]]
    assert record_count(alice, memory["id"]) == 1

    # The replay is the first answer, even after the record moved on.
    revised = alice.patch(f"{path}/{first.json()['id']}", {"content": "Acme renews in April"})
    assert revised.status_code == 200
    items_before = tenant_items(local_aws, alice.tenant)
    same_answer(first, alice.post(path, body, headers=key_header(key)))
    assert tenant_items(local_aws, alice.tenant) == items_before

    # Without the key, the same body is a new record.
    assert alice.post(path, body).status_code == 201
    assert record_count(alice, memory["id"]) == 2


def test_replayed_memory_creation(alice: Client, local_aws: LocalAws) -> None:
    key = new_key()
    first = alice.post("/v1/memories", {"name": "Sales"}, headers=key_header(key))
    assert first.status_code == 201, first.text
    items_before = tenant_items(local_aws, alice.tenant)
    same_answer(first, alice.post("/v1/memories", {"name": "Sales"}, headers=key_header(key)))
    assert tenant_items(local_aws, alice.tenant) == items_before
    roots = alice.get("/v1/memories").json()["data"]
    assert [m["id"] for m in roots] == [first.json()["id"]]


def test_replayed_revise_is_not_a_conflict(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"], "v1")
    path = f"/v1/memories/{memory['id']}/records/{record['id']}"
    key = new_key()
    first = alice.patch(path, {"content": "v2"}, headers=key_header(key))
    assert first.status_code == 200, first.text
    assert first.json()["version"] == 2
    items_before = tenant_item_bodies(local_aws, alice.tenant)
    # Without a key, the same PATCH now names a superseded version.
    stale = alice.patch(path, {"content": "v2"})
    assert stale.status_code == 409
    # With the key, it is the same request again, and gets the same answer.
    same_answer(first, alice.patch(path, {"content": "v2"}, headers=key_header(key)))
    assert tenant_item_bodies(local_aws, alice.tenant) == items_before
    history = alice.get(path + "/history").json()["data"]
    assert [v["version"] for v in history] == [1, 2]


def test_replayed_forget(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    path = f"/v1/memories/{memory['id']}/records/{record['id']}"
    key = new_key()
    first = alice.delete(path, headers=key_header(key))
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "forgotten"
    items_before = tenant_item_bodies(local_aws, alice.tenant)
    same_answer(first, alice.delete(path, headers=key_header(key)))
    assert tenant_item_bodies(local_aws, alice.tenant) == items_before
    assert alice.delete(path).status_code == 409, "without the key it is a second forget"
    assert record_count(alice, memory["id"]) == 0


def test_replayed_snapshot_and_grant(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    key = new_key()
    snapshots = f"/v1/memories/{memory['id']}/snapshots"
    first = alice.post(snapshots, {"name": "s1"}, headers=key_header(key))
    assert first.status_code == 201, first.text
    same_answer(first, alice.post(snapshots, {"name": "s1"}, headers=key_header(key)))
    assert alice.post(snapshots, {"name": "s1"}).status_code == 409, "without the key the name is taken"

    grants = f"/v1/memories/{memory['id']}/grants"
    grant_body = {"principal": "user:bob", "privileges": ["read"]}
    first_grant = alice.post(grants, grant_body, headers=key_header(key))
    assert first_grant.status_code == 201, first_grant.text
    items_before = tenant_items(local_aws, alice.tenant)
    same_answer(first_grant, alice.post(grants, grant_body, headers=key_header(key)))
    assert tenant_items(local_aws, alice.tenant) == items_before
    bob_grants = [g for g in alice.get(grants).json()["data"] if g["principal"] == "user:bob"]
    assert [g["id"] for g in bob_grants] == [first_grant.json()["id"]]


# -- a reused key ------------------------------------------------------------------------------


def test_same_key_with_another_body_is_refused(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    key = new_key()
    first = alice.post(path, {"type": "fact", "content": "one"}, headers=key_header(key))
    assert first.status_code == 201
    items_before = tenant_items(local_aws, alice.tenant)
    for other in (
        {"type": "fact", "content": "two"},
        {"type": "note", "content": "one"},
        {"type": "fact", "content": "one", "attributes": {"a": 1}},
    ):
        answer = alice.post(path, other, headers=key_header(key))
        assert answer.status_code == 422, answer.text
        assert error_code(answer) == "idempotency_key_reused"
    assert tenant_items(local_aws, alice.tenant) == items_before
    # The key still replays its own request.
    same_answer(first, alice.post(path, {"type": "fact", "content": "one"}, headers=key_header(key)))
    assert record_count(alice, memory["id"]) == 1


def test_same_key_with_another_revision_is_refused(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    path = f"/v1/memories/{memory['id']}/records/{record['id']}"
    key = new_key()
    assert alice.patch(path, {"content": "a"}, headers=key_header(key)).status_code == 200
    answer = alice.patch(path, {"content": "b"}, headers=key_header(key))
    assert answer.status_code == 422
    assert error_code(answer) == "idempotency_key_reused"
    assert [v["content"] for v in alice.get(path + "/history").json()["data"]] == ["a fact", "a"]


# -- scope -------------------------------------------------------------------------------------


def test_key_is_scoped_to_the_principal(alice: Client, bob: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory()
    alice.grant(memory["id"], "user:bob", "read", "write")
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "same body"}
    key = new_key()
    by_alice = alice.post(path, body, headers=key_header(key))
    by_bob = bob.post(path, body, headers=key_header(key))
    assert by_alice.status_code == by_bob.status_code == 201
    assert by_alice.json()["id"] != by_bob.json()["id"]
    assert by_bob.json()["written_by"] == {"kind": "user", "id": "bob"}
    # Another body from bob is not "reused": the key is his own.
    assert bob.post(path, {"type": "fact", "content": "bob's other"}, headers=key_header(new_key())).status_code == 201
    # A second API key of the same principal is the same principal: it replays.
    alice_again = make_client("user:alice")
    same_answer(by_alice, alice_again.post(path, body, headers=key_header(key)))
    assert record_count(alice, memory["id"]) == 3


def test_key_is_scoped_to_the_path(alice: Client) -> None:
    one = alice.create_memory("one")
    two = alice.create_memory("two")
    body = {"type": "fact", "content": "same body"}
    key = new_key()
    in_one = alice.post(f"/v1/memories/{one['id']}/records", body, headers=key_header(key))
    in_two = alice.post(f"/v1/memories/{two['id']}/records", body, headers=key_header(key))
    assert in_one.status_code == in_two.status_code == 201
    assert in_one.json()["memory_id"] == one["id"]
    assert in_two.json()["memory_id"] == two["id"]
    assert record_count(alice, one["id"]) == record_count(alice, two["id"]) == 1
    # A different body on a different path is not a reuse either.
    other = alice.post(f"/v1/memories/{two['id']}/snapshots", {"name": "s"}, headers=key_header(key))
    assert other.status_code == 201, other.text


def test_key_is_scoped_to_the_method(alice: Client) -> None:
    memory = alice.create_memory()
    record = alice.remember(memory["id"])
    path = f"/v1/memories/{memory['id']}/records/{record['id']}"
    key = new_key()
    revised = alice.patch(path, {"content": "v2"}, headers=key_header(key))
    assert revised.status_code == 200
    # DELETE on the same path with the same key is its own request: it acts (and finds v1 superseded).
    forget = alice.delete(path, headers=key_header(key))
    assert forget.status_code == 409, forget.text
    assert error_code(forget) == "memory_conflict"
    assert forget.json()["error"]["current_record_id"] == revised.json()["id"]


def test_key_is_scoped_to_the_tenant(alice: Client, make_client: ClientFactory) -> None:
    other = make_client("user:alice", tenant_name="other-" + alice.tenant)
    key = new_key()
    here = alice.post("/v1/memories", {"name": "same"}, headers=key_header(key))
    there = other.post("/v1/memories", {"name": "same"}, headers=key_header(key))
    assert here.status_code == there.status_code == 201
    assert here.json()["id"] != there.json()["id"]
    assert other.get(f"/v1/memories/{here.json()['id']}").status_code == 404


def test_header_name_is_case_insensitive(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "once"}
    key = new_key()
    first = alice.post(path, body, headers=key_header(key, "Idempotency-Key"))
    assert first.status_code == 201
    items_before = tenant_items(local_aws, alice.tenant)
    for name in ("idempotency-key", "IDEMPOTENCY-KEY", "IdEmPoTeNcY-kEy"):
        same_answer(first, alice.post(path, body, headers=key_header(key, name)))
    assert tenant_items(local_aws, alice.tenant) == items_before
    # And the other way round: first lowercase, then canonical.
    key2 = new_key()
    lower = alice.post(path, body, headers=key_header(key2, "idempotency-key"))
    assert lower.status_code == 201
    same_answer(lower, alice.post(path, body, headers=key_header(key2, "Idempotency-Key")))
    assert record_count(alice, memory["id"]) == 2


def test_the_key_value_is_case_sensitive(alice: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "c"}
    first = alice.post(path, body, headers=key_header("Key-ABC-" + secrets.token_hex(4)))
    second = alice.post(path, body, headers=key_header(first.request.headers["Idempotency-Key"].lower()))
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] != second.json()["id"]


def test_reads_are_not_affected_by_a_key(alice: Client) -> None:
    memory = alice.create_memory()
    key = new_key()
    list_path = f"/v1/memories/{memory['id']}/records"
    empty = alice.request("GET", list_path, headers=key_header(key))
    assert empty.status_code == 200
    assert empty.json()["data"] == []
    record = alice.remember(memory["id"])
    now = alice.request("GET", list_path, headers=key_header(key))
    assert now.status_code == 200
    assert [r["id"] for r in now.json()["data"]] == [record["id"]]
    one = alice.request("GET", f"{list_path}/{record['id']}", headers=key_header(key))
    assert one.status_code == 200
    assert one.json()["id"] == record["id"]
    got = alice.request("GET", f"/v1/memories/{memory['id']}", headers=key_header(key))
    assert got.status_code == 200
    assert got.json()["records"]["count"] == 1
    # A GET's key does not take the key for a write either.
    write = alice.post(list_path, {"type": "fact", "content": "after"}, headers=key_header(key))
    assert write.status_code == 201


# -- failures ----------------------------------------------------------------------------------


def test_a_conflict_replays_as_the_same_conflict(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    v1 = alice.remember(memory["id"])
    v2 = alice.patch(f"/v1/memories/{memory['id']}/records/{v1['id']}", {"content": "v2"})
    assert v2.status_code == 200
    key = new_key()
    path = f"/v1/memories/{memory['id']}/records/{v1['id']}"
    first = alice.patch(path, {"content": "stale"}, headers=key_header(key))
    assert first.status_code == 409
    assert error_code(first) == "memory_conflict"
    assert first.json()["error"]["current_record_id"] == v2.json()["id"]
    items_before = tenant_items(local_aws, alice.tenant)
    same_answer(first, alice.patch(path, {"content": "stale"}, headers=key_header(key)))
    assert tenant_items(local_aws, alice.tenant) == items_before


def test_a_refusal_replays_even_once_the_request_could_succeed(alice: Client, bob: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "bob's fact"}
    key = new_key()
    first = bob.post(path, body, headers=key_header(key))
    assert first.status_code == 404
    assert error_code(first) == "memory_not_found"
    alice.grant(memory["id"], "user:bob", "read", "write")
    # The key names that first request: its answer is kept, not recomputed.
    same_answer(first, bob.post(path, body, headers=key_header(key)))
    assert record_count(alice, memory["id"]) == 0
    # A new key is a new request.
    assert bob.post(path, body, headers=key_header(new_key())).status_code == 201
    assert record_count(alice, memory["id"]) == 1


def test_an_invalid_request_replays_as_the_same_refusal(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    key = new_key()
    bad = {"type": "fact", "content": "c", "trust": "trusted"}
    first = alice.post(path, bad, headers=key_header(key))
    assert first.status_code == 422
    assert error_code(first) == "memory_invalid"
    items_before = tenant_items(local_aws, alice.tenant)
    same_answer(first, alice.post(path, bad, headers=key_header(key)))
    assert tenant_items(local_aws, alice.tenant) == items_before
    # A corrected body under the same key is another body: refused, not run.
    answer = alice.post(path, {"type": "fact", "content": "c"}, headers=key_header(key))
    assert answer.status_code == 422
    assert error_code(answer) == "idempotency_key_reused"
    assert record_count(alice, memory["id"]) == 0


def test_key_length(alice: Client) -> None:
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    answer = alice.post(path, {"type": "fact", "content": "c"}, headers=key_header("k" * 256))
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"
    assert record_count(alice, memory["id"]) == 0
    longest = "k" * 250 + secrets.token_hex(2) + "k"
    assert len(longest) == 255
    first = alice.post(path, {"type": "fact", "content": "c"}, headers=key_header(longest))
    assert first.status_code == 201
    same_answer(first, alice.post(path, {"type": "fact", "content": "c"}, headers=key_header(longest)))
    assert record_count(alice, memory["id"]) == 1


def test_a_server_failure_is_not_kept(alice: Client, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5xx is not an answer to replay: the same key runs the request again."""
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "retried"}
    assert local_aws.container is not None
    repository = local_aws.container.ports.records
    real_append = repository.append_first
    calls: list[str] = []

    def fail_the_first_time(record: Any, conditions: Any = ()) -> None:
        calls.append(record.id)
        if len(calls) == 1:
            raise RuntimeError("injected failure")
        real_append(record, conditions)

    monkeypatch.setattr(repository, "append_first", fail_the_first_time)
    key = new_key()
    failed = alice.post(path, body, headers=key_header(key))
    assert failed.status_code == 500, failed.text
    assert error_code(failed) == "internal_error"
    assert "injected" not in failed.text, "an internal message never reaches the client"
    assert record_count(alice, memory["id"]) == 0
    retried = alice.post(path, body, headers=key_header(key))
    assert retried.status_code == 201, retried.text
    assert len(calls) == 2, "the retry ran the request again"
    same_answer(retried, alice.post(path, body, headers=key_header(key)))
    assert len(calls) == 2, "and the success is kept"
    assert record_count(alice, memory["id"]) == 1


def test_a_refusal_after_the_write_committed_is_not_kept(
    alice: Client, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 4xx produced after the write committed (an erase that erased, then failed presenting its report:
    issue 36) was kept and replayed, so a retry was told nothing happened. It is answered once and not
    kept: the retry is answered from the write's marker, 409 idempotency_key_committed with what the
    first attempt wrote, and writes nothing."""
    from uhp_memories.api import presenters, schemas

    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "written, then refused"}

    def fails_presenting(view: Any) -> Any:
        return schemas.UnreachableOut.model_validate({"where": "x"})  # a ValidationError, as the erase's was

    monkeypatch.setattr(presenters, "record", fails_presenting)
    key = new_key()
    first = alice.post(path, body, headers=key_header(key))
    assert (first.status_code, error_code(first)) == (422, "memory_invalid")
    monkeypatch.undo()
    [written] = records(alice, memory["id"])
    items = tenant_item_bodies(local_aws, alice.tenant)
    for _ in range(2):
        again = alice.post(path, body, headers=key_header(key))
        assert again.status_code == 409, again.text
        assert error_code(again) == "idempotency_key_committed"
        assert written["id"] in again.json()["error"]["written_ids"]
        assert tenant_item_bodies(local_aws, alice.tenant) == items, "the retry wrote"
    assert record_count(alice, memory["id"]) == 1


def test_an_answer_too_large_to_keep_is_still_answered(alice: Client) -> None:
    """An answer can exceed what the idempotency store keeps (a DynamoDB item holds 400 KB; 100 KiB of
    quotes is 400 KiB once the answer is escaped twice). The write happened: the caller gets its answer,
    and the key never writes twice."""
    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "note", "content": '"' * (100 * 1024)}
    key = new_key()
    first = alice.post(path, body, headers=key_header(key))
    assert first.status_code == 201, first.text[:200]
    assert first.json()["content"] == body["content"]
    assert record_count(alice, memory["id"]) == 1
    again = alice.post(path, body, headers=key_header(key))
    if again.status_code == 201:
        assert again.json() == first.json()
    else:
        assert again.status_code == 409, again.text[:200]
        assert error_code(again) == "idempotency_in_progress"
    assert record_count(alice, memory["id"]) == 1


# -- a write happens once per key, whatever became of its answer (issue 27) ---------------------


@pytest.fixture
def in_progress_expires_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Powertools holds a key "in progress" for the Lambda's remaining time (29 s behind API Gateway);
    a retry after that ran the request again. Here it expires at once, so a retry comes after it."""
    from uhp_memories.local import gateway as gateway_module

    monkeypatch.setattr(gateway_module.LambdaContext, "get_remaining_time_in_millis", lambda self: 1)


@pytest.fixture
def answers_not_kept(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Keeping an answer fails, as it does for one too large to keep or when the process is killed
    between the commit and the keeping. Lists the keys whose answer was dropped."""
    from uhp_memories.adapters.dynamodb.idempotency import PackedDynamoDBPersistenceLayer

    dropped: list[str] = []

    def fail(self: Any, data_record: Any) -> None:
        dropped.append(data_record.idempotency_key)
        raise RuntimeError("the answer could not be kept")

    monkeypatch.setattr(PackedDynamoDBPersistenceLayer, "_update_record", fail)
    return dropped


def _upload(client: Client, key: str) -> requests.Response:
    """A multipart upload, the same bytes each time (as a client's retry resends them)."""
    body = (b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
            b"Content-Type: text/plain\r\n\r\nbytes\r\n--b0undary--\r\n")
    return client.session.post(client.base_url + "/v1/files", data=body, timeout=30, headers={
        "x-api-key": client.key, "Idempotency-Key": key, "Content-Type": "multipart/form-data; boundary=b0undary"})


# Every kind of write: (name, how to arrange it, then the write itself as (method, path, body)).
WRITES: dict[str, Callable[[Client], tuple[str, str, Any]]] = {
    "remember": lambda c: ("POST", f"/v1/memories/{c.create_memory()['id']}/records",
                           {"type": "fact", "content": "x"}),
    "observe": lambda c: ("POST", f"/v1/memories/{c.create_memory()['id']}/observe",
                          {"episodes": [{"content": "one"}, {"content": "two"}]}),
    "create a memory": lambda c: ("POST", "/v1/memories", {"name": "once"}),
    "create a child": lambda c: ("POST", "/v1/memories", {"name": "child", "parent_id": c.create_memory()["id"]}),
    "grant": lambda c: ("POST", f"/v1/memories/{c.create_memory()['id']}/grants",
                        {"principal": "user:bob", "privileges": ["read"]}),
    "revoke": lambda c: (lambda m: ("DELETE", f"/v1/memories/{m}/grants/{c.grant(m, 'user:bob', 'read')['id']}",
                                    None))(c.create_memory()["id"]),
    "revise": lambda c: (lambda m: ("PATCH", f"/v1/memories/{m}/records/{c.remember(m)['id']}", {"content": "v2"}))(
        c.create_memory()["id"]),
    "forget": lambda c: (lambda m: ("DELETE", f"/v1/memories/{m}/records/{c.remember(m)['id']}", None))(
        c.create_memory()["id"]),
    "snapshot": lambda c: ("POST", f"/v1/memories/{c.create_memory()['id']}/snapshots", {"name": "s"}),
    "rename": lambda c: ("PUT", f"/v1/memories/{c.create_memory()['id']}", {"name": "renamed"}),
    "define a query": lambda c: ("PUT", f"/v1/memories/{c.create_memory()['id']}/queries/q1",
                                 {"description": "by text", "body": {"text": "{{words}}"},
                                  "params": {"type": "object", "properties": {"words": {"type": "string"}}}}),
    "attach": lambda c: (c.claim("h_once"), ("PUT", "/v1/harnesses/h_once/memories", {"memories": [
        {"memory_id": c.create_memory()["id"], "access": "write", "default": True}]}))[-1],
    "erase": lambda c: (lambda m: ("POST", f"/v1/memories/{m}/erase", {"record_ids": [c.remember(m)["id"]]}))(
        c.create_memory()["id"]),
    "delete a memory": lambda c: ("DELETE", f"/v1/memories/{c.create_memory()['id']}", None),
    "consolidate": lambda c: (lambda m: (c.remember(m, "same"), c.remember(m, "same"),
                                         ("POST", f"/v1/memories/{m}/consolidations", {}))[-1])(
        c.create_memory()["id"]),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_retry_of_a_write_whose_answer_was_not_kept_writes_nothing(
    alice: Client, local_aws: LocalAws, in_progress_expires_at_once: None, answers_not_kept: list[str], write: str
) -> None:
    """The write committed and its answer was lost (too large to keep, the process killed after the
    commit): the in-progress mark expires and the retry ran the write again. Now the write's own
    transaction holds the key's marker: the retry is answered from it, 409 idempotency_key_committed
    with the ids written, and writes nothing."""
    method, path, body = WRITES[write](alice)
    key = new_key()
    first = alice.request(method, path, body, headers=key_header(key))
    assert first.status_code in (200, 201), first.text
    assert answers_not_kept, "the answer was kept: the test arranged nothing"
    items = tenant_item_bodies(local_aws, alice.tenant)
    for _ in range(2):
        again = alice.request(method, path, body, headers=key_header(key))
        assert again.status_code == 409, again.text
        assert error_code(again) == "idempotency_key_committed"
        written = again.json()["error"]["written_ids"]
        assert written, again.text
        assert any(i in first.text or i in path for i in written), (written, first.text)
        assert tenant_item_bodies(local_aws, alice.tenant) == items, "the retry wrote"
    other = alice.request(method, path, {"other": "body"} if body is not None else {"x": 1}, headers=key_header(key))
    assert other.status_code == 422, other.text
    assert error_code(other) == "idempotency_key_reused"


def test_an_upload_is_written_once_per_key(
    alice: Client, local_aws: LocalAws, in_progress_expires_at_once: None, answers_not_kept: list[str]
) -> None:
    key = new_key()
    first = _upload(alice, key)
    assert first.status_code == 201, first.text
    items = tenant_item_bodies(local_aws, alice.tenant)
    again = _upload(alice, key)
    assert (again.status_code, error_code(again)) == (409, "idempotency_key_committed"), again.text
    assert again.json()["error"]["written_ids"] == [first.json()["id"]]
    assert tenant_item_bodies(local_aws, alice.tenant) == items


def test_two_attempts_at_once_commit_once(
    alice: Client, local_aws: LocalAws, in_progress_expires_at_once: None, answers_not_kept: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second attempt looked for a marker before the first committed (so it runs), and commits
    after it: its transaction carries the marker on the condition that none is there, so it fails
    whole, and is answered as a retry is."""
    from uhp_memories.adapters.dynamodb.idempotency import WriteKey

    memory = alice.create_memory()
    path = f"/v1/memories/{memory['id']}/records"
    body = {"type": "fact", "content": "raced"}
    key = new_key()
    first = alice.post(path, body, headers=key_header(key))
    assert first.status_code == 201, first.text
    items = tenant_item_bodies(local_aws, alice.tenant)
    real_find = WriteKey.find
    looked: list[str] = []

    def not_yet_the_first_time(self: WriteKey, client: Any) -> Any:
        looked.append(self.id)
        return None if len(looked) == 1 else real_find(self, client)

    monkeypatch.setattr(WriteKey, "find", not_yet_the_first_time)
    second = alice.post(path, body, headers=key_header(key))
    assert len(looked) >= 2, "the second attempt never reached its commit"
    assert (second.status_code, error_code(second)) == (409, "idempotency_key_committed"), second.text
    assert second.json()["error"]["written_ids"] == [first.json()["id"], memory["id"]]
    assert tenant_item_bodies(local_aws, alice.tenant) == items
    assert record_count(alice, memory["id"]) == 1


def test_30_episodes_of_100_kb_retried_are_30_records(alice: Client, local_aws: LocalAws,
                                                      in_progress_expires_at_once: None) -> None:
    """An answer of 3 MB is kept in parts (a DynamoDB item holds 400 KB): the retry, after the
    in-progress mark expired, is answered the first answer, and the memory holds 30 records, not 60.
    (30 x 100 KB is about the most one observe carries: domain/limits.py OBSERVE_BYTES.)"""
    memory = alice.create_memory()
    body = {"episodes": [{"content": secrets.token_hex(50 * 1024)} for _ in range(30)]}
    key = new_key()
    path = f"/v1/memories/{memory['id']}/observe"
    first = alice.post(path, body, headers=key_header(key))
    assert first.status_code == 200, first.text[:300]
    assert len(first.json()["records"]) == 30
    items = tenant_items(local_aws, alice.tenant)
    again = alice.post(path, body, headers=key_header(key))
    assert again.status_code == 200, again.text[:300]
    assert again.content == first.content
    assert tenant_items(local_aws, alice.tenant) == items
    assert record_count(alice, memory["id"]) == 30
    # Erase takes the kept answer with it, every part.
    erased = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [first.json()["records"][7]["id"]]})
    assert erased.status_code == 200, erased.text
    assert not [i for i in idempotency_items(local_aws) if "#part" in i["id"]["S"] or
                first.json()["records"][7]["id"] in i.get("data", {}).get("S", "")]


def idempotency_items(local_aws: LocalAws) -> list[dict[str, Any]]:
    assert local_aws.container is not None
    client = local_aws.container.dynamodb
    found: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": local_aws.settings.idempotency_table_name}
    while True:
        page = client.scan(**kwargs)
        found.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_a_write_marker_holds_ids_never_content(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory()
    secret = "marker-secret-" + secrets.token_hex(4)
    record = alice.post(f"/v1/memories/{memory['id']}/records", {"type": "note", "content": secret,
                        "path": f"notes/{secret}.md"}, headers=key_header(new_key()))
    assert record.status_code == 201, record.text
    markers = [i for i in idempotency_items(local_aws) if i["id"]["S"].startswith("write#")
               and record.json()["id"] in str(i)]
    assert len(markers) == 1
    assert secret not in json.dumps(markers[0])
    assert [v["S"] for v in markers[0]["written"]["L"]] == [record.json()["id"], memory["id"]]


# -- a read is never replayed ----------------------------------------------------------------------


def test_a_recall_replayed_after_its_grant_was_revoked_is_refused(alice: Client, bob: Client) -> None:
    """A recall's answer was kept like a write's, and replayed the content for 24 h after bob lost
    his grant. A read's answer is never kept: with the same key it runs again, with bob's access now."""
    memory = alice.create_memory()
    alice.remember(memory["id"], "the launch is on Friday")
    grant = alice.grant(memory["id"], "user:bob", "read")
    key = new_key()
    path = f"/v1/memories/{memory['id']}/recall"
    first = bob.post(path, {"text": "launch"}, headers=key_header(key))
    assert first.status_code == 200, first.text
    assert "Friday" in first.text
    assert alice.delete(f"/v1/memories/{memory['id']}/grants/{grant['id']}").status_code == 200
    replay = bob.post(path, {"text": "launch"}, headers=key_header(key))
    assert replay.status_code == 404, replay.text
    assert error_code(replay) == "memory_not_found"
    assert "Friday" not in replay.text
    # The other reads a POST carries run again too.
    for read, read_body in ((f"/v1/memories/{memory['id']}/grep", {"pattern": "Friday"}),
                            (f"/v1/memories/{memory['id']}/query",
                             {"language": "cypher", "statement": "MATCH (n) RETURN n"})):
        assert bob.post(read, read_body, headers=key_header(key)).status_code == 404


def test_an_mcp_recall_replayed_after_its_grant_was_revoked_is_refused(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory()
    alice.remember(memory["id"], "the launch is on Friday")
    alice.attach("h_replay", memory["id"], access="read")
    harness = make_client("harness:h_replay")
    key = new_key()
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "memory_recall", "arguments": {"memory_id": memory["id"], "text": "launch"}}}
    headers = {"x-api-key": harness.key, "Idempotency-Key": key, "Accept": "application/json, text/event-stream"}
    first = harness.session.post(harness.base_url + "/mcp", json=call, headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    assert "Friday" in first.text
    grants = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    (harness_grant,) = [g for g in grants if g["principal"] == "harness:h_replay"]
    assert alice.delete(f"/v1/memories/{memory['id']}/grants/{harness_grant['id']}").status_code == 200
    replay = harness.session.post(harness.base_url + "/mcp", json=call, headers=headers, timeout=30)
    assert "Friday" not in replay.text, replay.text
