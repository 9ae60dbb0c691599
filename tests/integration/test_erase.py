"""§5.2 erase and memory delete, run as Step Functions workflows (moto runs the ASL files, the real
step handlers run each task). After an erase the text and bytes are found nowhere: not through any
route, and not in a scan of the tables, every S3 object version, or the kept responses."""

from __future__ import annotations

import json
import secrets
import time

import boto3
import pytest

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.domain.removal.model import Retention
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow


def _scan_all(local_aws: LocalAws) -> str:
    """Everything this service keeps, as one string: both tables and every S3 object version. Job
    items are left out: an erase job's report names the ids it erased (ids, never content)."""
    dynamodb = boto3.client("dynamodb", region_name=local_aws.settings.region)
    dump = []
    for table in (local_aws.settings.table_name, local_aws.settings.idempotency_table_name):
        for page in dynamodb.get_paginator("scan").paginate(TableName=table):
            dump.append(json.dumps([i for i in page["Items"] if i.get("entity", {}).get("S") != "job"]))
    s3 = boto3.client("s3", region_name=local_aws.settings.region)
    bucket = local_aws.settings.files_bucket
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for version in page.get("Versions", []):
            body = s3.get_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])["Body"].read()
            dump.append(version["Key"] + body.decode("latin-1"))
    return "\n".join(dump)


def _secret(label: str) -> str:
    return f"{label}-{secrets.token_hex(8)}"


def _poll(client: Client, memory_id: str, job_id: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = client.get(f"/v1/memories/{memory_id}/jobs/{job_id}").json()
        if job["status"] != "running":
            return job
        time.sleep(0.1)
    raise AssertionError("job did not finish")


def test_erase_leaves_nothing_behind(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory("Private")
    derived_memory = alice.create_memory("Summaries")
    first, second, derived_text, keep = _secret("first"), _secret("second"), _secret("derived"), _secret("keep")
    record = alice.post(f"/v1/memories/{memory['id']}/records", {"type": "fact", "content": first},
                        headers={"Idempotency-Key": secrets.token_hex(8)}).json()
    revised = alice.patch(f"/v1/memories/{memory['id']}/records/{record['id']}", {"content": second}).json()
    file_bytes = _secret("filebytes").encode()
    file_id = alice.upload("f.txt", file_bytes)["id"]
    file_record = alice.remember(memory["id"], type="note", content={"file": {"id": file_id}})  # type: ignore[arg-type]
    derived = alice.remember(derived_memory["id"], derived_text, references=[
        {"rel": "derived_from", "memory_id": memory["id"], "record_id": revised["id"]}])
    kept = alice.remember(memory["id"], keep)
    assert alice.post(f"/v1/memories/{memory['id']}/snapshots", {"name": "before"}).status_code == 201
    before = _scan_all(local_aws)
    assert first in before
    assert file_bytes.decode() in before

    answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"], file_record["id"]]})
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert set(report["erased"]) == {record["id"], revised["id"], file_record["id"], derived["id"]}
    assert report["unreachable"] == []  # local mode keeps no backups, streams or snapshots

    after = _scan_all(local_aws)
    for trace in (first, second, derived_text, file_bytes.decode(), record["id"], revised["id"], derived["id"]):
        assert trace not in after
    assert keep in after
    for memory_id, record_id in ((memory["id"], record["id"]), (memory["id"], revised["id"]),
                                 (derived_memory["id"], derived["id"]), (memory["id"], file_record["id"])):
        assert error_code(alice.get(f"/v1/memories/{memory_id}/records/{record_id}")) == "memory_record_not_found"
        assert alice.get(f"/v1/memories/{memory_id}/records/{record_id}/history").status_code == 404
        assert alice.get(f"/v1/memories/{memory_id}/records/{record_id}/content").status_code == 404
    listed = alice.get(f"/v1/memories/{memory['id']}/records", include="all").json()["data"]
    assert [r["id"] for r in listed] == [kept["id"]]
    as_of = alice.get(f"/v1/memories/{memory['id']}/records", as_of="before", include="all").json()["data"]
    assert [r["id"] for r in as_of] == [kept["id"]]
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == 1
    assert alice.get(f"/v1/memories/{derived_memory['id']}").json()["records"]["count"] == 0


def test_erase_by_filter(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory("Accounts")
    gone, stays = _secret("acme"), _secret("globex")
    alice.remember(memory["id"], gone, attributes={"account": "acme"})
    alice.remember(memory["id"], stays, attributes={"account": "globex"})
    answer = alice.post(f"/v1/memories/{memory['id']}/erase",
                        {"filters": {"field": "attributes.account", "op": "eq", "value": "acme"}})
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["erased"]) == 1
    after = _scan_all(local_aws)
    assert gone not in after
    assert stays in after


def test_derived_records_in_memories_the_caller_cannot_see_are_counted_not_named(
    alice: Client, make_client: ClientFactory
) -> None:
    memory = alice.create_memory("Shared")
    source = alice.remember(memory["id"], "source")
    bob = make_client("user:bob")
    alice.grant(memory["id"], "user:bob", "read")
    bobs = bob.create_memory("Bob's notes")
    derived = bob.remember(bobs["id"], "bob's copy", references=[
        {"rel": "derived_from", "memory_id": memory["id"], "record_id": source["id"]}])
    report = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [source["id"]]}).json()
    assert report["erased"] == [source["id"]]
    assert report["erased_elsewhere"] == 1
    assert bob.get(f"/v1/memories/{bobs['id']}/records/{derived['id']}").status_code == 404


def test_copies_beyond_reach_in_memories_the_caller_cannot_see_are_counted_not_named(
    alice: Client, make_client: ClientFactory, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§5.2: an empty `unreachable` is a guarantee, so a copy the erase could not remove is reported even
    where the caller may not see its memory: counted per place, never named (the record, its memory).
    They were dropped, and the report read as a guarantee it was not (issue 36). The stage keeps its
    table's stream here, so every erased version has a copy beyond reach."""
    assert local_aws.container is not None
    monkeypatch.setattr(local_aws.container.removal, "_retention", Retention(stream_enabled=True))
    memory = alice.create_memory("Shared")
    source = alice.remember(memory["id"], "source")
    bob = make_client("user:bob")
    alice.grant(memory["id"], "user:bob", "read")
    bobs = bob.create_memory("Bob's notes")
    copies = [bob.remember(bobs["id"], f"bob's copy {n}", references=[
        {"rel": "derived_from", "memory_id": memory["id"], "record_id": source["id"]}]) for n in range(2)]

    answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [source["id"]]})
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert (report["erased"], report["erased_elsewhere"]) == ([source["id"]], 2)
    assert {(u["record_id"], u["count"], u["where"]) for u in report["unreachable"]} == {
        (source["id"], 1, "dynamodb_stream"), (None, 2, "dynamodb_stream")}
    assert len(report["unreachable"]) == 2
    assert all(u["until"] and u["reason"] for u in report["unreachable"])
    for hidden in (bobs["id"], *(c["id"] for c in copies)):
        assert hidden not in answer.text
    job = alice.get(f"/v1/memories/{memory['id']}/jobs/{report['job_id']}").json()
    assert job["unreachable"] == report["unreachable"]


def test_erase_needs_delete_and_names_records_of_this_memory(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("M")
    other = alice.create_memory("Other")
    record = alice.remember(memory["id"], "x")
    foreign = alice.remember(other["id"], "y")
    writer = make_client("user:writer")
    alice.grant(memory["id"], "user:writer", "read", "write")
    path = f"/v1/memories/{memory['id']}/erase"
    assert error_code(writer.post(path, {"record_ids": [record["id"]]})) == "memory_forbidden"
    assert error_code(make_client("user:nobody").post(path, {"record_ids": [record["id"]]})) == "memory_not_found"
    assert error_code(alice.post(path, {"record_ids": [foreign["id"]]})) == "memory_record_not_found"
    assert error_code(alice.post(path, {})) == "memory_invalid"
    both = {"record_ids": [record["id"]], "filters": {"field": "type", "op": "eq", "value": "fact"}}
    assert error_code(alice.post(path, both)) == "memory_invalid"
    assert error_code(alice.post(path, {"filters": {"field": "bogus", "op": "eq", "value": 1}})) == "memory_invalid"
    assert alice.get(f"/v1/memories/{memory['id']}/records/{record['id']}").status_code == 200


def test_a_step_that_fails_once_is_retried(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory("M")
    record = alice.remember(memory["id"], _secret("retry"))
    local_aws.fail_step("erase_records", 1)
    answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"]]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["erased"] == [record["id"]]
    assert record["content"] not in _scan_all(local_aws)


def test_a_step_that_keeps_failing_ends_in_a_failed_job_with_an_honest_report(
    alice: Client, local_aws: LocalAws, workflows_answer_at_once: None
) -> None:
    memory = alice.create_memory("M")
    record = alice.remember(memory["id"], "stays until a later erase succeeds")
    local_aws.fail_step("erase_records", 10)
    try:
        answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"]]})
        assert answer.status_code == 202, answer.text
        job = _poll(alice, memory["id"], answer.json()["job"]["id"])
    finally:
        local_aws.fail_step("erase_records", 0)
    assert job["status"] == "failed"
    assert job["erased"] == []
    assert [u["record_id"] for u in job["unreachable"]] == [record["id"]]
    assert job["unreachable"][0]["where"] == "uhp_memories"
    # Nothing claims success, and a new erase of the same record finishes the work.
    again = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"]]})
    assert again.status_code == 202
    finished = _poll(alice, memory["id"], again.json()["job"]["id"])
    assert finished["status"] == "completed"
    assert finished["erased"] == [record["id"]]


def test_a_long_erase_answers_202_with_a_job(alice: Client, workflows_answer_at_once: None) -> None:
    memory = alice.create_memory("M")
    record = alice.remember(memory["id"], "x")
    answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"]]})
    assert answer.status_code == 202
    job = _poll(alice, memory["id"], answer.json()["job"]["id"])
    assert job["status"] == "completed"
    assert job["erased"] == [record["id"]]
    assert job["unreachable"] == []


def test_delete_removes_the_subtree_its_records_and_files(alice: Client, local_aws: LocalAws) -> None:
    root = alice.create_memory("Root")
    child = alice.create_memory("Child", parent_id=root["id"])
    text, data = _secret("child-text"), _secret("child-bytes").encode()
    alice.remember(child["id"], text)
    alice.remember(child["id"], type="note", content={"file": {"id": alice.upload("f.txt", data)["id"]}})  # type: ignore[arg-type]
    answer = alice.delete(f"/v1/memories/{root['id']}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"] is True
    for memory_id in (root["id"], child["id"]):
        assert alice.get(f"/v1/memories/{memory_id}").status_code == 404
    after = _scan_all(local_aws)
    assert text not in after
    assert data.decode() not in after
    assert child["id"] not in after


def test_delete_is_hidden_at_once_and_finishes_in_the_workflow(alice: Client, workflows_answer_at_once: None) -> None:
    memory = alice.create_memory("M")
    alice.remember(memory["id"], "x")
    answer = alice.delete(f"/v1/memories/{memory['id']}")
    assert answer.status_code == 202
    assert alice.get(f"/v1/memories/{memory['id']}").status_code == 404
    job = _poll(alice, memory["id"], answer.json()["job"]["id"])
    assert job["status"] == "completed"


def test_a_running_erase_makes_delete_and_move_busy(
    alice: Client, local_aws: LocalAws, workflows_answer_at_once: None
) -> None:
    memory = alice.create_memory("M")
    target = alice.create_memory("Target")
    record = alice.remember(memory["id"], "x")
    local_aws.fail_step("erase_records", 2)  # two retries: the erase holds the memory for seconds
    answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"]]})
    assert answer.status_code == 202
    assert error_code(alice.delete(f"/v1/memories/{memory['id']}")) == "memory_busy"
    assert error_code(alice.put(f"/v1/memories/{memory['id']}", {"parent_id": target["id"]})) == "memory_busy"
    assert _poll(alice, memory["id"], answer.json()["job"]["id"])["status"] == "completed"
    assert alice.delete(f"/v1/memories/{memory['id']}").status_code in (200, 202)



def test_a_run_below_makes_an_ancestors_delete_and_move_busy(
    alice: Client, local_aws: LocalAws, workflows_answer_at_once: None
) -> None:
    """A run holds its memory against a delete or a move of any memory above it too, decided by the
    write itself (issue 36: the check used to come before the write, with a gap between), and the
    answer names only the memory acted on."""
    top = alice.create_memory("Top")
    child = alice.create_memory("Child", parent_id=top["id"])
    target = alice.create_memory("Target")
    record = alice.remember(child["id"], "kept while the run holds it")
    local_aws.fail_step("erase_records", 2)  # two retries: the erase holds the child for seconds
    answer = alice.post(f"/v1/memories/{child['id']}/erase", {"record_ids": [record["id"]]})
    assert answer.status_code == 202
    deleted = alice.delete(f"/v1/memories/{top['id']}")
    assert error_code(deleted) == "memory_busy"
    assert child["id"] not in deleted.text
    assert error_code(alice.put(f"/v1/memories/{top['id']}", {"parent_id": target["id"]})) == "memory_busy"
    for memory_id in (top["id"], child["id"]):  # nothing was hidden
        assert alice.get(f"/v1/memories/{memory_id}").status_code == 200
    assert alice.get(f"/v1/memories/{top['id']}").json()["parent_id"] is None
    assert alice.put(f"/v1/memories/{top['id']}", {"name": "Renamed"}).status_code == 200  # a rename is no move
    assert _poll(alice, child["id"], answer.json()["job"]["id"])["status"] == "completed"
    assert alice.put(f"/v1/memories/{top['id']}", {"parent_id": target["id"]}).status_code == 200
    assert alice.delete(f"/v1/memories/{top['id']}").status_code in (200, 202)


def test_a_job_is_read_only_through_the_memory_it_belongs_to(
    alice: Client, make_client: ClientFactory, workflows_answer_at_once: None
) -> None:
    memory, other = alice.create_memory("M"), alice.create_memory("Other")
    record = alice.remember(memory["id"], "x")
    answer = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [record["id"]]})
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job"]["id"]
    assert _poll(alice, memory["id"], job_id)["status"] == "completed"
    # The same job through another memory of the same caller, an unknown job, another caller: not found.
    for client, memory_id, job in ((alice, other["id"], job_id), (alice, memory["id"], "hjob_" + "0" * 32),
                                   (make_client("user:bob"), memory["id"], job_id)):
        refused = client.get(f"/v1/memories/{memory_id}/jobs/{job}")
        assert refused.status_code == 404, refused.text
        assert error_code(refused) in ("memory_job_not_found", "memory_not_found")
    assert error_code(alice.get(f"/v1/memories/{other['id']}/jobs/{job_id}")) == "memory_job_not_found"
