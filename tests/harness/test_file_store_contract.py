"""One FileStore contract, run against a13n-harness's DirectoryFileStore (the reference semantics) and
against ours through a real local server: what a caller sees is the same, whichever store it mounts.

Where the contract leaves a value open (the version a move returns, what a cursor looks like, whether
a change since a cursor is listed or answers a full resync), each store's own answer is checked on its
own terms, never compared across stores."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

import httpx2
from a13n_harness.providers.memory import (
    Changes,
    DirectoryFileStore,
    FileEntry,
    FileStore,
    FileText,
    FullResync,
    GrepMatch,
    MemoryStoreError,
    Origin,
    SearchableFileStore,
)

from tests.harness.conftest import ClientFactory, OpenFiles, Stage
from tests.integration.conftest import Client
from uhp_memories.harness import open_file_store

pytestmark = pytest.mark.anyio

ORIGIN = Origin(run_id="run-1", principal_id="user:alice", tool_call_id="call-1")
TEA = "likes tea\nreply in English\n"
FRONTMATTER = "---\ndescription: Language and tone preferences\n---\n- Reply in Chinese.\n"


@pytest.fixture(params=["directory", "uhp"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[FileStore]:
    if request.param == "directory":
        yield DirectoryFileStore(tmp_path / "memory")
        return
    # Only ours starts the local server: the directory half runs without it.
    alice: Client = request.getfixturevalue("alice")
    memory: str = request.getfixturevalue("memory")
    open_files: OpenFiles = request.getfixturevalue("open_files")
    async with open_files(alice, memory) as files:
        yield files


@pytest.fixture
async def ours(alice: Client, memory: str, open_files: OpenFiles) -> AsyncIterator[Any]:
    async with open_files(alice, memory) as files:
        yield files


async def refused(code: str, call: Awaitable[object]) -> MemoryStoreError:
    with pytest.raises(MemoryStoreError) as caught:
        await call
    assert caught.value.code == code, caught.value
    return caught.value


async def create(store: FileStore, path: str, text: str = TEA) -> str:
    return await store.write(path, text, expected=None, origin=ORIGIN)


async def nothing_changed(store: FileStore, cursor: str) -> bool:
    """Whether the store lists no change after `cursor` (the cursor it answers with may be a new one)."""
    answer = await store.changes(cursor)
    return isinstance(answer, Changes) and answer.paths == ()


# -- creating and reading -------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_created_file_reads_and_lists_at_the_version_the_write_returned(store: FileStore) -> None:
    tea = await create(store, "prefs/tea.md")
    lang = await create(store, "prefs/lang.md", FRONTMATTER)
    blank = await create(store, "notes/blank.md", "\n\n")
    empty = await create(store, "notes/empty.md", "")

    assert await store.read("prefs/tea.md") == FileText("prefs/tea.md", TEA, tea)
    assert await store.read("notes/empty.md") == FileText("notes/empty.md", "", empty)
    assert await store.list() == [
        FileEntry("notes/blank.md", blank, 2, None),
        FileEntry("notes/empty.md", empty, 0, None),
        FileEntry("prefs/lang.md", lang, len(FRONTMATTER.encode()), "Language and tone preferences"),
        FileEntry("prefs/tea.md", tea, len(TEA.encode()), "likes tea"),
    ]


async def test_sizes_count_utf8_bytes_and_paths_are_nfc(store: FileStore) -> None:
    text = "喜欢茶\n"
    version = await create(store, "cafe\u0301.md", text)  # decomposed é

    assert await store.read("caf\u00e9.md") == FileText("caf\u00e9.md", text, version)
    assert [(entry.path, entry.size) for entry in await store.list()] == [("caf\u00e9.md", len(text.encode()))]


async def test_reading_a_missing_file_is_not_found(store: FileStore) -> None:
    await create(store, "a/b.md")
    await refused("not_found", store.read("nothing.md"))
    await refused("not_found", store.read("a"))  # a directory is not a file


async def test_creating_an_existing_path_is_a_version_mismatch_with_the_file(store: FileStore) -> None:
    version = await create(store, "tea.md")

    error = await refused("version_mismatch", store.write("tea.md", "other", expected=None, origin=ORIGIN))

    assert error.current == FileText("tea.md", TEA, version)
    assert [entry.path for entry in await store.list()] == ["tea.md"]


# -- compare and swap -----------------------------------------------------------------------------


async def test_a_write_at_the_current_version_replaces_the_text(store: FileStore) -> None:
    first = await create(store, "tea.md")

    second = await store.write("tea.md", "likes coffee\n", expected=first, origin=ORIGIN)

    assert second != first
    assert await store.read("tea.md") == FileText("tea.md", "likes coffee\n", second)


async def test_a_write_at_a_stale_version_is_refused_with_the_current_file(store: FileStore) -> None:
    first = await create(store, "tea.md")
    second = await store.write("tea.md", "likes coffee\n", expected=first, origin=ORIGIN)

    error = await refused("version_mismatch", store.write("tea.md", "likes milk\n", expected=first, origin=ORIGIN))

    assert error.current == FileText("tea.md", "likes coffee\n", second)
    assert (await store.read("tea.md")).text == "likes coffee\n"


async def test_a_write_expecting_another_paths_version_is_a_version_mismatch(store: FileStore) -> None:
    tea = await create(store, "tea.md")
    lang = await create(store, "lang.md", FRONTMATTER)

    error = await refused("version_mismatch", store.write("tea.md", "swapped\n", expected=lang, origin=ORIGIN))
    assert error.current == FileText("tea.md", TEA, tea)
    # Nor may it create a file at a free path from another file's version.
    error = await refused("version_mismatch", store.write("new.md", "swapped\n", expected=lang, origin=ORIGIN))
    assert error.current is None

    assert await store.read("lang.md") == FileText("lang.md", FRONTMATTER, lang)
    assert [entry.path for entry in await store.list()] == ["lang.md", "tea.md"]


async def test_a_write_expecting_a_version_nothing_has_is_a_version_mismatch(store: FileStore) -> None:
    tea = await create(store, "tea.md")
    for unknown in ("0123456789abcdef", "hrec_" + "0" * 32, ".."):
        error = await refused("version_mismatch", store.write("tea.md", "x", expected=unknown, origin=ORIGIN))
        assert error.current == FileText("tea.md", TEA, tea)


@pytest.mark.slow
async def test_a_stale_dependency_is_a_read_conflict_and_nothing_is_written(store: FileStore) -> None:
    lang = await create(store, "lang.md", "reply in English\n")
    tea = await create(store, "tea.md")
    changed = await store.write("lang.md", "reply in Chinese\n", expected=lang, origin=ORIGIN)

    error = await refused(
        "read_conflict",
        store.write("tea.md", "likes coffee\n", expected=tea, origin=ORIGIN, dependencies={"lang.md": lang}),
    )
    assert error.current == FileText("lang.md", "reply in Chinese\n", changed)
    await refused(
        "read_conflict", store.write("new.md", "x", expected=None, origin=ORIGIN, dependencies={"lang.md": lang})
    )

    assert await store.read("tea.md") == FileText("tea.md", TEA, tea)
    assert [entry.path for entry in await store.list()] == ["lang.md", "tea.md"]


async def test_a_stale_dependency_is_reported_before_a_stale_target(store: FileStore) -> None:
    lang = await create(store, "lang.md", "reply in English\n")
    tea = await create(store, "tea.md")
    await store.write("lang.md", "reply in Chinese\n", expected=lang, origin=ORIGIN)
    await store.write("tea.md", "likes coffee\n", expected=tea, origin=ORIGIN)

    await refused(
        "read_conflict", store.write("tea.md", "x", expected=tea, origin=ORIGIN, dependencies={"lang.md": lang})
    )


async def test_a_read_set_that_saw_an_older_target_is_a_read_conflict_even_at_the_current_version(
    store: FileStore,
) -> None:
    """The harness's edit after another conversation changed the file the model viewed: the tool rereads the
    file and expects its current version, but the model's read set still holds the version it saw."""
    seen = await create(store, "tea.md")
    now = await store.write("tea.md", "likes coffee\n", expected=seen, origin=ORIGIN)

    for call in (
        store.write("tea.md", "likes milk\n", expected=now, origin=ORIGIN, dependencies={"tea.md": seen}),
        store.move("tea.md", "milk.md", expected=now, origin=ORIGIN, dependencies={"tea.md": seen}),
        store.delete("tea.md", expected=now, origin=ORIGIN, dependencies={"tea.md": seen}),
    ):
        error = await refused("read_conflict", call)
        assert error.current == FileText("tea.md", "likes coffee\n", now)

    assert [entry.path for entry in await store.list()] == ["tea.md"]


async def test_current_dependencies_let_the_write_through(store: FileStore) -> None:
    lang = await create(store, "lang.md", "reply in English\n")
    tea = await create(store, "tea.md")

    written = await store.write(
        "tea.md", "likes coffee\n", expected=tea, origin=ORIGIN, dependencies={"lang.md": lang, "tea.md": tea}
    )

    assert await store.read("tea.md") == FileText("tea.md", "likes coffee\n", written)


async def test_a_none_dependency_expects_the_path_to_be_absent(store: FileStore) -> None:
    await create(store, "tea.md")
    await store.write("lang.md", "reply in English\n", expected=None, origin=ORIGIN, dependencies={"later.md": None})

    other = await create(store, "later.md", "here now\n")
    error = await refused(
        "read_conflict",
        store.write("third.md", "x", expected=None, origin=ORIGIN, dependencies={"later.md": None}),
    )

    assert error.current == FileText("later.md", "here now\n", other)
    await refused("not_found", store.read("third.md"))


async def test_a_dependency_deleted_since_it_was_read_is_a_read_conflict_without_a_file(store: FileStore) -> None:
    lang = await create(store, "lang.md", "reply in English\n")
    await store.delete("lang.md", expected=lang, origin=ORIGIN)

    error = await refused(
        "read_conflict", store.write("tea.md", TEA, expected=None, origin=ORIGIN, dependencies={"lang.md": lang})
    )

    assert error.current is None


# -- moving and deleting --------------------------------------------------------------------------


async def test_a_moved_file_reads_at_its_new_path_and_is_gone_from_the_old(store: FileStore) -> None:
    version = await create(store, "inbox/tea.md")

    moved = await store.move("inbox/tea.md", "prefs/tea.md", expected=version, origin=ORIGIN)

    assert await store.read("prefs/tea.md") == FileText("prefs/tea.md", TEA, moved)
    await refused("not_found", store.read("inbox/tea.md"))
    assert [(entry.path, entry.version) for entry in await store.list()] == [("prefs/tea.md", moved)]
    # The old path is free again.
    await create(store, "inbox/tea.md", "again\n")


async def test_a_move_onto_an_existing_file_is_already_exists_with_that_file(store: FileStore) -> None:
    tea = await create(store, "tea.md")
    lang = await create(store, "lang.md", FRONTMATTER)

    error = await refused("already_exists", store.move("tea.md", "lang.md", expected=tea, origin=ORIGIN))

    assert error.current == FileText("lang.md", FRONTMATTER, lang)
    assert await store.read("tea.md") == FileText("tea.md", TEA, tea)
    await refused("already_exists", store.move("tea.md", "tea.md", expected=tea, origin=ORIGIN))


@pytest.mark.slow
async def test_a_move_at_a_stale_version_is_a_version_mismatch(store: FileStore) -> None:
    first = await create(store, "tea.md")
    second = await store.write("tea.md", "likes coffee\n", expected=first, origin=ORIGIN)

    error = await refused("version_mismatch", store.move("tea.md", "coffee.md", expected=first, origin=ORIGIN))

    assert error.current == FileText("tea.md", "likes coffee\n", second)
    await refused("not_found", store.read("coffee.md"))
    # The target's own check comes before the destination's.
    await create(store, "coffee.md")
    await refused("version_mismatch", store.move("tea.md", "coffee.md", expected=first, origin=ORIGIN))


async def test_a_move_of_a_missing_file_is_a_version_mismatch_without_a_file(store: FileStore) -> None:
    version = await create(store, "tea.md")
    await store.delete("tea.md", expected=version, origin=ORIGIN)

    error = await refused("version_mismatch", store.move("tea.md", "coffee.md", expected=version, origin=ORIGIN))

    assert error.current is None


async def test_a_move_with_a_stale_dependency_is_a_read_conflict(store: FileStore) -> None:
    lang = await create(store, "lang.md", "reply in English\n")
    tea = await create(store, "tea.md")
    await store.write("lang.md", "reply in Chinese\n", expected=lang, origin=ORIGIN)

    await refused(
        "read_conflict",
        store.move("tea.md", "coffee.md", expected=tea, origin=ORIGIN, dependencies={"lang.md": lang}),
    )

    assert await store.read("tea.md") == FileText("tea.md", TEA, tea)


@pytest.mark.slow
async def test_a_delete_at_a_stale_version_is_refused_then_at_the_current_one_removes_the_file(
    store: FileStore,
) -> None:
    first = await create(store, "tea.md")
    second = await store.write("tea.md", "likes coffee\n", expected=first, origin=ORIGIN)

    error = await refused("version_mismatch", store.delete("tea.md", expected=first, origin=ORIGIN))
    assert error.current == FileText("tea.md", "likes coffee\n", second)

    await store.delete("tea.md", expected=second, origin=ORIGIN)
    await refused("not_found", store.read("tea.md"))
    assert await store.list() == []
    error = await refused("version_mismatch", store.delete("tea.md", expected=second, origin=ORIGIN))
    assert error.current is None


async def test_a_delete_with_a_stale_dependency_is_a_read_conflict(store: FileStore) -> None:
    lang = await create(store, "lang.md", "reply in English\n")
    tea = await create(store, "tea.md")
    await store.write("lang.md", "reply in Chinese\n", expected=lang, origin=ORIGIN)

    await refused("read_conflict", store.delete("tea.md", expected=tea, origin=ORIGIN, dependencies={"lang.md": lang}))

    assert await store.read("tea.md") == FileText("tea.md", TEA, tea)


# -- the file rules -------------------------------------------------------------------------------

INVALID_PATHS = ["", "/tea.md", "tea/", "a//b.md", "./a.md", "a/../b.md", "a\\b.md", "a\x00b.md", "x" * 257]


@pytest.mark.parametrize("path", INVALID_PATHS)
async def test_an_invalid_path_is_refused_before_anything_changes(store: FileStore, path: str) -> None:
    tea = await create(store, "tea.md")

    await refused("invalid_path", store.read(path))
    await refused("invalid_path", store.write(path, "x", expected=None, origin=ORIGIN))
    await refused("invalid_path", store.move("tea.md", path, expected=tea, origin=ORIGIN))
    await refused("invalid_path", store.delete(path, expected=tea, origin=ORIGIN))
    await refused("invalid_path", store.write("b.md", "x", expected=None, origin=ORIGIN, dependencies={path: None}))

    assert [entry.path for entry in await store.list()] == ["tea.md"]


async def test_a_file_over_the_size_limit_is_too_large(store: FileStore) -> None:
    tea = await create(store, "tea.md")
    await create(store, "full.md", "x" * 65_536)

    await refused("too_large", store.write("big.md", "x" * 65_537, expected=None, origin=ORIGIN))
    await refused("too_large", store.write("tea.md", "茶" * 21_846, expected=tea, origin=ORIGIN))

    assert [entry.path for entry in await store.list()] == ["full.md", "tea.md"]


async def test_unclosed_frontmatter_is_an_invalid_file(store: FileStore) -> None:
    await refused("invalid_file", store.write("a.md", "---\ndescription: x\n", expected=None, origin=ORIGIN))


@pytest.mark.slow
async def test_purge_removes_every_file(store: FileStore) -> None:
    for path in ("a.md", "b/c.md", "b/d/e.md"):
        await create(store, path)

    await store.purge()

    assert await store.list() == []
    await refused("not_found", store.read("b/c.md"))
    await create(store, "b/c.md")  # and the paths are free again


# -- changes: the one place the stores answer differently -----------------------------------------


async def test_changes_without_a_cursor_ask_for_a_full_resync(store: FileStore) -> None:
    assert isinstance(await store.changes(None), FullResync)


async def test_the_directory_store_answers_any_change_with_a_full_resync(tmp_path: Path) -> None:
    store = DirectoryFileStore(tmp_path)
    version = await create(store, "tea.md")
    start = await store.changes(None)

    assert await store.changes(start.cursor) == Changes(start.cursor, ())
    await store.write("tea.md", "likes coffee\n", expected=version, origin=ORIGIN)
    assert isinstance(await store.changes(start.cursor), FullResync)


@pytest.mark.slow
async def test_our_changes_list_exactly_the_paths_changed_after_a_cursor(ours: Any) -> None:
    tea = await create(ours, "tea.md")
    lang = await create(ours, "lang.md", "reply in English\n")
    await create(ours, "untouched.md")
    start = await ours.changes(None)
    assert isinstance(start, FullResync)

    quiet = await ours.changes(start.cursor)
    assert isinstance(quiet, Changes)
    assert quiet.paths == ()

    await ours.write("tea.md", "likes coffee\n", expected=tea, origin=ORIGIN)
    new = await create(ours, "new.md")
    moved = await ours.move("lang.md", "prefs/lang.md", expected=lang, origin=ORIGIN)
    await ours.delete("new.md", expected=new, origin=ORIGIN)
    await ours.write("tea.md", "likes milk\n", expected=(await ours.read("tea.md")).version, origin=ORIGIN)

    changed = await ours.changes(quiet.cursor)
    assert isinstance(changed, Changes)
    # Each path once, whether it holds a file now (moved here, revised) or not (deleted, moved away).
    assert sorted(changed.paths) == ["lang.md", "new.md", "prefs/lang.md", "tea.md"]
    assert len(changed.paths) == len(set(changed.paths))
    assert (await ours.read("prefs/lang.md")).version == moved
    assert await nothing_changed(ours, changed.cursor)


@pytest.mark.slow
async def test_a_cursor_our_memory_did_not_give_is_a_full_resync_with_a_fresh_cursor(ours: Any) -> None:
    await create(ours, "tea.md")

    for foreign in ("not-a-cursor", "0" * 64):
        resync = await ours.changes(foreign)
        assert isinstance(resync, FullResync)
        assert await nothing_changed(ours, resync.cursor)


@pytest.mark.slow
async def test_after_a_purge_an_earlier_cursor_is_a_full_resync(ours: Any) -> None:
    await create(ours, "tea.md")
    before = await ours.changes(None)

    await ours.purge()

    assert isinstance(await ours.changes(before.cursor), FullResync)


# -- ours only: the read set's bound, search ------------------------------------------------------


@pytest.mark.slow
async def test_a_read_set_as_large_as_the_harness_keeps_is_checked_and_a_larger_one_refused(ours: Any) -> None:
    # a13n-harness tracks up to 2,048 files a conversation saw and sends them all with each write.
    read_set: dict[str, str | None] = {f"seen/{n}.md": None for n in range(2048)}
    await ours.write("a.md", "x", expected=None, origin=ORIGIN, dependencies=read_set)

    # Past the server's bound (4,096 conditions, the target's own included): refused before sending.
    read_set.update({f"more/{n}.md": None for n in range(2048)})
    await refused("read_set_full", ours.write("b.md", "x", expected=None, origin=ORIGIN, dependencies=read_set))
    await refused("not_found", ours.read("b.md"))


@pytest.mark.slow
async def test_a_read_set_naming_the_target_at_the_expected_version_is_the_targets_own_check(ours: Any) -> None:
    """DirectoryFileStore checks the read set first and calls this a read_conflict; ours reports the target's
    version_mismatch, so the harness's write loop rereads the file (and then finds the read set stale)."""
    first = await create(ours, "tea.md")
    second = await ours.write("tea.md", "likes coffee\n", expected=first, origin=ORIGIN)

    error = await refused(
        "version_mismatch", ours.write("tea.md", "x", expected=first, origin=ORIGIN, dependencies={"tea.md": first})
    )
    assert error.current == FileText("tea.md", "likes coffee\n", second)
    await refused(
        "read_conflict", ours.write("tea.md", "x", expected=second, origin=ORIGIN, dependencies={"tea.md": first})
    )


@pytest.mark.slow
async def test_ours_is_a_searchable_store(ours: Any) -> None:
    assert isinstance(ours, SearchableFileStore)


@pytest.mark.slow
async def test_search_matches_lines_literally_ignoring_case_unless_told(ours: Any) -> None:
    tea = await create(ours, "prefs/tea.md", "Likes tea.\nreply in English\nTEA time: 5pm\n")
    await create(ours, "notes/a.md", "nothing here\nlikes t.a\n")

    matches, more = await ours.search("tea", regex=False, case_sensitive=False, path="", limit=50)
    assert (matches, more) == (
        [GrepMatch("prefs/tea.md", 1, "Likes tea.", tea), GrepMatch("prefs/tea.md", 3, "TEA time: 5pm", tea)],
        False,
    )
    matches, _ = await ours.search("TEA", regex=False, case_sensitive=True, path="", limit=50)
    assert [(m.path, m.line) for m in matches] == [("prefs/tea.md", 3)]
    # Literal: the dot is a dot.
    matches, _ = await ours.search("t.a", regex=False, case_sensitive=False, path="", limit=50)
    assert [(m.path, m.line) for m in matches] == [("notes/a.md", 2)]
    matches, _ = await ours.search(r"^(likes|reply) ", regex=True, case_sensitive=False, path="", limit=50)
    assert [(m.path, m.line) for m in matches] == [("notes/a.md", 2), ("prefs/tea.md", 1), ("prefs/tea.md", 2)]


@pytest.mark.slow
async def test_search_under_a_directory_and_up_to_a_limit(ours: Any) -> None:
    for n in range(3):
        await create(ours, f"logs/{n}.md", "tea\ntea\n")
    await create(ours, "logsbook.md", "tea\n")  # shares the prefix, not the directory

    matches, more = await ours.search("tea", regex=False, case_sensitive=False, path="logs/", limit=50)
    assert [(m.path, m.line) for m in matches] == [(f"logs/{n}.md", line) for n in range(3) for line in (1, 2)]
    assert not more
    matches, more = await ours.search("tea", regex=False, case_sensitive=False, path="logs/", limit=4)
    assert [(m.path, m.line) for m in matches] == [(f"logs/{n}.md", line) for n in (0, 1) for line in (1, 2)]
    assert more
    matches, more = await ours.search("tea", regex=False, case_sensitive=False, path="logs/", limit=6)
    assert (len(matches), more) == (6, False)
    await refused("invalid_path", ours.search("tea", regex=False, case_sensitive=False, path="logs", limit=5))


@pytest.mark.slow
async def test_search_refuses_a_pattern_re2_cannot_compile(ours: Any) -> None:
    await create(ours, "tea.md")
    for pattern in ("(unclosed", r"(a)\1", "(?=tea)"):
        await refused("invalid_pattern", ours.search(pattern, regex=True, case_sensitive=False, path="", limit=5))
    # Literal patterns are never compiled as expressions.
    assert await ours.search("(unclosed", regex=False, case_sensitive=False, path="", limit=5) == ([], False)


@pytest.mark.slow
async def test_a_catastrophic_pattern_answers(ours: Any) -> None:
    line = "a" * 20_000 + "b"
    await create(ours, "long.md", f"{line}\naaaa\n")

    matches, _ = await ours.search("(a+)+$", regex=True, case_sensitive=True, path="", limit=5)

    assert [(m.path, m.line) for m in matches] == [("long.md", 2)]


# -- ours only: who may do what, and answers that never came ----------------------------------------


@pytest.mark.slow
async def test_a_key_that_cannot_see_the_memory_finds_it_deleted(
    memory: str, make_client: ClientFactory, open_files: OpenFiles
) -> None:
    async with open_files(make_client("user:bob"), memory) as store:
        await refused("memory_deleted", store.list())
        await refused("memory_deleted", store.read("tea.md"))
        await refused("memory_deleted", store.write("tea.md", TEA, expected=None, origin=ORIGIN))


@pytest.mark.slow
async def test_a_read_grant_reads_and_is_forbidden_to_write_or_purge(
    alice: Client, memory: str, make_client: ClientFactory, open_files: OpenFiles, ours: Any
) -> None:
    version = await create(ours, "tea.md")
    alice.grant(memory, "user:bob", "read")
    async with open_files(make_client("user:bob"), memory) as store:
        assert await store.read("tea.md") == FileText("tea.md", TEA, version)
        await refused("forbidden", store.write("tea.md", "x", expected=version, origin=ORIGIN))
        await refused("forbidden", store.delete("tea.md", expected=version, origin=ORIGIN))
        await refused("forbidden", store.purge())
    assert (await ours.read("tea.md")).version == version


def test_without_a_client_of_its_own_a_local_server_is_refused_at_once(
    stage: Stage, alice: Client, memory: str
) -> None:
    """The store's own client reaches public HTTPS endpoints only: open_file_store says so when called,
    with what to do (pass `http=`), instead of every tool answering `unavailable` (issue 28)."""
    with pytest.raises(ValueError, match=r"http=http"):
        open_file_store(base_url=stage.url, api_key=alice.key, memory_id=memory)
    with pytest.raises(ValueError, match="loopback"):
        open_file_store(base_url="https://127.0.0.1:8443", api_key=alice.key, memory_id=memory)


class Scripted(httpx2.AsyncBaseTransport):
    """The real transport, with some answers made up: `answers` maps (method, path suffix) to a status and
    body, each used once, in order; "lost" sends the request and loses its answer."""

    def __init__(self, answers: dict[tuple[str, str], list[tuple[int, Any] | str]]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._answers = answers
        self.sent: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append((request.method, request.url.path))
        planned = next(
            (queue for (method, suffix), queue in self._answers.items()
             if request.method == method and request.url.path.endswith(suffix) and queue),
            None,
        )
        if planned is None:
            return await self._inner.handle_async_request(request)
        answer = planned.pop(0)
        if answer == "lost":
            response = await self._inner.handle_async_request(request)
            await response.aread()
            await response.aclose()
            raise httpx2.ReadTimeout("injected: the answer was lost", request=request)
        assert not isinstance(answer, str)
        status, body = answer
        return httpx2.Response(status, json=body, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.slow
async def test_a_write_whose_answers_are_all_lost_is_unconfirmed_and_happened_once(
    alice: Client, memory: str, open_files: OpenFiles, ours: Any
) -> None:
    transport = Scripted({("POST", "/records"): ["lost", "lost", "lost"]})
    async with open_files(alice, memory, transport=transport) as store:
        await refused("write_unconfirmed", store.write("tea.md", TEA, expected=None, origin=ORIGIN))
    # Three attempts with one Idempotency-Key: the server ran the first and replayed it.
    assert transport.sent.count(("POST", f"/v1/memories/{memory}/records")) == 3
    assert [entry.path for entry in await ours.list()] == ["tea.md"]


@pytest.mark.slow
async def test_purge_follows_an_erase_job_and_logs_what_it_could_not_reach(
    alice: Client, memory: str, open_files: OpenFiles, caplog: pytest.LogCaptureFixture
) -> None:
    job = "hjob_" + "1" * 32
    kept = {"record_id": "hrec_" + "2" * 32, "where": "dynamodb_point_in_time_recovery", "reason": "backups",
            "until": "2027-01-01T00:00:00Z"}
    transport = Scripted({
        ("POST", "/erase"): [(202, {"job": {"id": job, "status": "running"}}), (202, {"job": {"id": job}})],
        ("GET", f"/jobs/{job}"): [
            (200, {"id": job, "status": "running"}),
            (200, {"id": job, "status": "completed", "unreachable": []}),
            (200, {"id": job, "status": "completed", "unreachable": [kept]}),
        ],
    })
    async with open_files(alice, memory, transport=transport) as store:
        await store.purge()
        # Erased, with copies in the deployment's backups until their retention ends: the purge is
        # done, and the places are logged (the harness's purge has no report to carry them).
        with caplog.at_level(logging.WARNING, logger="uhp_memories.harness.api"):
            await store.purge()
    logged = next(r for r in caplog.records if hasattr(r, "places"))
    assert logged.places == ["dynamodb_point_in_time_recovery until 2027-01-01T00:00:00Z"]
