"""§7 files: upload inline or by presigned PUT, a record whose content is a file, revisions as new
S3 object versions, old bytes readable through history and as_of."""

from __future__ import annotations

import boto3
import pytest
import requests

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow


def _upload(client: Client, name: str, data: bytes, media_type: str = "text/plain") -> dict:
    answer = client.session.post(
        client.base_url + "/v1/files",
        files={"file": (name, data, media_type)},
        headers={"x-api-key": client.key},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def _content(client: Client, memory_id: str, record_id: str, **params: str) -> requests.Response:
    return client.session.get(
        f"{client.base_url}/v1/memories/{memory_id}/records/{record_id}/content",
        params=params, headers={"x-api-key": client.key}, allow_redirects=False, timeout=30,
    )


def test_inline_upload_then_a_file_record_and_its_bytes(alice: Client) -> None:
    uploaded = _upload(alice, "notes.txt", b"first bytes")
    assert uploaded["status"] == "uploaded"
    assert uploaded["bytes"] == len(b"first bytes")
    memory = alice.create_memory("Docs")
    record = alice.remember(memory["id"], type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    file_ref = record["content"]["file"]
    assert file_ref["id"] == uploaded["id"]
    assert file_ref["name"] == "notes.txt"
    assert file_ref["media_type"] == "text/plain"
    assert file_ref["bytes"] == 11
    assert file_ref["version"]
    answer = _content(alice, memory["id"], record["id"])
    assert answer.status_code == 200
    assert answer.content == b"first bytes"
    assert answer.headers["Content-Type"].startswith("text/plain")


def test_revision_with_new_bytes_keeps_the_old_bytes(alice: Client) -> None:
    memory = alice.create_memory("Docs")
    first = _upload(alice, "plan.md", b"version one", "text/markdown")
    record = alice.remember(memory["id"], type="note", content={"file": {"id": first["id"]}})  # type: ignore[arg-type]
    snapshot = alice.post(f"/v1/memories/{memory['id']}/snapshots", {"name": "v1"})
    assert snapshot.status_code == 201
    second = _upload(alice, "plan.md", b"version two, longer", "text/markdown")
    revised = alice.patch(f"/v1/memories/{memory['id']}/records/{record['id']}",
                          {"content": {"file": {"id": second["id"]}}})
    assert revised.status_code == 200, revised.text
    new = revised.json()
    assert new["content"]["file"]["version"] != record["content"]["file"]["version"]
    assert _content(alice, memory["id"], new["id"]).content == b"version two, longer"
    # The old version's bytes, by the old record version and by the file version.
    assert _content(alice, memory["id"], record["id"]).content == b"version one"
    old_version = record["content"]["file"]["version"]
    assert _content(alice, memory["id"], new["id"], version=old_version).content == b"version one"
    # Through as_of: the memory as it stood at the snapshot names the old bytes.
    then = alice.get(f"/v1/memories/{memory['id']}/records", as_of="v1").json()["data"]
    assert [r["content"]["file"]["version"] for r in then] == [old_version]
    history = alice.get(f"/v1/memories/{memory['id']}/records/{new['id']}/history").json()["data"]
    assert [h["content"]["file"]["version"] for h in history] == [old_version, new["content"]["file"]["version"]]
    assert _content(alice, memory["id"], new["id"], version="nope").status_code == 404


def test_nothing_is_overwritten_in_s3(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory("Docs")
    record = alice.remember(memory["id"], type="note",
                            content={"file": {"id": _upload(alice, "a.txt", b"aaa")["id"]}})  # type: ignore[arg-type]
    alice.patch(f"/v1/memories/{memory['id']}/records/{record['id']}",
                {"content": {"file": {"id": _upload(alice, "a.txt", b"bbb")["id"]}}})
    s3 = boto3.client("s3", region_name=local_aws.settings.region)
    prefix = f"t/{alice.tenant}/m/{memory['id']}/"
    versions = s3.list_object_versions(Bucket=local_aws.settings.files_bucket, Prefix=prefix)["Versions"]
    assert len(versions) == 2
    assert len({v["Key"] for v in versions}) == 1


def test_large_file_by_presigned_put(alice: Client) -> None:
    data = b"x" * (5 * 1024 * 1024)  # above the inline limit
    started = alice.post("/v1/files", {"name": "big.bin", "media_type": "application/octet-stream",
                                       "bytes": len(data)})
    assert started.status_code == 201, started.text
    body = started.json()
    assert body["status"] == "pending"
    upload = body["upload"]
    memory = alice.create_memory("Docs")
    early = alice.post(f"/v1/memories/{memory['id']}/records",
                       {"type": "note", "content": {"file": {"id": body["id"]}}})
    assert early.status_code == 422
    put = requests.put(upload["url"], data=data, headers=upload["headers"], timeout=60)
    assert put.status_code == 200
    assert alice.get(f"/v1/files/{body['id']}").json()["status"] == "uploaded"
    record = alice.remember(memory["id"], type="note", content={"file": {"id": body["id"]}})  # type: ignore[arg-type]
    answer = _content(alice, memory["id"], record["id"])
    assert answer.status_code == 302
    download = requests.get(answer.headers["Location"], timeout=60)
    assert download.status_code == 200
    assert download.content == data


def test_files_are_private_to_their_uploader_and_content_needs_read(alice: Client, make_client: ClientFactory) -> None:
    uploaded = _upload(alice, "secret.txt", b"s")
    bob = make_client("user:bob")
    assert error_code(bob.get(f"/v1/files/{uploaded['id']}")) == "file_not_found"
    memory = bob.create_memory("Bob's")
    answer = bob.post(f"/v1/memories/{memory['id']}/records",
                      {"type": "note", "content": {"file": {"id": uploaded["id"]}}})
    assert answer.status_code == 404
    mine = alice.create_memory("Alice's")
    record = alice.remember(mine["id"], type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    assert _content(bob, mine["id"], record["id"]).status_code == 404
    text = alice.remember(mine["id"], content="plain text")
    assert _content(alice, mine["id"], text["id"]).status_code == 422


def test_a_forgotten_files_bytes_leave_every_read_but_historys(alice: Client) -> None:
    """§5.2: a forgotten record leaves every read that does not ask for history, its bytes included,
    by any version's id or file version; include=all (history's view, as on GET record) still reads
    them, since forget keeps the trace and only erase removes content (issue 36)."""
    memory = alice.create_memory("Docs")["id"]
    first = _upload(alice, "plan.md", b"version one", "text/markdown")
    record = alice.remember(memory, type="note", content={"file": {"id": first["id"]}})  # type: ignore[arg-type]
    second = _upload(alice, "plan.md", b"version two", "text/markdown")
    revised = alice.patch(f"/v1/memories/{memory}/records/{record['id']}",
                          {"content": {"file": {"id": second["id"]}}}).json()
    old_version = record["content"]["file"]["version"]
    forgotten = alice.delete(f"/v1/memories/{memory}/records/{revised['id']}")
    assert forgotten.json()["status"] == "forgotten"

    for read in (_content(alice, memory, revised["id"]), _content(alice, memory, record["id"]),
                 _content(alice, memory, revised["id"], version=old_version)):
        assert read.status_code == 404, read.content
        assert error_code(read) == "memory_record_not_found"
        assert b"version" not in read.content
    assert _content(alice, memory, revised["id"], include="all").content == b"version two"
    assert _content(alice, memory, record["id"], include="all").content == b"version one"
    assert _content(alice, memory, revised["id"], version=old_version, include="all").content == b"version one"
    bad = _content(alice, memory, revised["id"], include="forgotten")
    assert (bad.status_code, error_code(bad)) == (422, "memory_invalid")
    # A live record's superseded version stays readable, as GET record answers it.
    live = alice.remember(memory, type="note", content={"file": {"id": _upload(alice, "a.txt", b"a")["id"]}})  # type: ignore[arg-type]
    alice.patch(f"/v1/memories/{memory}/records/{live['id']}",
                {"content": {"file": {"id": _upload(alice, "a.txt", b"b")["id"]}}})
    assert _content(alice, memory, live["id"]).content == b"a"


def test_bad_uploads_are_refused(alice: Client) -> None:
    assert alice.post("/v1/files", {"name": "a/b", "media_type": "text/plain", "bytes": 1}).status_code == 422
    assert alice.post("/v1/files", {"name": "a", "media_type": "nonsense", "bytes": 1}).status_code == 422
    assert alice.post("/v1/files", {"name": "a", "media_type": "text/plain", "bytes": -1}).status_code == 422
    memory = alice.create_memory("Docs")
    for content in ({"file": {"id": "file_nope"}}, {"file": {"id": "file_" + "0" * 32, "version": "x"}}, {"other": 1}):
        answer = alice.post(f"/v1/memories/{memory['id']}/records", {"type": "note", "content": content})
        assert answer.status_code in (404, 422), content
