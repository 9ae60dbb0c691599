"""The local embedder with the real all-MiniLM-L6-v2 int8 model, loaded offline from the installed
packages (a second or so, once for the module)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from uhp_memories.local.minilm import (
    DIMENSIONS,
    MODEL_DISTRIBUTION,
    MODEL_FILE,
    TOKENIZER_DISTRIBUTION,
    TOKENIZER_FILE,
    MiniLmEmbedder,
    ModelFileError,
    installed_file,
    int8_matmuls,
)


@pytest.fixture(scope="module")
def minilm() -> MiniLmEmbedder:
    embedder = MiniLmEmbedder()
    embedder.load()
    return embedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.mark.slow
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
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2:onnx-int8-u8u8"
    for vector, single in zip(together, alone, strict=True):
        assert len(vector) == 384
        assert math.isclose(math.sqrt(cosine(vector, vector)), 1.0, abs_tol=1e-5)
        assert vector == single  # each text runs alone: activations are quantized per call
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


def small_model(weights: np.ndarray, stored_as_int8: bool, scales: str = "column") -> tuple[bytes, np.ndarray]:
    """y = x @ W, with W stored as the model file stores it (int8 and a scale per column; or one scale,
    or one per row), or as float."""
    from onnx import TensorProto, helper, numpy_helper

    axis = {"column": 0, "one": None, "row": 1}[scales]
    scale = (np.abs(weights).max(axis=axis, keepdims=axis is not None) / 127).astype(np.float32)
    quantized = np.round(weights / scale).astype(np.int8)
    if axis == 0:
        scale = scale.reshape(-1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, weights.shape[0]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, weights.shape[1]])
    if stored_as_int8:
        nodes = [
            helper.make_node("Cast", ["w_int8"], ["w_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
            helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul"),
        ]
        stored_scale = scale[None, :] if scales == "column" else scale
        stored = [numpy_helper.from_array(quantized, "w_int8"), numpy_helper.from_array(stored_scale, "w_scale")]
    else:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")]
        stored = [numpy_helper.from_array(weights.astype(np.float32), "w")]
    graph = helper.make_graph(nodes, "small", [x], [y], stored)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString(), quantized.astype(np.float32) * scale


def test_int8_matrices_are_multiplied_as_int8_and_give_what_the_float_graph_gives() -> None:
    import onnx
    import onnxruntime as ort

    rng = np.random.default_rng(7)
    model, dequantized = small_model(rng.normal(size=(64, 32)), stored_as_int8=True)
    rewritten = int8_matmuls(model)
    assert [n.op_type for n in onnx.load_from_string(rewritten).graph.node][-1] == "DynamicQuantizeMatMul"
    x = rng.normal(size=(5, 64)).astype(np.float32)
    got = ort.InferenceSession(rewritten, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    want = x @ dequantized
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()  # activations quantized to 8 bits
    one_scale, dequantized = small_model(rng.normal(size=(64, 32)), stored_as_int8=True, scales="one")
    got = ort.InferenceSession(int8_matmuls(one_scale), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(got - x @ dequantized).max() < 0.05 * np.abs(x @ dequantized).max()
    with pytest.raises(ModelFileError, match="no int8 weight"):
        int8_matmuls(small_model(rng.normal(size=(64, 32)), stored_as_int8=False)[0])
    with pytest.raises(ModelFileError, match="no int8 weight"):  # a scale per row is not DynamicQuantizeMatMul's
        int8_matmuls(small_model(rng.normal(size=(64, 32)), stored_as_int8=True, scales="row")[0])


def quantized_like_onnxruntime(x: np.ndarray) -> tuple[np.ndarray, float, int]:
    """DynamicQuantizeLinear as the ONNX operator defines it: asymmetric uint8 over the range widened to 0."""
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = np.float32((high - low) / 255)
    zero = int(np.clip(np.rint(-low / scale), 0, 255))
    return np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.int64), float(scale), zero


def test_the_int8_products_are_exact_integer_arithmetic_on_this_cpu() -> None:
    """What makes a vector the same on every CPU: the int8 kernel's integer sums must be exact. u8 x s8
    kernels on AVX2 without VNNI add pairs of products in int16 and saturate (an error of 6.5 where this
    allows 1e-4 of the output's range, seen on an AMD EPYC); u8 x u8 widens to 16 bits first and is exact
    on x86-64 with or without AVX-512/VNNI and on arm64. Large weights and activations, where a saturating
    kernel goes wrong."""
    import onnxruntime as ort

    rng = np.random.default_rng(11)
    weights = rng.normal(size=(384, 96)) * np.where(rng.random((384, 96)) < 0.05, 8.0, 1.0)  # outliers: +-127
    model, _ = small_model(weights, stored_as_int8=True)
    session = ort.InferenceSession(int8_matmuls(model), providers=["CPUExecutionProvider"])
    scale = (np.abs(weights).max(axis=0) / 127).astype(np.float32)
    stored = np.round(weights / scale).astype(np.int64)
    for _ in range(5):
        x = (rng.normal(size=(7, 384)) * 4).astype(np.float32)
        got = session.run(None, {"x": x})[0]
        quantized, x_scale, zero = quantized_like_onnxruntime(x)
        exact = ((quantized - zero) @ stored).astype(np.float64) * x_scale * scale
        assert np.abs(got - exact).max() <= 1e-4 * np.abs(exact).max()


# Texts of the kinds a memory holds (questions, facts, turns, code, numbers, other languages, long ones).
AGREEMENT_TEXTS = (
    "When does Acme renew its contract?",
    "Caroline went to the LGBTQ support group yesterday.",
    "Acme renews in March and wants the annual discount kept.",
    "user: can you book the usual room for Thursday at 3? assistant: done, room 4B, 15:00-16:00.",
    "The deploy failed: AccessDeniedException on dynamodb:TransactWriteItems for role api-records.",
    "def handle_get_order(order_id: str) -> GetOrderOutput: return get_order(order_id=order_id)",
    "Invoice 2026-0417: 3 x 129.99 EUR, VAT 19%, due 2026-11-30.",
    "Melanie painted a sunrise over the lake and signed up for a pottery class.",
    "Der Kunde möchte den Vertrag im März verlängern und den Rabatt behalten.",
    "ok",
    "Procedure: when the nightly import stalls, drain the queue, restart the worker, then re-run the last batch. "
    * 6,
)


@pytest.mark.slow
def test_the_int8_model_agrees_with_the_float_arithmetic_it_replaces(minilm: MiniLmEmbedder) -> None:
    """The stated tolerance (docs/performance.md): cosine to the model's own float graph (the same stored
    weights, dequantized) at least 0.97 for every text (the shortest texts are the furthest: "ok" 0.977) and
    0.99 on average (0.993 here)."""
    import onnxruntime as ort

    float_session = ort.InferenceSession(
        str(installed_file(MODEL_DISTRIBUTION, MODEL_FILE)), providers=["CPUExecutionProvider"]
    )
    cosines = []
    for text, vector in zip(AGREEMENT_TEXTS, minilm.embed(list(AGREEMENT_TEXTS)), strict=True):
        ids = np.asarray([minilm._tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        pooled = float_session.run(None, feeds)[0][0].mean(axis=0)
        cosines.append(float(np.dot(pooled / np.linalg.norm(pooled), vector)))
    assert min(cosines) >= 0.97, cosines
    assert sum(cosines) / len(cosines) >= 0.99, cosines
