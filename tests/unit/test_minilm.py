"""The local embedder with the real all-MiniLM-L6-v2 int8 model, loaded offline from the installed
packages (a second or so, once for the module)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from uhp_memories.search.minilm import (
    DIMENSIONS,
    MODEL_DISTRIBUTION,
    MODEL_FILE,
    TOKENIZER_DISTRIBUTION,
    TOKENIZER_FILE,
    MiniLmEmbedder,
    ModelFileError,
    installed_file,
)


@pytest.fixture(scope="module")
def minilm() -> MiniLmEmbedder:
    embedder = MiniLmEmbedder()
    embedder.load()
    return embedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_close_sentences_score_higher_than_unrelated_ones(minilm: MiniLmEmbedder) -> None:
    question, answer, near_miss, unrelated = minilm.embed(
        [
            "When does Acme renew its contract?",
            "Acme renews in March and wants the annual discount kept.",
            "Globex signed a three-year deal last spring.",
            "I had pizza with extra cheese for lunch.",
        ]
    )
    assert cosine(question, answer) > cosine(question, near_miss) > cosine(question, unrelated)
    assert cosine(question, answer) > 0.5
    assert cosine(question, unrelated) < 0.2


def test_paraphrases_are_closer_than_sentences_that_share_only_words(minilm: MiniLmEmbedder) -> None:
    base, paraphrase, shared_words = minilm.embed(
        [
            "Caroline is planning to adopt a child.",
            "Caroline wants to become a mother through adoption.",
            "The child planned a trip to Caroline's farm.",
        ]
    )
    assert cosine(base, paraphrase) > cosine(base, shared_words)


def test_vectors_are_normalized_384_floats_and_do_not_depend_on_the_batch(minilm: MiniLmEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about renewals and discounts", "word " * 400]
    together = minilm.embed(texts)
    alone = [minilm.embed([t])[0] for t in texts]
    assert minilm.dimensions == DIMENSIONS == 384
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2:onnx-int8"
    for vector, single in zip(together, alone, strict=True):
        assert len(vector) == 384
        assert math.isclose(math.sqrt(cosine(vector, vector)), 1.0, abs_tol=1e-5)
        assert cosine(vector, single) > 0.9999
    assert minilm.embed([]) == []


def test_the_model_files_come_from_the_installed_packages() -> None:
    model = installed_file(MODEL_DISTRIBUTION, MODEL_FILE)
    assert model.name == "model.onnx"
    assert installed_file(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE).name == "tokenizer.json"
    with pytest.raises(ModelFileError):
        installed_file("no-such-distribution-here", "model.onnx")


def test_a_file_that_does_not_match_its_pinned_hash_is_refused(tmp_path: Path) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    shutil.copy(installed_file(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE), tokenizer)
    with tokenizer.open("a") as stream:
        stream.write(" ")
    with pytest.raises(ModelFileError, match="SHA-256"):
        MiniLmEmbedder(tokenizer_path=tokenizer).load()
