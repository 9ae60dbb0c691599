"""Grep over files (docs/file-memory.md, /grep): literal and RE2 patterns, case folding, line numbers,
the limit and `more`, the scan caps, patterns RE2 refuses, and linear-time matching."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.files.grep import FileText, GrepResult, LineMatch, Matcher, compile_pattern, grep


def files(*texts: str) -> list[FileText]:
    return [FileText(path=f"f{n}.md", record_id=f"hrec_{n}", text=text) for n, text in enumerate(texts)]


def found(
    pattern: str, *texts: str, regex: bool = False, case_sensitive: bool = False, limit: int = 200
) -> list[tuple[str, int, str]]:
    result = grep(files(*texts), compile_pattern(pattern, regex=regex, case_sensitive=case_sensitive), limit=limit)
    return [(m.path, m.line, m.text) for m in result.matches]


def invalid(pattern: str, *, regex: bool = True) -> MemoryInvalid:
    with pytest.raises(MemoryInvalid) as caught:
        compile_pattern(pattern, regex=regex, case_sensitive=False)
    assert caught.value.details == {"reason": "invalid_pattern"}
    return caught.value


# -- literal and regex -----------------------------------------------------------------------------


def test_a_literal_pattern_matches_its_characters_and_a_regex_its_language() -> None:
    text = "a.c\nabc\n(x)+\n"
    assert found("a.c", text) == [("f0.md", 1, "a.c")]
    assert found("a.c", text, regex=True) == [("f0.md", 1, "a.c"), ("f0.md", 2, "abc")]
    assert found("(x)+", text) == [("f0.md", 3, "(x)+")]
    assert found(r"\d", "no digits", regex=False) == []


def test_a_line_matches_when_the_pattern_is_found_anywhere_in_it() -> None:
    assert found("needle", "hay needle hay\nneedles\nneedl") == [
        ("f0.md", 1, "hay needle hay"),
        ("f0.md", 2, "needles"),
    ]
    assert found("^needle$", "needle\n needle", regex=True) == [("f0.md", 1, "needle")]


def test_a_match_names_its_file_and_record() -> None:
    result = grep(files("x", "no", "x"), compile_pattern("x", regex=False, case_sensitive=True), limit=10)
    assert result == GrepResult(
        [LineMatch("f0.md", 1, "x", "hrec_0"), LineMatch("f2.md", 1, "x", "hrec_2")], more=False, capped=False
    )


# -- case --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("regex", [False, True])
def test_matching_folds_case_unless_asked_not_to_also_beyond_ascii(regex: bool) -> None:
    text = "Straße in KÖLN\nÄrger\närger\nΦΩΣ"
    assert found("köln", text, regex=regex) == [("f0.md", 1, "Straße in KÖLN")]
    assert found("ä", text, regex=regex) == [("f0.md", 2, "Ärger"), ("f0.md", 3, "ärger")]
    assert found("Ä", text, regex=regex) == [("f0.md", 2, "Ärger"), ("f0.md", 3, "ärger")]
    assert found("φως", text, regex=regex) == [("f0.md", 4, "ΦΩΣ")]  # final ς folds to Σ
    assert found("Ä", text, regex=regex, case_sensitive=True) == [("f0.md", 2, "Ärger")]
    assert found("köln", text, regex=regex, case_sensitive=True) == []


def test_regex_classes_see_utf8_characters_not_bytes() -> None:
    assert found("^.{5}$", "Ärger\nÄrgerX", regex=True) == [("f0.md", 1, "Ärger")]
    assert found(r"\pL+ß", "Straße", regex=True) == [("f0.md", 1, "Straße")]
    assert found("[à-ü]", "Köln\nKoln", regex=True) == [("f0.md", 1, "Köln")]


def test_perl_classes_are_ascii_in_re2() -> None:
    # Unlike Python re; \pL (or \p{L}) is the class of all letters.
    assert found(r"^\w+$", "über\nuber", regex=True) == [("f0.md", 2, "uber")]
    assert found(r"^\pL+$", "über\nuber", regex=True) == [("f0.md", 1, "über"), ("f0.md", 2, "uber")]


# -- lines -------------------------------------------------------------------------------------------


def test_lines_are_numbered_from_one_as_splitlines_splits() -> None:
    assert found("x", "a\r\nx\r\nb\r\nx") == [("f0.md", 2, "x"), ("f0.md", 4, "x")]
    assert found("x", "a\nx\n\nx\n") == [("f0.md", 2, "x"), ("f0.md", 4, "x")]
    assert found("x", "a\rx\u2028b\x0cx\x85x") == [("f0.md", 2, "x"), ("f0.md", 4, "x"), ("f0.md", 5, "x")]
    assert found("x", "") == []


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^x", [2, 3, 4, 5]),
        ("x$", [1, 2, 3, 4]),
        ("^x$", [2, 3, 4]),
        (r"\Ax", [2, 3, 4, 5]),
        (r"x\z", [1, 2, 3, 4]),
        ("(?-m)^x", [2, 3, 4, 5]),
        (r"(?i-m:^X)", [2, 3, 4, 5]),
        (r"\bx\b", [2, 3, 4]),
    ],
)
def test_anchors_hold_at_every_line_break_splitlines_knows(pattern: str, expected: list[int]) -> None:
    # Line 1 ends in x; lines 2 to 5 follow \r, \u2028, \x1c and \n; line 5 goes on after its x.
    text = "ax\rx\u2028x\x1cx\nxa"
    assert [line for _, line, _ in found(pattern, text, regex=True)] == expected


ALPHABET = "ax \n\r\x0b\x85\u2028Ä_"
SHORTCUT_PATTERNS = ["^x", "x$", "^$", r"\Ax", r"x\z", "(?-m)^x", r"\bx", r"x\B", r"a\sx", r"x\n", "^(a|x)+$", "ä"]


@given(pattern=st.sampled_from(SHORTCUT_PATTERNS), text=st.text(alphabet=ALPHABET, max_size=30))
def test_ruling_out_a_whole_file_at_once_never_loses_a_line(pattern: str, text: str) -> None:
    matcher = compile_pattern(pattern, regex=True, case_sensitive=False)
    line_by_line = Matcher(line=matcher.line, whole=None)
    assert list(matcher.lines(text)) == list(line_by_line.lines(text))


# -- limit and more ----------------------------------------------------------------------------------


def test_exactly_limit_matches_is_not_more() -> None:
    result = grep(files("x\nx", "y\nx"), compile_pattern("x", regex=False, case_sensitive=False), limit=3)
    assert [(m.path, m.line) for m in result.matches] == [("f0.md", 1), ("f0.md", 2), ("f1.md", 2)]
    assert (result.more, result.capped) == (False, False)


def test_one_match_past_the_limit_is_more() -> None:
    for texts in [("x\nx", "x\ny\nx"), ("x\nx", "x", "y", "x")]:
        result = grep(files(*texts), compile_pattern("x", regex=False, case_sensitive=False), limit=3)
        assert [(m.path, m.line) for m in result.matches] == [("f0.md", 1), ("f0.md", 2), ("f1.md", 1)]
        assert (result.more, result.capped) == (True, False)


def test_files_are_read_only_until_the_answer_is_known() -> None:
    pulled: list[str] = []

    def lazily() -> Iterator[FileText]:
        for file in files("x", "y", "x", "x", "x"):
            pulled.append(file.path)
            yield file

    result = grep(lazily(), compile_pattern("x", regex=False, case_sensitive=False), limit=2)
    assert result.more
    assert pulled == ["f0.md", "f1.md", "f2.md", "f3.md"]


@pytest.mark.parametrize("limit", [0, -1, 201])
def test_a_limit_is_1_to_200(limit: int) -> None:
    with pytest.raises(MemoryInvalid):
        grep(files("x"), compile_pattern("x", regex=False, case_sensitive=False), limit=limit)


@pytest.mark.parametrize("limit", [1, 200])
def test_the_limit_bounds_are_allowed(limit: int) -> None:
    result = grep(files("x\n" * 300), compile_pattern("x", regex=False, case_sensitive=False), limit=limit)
    assert (len(result.matches), result.more) == (limit, True)


# -- caps ----------------------------------------------------------------------------------------------


def test_the_scan_stops_after_max_files_and_says_so() -> None:
    matcher = compile_pattern("x", regex=False, case_sensitive=False)
    three = files("x", "y", "x")
    assert grep(three, matcher, limit=10, max_files=3) == GrepResult(
        [LineMatch("f0.md", 1, "x", "hrec_0"), LineMatch("f2.md", 1, "x", "hrec_2")], more=False, capped=False
    )
    capped = grep(three, matcher, limit=10, max_files=2)
    assert [m.path for m in capped.matches] == ["f0.md"]
    assert (capped.more, capped.capped) == (True, True)


def test_the_scan_stops_after_max_bytes_of_utf8_and_says_so() -> None:
    matcher = compile_pattern("ä", regex=False, case_sensitive=False)
    texts = files("ä", "ää", "ä")  # 2, 4 and 2 bytes
    assert grep(texts, matcher, limit=10, max_bytes=8) == GrepResult(
        [
            LineMatch("f0.md", 1, "ä", "hrec_0"),
            LineMatch("f1.md", 1, "ää", "hrec_1"),
            LineMatch("f2.md", 1, "ä", "hrec_2"),
        ],
        more=False,
        capped=False,
    )
    capped = grep(texts, matcher, limit=10, max_bytes=7)
    assert [m.path for m in capped.matches] == ["f0.md", "f1.md"]
    assert (capped.more, capped.capped) == (True, True)
    assert grep(texts, matcher, limit=10, max_bytes=1) == GrepResult([], more=True, capped=True)


def test_the_limit_answers_before_the_cap_when_it_comes_first() -> None:
    result = grep(files("x\nx", "x"), compile_pattern("x", regex=False, case_sensitive=False), limit=1, max_files=1)
    assert (len(result.matches), result.more, result.capped) == (1, True, False)


# -- patterns ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern", ["(a", "a)", "[a", "a{2,1}", "*a", r"(a)\1", r"(?P<x>a)(?P=x)", "a(?=b)", "a(?!b)", "(?<=a)b", "(?<!a)b"]
)
def test_a_pattern_re2_cannot_compile_is_invalid_pattern(pattern: str) -> None:
    assert "RE2 syntax" in invalid(pattern).message


def test_a_literal_pattern_is_never_invalid_syntax() -> None:
    assert found(r"(a)\1(?=", r"x(a)\1(?=y") == [("f0.md", 1, r"x(a)\1(?=y")]


def test_a_pattern_with_a_lone_surrogate_is_invalid_pattern() -> None:
    invalid("\ud800", regex=True)
    invalid("\ud800", regex=False)


@pytest.mark.parametrize("regex", [False, True])
def test_a_pattern_is_1_to_512_characters(regex: bool) -> None:
    invalid("", regex=regex)
    invalid("a" * 513, regex=regex)
    invalid("ä" * 513, regex=regex)
    assert found("ä" * 512, "Ä" * 512, regex=regex) == [("f0.md", 1, "Ä" * 512)]


def test_a_pattern_that_backtracks_exponentially_in_python_re_finishes() -> None:
    text = "a" * 50_000 + "b"
    assert found("(a+)+$", text, regex=True) == []
    assert found("(a+)+b", text, regex=True) == [("f0.md", 1, text)]
    assert found("(a|aa)+$", text + "\n" + "a" * 50_000, regex=True) == [("f0.md", 2, "a" * 50_000)]


# -- agreement with Python re ---------------------------------------------------------------------------

CORPUS = """\
# Preferences
- language: Python 3.13
- editor: vim (since 2019)
user@example.com wrote on 2024-05-01
TODO: fix the flaky test
todo later
  indented line
trailing space\x20
ID-4711 and ID-42
a.b.c
path/to/file.md
Ünïcödé line: café
[link](https://example.com)
$HOME and ~/bin
tabs\tbetween\twords

last line
"""

AGREED_PATTERNS = [
    "python",
    "^- ",
    r"\d{4}-\d{2}-\d{2}",
    r"[a-z]+@[a-z]+\.com",
    "todo",
    "^TODO:",
    r"^\s+\S",
    r" $",
    r"ID-\d+",
    r"ID-\d{3,}",
    r"a\.b",
    r"a.b",
    r"\.md$",
    r"café",
    r"\(https?://[^)]+\)",
    r"\$HOME",
    r"\t",
    r"^$",
    r"(vim|emacs)",
    r"\bline\b",
    r"^[^a-z]*$",
    r"(?i)LAST",
    r"e{2}|o{2}",
    r"\[.*?\]",
]


@pytest.mark.parametrize("pattern", AGREED_PATTERNS)
@pytest.mark.parametrize("case_sensitive", [False, True])
def test_re2_agrees_with_python_re_on_common_patterns(pattern: str, case_sensitive: bool) -> None:
    python = re.compile(pattern, 0 if case_sensitive else re.IGNORECASE)
    expected = [n for n, line in enumerate(CORPUS.splitlines(), start=1) if python.search(line)]
    lines = [line for _, line, _ in found(pattern, CORPUS, regex=True, case_sensitive=case_sensitive)]
    assert lines == expected
