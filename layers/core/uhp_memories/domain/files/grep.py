"""Grep over a memory's files (docs/file-memory.md, /grep): the lines that match a pattern, in the order
the files are given and then line order. Pure: the caller lists and reads the files.

Patterns are RE2 (google-re2), not Python re: RE2 matches in time linear in the text, so no pattern
(say `(a+)+$`) can hang a Lambda by backtracking. The price is RE2's syntax: no backreferences, no
lookaround, and `\\w`, `\\d`, `\\b` are ASCII (`\\pL` is any letter)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import re2

from uhp_memories.domain.errors import MemoryInvalid

PATTERN_CHARS = 512
LIMIT_MAX = 200
MAX_FILES = 10_000
MAX_BYTES = 64 * 1024 * 1024

# A line match is also a match of the whole file with its lines joined by "\n" under (?m), except through
# what sees past a line's ends: \A and \z (text ends even under (?m)) and a (?-m) that turns (?m) off.
# For such patterns every file is scanned line by line; this test is loose (it may also catch `\\A`), so
# at worst a file is scanned that need not be. \b and \B are safe: every line break is a non-word character.
_WHOLE_TEXT_UNSAFE = re.compile(r"\\[Az]|\(\?[imsU]*-[imsU]*m")


@dataclass(frozen=True)
class FileText:
    path: str
    record_id: str
    text: str


@dataclass(frozen=True)
class LineMatch:
    path: str
    line: int  # 1-based, as str.splitlines splits
    text: str
    record_id: str


@dataclass(frozen=True)
class GrepResult:
    matches: list[LineMatch]
    more: bool  # another line matched past the limit, or the scan was capped before the end
    capped: bool  # stopped at max_files or max_bytes (the API's degraded "grep:scan_capped")


@dataclass(frozen=True)
class Matcher:
    """A compiled pattern: `line` matches one line; `whole`, when not None, rules out a whole file at once
    (one RE2 pass instead of one call per line, most files matching nothing)."""

    line: Any  # re2._Regexp (google-re2 has no type information)
    whole: Any | None

    def lines(self, text: str) -> Iterator[tuple[int, str]]:
        lines = text.splitlines()
        if self.whole is not None and self.whole.search("\n".join(lines)) is None:
            return
        for number, line in enumerate(lines, start=1):
            if self.line.search(line) is not None:
                yield number, line


def compile_pattern(pattern: str, *, regex: bool, case_sensitive: bool) -> Matcher:
    if not 1 <= len(pattern) <= PATTERN_CHARS:
        raise MemoryInvalid(f"a pattern is 1 to {PATTERN_CHARS} characters", reason="invalid_pattern")
    options = re2.Options()
    options.encoding = re2.Options.Encoding.UTF8  # the default, stated: Unicode letters and case folding
    options.case_sensitive = case_sensitive
    options.log_errors = False  # a bad pattern is the caller's error, answered; not a line in our logs
    try:
        source = pattern if regex else re2.escape(pattern)
        line = re2.compile(source, options)
    except (re2.error, UnicodeEncodeError) as error:  # UnicodeEncodeError: a lone surrogate from JSON
        raise MemoryInvalid(
            f"the pattern is not valid RE2 syntax (RE2 has no backreferences or lookaround): {_reason(error)}",
            reason="invalid_pattern",
        ) from None
    whole = None
    if not regex or not _WHOLE_TEXT_UNSAFE.search(pattern):
        try:
            whole = re2.compile(f"(?m){source}", options)
        except re2.error:  # not expected (the pattern compiled); without the shortcut, answers are the same
            whole = None
    return Matcher(line=line, whole=whole)


def grep(
    files: Iterable[FileText], matcher: Matcher, *, limit: int, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES
) -> GrepResult:
    """At most `limit` matching lines; `more` as a13n-harness's own scan says it (a line matched past the
    limit). Files are read whole or not at all, and pulled from `files` one at a time, only as needed."""
    if not 1 <= limit <= LIMIT_MAX:
        raise MemoryInvalid(f"limit is 1 to {LIMIT_MAX}")
    matches: list[LineMatch] = []
    read = size = 0
    for file in files:
        if read == max_files:
            return GrepResult(matches, more=True, capped=True)
        read, size = read + 1, size + len(file.text.encode())
        if size > max_bytes:
            return GrepResult(matches, more=True, capped=True)
        for number, line in matcher.lines(file.text):
            if len(matches) == limit:
                return GrepResult(matches, more=True, capped=False)
            matches.append(LineMatch(path=file.path, line=number, text=line, record_id=file.record_id))
    return GrepResult(matches, more=False, capped=False)


def _reason(error: Exception) -> str:
    message = error.args[0] if isinstance(error, re2.error) and error.args else error
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)
