"""A memory's files as a tree (docs/file-memory.md): the listing, the change journal and grep, over the
in-memory fakes, with the files written through RecordService as the API writes them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.fakes import InMemoryPathRepository, InMemoryRecordRepository
from tests.unit.conftest import World, caller, make_world
from uhp_memories.domain import cursors
from uhp_memories.domain.errors import MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.files import tree
from uhp_memories.domain.files.model import (
    JOURNAL_RETENTION_SECONDS,
    ChangeList,
    JournalCursor,
    decode_cursor,
    encode_cursor,
)
from uhp_memories.domain.files.tree import TreeService
from uhp_memories.domain.records.model import RecordInput, RecordVersion
from uhp_memories.domain.records.service import RecordService

ALICE = caller("user:alice")
BOB = caller("user:bob")
STRANGER = caller("user:stranger")


@dataclass
class Tree:
    world: World
    paths: InMemoryPathRepository
    records: RecordService
    tree: TreeService
    memory_id: str

    def write(self, path: str, text: str) -> RecordVersion:
        return self.records.remember(ALICE, self.memory_id, RecordInput("note", text, {}, path=path)).record

    def revise(self, record: RecordVersion, **changes: str) -> RecordVersion:
        return self.records.revise(ALICE, self.memory_id, record.id, dict(changes)).record

    def forget(self, record: RecordVersion) -> RecordVersion:
        return self.records.forget(ALICE, self.memory_id, record.id).record

    def changes(self, cursor: str | None, limit: int | None = None) -> ChangeList:
        return self.tree.changes(ALICE, self.memory_id, cursor, limit)

    def cursor(self) -> str:
        return self.changes(None).cursor


@pytest.fixture
def t() -> Tree:
    world = make_world()
    records_repo = world.ports.records
    assert isinstance(records_repo, InMemoryRecordRepository)
    paths = records_repo.paths
    records = RecordService(world.ports, world.memories, paths=paths)
    memory_id = world.memories.create(ALICE, name="Files").memory.id
    return Tree(world, paths, records, TreeService(world.ports, paths), memory_id)


def listed(changes: ChangeList) -> list[tuple[str, str | None]]:
    return [(c.path, c.record_id) for c in changes.changes]


# -- /paths ------------------------------------------------------------------------------------------


def test_paths_lists_the_current_files_in_path_order_without_content(t: Tree) -> None:
    b = t.write("b.md", "---\ndescription: Bee\n---\nbody\n")
    a = t.write("a/one.md", "\n\n  first line  \nsecond")
    c = t.write("c.md", "")
    gone = t.write("gone.md", "x")
    t.forget(gone)
    found, cursor = t.tree.paths(ALICE, t.memory_id)
    assert cursor is None
    assert [(e.path, e.record_id, e.bytes, e.description) for e in found] == [
        ("a/one.md", a.id, len(b"\n\n  first line  \nsecond"), "first line"),
        ("b.md", b.id, len(b"---\ndescription: Bee\n---\nbody\n"), "Bee"),
        ("c.md", c.id, 0, None),
    ]
    assert (found[0].written_at, found[0].written_by) == (a.written_at, {"kind": "user", "id": "alice"})
    under, _ = t.tree.paths(ALICE, t.memory_id, under="a/")
    assert [e.path for e in under] == ["a/one.md"]


def test_paths_pages_with_a_cursor_of_its_own_directory(t: Tree) -> None:
    for name in ("d/1.md", "d/2.md", "d/3.md", "d/4.md", "e.md"):
        t.write(name, name)
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        found, cursor = t.tree.paths(ALICE, t.memory_id, under="d/", limit=3, cursor=cursor)
        seen += [e.path for e in found]
        pages += 1
        if cursor is None:
            break
    assert (seen, pages) == (["d/1.md", "d/2.md", "d/3.md", "d/4.md"], 2)

    _, first_page = t.tree.paths(ALICE, t.memory_id, under="d/", limit=1)
    assert first_page is not None
    with pytest.raises(MemoryInvalid):  # a cursor of another directory's listing
        t.tree.paths(ALICE, t.memory_id, under="", cursor=first_page)
    with pytest.raises(MemoryInvalid):
        t.tree.paths(ALICE, t.memory_id, cursor=cursors.encode("records:active:", "x", over=t.memory_id))


@pytest.mark.parametrize("under", ["d", "/d/", "d//", "../", "d/../"])
def test_paths_and_grep_refuse_a_directory_that_is_not_one(t: Tree, under: str) -> None:
    with pytest.raises(MemoryInvalid):
        t.tree.paths(ALICE, t.memory_id, under=under)
    with pytest.raises(MemoryInvalid):
        t.tree.grep(ALICE, t.memory_id, "x", under=under)


@pytest.mark.parametrize("limit", [0, 1001])
def test_paths_refuses_a_limit_out_of_range(t: Tree, limit: int) -> None:
    with pytest.raises(MemoryInvalid):
        t.tree.paths(ALICE, t.memory_id, limit=limit)


# -- /changes ----------------------------------------------------------------------------------------


def test_without_a_cursor_the_answer_is_a_full_resync_and_a_cursor_to_start_from(t: Tree) -> None:
    t.write("a.md", "a")
    start = t.changes(None)
    assert (start.changes, start.more, start.full_resync) == ([], False, True)
    given = decode_cursor(t.memory_id, start.cursor)
    assert (given.epoch, given.seq) == (t.paths.head("acme", t.memory_id).epoch, 1)
    again = t.changes(start.cursor)
    assert (again.changes, again.more, again.full_resync) == ([], False, False)


def test_each_changed_path_is_listed_once_with_what_holds_it_now_in_the_order_it_last_changed(t: Tree) -> None:
    cursor = t.cursor()
    a = t.write("a.md", "a")
    b = t.write("b.md", "b")
    c = t.write("c.md", "c")
    a2 = t.revise(a, content="a, again")
    moved = t.revise(a2, path="m/a.md")
    t.forget(b)
    c2 = t.revise(c, content="c, again")

    seen = t.changes(cursor)
    assert (seen.more, seen.full_resync) == (False, False)
    assert listed(seen) == [("a.md", None), ("m/a.md", moved.id), ("b.md", None), ("c.md", c2.id)]
    after = t.changes(seen.cursor)
    assert (after.changes, after.more, after.full_resync) == ([], False, False)

    # Only what changed after the cursor given.
    d = t.write("d.md", "d")
    assert listed(t.changes(seen.cursor)) == [("d.md", d.id)]


def test_a_limit_pages_the_journal_and_the_next_page_carries_on(t: Tree) -> None:
    cursor = t.cursor()
    a = t.write("a.md", "a")  # 1
    b = t.write("b.md", "b")  # 2
    moved = t.revise(a, path="m/a.md")  # 3: a.md freed, 4: m/a.md taken
    t.forget(b)  # 5

    first = t.changes(cursor, limit=2)
    assert (listed(first), first.more, first.full_resync) == ([("a.md", a.id), ("b.md", b.id)], True, False)
    second = t.changes(first.cursor, limit=2)
    assert (listed(second), second.more) == ([("a.md", None), ("m/a.md", moved.id)], True)
    third = t.changes(second.cursor, limit=2)
    assert (listed(third), third.more) == ([("b.md", None)], False)
    assert decode_cursor(t.memory_id, third.cursor).seq == 5
    assert t.changes(third.cursor).changes == []

    with pytest.raises(MemoryInvalid):
        t.changes(cursor, limit=0)
    with pytest.raises(MemoryInvalid):
        t.changes(cursor, limit=1001)


def test_a_cursor_of_another_memory_or_none_at_all_is_invalid(t: Tree) -> None:
    other = t.world.memories.create(ALICE, name="Other").memory.id
    theirs = t.tree.changes(ALICE, other, None).cursor
    with pytest.raises(MemoryInvalid):
        t.changes(theirs)
    cut = encode_cursor(JournalCursor(t.memory_id, "0", 0, 0))[:-2]
    for text in ("not-a-cursor", "", cursors.encode("paths:", "a.md", over=t.memory_id), cut):
        with pytest.raises(MemoryInvalid):
            t.changes(text)


def test_a_cursor_older_than_the_journal_keeps_answers_full_resync(t: Tree) -> None:
    cursor = t.cursor()
    a = t.write("a.md", "a")
    t.world.clock.advance(JOURNAL_RETENTION_SECONDS * 1000 - 100)
    assert listed(t.changes(cursor)) == [("a.md", a.id)]  # still within the retention

    t.world.clock.advance(100)
    late = t.changes(cursor)
    assert (late.changes, late.more, late.full_resync) == ([], False, True)
    # The cursor given with it answers again.
    b = t.write("b.md", "b")
    assert listed(t.changes(late.cursor)) == [("b.md", b.id)]


def test_a_new_epoch_answers_full_resync_to_every_cursor_given_before(t: Tree) -> None:
    cursor = t.cursor()
    t.write("a.md", "a")
    t.paths.clear_journal("acme", t.memory_id)
    late = t.changes(cursor)
    assert (late.changes, late.full_resync) == ([], True)
    b = t.write("b.md", "b")
    assert listed(t.changes(late.cursor)) == [("b.md", b.id)]


def test_erasing_a_file_answers_full_resync_to_earlier_cursors(t: Tree) -> None:
    a = t.write("a.md", "a")
    cursor = t.cursor()
    t.write("b.md", "b")
    t.world.ports.records.erase_chain("acme", t.memory_id, a.chain_id)
    assert t.changes(cursor).full_resync is True
    assert [e.path for e in t.tree.paths(ALICE, t.memory_id)[0]] == ["b.md"]


def test_a_gap_in_the_journal_answers_full_resync(t: Tree) -> None:
    cursor = t.cursor()
    t.write("a.md", "a")  # 1
    t.write("b.md", "b")  # 2
    t.write("c.md", "c")  # 3
    t.paths.expire("acme", t.memory_id, 2)
    gap = t.changes(cursor)
    assert (gap.changes, gap.more, gap.full_resync) == ([], False, True)
    assert decode_cursor(t.memory_id, gap.cursor).seq == 3
    # A page that ends before the gap is still answered.
    assert listed(t.changes(cursor, limit=1))[0][0] == "a.md"


def test_a_cursor_ahead_of_the_journal_answers_full_resync(t: Tree) -> None:
    t.write("a.md", "a")
    head = t.paths.head("acme", t.memory_id)
    ahead = encode_cursor(JournalCursor(t.memory_id, head.epoch, head.seq + 5, t.world.clock.now))
    assert t.changes(ahead).full_resync is True


def test_the_cursor_is_bounded_by_the_head_read_before_the_entries(t: Tree) -> None:
    """A change that commits while a page is read is after the cursor given back: listed next time."""
    cursor = t.cursor()
    a = t.write("a.md", "a")
    late: list[RecordVersion] = []
    reads = t.paths.changes

    def changes_then_a_write(tenant: str, memory_id: str, after: int, up_to: int):
        found = reads(tenant, memory_id, after, up_to)
        if not late:
            late.append(t.write("late.md", "late"))
        return found

    t.paths.changes = changes_then_a_write  # type: ignore[method-assign]
    seen = t.changes(cursor)
    assert listed(seen) == [("a.md", a.id)]
    assert listed(t.changes(seen.cursor)) == [("late.md", late[0].id)]


# -- /grep -------------------------------------------------------------------------------------------


def test_grep_matches_lines_of_the_current_files_in_path_then_line_order(t: Tree) -> None:
    t.write("b/two.md", "likes coffee\nLIKES cake")
    one = t.write("a/one.md", "Likes tea\nreply in English\nlikes scones")
    t.revise(one, content="Likes tea, now\nreply in English\nlikes scones")
    gone = t.write("c.md", "likes nothing")
    t.forget(gone)
    t.records.remember(ALICE, t.memory_id, RecordInput("note", "likes a record that is no file", {}))

    found = t.tree.grep(ALICE, t.memory_id, "likes")
    assert [(m.path, m.line, m.text) for m in found.matches] == [
        ("a/one.md", 1, "Likes tea, now"), ("a/one.md", 3, "likes scones"),
        ("b/two.md", 1, "likes coffee"), ("b/two.md", 2, "LIKES cake"),
    ]
    assert (found.more, found.capped) == (False, False)
    current = t.paths.at("acme", t.memory_id, "a/one.md")
    assert current is not None
    assert found.matches[0].record_id == current.record_id

    sensitive = t.tree.grep(ALICE, t.memory_id, "likes", case_sensitive=True)
    assert [(m.path, m.line) for m in sensitive.matches] == [("a/one.md", 3), ("b/two.md", 1)]
    regex = t.tree.grep(ALICE, t.memory_id, r"^reply\s+in", regex=True)
    assert [(m.path, m.line) for m in regex.matches] == [("a/one.md", 2)]
    under = t.tree.grep(ALICE, t.memory_id, "likes", under="b/")
    assert [(m.path, m.line) for m in under.matches] == [("b/two.md", 1), ("b/two.md", 2)]


def test_grep_stops_at_its_limit_and_says_more_followed(t: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree, "GREP_BATCH", 2)  # the files are read across several batches
    for n in range(5):
        t.write(f"f{n}.md", f"hit {n}\nmiss\nhit again {n}")
    capped = t.tree.grep(ALICE, t.memory_id, "hit", limit=3)
    assert [(m.path, m.line) for m in capped.matches] == [("f0.md", 1), ("f0.md", 3), ("f1.md", 1)]
    assert (capped.more, capped.capped) == (True, False)
    exact = t.tree.grep(ALICE, t.memory_id, "hit", limit=10)
    assert (len(exact.matches), exact.more) == (10, False)
    assert [m.path for m in exact.matches][-2:] == ["f4.md", "f4.md"]


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=a)", "(?<!a)b", "[", "a{2,1}"])
def test_grep_refuses_a_pattern_re2_cannot_compile(t: Tree, pattern: str) -> None:
    t.write("a.md", "aa")
    with pytest.raises(MemoryInvalid) as error:
        t.tree.grep(ALICE, t.memory_id, pattern, regex=True)
    assert error.value.details["reason"] == "invalid_pattern"


@pytest.mark.parametrize("pattern", ["", "x" * 513])
def test_grep_refuses_a_pattern_of_no_or_too_many_characters(t: Tree, pattern: str) -> None:
    with pytest.raises(MemoryInvalid) as error:
        t.tree.grep(ALICE, t.memory_id, pattern)
    assert error.value.details["reason"] == "invalid_pattern"


def test_a_pattern_that_is_not_a_regex_matches_as_written(t: Tree) -> None:
    t.write("a.md", "costs $5 (a+b)\nplain")
    found = t.tree.grep(ALICE, t.memory_id, "$5 (a+b)")
    assert [m.line for m in found.matches] == [1]


# -- access ------------------------------------------------------------------------------------------


def test_reading_the_tree_needs_read_and_hides_an_unseen_memory(t: Tree) -> None:
    t.write("a.md", "a")
    reads = (
        lambda who: t.tree.paths(who, t.memory_id),
        lambda who: t.tree.changes(who, t.memory_id, None),
        lambda who: t.tree.grep(who, t.memory_id, "a"),
    )
    for read in reads:
        with pytest.raises(MemoryNotFound):
            read(STRANGER)
    t.world.grants.create(ALICE, t.memory_id, BOB.principal, ["write"])
    for read in reads:
        with pytest.raises(MemoryForbidden):
            read(BOB)
    t.world.grants.create(ALICE, t.memory_id, BOB.principal, ["read"])
    assert [e.path for e in t.tree.paths(BOB, t.memory_id)[0]] == ["a.md"]
    with pytest.raises(MemoryNotFound):  # another tenant's caller with the same principal
        t.tree.paths(caller("user:alice", tenant="globex"), t.memory_id)
