"""The pure-Python MiniLM tokenizer (uhp_memories.tokens) yields the very tokens `tokenizers` does on
the pinned tokenizer.json, so prime's budget is counted by a real tokenizer in every deployed Lambda."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer

from uhp_memories.local.minilm import TOKENIZER_DISTRIBUTION, TOKENIZER_FILE, TOKENIZER_SHA256, installed_file, verified
from uhp_memories.tokens import count_tokens
from uhp_memories.tokens.wordpiece import MiniLmTokens

SAMPLES = [
    "Hello, World! Café naïve résumé",
    "北京欢迎你 and 東京",
    "x" * 150,
    "don't $100 <tag> a+b=c ~ | ^ `",
    "Ünïcödé İstanbul ß ﬁ",
    "tab\tnew\nline\r\x00\ufffd\x85 nbsp\xa0end",
    "emoji 😀🚀 ok",
    "[[record-content 3f9a]] hi [[/record-content 3f9a]]",
    "antidisestablishmentarianism supercalifragilistic",
    "",
]


@pytest.fixture(scope="module")
def reference() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(verified(installed_file(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE),
                                                 TOKENIZER_SHA256)))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _random_texts(n: int) -> list[str]:
    rnd = random.Random(7)
    alphabet = "abcXYZ éü北,.!?'\"-_\t\n😀ß0123456789#$%&()[]{}\u0301\u200b\u2028\u3000"
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))) for _ in range(n)]


def test_the_tokens_are_those_of_the_tokenizers_package(reference: Tokenizer) -> None:
    ours = MiniLmTokens()
    for text in [*SAMPLES, *_random_texts(1500)]:
        assert ours.tokens(text) == reference.encode(text, add_special_tokens=False).tokens, repr(text)


def test_counting_is_the_number_of_tokens_without_special_tokens(reference: Tokenizer) -> None:
    text = "Deploys happen on Tuesdays."
    assert count_tokens(text) == len(reference.encode(text, add_special_tokens=False).ids) == 7


def test_a_vocabulary_that_is_not_the_pinned_one_is_refused(tmp_path) -> None:
    forged = tmp_path / "vocab.txt"
    forged.write_text("[UNK]\nhello\n")
    with pytest.raises(RuntimeError, match="SHA-256"):
        MiniLmTokens(forged).count("hello")
