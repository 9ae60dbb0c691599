"""Records with a path (docs/file-memory.md) through RecordService, over the in-memory fakes: the path
rules, what may be a file, one current file per path, read sets, `origin`, and listing by path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.fakes import InMemoryFileRepository, InMemoryObjectStore, InMemoryRecordRepository
from tests.unit.conftest import World, attach, caller, make_world
from uhp_memories.domain.errors import MemoryConflict, MemoryInvalid
from uhp_memories.domain.files.model import PATH_BYTES, PathConflict, check_conditions
from uhp_memories.domain.files.service import FileService
from uhp_memories.domain.records.model import RecordInput, RecordVersion, WriteTerms
from uhp_memories.domain.records.service import RecordService
from uhp_memories.domain.timefmt import format_ms

ALICE = caller("user:alice")
BOB = caller("harness:chrn_41c0")
RUN = {"run_id": "run-1", "principal_id": "user:carol", "tool_call_id": "call-9"}


@dataclass
class Files:
    world: World
    records: RecordService
    files: FileService
    memory_id: str

    def write(self, path: str | None, text: str = "text", type_: str = "note", terms: WriteTerms | None = None,
              who=ALICE) -> RecordVersion:
        given = RecordInput(type_, text, {}, path=path)
        return self.records.remember(who, self.memory_id, given, terms or WriteTerms()).record

    def revise(self, record: RecordVersion, terms: WriteTerms | None = None, **changes: Any) -> RecordVersion:
        return self.records.revise(ALICE, self.memory_id, record.id, changes, terms or WriteTerms()).record

    def at(self, path: str, **options: Any) -> list[str]:
        return [view.record.id for view in self.records.list(ALICE, self.memory_id, path=path, **options).items]

    def under(self, directory: str, **options: Any) -> list[str | None]:
        page = self.records.list(ALICE, self.memory_id, under=directory, **options)
        return sorted(view.record.path or "" for view in page.items)

    def count(self) -> int:
        return self.world.memories.get(ALICE, self.memory_id).memory.record_count


def build(*, lookup: bool) -> Files:
    world = make_world()
    records_repo = world.ports.records
    assert isinstance(records_repo, InMemoryRecordRepository)
    files = FileService(world.ports, InMemoryObjectStore(), InMemoryFileRepository())
    records = RecordService(world.ports, world.memories, files, paths=records_repo.paths if lookup else None)
    memory_id = world.memories.create(ALICE, name="Files").memory.id
    return Files(world, records, files, memory_id)


@pytest.fixture
def f() -> Files:
    return build(lookup=True)


@pytest.fixture(params=["by path item", "by scan"])
def either(request: pytest.FixtureRequest) -> Files:
    """With the path lookup (as deployed) and without it (list then scans the memory): the same answers."""
    return build(lookup=request.param == "by path item")


# -- the path rules ------------------------------------------------------------------------------------

BAD_PATHS = [
    "",
    "/abs.md",
    "dir/",
    "/",
    "a//b.md",
    "a/../b.md",
    "..",
    "./a.md",
    "a/./b.md",
    "tab\there.md",
    "nul\x00.md",
    "line\nbreak.md",
    "del\x7f.md",
    "back\\slash.md",
    "x" * (PATH_BYTES + 1),
    "é" * (PATH_BYTES // 2 + 1),  # 129 characters, 258 bytes
    "Cafe\u0301.md",  # NFD: "Café.md" spelled another way
    "\u212b.md",  # ANGSTROM SIGN, which NFC makes Å
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_a_bad_path_is_refused_and_nothing_is_written(f: Files, path: str) -> None:
    with pytest.raises(MemoryInvalid):
        f.write(path)
    plain = f.write(None)
    with pytest.raises(MemoryInvalid):
        f.revise(plain, path=path)
    with pytest.raises(MemoryInvalid):
        f.records.list(ALICE, f.memory_id, path=path)
    with pytest.raises(MemoryInvalid):
        f.records.observe(ALICE, f.memory_id, [RecordInput("episode", "e", {}, path=path)])
    assert f.count() == 1
    assert f.world.ports.records.get("acme", f.memory_id, plain.id) == plain


@pytest.mark.parametrize("path", ["a.md", "x" * PATH_BYTES, "é" * (PATH_BYTES // 2), "Café.md", "한국어/메모.md",
                                  ".hidden", "a/.b/c", "...", "with space.md", "emoji/🎉.md"])
def test_a_good_path_is_taken_as_written(f: Files, path: str) -> None:
    record = f.write(path)
    assert record.path == path
    assert f.at(path) == [record.id]


@pytest.mark.parametrize("under", ["a", "/a/", "a//", "../", "Cafe\u0301/"])
def test_listing_under_something_that_is_no_directory_is_refused(f: Files, under: str) -> None:
    with pytest.raises(MemoryInvalid):
        f.records.list(ALICE, f.memory_id, under=under)


# -- what may be a file ----------------------------------------------------------------------------------


def test_an_episode_cannot_be_a_file(f: Files) -> None:
    with pytest.raises(MemoryInvalid):
        f.write("e.md", type_="episode")
    with pytest.raises(MemoryInvalid):
        f.records.observe(ALICE, f.memory_id, [RecordInput("episode", "e", {}, path="e.md")])
    episode = f.records.observe(ALICE, f.memory_id, [RecordInput("episode", "e", {})])[0].record
    with pytest.raises(MemoryInvalid):  # episodes are append-only anyway; a path changes nothing of that
        f.revise(episode, path="e.md")
    assert f.count() == 1
    assert f.at("e.md") == []


def test_a_file_holds_text_not_file_content(f: Files) -> None:
    uploaded = f.files.upload(ALICE, "notes.txt", "text/plain", b"bytes")
    with pytest.raises(MemoryInvalid):
        f.records.remember(ALICE, f.memory_id, RecordInput("note", {"file": {"id": uploaded.id}}, {}, path="n.md"))
    held = f.records.remember(ALICE, f.memory_id, RecordInput("note", {"file": {"id": uploaded.id}}, {})).record
    with pytest.raises(MemoryInvalid):
        f.revise(held, path="n.md")
    text = f.write("t.md", "text")
    again = f.files.upload(ALICE, "more.txt", "text/plain", b"more")
    with pytest.raises(MemoryInvalid):
        f.revise(text, content={"file": {"id": again.id}})
    assert f.at("n.md") == []
    assert f.at("t.md") == [text.id]
    assert f.count() == 2


def test_a_path_cannot_be_removed_from_a_file(f: Files) -> None:
    record = f.write("a.md")
    with pytest.raises(MemoryInvalid):
        f.revise(record, path=None)
    with pytest.raises(MemoryInvalid):
        f.revise(record, path=None, content="new")
    assert f.at("a.md") == [record.id]


def test_a_revision_without_a_path_keeps_the_file_where_it_is(f: Files) -> None:
    record = f.write("a.md", "one")
    revised = f.revise(record, content="two", attributes={"k": 1})
    assert revised.path == "a.md"
    assert f.at("a.md") == [revised.id]


def test_a_record_becomes_a_file_when_a_revision_gives_it_a_path(f: Files) -> None:
    plain = f.write(None, "plain")
    filed = f.revise(plain, path="now/a-file.md")
    assert f.at("now/a-file.md") == [filed.id]
    assert f.world.ports.records.get("acme", f.memory_id, plain.id).path is None


# -- one current file per path, and read sets ----------------------------------------------------------


def test_a_write_onto_a_held_path_is_a_conflict_that_names_the_holder(f: Files) -> None:
    a = f.write("a.md")
    b = f.write("b.md")
    with pytest.raises(MemoryConflict) as error:
        f.write("a.md", "another")
    assert isinstance(error.value, PathConflict)
    assert error.value.details["conflicts"] == [{"path": "a.md", "reason": "path_taken", "current_record_id": a.id}]
    with pytest.raises(PathConflict):
        f.revise(b, path="a.md")
    assert (f.at("a.md"), f.at("b.md"), f.count()) == ([a.id], [b.id], 2)


def test_a_stale_read_set_refuses_the_write(f: Files) -> None:
    rules = f.write("rules.md", "reply in English")
    notes = f.write("notes.md", "likes tea")
    newer = f.revise(rules, content="reply in Chinese")
    stale = WriteTerms(check_conditions([{"path": "rules.md", "record_id": rules.id},
                                         {"path": "absent.md", "record_id": None}]))
    for write in (
        lambda: f.revise(notes, stale, content="likes coffee"),
        lambda: f.records.forget(ALICE, f.memory_id, notes.id, stale),
        lambda: f.write("new.md", "x", terms=stale),
    ):
        with pytest.raises(PathConflict) as error:
            write()
        assert error.value.details["conflicts"] == [
            {"path": "rules.md", "reason": "condition", "current_record_id": newer.id}
        ]
    assert (f.at("notes.md"), f.at("new.md"), f.count()) == ([notes.id], [], 2)

    fresh = WriteTerms(check_conditions([{"path": "rules.md", "record_id": newer.id}]))
    assert f.revise(notes, fresh, content="likes coffee").content == "likes coffee"


def test_revise_or_forget_of_a_version_no_longer_current_names_the_current_one(f: Files) -> None:
    a = f.write("a.md", "one")
    a2 = f.revise(a, content="two")
    with pytest.raises(MemoryConflict) as error:
        f.revise(a, content="three")
    assert not isinstance(error.value, PathConflict)
    assert error.value.details == {"current_record_id": a2.id}
    with pytest.raises(MemoryConflict) as error:
        f.records.forget(ALICE, f.memory_id, a.id)
    assert error.value.details == {"current_record_id": a2.id}


# -- origin ------------------------------------------------------------------------------------------------


def test_origin_is_kept_with_the_version_it_came_with(f: Files) -> None:
    created = f.write("a.md", "one", terms=WriteTerms(origin=RUN))
    assert (created.origin, created.written_by) == (RUN, {"kind": "user", "id": "alice"})
    revised = f.revise(created, WriteTerms(origin={"run_id": "run-2"}), content="two")
    untold = f.revise(revised, content="three")  # origin is the change's, never carried over
    assert (revised.origin, untold.origin) == ({"run_id": "run-2"}, None)
    history = f.records.history(ALICE, f.memory_id, untold.id).items
    assert [(v.record.content, v.record.origin) for v in history] == [
        ("one", RUN), ("two", {"run_id": "run-2"}), ("three", None)
    ]


def test_forget_records_who_forgot_with_the_origin(f: Files) -> None:
    f.world.grants.create(ALICE, f.memory_id, BOB.principal, ["read", "write"])
    attach(f.world, BOB, f.memory_id)
    a = f.write("a.md")
    gone = f.records.forget(BOB, f.memory_id, a.id, WriteTerms(origin={"tool_call_id": "call-9"})).record
    assert gone.forgotten_by == {"written_by": {"kind": "harness", "id": "chrn_41c0"},
                                 "origin": {"tool_call_id": "call-9"}}
    assert f.world.ports.records.get("acme", f.memory_id, a.id).forgotten_by == gone.forgotten_by
    b = f.write("b.md")
    plain = f.records.forget(ALICE, f.memory_id, b.id).record
    assert plain.forgotten_by == {"written_by": {"kind": "user", "id": "alice"}, "origin": None}
    assert (f.at("a.md"), f.at("b.md")) == ([], [])


# -- list by path and under a directory ----------------------------------------------------------------


def test_list_by_path_gives_the_current_file_there(either: Files) -> None:
    f = either
    a = f.write("a.md", "one")
    f.write("b.md", "bee")
    f.write(None, "no file")
    assert f.at("a.md") == [a.id]
    assert f.at("absent.md") == []
    a2 = f.revise(a, content="two")
    assert f.at("a.md") == [a2.id]
    instant = format_ms(f.world.clock.now)
    f.world.clock.advance(1000)
    moved = f.revise(a2, path="d/a.md")
    assert (f.at("a.md"), f.at("d/a.md")) == ([], [moved.id])
    # As the memory stood before the move, and every version that ever held the path.
    assert f.at("a.md", as_of=instant) == [a2.id]
    assert f.at("a.md", include="all") == [a2.id, a.id]
    f.records.forget(ALICE, f.memory_id, moved.id)
    assert f.at("d/a.md") == []
    assert f.at("a.md", types=["fact"]) == []


def test_list_under_a_directory_gives_the_current_files_there(either: Files) -> None:
    f = either
    for path in ("d/1.md", "d/sub/2.md", "dd/3.md", "e.md"):
        f.write(path)
    gone = f.write("d/gone.md")
    f.records.forget(ALICE, f.memory_id, gone.id)
    f.write(None, "no file")
    assert f.under("d/") == ["d/1.md", "d/sub/2.md"]
    assert f.under("d/sub/") == ["d/sub/2.md"]
    assert f.under("") == ["d/1.md", "d/sub/2.md", "dd/3.md", "e.md"]
    assert f.under("nothing/") == []
    assert "d/gone.md" in f.under("d/", include="all")
    page = f.records.list(ALICE, f.memory_id, under="", limit=2)
    assert len(page.items) == 2
    rest = f.records.list(ALICE, f.memory_id, under="", limit=2, cursor=page.next_cursor)
    assert len(rest.items) == 2
    assert rest.next_cursor is None


# -- frontmatter PyYAML cannot construct ------------------------------------------------------------


@pytest.mark.parametrize("frontmatter", ["date: 2024-02-30", "t: 2024-01-01T25:00:00", "n: !!float x",
                                         "b: !!bool x", "s: !!timestamp 'x'", "d: " + "[" * 2000])
def test_frontmatter_pyyaml_cannot_read_gives_no_description_and_the_write_goes_through(
    f: Files, frontmatter: str
) -> None:
    record = f.write("dated.md", f"---\n{frontmatter}\n---\nbody\n")
    entry = f.world.ports.records.paths.at("acme", f.memory_id, "dated.md")  # type: ignore[attr-defined]
    assert (entry.record_id, entry.description) == (record.id, None)
