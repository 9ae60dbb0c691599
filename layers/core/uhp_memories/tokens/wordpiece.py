"""The all-MiniLM-L6-v2 tokenizer (BERT uncased WordPiece), in pure Python, for counting prime's tokens.

Prime places records within a budget of tokens (§9.1), counted by a real tokenizer that works offline
and in every deployed Lambda. The embedding tokenizer of local mode (`tokenizers`, a native wheel) is
not deployed (tests/unit/test_api_surface.py keeps it out of the Lambda layer), so this module is the
same tokenizer written out: the same vocabulary (`minilm_vocab.txt`, the 30,522 entries of the
`tokenizer.json` that uhp_memories.local.minilm pins, in id order) and the same pipeline as its
`BertNormalizer` (clean text, space around CJK ideographs, strip accents, lowercase),
`BertPreTokenizer` (split on whitespace, each punctuation character a word) and `WordPiece`
(greedy longest match, `##` continuations, `[UNK]` for a word of more than 100 characters or one
that cannot be matched). tests/unit/test_prime_tokens.py checks that it yields the very tokens
`tokenizers` does on the pinned `tokenizer.json`.

The count is of MiniLM's tokens, without [CLS] and [SEP]: a model's own tokenizer differs, so a
budget is a measured size in one tokenizer the server can always run, not a promise in another.
"""

from __future__ import annotations

import hashlib
import string
import threading
import unicodedata
from pathlib import Path

TOKENIZER_NAME = "all-MiniLM-L6-v2 WordPiece"  # named in prime's answer: what its tokens count
VOCAB_FILE = Path(__file__).with_name("minilm_vocab.txt")
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
UNKNOWN = "[UNK]"
CONTINUATION = "##"
MAX_WORD_CHARS = 100
_ASCII_PUNCTUATION = frozenset(string.punctuation)
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK)


def _is_punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def normalize(text: str) -> str:
    """BertNormalizer(clean_text, handle_chinese_chars, strip_accents, lowercase)."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code in (0, 0xFFFD) or (char not in "\t\n\r" and unicodedata.category(char).startswith("C")):
            continue
        if char.isspace():
            out.append(" ")
        elif _is_cjk(code):
            out.extend((" ", char, " "))
        else:
            out.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def words(normalized: str) -> list[str]:
    """BertPreTokenizer: whitespace separates words; each punctuation character is a word of its own."""
    found: list[str] = []
    current: list[str] = []
    for char in normalized:
        if char.isspace() or _is_punctuation(char):
            if current:
                found.append("".join(current))
                current = []
            if not char.isspace():
                found.append(char)
        else:
            current.append(char)
    if current:
        found.append("".join(current))
    return found


class MiniLmTokens:
    """The tokenizer over the vocabulary file, loaded (and checked against its SHA-256) on first use."""

    def __init__(self, vocab_file: Path = VOCAB_FILE, sha256: str = VOCAB_SHA256) -> None:
        self._file = vocab_file
        self._sha256 = sha256
        self._vocab: frozenset[str] | None = None
        self._lock = threading.Lock()

    def _loaded(self) -> frozenset[str]:
        if self._vocab is None:
            with self._lock:
                if self._vocab is None:
                    data = self._file.read_bytes()
                    if hashlib.sha256(data).hexdigest() != self._sha256:
                        raise RuntimeError(f"{self._file.name} does not match its pinned SHA-256")
                    self._vocab = frozenset(data.decode("utf-8").split("\n")[:-1])
        return self._vocab

    def tokens(self, text: str) -> list[str]:
        vocab = self._loaded()
        out: list[str] = []
        for word in words(normalize(text)):
            out.extend(_word_pieces(word, vocab))
        return out

    def count(self, text: str) -> int:
        return len(self.tokens(text))


def _word_pieces(word: str, vocab: frozenset[str]) -> list[str]:
    if len(word) > MAX_WORD_CHARS:
        return [UNKNOWN]
    pieces: list[str] = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:
            candidate = word[start:end] if start == 0 else CONTINUATION + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [UNKNOWN]
        pieces.append(piece)
        start = end
    return pieces


_DEFAULT = MiniLmTokens()


def count_tokens(text: str) -> int:
    """MiniLM tokens in `text` (no special tokens)."""
    return _DEFAULT.count(text)
