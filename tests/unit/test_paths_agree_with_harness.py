"""domain/files/model.py restates a13n-harness's file rules (a13n_harness/providers/memory/files.py) because the
server does not import the harness. These tables hold the two to one answer.

Where they differ by design: the harness normalises a path to NFC and goes on, the server refuses one that
is not NFC already (so one file is never reachable under two spellings): a path is the server's exactly
when the harness accepts it and gives it back unchanged. And the harness refuses to describe a file with
broken frontmatter (`invalid_file`) where the server, which stores what it is sent, describes it as None."""

from __future__ import annotations

import unicodedata

import pytest

from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.files.model import (
    DESCRIPTION_CHARS,
    FRONTMATTER_BYTES,
    PATH_BYTES,
    check_directory,
    check_path,
)
from uhp_memories.domain.files.model import describe as server_describe

harness_files = pytest.importorskip("a13n_harness.providers.memory.files")
contracts = pytest.importorskip("a13n_harness.providers.memory.contracts")
FORMAT = harness_files.FileFormat()


def test_the_limits_are_the_harness_defaults() -> None:
    assert (
        FORMAT.path_bytes, FORMAT.description_chars, FORMAT.frontmatter_bytes
    ) == (PATH_BYTES, DESCRIPTION_CHARS, FRONTMATTER_BYTES)


PATHS = [
    "a.md",
    "prefs/lang.md",
    "deep/er/still/file.txt",
    "",
    "/abs.md",
    "dir/",
    "/",
    "a//b.md",
    "a/../b.md",
    "./a.md",
    "a/.",
    "..",
    ".",
    "...",
    ".hidden",
    "a/.b/c",
    "tab\there.md",
    "nul\x00.md",
    "del\x7f.md",
    "nel\x85.md",  # a C1 control character
    "back\\slash.md",
    "zero\u200bwidth.md",  # a format character, not a control one
    "bidi\u202eexe.txt",  # a right-to-left override
    "isolate\u2066x\u2069.md",
    "bom\ufeff.md",
    "joiner\u200d.md",
    "line\u2028sep.md",
    "with space.md",
    "x" * PATH_BYTES,
    "x" * (PATH_BYTES + 1),
    "é" * (PATH_BYTES // 2),
    "é" * (PATH_BYTES // 2 + 1),
    "Café.md",
    "Cafe\u0301.md",  # NFD
    "e\u0301" * 100,  # NFD, 300 bytes; its NFC form has 200
    "\u212b.md",  # ANGSTROM SIGN: NFC makes it Å
    "ﬁ.md",  # a ligature NFC keeps (NFKC would not)
    "한국어/메모.md",
    "emoji/🎉.md",
]


def _harness(rule, text: str) -> str | None:
    """What the harness makes of a path: its canonical form, or None when it refuses it."""
    try:
        return rule(text, FORMAT)
    except contracts.MemoryStoreError as error:
        if error.code != "invalid_path":
            raise
        return None


def _format_free(text: str) -> bool:
    """The server also refuses Unicode format characters (zero-width, bidi controls), which the
    harness takes: one more way the server is stricter by design (docs/decisions.md, "Hostile input")."""
    return not any(unicodedata.category(char) == "Cf" for char in text)


def _server(rule, text: str) -> bool:
    try:
        assert rule(text) == text
    except MemoryInvalid:
        return False
    return True


@pytest.mark.parametrize("path", PATHS, ids=repr)
def test_a_path_is_the_servers_exactly_when_the_harness_takes_it_as_it_is(path: str) -> None:
    assert _server(check_path, path) == (_harness(harness_files.validate_path, path) == path and _format_free(path))


@pytest.mark.parametrize("path", ["", *PATHS, *(p + "/" for p in PATHS if p and not p.endswith("/"))], ids=repr)
def test_a_directory_is_the_servers_exactly_when_the_harness_takes_it_as_it_is(path: str) -> None:
    assert _server(check_directory, path) == (
        _harness(harness_files.validate_directory, path) == path and _format_free(path)
    )


TEXTS = [
    "",
    "\n\n   \n",
    "first line\nsecond",
    "   padded first line   \nsecond",
    "\ufeffa byte order mark",
    "\u2028a line separator first",
    "x" * 300,  # cut to 200 characters
    "---\ndescription: Language\n---\n- Reply in English.\n",
    "---\ndescription: '  padded  '\n---\nbody\n",
    "---\ndescription: |\n  one line\n---\nbody\n",
    "---\ndescription: " + "d" * 200 + "\n---\nbody\n",
    "---\ndescription: " + "d" * 201 + "\n---\nbody\n",  # too long: broken
    "---\ndescription: 12\n---\nbody\n",  # not a string: broken
    "---\ndescription: ''\n---\nbody\n",  # empty: broken
    "---\ndescription: |\n  two\n  lines\n---\nbody\n",  # two lines: broken
    "---\ntitle: no description\n---\n\nthe body's first line\n",
    "---\n---\nan empty block\n",
    "---\n# only a comment\n---\nbody\n",
    "---\n- a list\n---\nbody\n",  # not a mapping: broken
    "---\nkey: [unclosed\n---\nbody\n",  # not YAML: broken
    "---\n!!python/object:os.system\n---\nbody\n",  # not safe YAML: broken
    "---\ndescription: never closed\nbody\n",  # no closing line: broken
    "---\ndescription: x\n---",  # closed without a newline: broken
    "---\n" + "k: " + "v" * FRONTMATTER_BYTES + "\n---\nbody\n",  # frontmatter too long: broken
    "--- \ndescription: x\n---\nbody\n",  # not a fence: the first line is the description
    "---\r\ndescription: x\r\n---\r\nbody\r\n",  # CRLF: not a fence either
    "----\ndescription: x\n----\nbody\n",
    "body first\n---\ndescription: late\n---\n",
]


def _harness_description(text: str) -> tuple[str | None, bool]:
    """The harness's description, and whether it refused the text as a broken file."""
    try:
        return harness_files.describe(text, FORMAT), False
    except contracts.MemoryStoreError as error:
        if error.code != "invalid_file":
            raise
        return None, True


@pytest.mark.parametrize("text", TEXTS, ids=lambda t: repr(t[:40]))
def test_the_index_line_is_the_harness_s(text: str) -> None:
    description, broken = _harness_description(text)
    assert server_describe(text) == description
    if not broken:
        assert description is None or len(description) <= DESCRIPTION_CHARS


def test_the_table_holds_broken_and_whole_files() -> None:
    """The table tries both sides of the harness's rule, not only the easy one."""
    outcomes = [_harness_description(text) for text in TEXTS]
    assert sum(broken for _, broken in outcomes) >= 8
    assert sum(description is not None for description, _ in outcomes) >= 12


def test_a_file_past_the_harness_limit_is_still_described_by_the_server() -> None:
    """The harness's 64 KiB is the client's limit; the server takes any text of a record (100 KiB)."""
    text = "a large file\n" + "x" * FORMAT.max_file_bytes
    with pytest.raises(contracts.MemoryStoreError):
        harness_files.describe(text, FORMAT)
    assert server_describe(text) == "a large file"
