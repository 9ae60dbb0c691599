"""The ObjectStore contract (domain/files/service.py): a versioned bucket where nothing is overwritten. Run on
the in-memory fake and on S3 (moto, versioning enabled)."""

from __future__ import annotations

from urllib.parse import unquote

from uhp_memories.domain.files.ports import ObjectStore

KEY = "t/acme/m/hmem_1/r/hrec_1"
BINARY = bytes(range(256)) * 3


def test_put_answers_a_version_whose_bytes_read_back_exactly(objects: ObjectStore) -> None:
    version = objects.put(KEY, BINARY, "application/octet-stream")
    assert isinstance(version, str)
    assert version
    assert objects.read(KEY, version) == BINARY
    assert objects.size(KEY) == len(BINARY)


def test_every_put_is_a_new_version_and_the_earlier_ones_stay_readable(objects: ObjectStore) -> None:
    v1 = objects.put(KEY, b"version one", "text/plain")
    v2 = objects.put(KEY, b"version two, longer", "text/plain")
    v3 = objects.put(KEY, b"", "text/plain")
    assert len({v1, v2, v3}) == 3
    assert [objects.read(KEY, v) for v in (v1, v2, v3)] == [b"version one", b"version two, longer", b""]
    assert objects.size(KEY) == 0  # the current object is the last one put


def test_the_size_of_a_key_never_put_is_none(objects: ObjectStore) -> None:
    objects.put(KEY, b"x", "text/plain")
    assert objects.size("t/acme/m/hmem_1/r/hrec_2") is None
    assert objects.size("t/acme/m/hmem_1/r/hrec") is None  # a prefix is not a key


def test_copy_adds_a_version_of_the_target_with_the_current_source_bytes(objects: ObjectStore) -> None:
    upload = "uploads/acme/file_1"
    objects.put(upload, b"old", "text/plain")
    objects.put(upload, b"current bytes", "text/plain")
    before = objects.put(KEY, b"the chain's earlier bytes", "text/plain")
    copied = objects.copy(upload, KEY)
    assert copied != before
    assert objects.read(KEY, copied) == b"current bytes"
    assert objects.read(KEY, before) == b"the chain's earlier bytes"
    assert objects.size(KEY) == len(b"current bytes")
    assert objects.size(upload) == len(b"current bytes")


def test_delete_all_versions_removes_every_version_under_the_prefix_and_counts_them(objects: ObjectStore) -> None:
    memory_prefix = "t/acme/m/hmem_1/"
    objects.put(KEY, b"1", "text/plain")
    objects.put(KEY, b"2", "text/plain")
    objects.put(memory_prefix + "r/hrec_2", b"3", "text/plain")
    kept = objects.put("t/acme/m/hmem_10/r/hrec_1", b"another memory", "text/plain")
    other_tenant = objects.put("t/globex/m/hmem_1/r/hrec_1", b"another tenant", "text/plain")

    assert objects.delete_all_versions(memory_prefix) == 3
    assert objects.size(KEY) is None
    assert objects.size(memory_prefix + "r/hrec_2") is None
    assert objects.read("t/acme/m/hmem_10/r/hrec_1", kept) == b"another memory"
    assert objects.read("t/globex/m/hmem_1/r/hrec_1", other_tenant) == b"another tenant"
    assert objects.delete_all_versions(memory_prefix) == 0  # a retried step finds nothing left
    assert objects.delete_all_versions("t/nobody/") == 0


def test_presign_put_answers_a_put_of_that_media_type_to_the_key(objects: ObjectStore) -> None:
    upload = objects.presign_put("uploads/acme/file_1", "application/pdf", 1234, 3600)
    assert upload.method == "PUT"
    assert upload.headers == {"Content-Type": "application/pdf"}
    assert upload.expires_in == 3600
    assert upload.url.startswith("https://")
    assert "uploads/acme/file_1" in unquote(upload.url)


def test_presign_get_answers_an_address_of_that_version(objects: ObjectStore) -> None:
    version = objects.put(KEY, b"bytes", "text/plain")
    url = objects.presign_get(KEY, version, "Plan für März.pdf", 300)
    assert url.startswith("https://")
    assert KEY in unquote(url)
    assert version in unquote(url)
