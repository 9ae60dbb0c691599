"""The local embedder's arithmetic, side by side: time per text and cosine to the model's own float graph.

Not a test. Three embedders run in one process, alternating round by round on the same texts, so the
machine's noise falls on all of them alike:
  - this checkout's MiniLmEmbedder (the int8 arithmetic it ships);
  - the same embedder as an earlier commit wrote it (`--versus REV`, default HEAD~1: its minilm.py is
    read with `git show` and loaded as a module of its own), when that commit has one;
  - the model file's float graph as onnxruntime runs it unchanged (the stored int8 weights dequantized
    to float32): the reference the cosines are measured against.
Each embedder runs with one intra-op thread, as local mode does. Prints one JSON object.

Usage: python bench/embedding_arithmetic.py [--versus REV] [--rounds 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT / "tests" / "unit")]

from test_minilm import AGREEMENT_TEXTS  # noqa: E402

from uhp_memories.local.minilm import MODEL_DISTRIBUTION, MODEL_FILE, MiniLmEmbedder, installed_file  # noqa: E402


def earlier_embedder(rev: str) -> Any | None:
    """MiniLmEmbedder as commit `rev` wrote it, or None where that commit has no such module."""
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:layers/core/uhp_memories/local/minilm.py"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout
    except subprocess.CalledProcessError:
        return None
    path = Path(tempfile.mkdtemp()) / "minilm_earlier.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("minilm_earlier", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    embedder = module.MiniLmEmbedder()
    embedder.load()
    return embedder


class FloatGraph:
    """The model file run as it is: the reference arithmetic."""

    def __init__(self, tokenizer: Any) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(installed_file(MODEL_DISTRIBUTION, MODEL_FILE)), sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        self._tokenizer = tokenizer

    def embed_array(self, texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            ids = np.asarray([self._tokenizer.encode(text).ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            pooled = self._session.run(None, feeds)[0][0].mean(axis=0)
            rows.append(pooled / np.linalg.norm(pooled))
        return np.asarray(rows, dtype=np.float32)


def cpu_flags() -> list[str]:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return []
    return sorted({f for f in flags.split() if f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versus", default="HEAD~1")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    current = MiniLmEmbedder()
    current.load()
    embedders: dict[str, Any] = {f"this checkout ({current.model_id})": current}
    earlier = earlier_embedder(args.versus)
    if earlier is not None:
        embedders[f"{args.versus} ({earlier.model_id})"] = earlier
    reference = FloatGraph(current._tokenizer)
    embedders["float graph"] = reference
    texts = list(AGREEMENT_TEXTS) * 4
    want = reference.embed_array(list(AGREEMENT_TEXTS))
    per_text: dict[str, list[float]] = {name: [] for name in embedders}
    for _ in range(args.rounds):
        for name, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed_array(texts)
            per_text[name].append((time.perf_counter() - started) / len(texts) * 1000)
    baseline = statistics.median(per_text["float graph"])
    report = {
        "machine": {"processor": platform.processor() or platform.machine(), "flags": cpu_flags()},
        "texts": len(AGREEMENT_TEXTS),
        "rounds": args.rounds,
        "embedders": {},
    }
    for name, embedder in embedders.items():
        cosines = np.sum(np.asarray(embedder.embed_array(list(AGREEMENT_TEXTS))) * want, axis=1)
        median = statistics.median(per_text[name])
        report["embedders"][name] = {
            "ms_per_text_median": round(median, 2),
            "ratio_to_float_graph": round(median / baseline, 2),
            "cosine_to_float_graph": {"min": round(float(cosines.min()), 4), "mean": round(float(cosines.mean()), 4)},
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
