"""Files (§7) over the in-memory fakes: bytes uploaded once (inline, or by a presigned PUT), seen only
by their uploader until a record holds them, then bound to the record's chain as a new object version,
so every earlier version's bytes stay readable."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from tests.fakes import InMemoryFileRepository, InMemoryObjectStore
from tests.unit.conftest import World, caller
from uhp_memories.domain.errors import MemoryInvalid, MemoryNotFound, RecordNotFound
from uhp_memories.domain.files.model import (
    DOWNLOAD_SECONDS,
    FILE_MAX_BYTES,
    INLINE_MAX_BYTES,
    NAME_CHARS,
    UPLOAD_SECONDS,
    FileNotFound,
    StoredFile,
    chain_key,
    upload_key,
)
from uhp_memories.domain.files.service import FileService
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.records.service import RecordService

ALICE = caller("user:alice")
BOB = caller("user:bob")
STRANGER = caller("user:stranger")


@dataclass
class Setup:
    world: World
    objects: InMemoryObjectStore
    repo: InMemoryFileRepository
    files: FileService
    records: RecordService
    memory_id: str

    def file_record(self, data: bytes, name: str = "notes.txt", who=ALICE) -> str:
        uploaded = self.files.upload(who, name, "text/plain", data)
        given = RecordInput("note", {"file": {"id": uploaded.id}}, {})
        return self.records.remember(who, self.memory_id, given).record.id

    def uploads(self) -> list[str]:
        return [key for key in self.objects.versions if key.startswith("uploads/")]


@pytest.fixture
def setup(world: World) -> Setup:
    objects, repo = InMemoryObjectStore(), InMemoryFileRepository()
    files = FileService(world.ports, objects, repo)
    records = RecordService(world.ports, world.memories, files)
    memory_id = world.memories.create(ALICE, name="Docs").memory.id
    world.grants.create(ALICE, memory_id, BOB.principal, ["read", "write"])
    return Setup(world, objects, repo, files, records, memory_id)


# -- upload ------------------------------------------------------------------------------------


def test_upload_keeps_the_bytes_under_the_uploads_prefix_and_the_file_as_uploaded(setup: Setup) -> None:
    stored = setup.files.upload(ALICE, "notes.txt", "text/plain", b"first bytes")
    assert stored == StoredFile("acme", stored.id, "notes.txt", "text/plain", 11, "uploaded", "user:alice",
                                setup.world.clock.now)
    assert stored.id.startswith("file_")
    assert setup.repo.get("acme", stored.id) == stored
    [version] = setup.objects.versions[upload_key("acme", stored.id)]
    assert (version.data, version.media_type) == (b"first bytes", "text/plain")


def test_an_empty_file_may_be_uploaded(setup: Setup) -> None:
    assert setup.files.upload(ALICE, "empty", "application/octet-stream", b"").bytes == 0


def test_a_file_larger_than_a_request_can_carry_is_refused_and_nothing_is_kept(setup: Setup) -> None:
    with pytest.raises(MemoryInvalid, match="presigned"):
        setup.files.upload(ALICE, "big.bin", "application/octet-stream", b"x" * (INLINE_MAX_BYTES + 1))
    assert setup.repo.files == {}
    assert setup.objects.versions == {}


@pytest.mark.parametrize("name", ["", "a" * (NAME_CHARS + 1), "dir/notes.txt", "dir\\notes.txt"])
def test_a_file_name_is_1_to_255_characters_without_slashes(setup: Setup, name: str) -> None:
    with pytest.raises(MemoryInvalid):
        setup.files.upload(ALICE, name, "text/plain", b"x")
    assert setup.files.upload(ALICE, "a" * NAME_CHARS, "text/plain", b"x").name == "a" * NAME_CHARS


@pytest.mark.parametrize("media_type", ["text", "text/", "/plain", "text/plain; charset=utf-8", "text/pl ain"])
def test_a_media_type_must_look_like_type_slash_subtype(setup: Setup, media_type: str) -> None:
    with pytest.raises(MemoryInvalid):
        setup.files.upload(ALICE, "notes", media_type, b"x")
    for fine in ("image/svg+xml", "application/vnd.ms-excel", "text/x-python_3"):
        assert setup.files.upload(ALICE, "notes", fine, b"x").media_type == fine


# -- a large file: start_upload and its presigned PUT --------------------------------------------


def test_start_upload_keeps_a_pending_file_and_answers_a_presigned_put(setup: Setup) -> None:
    size = INLINE_MAX_BYTES * 10
    stored, upload = setup.files.start_upload(ALICE, "video.mp4", "video/mp4", size)
    assert (stored.status, stored.bytes, stored.created_by) == ("pending", size, "user:alice")
    assert setup.repo.get("acme", stored.id) == stored
    assert upload == setup.objects.presign_put(upload_key("acme", stored.id), "video/mp4", size, UPLOAD_SECONDS)
    assert upload.method == "PUT"
    assert upload.headers == {"Content-Type": "video/mp4"}
    assert setup.objects.versions == {}  # the bytes go straight to the bucket, not through the service


@pytest.mark.parametrize("size", [-1, FILE_MAX_BYTES + 1])
def test_start_upload_refuses_a_size_outside_one_put(setup: Setup, size: int) -> None:
    with pytest.raises(MemoryInvalid):
        setup.files.start_upload(ALICE, "video.mp4", "video/mp4", size)
    assert setup.repo.files == {}


def test_a_pending_file_is_uploaded_once_all_its_bytes_are_there(setup: Setup) -> None:
    stored, _ = setup.files.start_upload(ALICE, "a.bin", "application/octet-stream", 10)
    assert setup.files.get(ALICE, stored.id).status == "pending"
    setup.objects.put(upload_key("acme", stored.id), b"12345", "application/octet-stream")  # cut short
    assert setup.files.get(ALICE, stored.id).status == "pending"
    setup.objects.put(upload_key("acme", stored.id), b"0123456789", "application/octet-stream")
    assert setup.files.get(ALICE, stored.id) == replace(stored, status="uploaded")
    assert setup.repo.get("acme", stored.id) == replace(stored, status="uploaded")


# -- get -----------------------------------------------------------------------------------------


def test_only_its_uploader_sees_a_file(setup: Setup) -> None:
    stored = setup.files.upload(ALICE, "notes.txt", "text/plain", b"x")
    assert setup.files.get(ALICE, stored.id) == stored
    for other in (BOB, caller("user:alice", tenant="other"), caller("harness:chrn_1")):
        with pytest.raises(FileNotFound) as refused:
            setup.files.get(other, stored.id)
        assert refused.value.code == "file_not_found"


@pytest.mark.parametrize("file_id", ["file_" + "0" * 32, "file_1", "hrec_" + "0" * 32, "FILE_" + "0" * 32, ""])
def test_an_unknown_or_malformed_id_is_file_not_found(setup: Setup, file_id: str) -> None:
    with pytest.raises(FileNotFound):
        setup.files.get(ALICE, file_id)


# -- attach and release --------------------------------------------------------------------------


def test_attach_binds_the_bytes_to_the_chain_as_a_new_object_version(setup: Setup) -> None:
    stored = setup.files.upload(ALICE, "plan.md", "text/markdown", b"version one")
    reference = setup.files.attach(ALICE, {"id": stored.id}, setup.memory_id, "hrec_" + "c" * 32)
    version = reference["file"]["version"]
    assert reference == {"file": {"id": stored.id, "name": "plan.md", "bytes": 11, "media_type": "text/markdown",
                                  "version": version}}
    assert setup.objects.read(chain_key("acme", setup.memory_id, "hrec_" + "c" * 32), version) == b"version one"


@pytest.mark.parametrize(
    "reference",
    ["file_x", {"id": "file_x", "name": "other.txt"}, {"id": 7}, {}, {"file": {"id": "file_x"}}, None],
    ids=["text", "extra-field", "id-not-text", "empty", "nested", "none"],
)
def test_a_file_reference_names_only_the_id(setup: Setup, reference: object) -> None:
    with pytest.raises(MemoryInvalid):
        setup.files.attach(ALICE, reference, setup.memory_id, "hrec_" + "c" * 32)


def test_a_file_not_uploaded_completely_cannot_be_attached(setup: Setup) -> None:
    stored, _ = setup.files.start_upload(ALICE, "a.bin", "application/octet-stream", 10)
    with pytest.raises(MemoryInvalid, match="not been uploaded"):
        setup.files.attach(ALICE, {"id": stored.id}, setup.memory_id, "hrec_" + "c" * 32)


def test_another_callers_file_cannot_be_attached(setup: Setup) -> None:
    stored = setup.files.upload(ALICE, "notes.txt", "text/plain", b"x")
    with pytest.raises(FileNotFound):
        setup.files.attach(BOB, {"id": stored.id}, setup.memory_id, "hrec_" + "c" * 32)


def test_a_released_upload_is_gone_and_its_file_cannot_be_attached_again(setup: Setup) -> None:
    stored = setup.files.upload(ALICE, "notes.txt", "text/plain", b"x")
    setup.files.attach(ALICE, {"id": stored.id}, setup.memory_id, "hrec_" + "c" * 32)
    setup.files.release_upload(ALICE, stored.id, setup.memory_id, "hrec_" + "c" * 32)
    assert setup.uploads() == []
    assert setup.repo.get("acme", stored.id) == replace(
        stored, status="attached", memory_id=setup.memory_id, record_id="hrec_" + "c" * 32
    )
    with pytest.raises(MemoryInvalid, match="already held"):
        setup.files.attach(ALICE, {"id": stored.id}, setup.memory_id, "hrec_" + "d" * 32)


def test_a_record_that_holds_a_file_releases_its_upload(setup: Setup) -> None:
    record_id = setup.file_record(b"first bytes")
    record = setup.records.get(ALICE, setup.memory_id, record_id).record
    assert record.content["file"]["name"] == "notes.txt"
    assert setup.uploads() == []
    assert setup.repo.get("acme", record.content["file"]["id"]).status == "attached"


# -- content -------------------------------------------------------------------------------------


def test_content_answers_a_file_records_bytes_inline(setup: Setup) -> None:
    record_id = setup.file_record(b"first bytes", name="notes.txt")
    content = setup.files.content(ALICE, setup.memory_id, record_id, None)
    assert (content.media_type, content.name, content.data, content.redirect) == (
        "text/plain", "notes.txt", b"first bytes", None)


def test_the_bytes_of_every_earlier_version_stay_readable(setup: Setup) -> None:
    first = setup.file_record(b"version one", name="plan.md")
    second = setup.files.upload(ALICE, "plan.md", "text/plain", b"version two, longer")
    revised = setup.records.revise(ALICE, setup.memory_id, first, {"content": {"file": {"id": second.id}}}).record
    old_version = setup.records.get(ALICE, setup.memory_id, first).record.content["file"]["version"]
    assert old_version != revised.content["file"]["version"]

    def data(record_id: str, version: str | None = None) -> bytes | None:
        return setup.files.content(ALICE, setup.memory_id, record_id, version).data

    assert data(revised.id) == b"version two, longer"
    assert data(first) == b"version one"  # by the earlier record version
    assert data(revised.id, old_version) == b"version one"  # by the earlier file version
    assert data(first, revised.content["file"]["version"]) == b"version two, longer"


def test_an_unknown_record_or_file_version_is_record_not_found(setup: Setup) -> None:
    record_id = setup.file_record(b"x")
    with pytest.raises(RecordNotFound):
        setup.files.content(ALICE, setup.memory_id, record_id, "no-such-version")
    with pytest.raises(RecordNotFound):
        setup.files.content(ALICE, setup.memory_id, "hrec_" + "0" * 32, None)


def test_a_text_record_has_no_file_content(setup: Setup) -> None:
    text = setup.records.remember(ALICE, setup.memory_id, RecordInput("fact", "plain words", {})).record.id
    with pytest.raises(MemoryInvalid, match="text, not a file"):
        setup.files.content(ALICE, setup.memory_id, text, None)


def test_once_a_record_holds_a_file_its_memory_decides_who_reads_the_bytes(setup: Setup) -> None:
    record_id = setup.file_record(b"shared bytes")
    assert setup.files.content(BOB, setup.memory_id, record_id, None).data == b"shared bytes"
    with pytest.raises(MemoryNotFound):
        setup.files.content(STRANGER, setup.memory_id, record_id, None)


def test_a_large_file_is_answered_by_a_short_lived_presigned_address(setup: Setup) -> None:
    size = INLINE_MAX_BYTES + 1
    stored, _ = setup.files.start_upload(ALICE, "big.bin", "application/octet-stream", size)
    setup.objects.put(upload_key("acme", stored.id), b"x" * size, "application/octet-stream")  # the client's PUT
    given = RecordInput("note", {"file": {"id": stored.id}}, {})
    record = setup.records.remember(ALICE, setup.memory_id, given).record
    content = setup.files.content(ALICE, setup.memory_id, record.id, None)
    assert content.data is None
    key = chain_key("acme", setup.memory_id, record.chain_id)
    version = record.content["file"]["version"]
    assert content.redirect == setup.objects.presign_get(key, version, "big.bin", DOWNLOAD_SECONDS)
