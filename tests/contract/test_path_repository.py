"""The file half of the RecordRepository contract and the PathRepository reads (docs/file-memory.md):
one suite run on the in-memory fakes and on DynamoDB over moto.

A record with a path is a file: its write claims, keeps, moves or frees a path item in the same
transaction, checks the write's read set there, and journals each changed path. A refused write
changes nothing: not the record, not the memory's count, not the journal."""

from __future__ import annotations

import pytest

from tests.contract.builders import ACME, GLOBEX, add, at, first, forgotten, revision, rid
from tests.contract.conftest import Repositories
from uhp_memories.domain.errors import StaleVersion, TreeChanged
from uhp_memories.domain.files.model import (
    FIRST_EPOCH,
    Conflict,
    JournalHead,
    PathChange,
    PathCondition,
    PathConflict,
    PathEntry,
)
from uhp_memories.domain.records.model import RecordVersion

TEXT = "---\ndescription: Language\n---\n- Reply in English.\n"


def file(n: int, memory_id: str, written: int, path: str, content: str | None = None, *,
         tenant: str = ACME) -> RecordVersion:
    return first(n, memory_id, written, tenant=tenant, content=content, type_="note").evolve(path=path)


def create(repos: Repositories, n: int, memory_id: str, path: str, content: str | None = None,
           conditions: tuple[PathCondition, ...] = ()) -> RecordVersion:
    record = file(n, memory_id, n, path, content)
    repos.records.append_first(record, conditions)
    return record


def change(repos: Repositories, current: RecordVersion, n: int, *, content: str | None = None,
           path: str | None = None, conditions: tuple[PathCondition, ...] = ()) -> RecordVersion:
    closed, new = revision(current, n, n, content if content is not None else current.content)
    if path is not None:
        new = new.evolve(path=path)
    repos.records.append_revision(closed, new, conditions)
    return new


def holder(repos: Repositories, memory_id: str, path: str) -> str | None:
    entry = repos.paths.at(ACME, memory_id, path)
    return entry.record_id if entry is not None else None


def journal(repos: Repositories, memory_id: str) -> list[PathChange]:
    return repos.paths.changes(ACME, memory_id, 0, repos.paths.head(ACME, memory_id).seq)


def refused(error: pytest.ExceptionInfo[PathConflict]) -> list[Conflict]:
    return error.value.conflicts


# -- one current file per path -------------------------------------------------------------------


@pytest.mark.slow
def test_create_claims_the_path_and_a_second_create_on_it_is_refused(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "prefs/lang.md", TEXT)
    assert repos.paths.at(ACME, m.id, "prefs/lang.md") == PathEntry(
        path="prefs/lang.md", record_id=a.id, chain_id=a.chain_id, bytes=len(TEXT.encode()),
        description="Language", written_at=a.written_at, written_by={"kind": "user", "id": "alice"},
    )
    assert repos.paths.holders(ACME, m.id, ["prefs/lang.md", "absent.md"]) == {"prefs/lang.md": a.id}
    head = repos.paths.head(ACME, m.id)

    with pytest.raises(PathConflict) as error:
        create(repos, 2, m.id, "prefs/lang.md", "another")
    assert refused(error) == [Conflict("prefs/lang.md", "path_taken", a.id)]
    assert error.value.details["conflicts"] == [
        {"path": "prefs/lang.md", "reason": "path_taken", "current_record_id": a.id}
    ]
    assert repos.records.get(ACME, m.id, rid(2)) is None
    assert repos.memories.get(ACME, m.id).record_count == 1
    assert repos.paths.head(ACME, m.id) == head
    assert holder(repos, m.id, "prefs/lang.md") == a.id


def test_a_record_without_a_path_holds_none_and_journals_nothing(repos: Repositories) -> None:
    m = add(repos, 1)
    plain = first(1, m.id, 10)
    repos.records.append_first(plain)
    repos.records.append_revision(*revision(plain, 2, 20, "second"))
    assert repos.paths.entries(ACME, m.id, "", None, 10) == ([], False)
    assert repos.paths.head(ACME, m.id) == JournalHead(FIRST_EPOCH, 0)


@pytest.mark.slow
def test_revise_keeps_the_path_and_changes_its_holder(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md", "one")
    a2 = change(repos, a, 2, content="two\nlines")
    entry = repos.paths.at(ACME, m.id, "a.md")
    assert entry is not None
    assert (entry.record_id, entry.chain_id, entry.bytes, entry.description, entry.written_at) == (
        a2.id, a.chain_id, len(b"two\nlines"), "two", a2.written_at
    )
    assert repos.records.get(ACME, m.id, a.id).superseded_by == a2.id
    assert repos.memories.get(ACME, m.id).record_count == 1


@pytest.mark.slow
def test_move_frees_the_old_path_and_claims_the_new(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md", "one")
    moved = change(repos, a, 2, path="c/a.md")
    assert holder(repos, m.id, "a.md") is None
    assert holder(repos, m.id, "c/a.md") == moved.id
    # The old path is free again.
    again = create(repos, 3, m.id, "a.md", "a new a")
    assert holder(repos, m.id, "a.md") == again.id


@pytest.mark.slow
def test_move_onto_a_held_path_is_refused_and_changes_nothing(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md", "one")
    b = create(repos, 2, m.id, "b.md", "bee")
    head = repos.paths.head(ACME, m.id)
    with pytest.raises(PathConflict) as error:
        change(repos, a, 3, path="b.md")
    assert refused(error) == [Conflict("b.md", "path_taken", b.id)]
    assert repos.records.get(ACME, m.id, a.id) == a  # still current, not closed
    assert repos.records.get(ACME, m.id, rid(3)) is None
    assert (holder(repos, m.id, "a.md"), holder(repos, m.id, "b.md")) == (a.id, b.id)
    assert repos.paths.head(ACME, m.id) == head


@pytest.mark.slow
def test_forget_frees_the_path(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md", "one")
    repos.records.close(a, forgotten(a, 20))
    assert holder(repos, m.id, "a.md") is None
    assert repos.memories.get(ACME, m.id).record_count == 0
    again = create(repos, 2, m.id, "a.md", "again")
    assert holder(repos, m.id, "a.md") == again.id


@pytest.mark.slow
def test_reopen_claims_the_path_back_unless_another_file_holds_it(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md", "one")
    gone = forgotten(a, 20)
    repos.records.close(a, gone)
    b = create(repos, 2, m.id, "a.md", "bee")

    back = gone.evolve(id=rid(3), version=2, status="active", supersedes=gone.id, superseded_by=None,
                       invalidated_at=None, written_at=at(30))
    with pytest.raises(PathConflict) as error:
        repos.records.reopen(gone.evolve(superseded_by=back.id), back)
    assert refused(error) == [Conflict("a.md", "path_taken", b.id)]
    assert repos.records.get(ACME, m.id, a.id) == gone
    assert repos.records.get(ACME, m.id, back.id) is None
    assert repos.memories.get(ACME, m.id).record_count == 1

    repos.records.close(b, forgotten(b, 40))
    repos.records.reopen(gone.evolve(superseded_by=back.id), back)
    assert holder(repos, m.id, "a.md") == back.id
    assert journal(repos, m.id)[-1] == PathChange(repos.paths.head(ACME, m.id).seq, "a.md", back.id)


@pytest.mark.slow
def test_the_same_path_in_two_memories_or_tenants_is_two_files(repos: Repositories) -> None:
    m, other = add(repos, 1), add(repos, 2)
    theirs = add(repos, 1, tenant=GLOBEX)
    a = create(repos, 1, m.id, "a.md")
    b = create(repos, 2, other.id, "a.md")
    c = file(3, theirs.id, 3, "a.md", tenant=GLOBEX)
    repos.records.append_first(c)
    assert (holder(repos, m.id, "a.md"), holder(repos, other.id, "a.md")) == (a.id, b.id)
    assert repos.paths.at(GLOBEX, theirs.id, "a.md").record_id == c.id
    assert repos.paths.head(ACME, m.id).seq == 1
    assert repos.paths.head(GLOBEX, theirs.id).seq == 1
    assert repos.paths.holders(GLOBEX, m.id, ["a.md"]) == {"a.md": c.id}  # GLOBEX's mid(1) is theirs


# -- the read set ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_conditions_that_hold_let_the_write_through(repos: Repositories) -> None:
    m = add(repos, 1)
    rules = create(repos, 1, m.id, "rules.md", "reply in English")
    holds = (PathCondition("rules.md", rules.id), PathCondition("absent.md", None))
    notes = create(repos, 2, m.id, "notes.md", "likes tea", holds)
    notes2 = change(repos, notes, 3, content="likes coffee", conditions=holds)
    repos.records.close(notes2, forgotten(notes2, 40), holds)
    assert holder(repos, m.id, "notes.md") is None
    # A record without a path may carry a read set too.
    plain = first(4, m.id, 50)
    repos.records.append_first(plain, holds)
    assert repos.records.get(ACME, m.id, plain.id) == plain


@pytest.mark.slow
def test_every_failing_condition_is_listed_and_nothing_is_written(repos: Repositories) -> None:
    m = add(repos, 1)
    rules = create(repos, 1, m.id, "rules.md", "reply in English")
    taken = create(repos, 2, m.id, "taken.md", "here")
    rules2 = change(repos, rules, 3, content="reply in Chinese")
    notes = create(repos, 4, m.id, "notes.md", "likes tea")
    stale = (
        PathCondition("rules.md", rules.id),  # revised since
        PathCondition("ok.md", None),  # holds
        PathCondition("taken.md", None),  # held, not absent
        PathCondition("gone.md", rid(99)),  # never held
    )
    expected = [
        Conflict("rules.md", "condition", rules2.id),
        Conflict("taken.md", "condition", taken.id),
        Conflict("gone.md", "condition", None),
    ]
    head = repos.paths.head(ACME, m.id)
    count = repos.memories.get(ACME, m.id).record_count

    with pytest.raises(PathConflict) as error:
        create(repos, 5, m.id, "new.md", "x", stale)
    assert refused(error) == expected
    assert repos.records.get(ACME, m.id, rid(5)) is None
    assert holder(repos, m.id, "new.md") is None

    with pytest.raises(PathConflict) as error:
        change(repos, notes, 6, content="likes coffee", conditions=stale)
    assert refused(error) == expected
    assert repos.records.get(ACME, m.id, notes.id) == notes
    assert repos.records.get(ACME, m.id, rid(6)) is None

    with pytest.raises(PathConflict) as error:
        repos.records.close(notes, forgotten(notes, 70), stale)
    assert refused(error) == expected
    assert repos.records.get(ACME, m.id, notes.id) == notes
    assert holder(repos, m.id, "notes.md") == notes.id

    plain = first(7, m.id, 80)
    with pytest.raises(PathConflict) as error:
        repos.records.append_first(plain, stale)
    assert refused(error) == expected
    assert repos.records.get(ACME, m.id, plain.id) is None

    assert repos.memories.get(ACME, m.id).record_count == count
    assert repos.paths.head(ACME, m.id) == head


def test_failed_conditions_and_a_taken_path_are_listed_together(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md")
    b = create(repos, 2, m.id, "b.md")
    with pytest.raises(PathConflict) as error:
        change(repos, a, 3, path="b.md", conditions=(PathCondition("c.md", b.id),))
    assert refused(error) == [Conflict("c.md", "condition", None), Conflict("b.md", "path_taken", b.id)]


@pytest.mark.slow
def test_a_condition_on_the_writes_own_path_joins_that_path_s_condition(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md", "one", (PathCondition("a.md", None),))
    other = create(repos, 2, m.id, "other.md")
    head = repos.paths.head(ACME, m.id)

    with pytest.raises(PathConflict) as error:
        change(repos, a, 3, content="two", conditions=(PathCondition("a.md", other.id),))
    assert refused(error) == [Conflict("a.md", "condition", a.id)]
    with pytest.raises(PathConflict) as error:
        repos.records.close(a, forgotten(a, 30), (PathCondition("a.md", None),))
    assert refused(error) == [Conflict("a.md", "condition", a.id)]
    with pytest.raises(PathConflict) as error:  # the path it claims is free, but not held by `other`
        create(repos, 4, m.id, "new.md", "x", (PathCondition("new.md", other.id),))
    assert refused(error) == [Conflict("new.md", "condition", None)]
    with pytest.raises(PathConflict) as error:  # a move whose destination is said to be held
        change(repos, a, 5, path="new.md", conditions=(PathCondition("new.md", other.id),))
    assert refused(error) == [Conflict("new.md", "condition", None)]
    assert repos.records.get(ACME, m.id, a.id) == a
    assert repos.paths.head(ACME, m.id) == head

    # The same entries, true, let it through: own path held by the version revised, destination free.
    a2 = change(repos, a, 6, content="two", conditions=(PathCondition("a.md", a.id),))
    moved = change(repos, a2, 7, path="new.md",
                   conditions=(PathCondition("a.md", a2.id), PathCondition("new.md", None)))
    assert (holder(repos, m.id, "a.md"), holder(repos, m.id, "new.md")) == (None, moved.id)


@pytest.mark.slow
def test_a_stale_version_is_refused_as_such_before_its_conditions(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md")
    change(repos, a, 2, content="two")
    wrong = (PathCondition("a.md", rid(99)),)
    with pytest.raises(StaleVersion):
        change(repos, a, 3, content="three", conditions=wrong)
    with pytest.raises(StaleVersion):
        repos.records.close(a, forgotten(a, 30), wrong)
    repos.memories.mark_deleting(ACME, [m.id])
    with pytest.raises(TreeChanged):
        create(repos, 4, m.id, "b.md", "late")
    assert holder(repos, m.id, "b.md") is None


# -- the change journal ----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_journal_advances_by_one_per_changed_path(repos: Repositories) -> None:
    m = add(repos, 1)
    assert repos.paths.head(ACME, m.id) == JournalHead(FIRST_EPOCH, 0)
    a = create(repos, 1, m.id, "a.md")
    b = create(repos, 2, m.id, "b.md")
    a2 = change(repos, a, 3, content="two")
    moved = change(repos, a2, 4, path="d/a.md")  # two paths: the one left, the one taken
    repos.records.close(b, forgotten(b, 50))
    head = repos.paths.head(ACME, m.id)
    assert head == JournalHead(FIRST_EPOCH, 6)
    assert journal(repos, m.id) == [
        PathChange(1, "a.md", a.id),
        PathChange(2, "b.md", b.id),
        PathChange(3, "a.md", a2.id),
        PathChange(4, "a.md", None),
        PathChange(5, "d/a.md", moved.id),
        PathChange(6, "b.md", None),
    ]
    assert repos.paths.changes(ACME, m.id, 2, 4) == journal(repos, m.id)[2:4]
    assert repos.paths.changes(ACME, m.id, 6, 6) == []


@pytest.mark.slow
def test_clear_journal_starts_a_new_epoch_without_entries(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md")
    create(repos, 2, m.id, "b.md")
    before = repos.paths.head(ACME, m.id)
    repos.paths.clear_journal(ACME, m.id)
    after = repos.paths.head(ACME, m.id)
    assert after.epoch != before.epoch
    assert repos.paths.changes(ACME, m.id, 0, max(after.seq, before.seq) + 10) == []
    # The files stay; the next write journals in the new epoch.
    assert holder(repos, m.id, "a.md") == a.id
    a2 = change(repos, a, 3, content="two")
    head = repos.paths.head(ACME, m.id)
    assert head == JournalHead(after.epoch, after.seq + 1)
    assert journal(repos, m.id) == [PathChange(head.seq, "a.md", a2.id)]

    # A memory that never had a file gets an epoch of its own too.
    fresh = add(repos, 2)
    repos.paths.clear_journal(ACME, fresh.id)
    assert repos.paths.head(ACME, fresh.id).epoch != FIRST_EPOCH
    assert journal(repos, fresh.id) == []


@pytest.mark.slow
def test_erase_chain_frees_the_path_and_clears_the_journal(repos: Repositories) -> None:
    m = add(repos, 1)
    doomed = create(repos, 1, m.id, "gone/a.md", "secret")
    doomed2 = change(repos, doomed, 2, path="gone/b.md")
    kept = create(repos, 3, m.id, "keep.md")
    before = repos.paths.head(ACME, m.id)

    assert sorted(repos.records.erase_chain(ACME, m.id, doomed.chain_id)) == sorted([doomed.id, doomed2.id])
    assert holder(repos, m.id, "gone/b.md") is None
    assert holder(repos, m.id, "keep.md") == kept.id
    assert repos.paths.head(ACME, m.id).epoch != before.epoch
    assert journal(repos, m.id) == []
    assert repos.memories.get(ACME, m.id).record_count == 1
    again = create(repos, 4, m.id, "gone/b.md", "new")
    assert holder(repos, m.id, "gone/b.md") == again.id

    # Erasing a chain that holds no path (no more) leaves another chain's file and the journal alone.
    epoch = repos.paths.head(ACME, m.id).epoch
    assert repos.records.erase_chain(ACME, m.id, doomed.chain_id) == []
    assert repos.paths.head(ACME, m.id).epoch == epoch


def test_release_frees_only_the_paths_the_chain_holds(repos: Repositories) -> None:
    m = add(repos, 1)
    a = create(repos, 1, m.id, "a.md")
    b = create(repos, 2, m.id, "b.md")
    repos.paths.release(ACME, m.id, a.chain_id, ["a.md", "b.md", "absent.md"])
    assert holder(repos, m.id, "a.md") is None
    assert holder(repos, m.id, "b.md") == b.id


@pytest.mark.slow
def test_purge_memory_removes_its_paths_and_journal(repos: Repositories) -> None:
    m, keep = add(repos, 1), add(repos, 2)
    create(repos, 1, m.id, "a.md")
    kept = create(repos, 2, keep.id, "a.md")
    repos.memories.mark_deleting(ACME, [m.id])
    repos.records.purge_memory(ACME, m.id)
    assert repos.paths.entries(ACME, m.id, "", None, 10) == ([], False)
    assert repos.paths.head(ACME, m.id) == JournalHead(FIRST_EPOCH, 0)
    assert repos.paths.changes(ACME, m.id, 0, 10) == []
    assert holder(repos, keep.id, "a.md") == kept.id
    assert repos.paths.head(ACME, keep.id).seq == 1


# -- the listing -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_entries_page_in_path_order_under_a_directory(repos: Repositories) -> None:
    m = add(repos, 1)
    # '-' < '.' < '/' in UTF-8, and "ä" (two bytes) after every ASCII letter: byte order, not "natural".
    paths = ["b.md", "a/c/d.md", "ä.md", "a.md", "a-b.md", "a/b.md", "ab/x.md", "Z.md"]
    for n, path in enumerate(paths, start=1):
        create(repos, n, m.id, path)
    ordered = sorted(paths, key=lambda p: p.encode())
    assert ordered == ["Z.md", "a-b.md", "a.md", "a/b.md", "a/c/d.md", "ab/x.md", "b.md", "ä.md"]

    found, more = repos.paths.entries(ACME, m.id, "", None, 100)
    assert ([e.path for e in found], more) == (ordered, False)
    assert found[0] == repos.paths.at(ACME, m.id, "Z.md")

    pages, after = [], None
    while True:
        page, more = repos.paths.entries(ACME, m.id, "", after, 3)
        pages.append(([e.path for e in page], more))
        if not more:
            break
        after = page[-1].path
    assert pages == [(ordered[0:3], True), (ordered[3:6], True), (ordered[6:8], False)]
    assert repos.paths.entries(ACME, m.id, "", None, 8)[1] is False

    under, more = repos.paths.entries(ACME, m.id, "a/", None, 100)
    assert ([e.path for e in under], more) == (["a/b.md", "a/c/d.md"], False)
    under, more = repos.paths.entries(ACME, m.id, "a/", None, 1)
    assert ([e.path for e in under], more) == (["a/b.md"], True)
    under, more = repos.paths.entries(ACME, m.id, "a/", "a/b.md", 1)
    assert ([e.path for e in under], more) == (["a/c/d.md"], False)
    assert repos.paths.entries(ACME, m.id, "a/c/", None, 10)[0][0].path == "a/c/d.md"
    assert repos.paths.entries(ACME, m.id, "nothing/", None, 10) == ([], False)
