"""mem0 OSS beside our server: a worker process that bench/recall_locomo.py drives, call by call.

Not a test, and never imported by the project: it runs in the bench-only venv (`make .venv-bench`,
PyPI `mem0ai` pinned in bench/requirements-mem0.txt), so mem0 and its dependencies never enter the
project's venv or `make test`.

mem0 runs as a new user would run it without a hosted LLM: `Memory()` with its local vector store
(Qdrant's embedded mode, in memory; the history in SQLite in a temporary folder), every write with
`infer=False` (each message stored as it is, no LLM), and our own embedder,
all-MiniLM-L6-v2 int8 (uhp_memories.search.minilm), wrapped as a mem0 custom embedder, so both
sides embed the same texts with the same model and arithmetic. Nothing reaches the network:
telemetry off, the OpenAI LLM and embedder that `Memory()` builds by default are never called
(a placeholder key satisfies their constructors). mem0's hybrid keyword signal needs fastembed's
`Qdrant/bm25` and spaCy's `en_core_web_sm`, both fetched from model hubs at run time, which this
machine cannot reach: without them mem0 searches by meaning alone (it says so in its log), which is
what `pip install mem0ai` gives offline.

Protocol: one JSON request a line on standard input, one JSON answer a line on standard output.
Each answer carries `ms`, the time of the mem0 call alone, measured in this process (so mem0 pays no
HTTP and no pipe: the comparison favours it).
  {"op": "add", "user": U, "messages": ["Speaker: text", ...]}   -> {"ids": [...], "ms": t}
  {"op": "search", "user": U, "query": Q, "limit": K}    -> {"ids": [...], "ms": t, "embed_ms": e}
  {"op": "info"}                                                   -> {"mem0ai": version, ...}
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def build(folder: str) -> Any:
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = folder
    os.environ.setdefault("OPENAI_API_KEY", "not-used-infer-is-false")
    logging.getLogger("mem0").setLevel(logging.ERROR)
    sys.path.insert(0, str(ROOT / "layers" / "core"))
    from mem0 import Memory
    from mem0.embeddings.base import EmbeddingBase

    from uhp_memories.search.minilm import DIMENSIONS, MiniLmEmbedder

    class OurMiniLm(EmbeddingBase):  # mem0's custom-embedder interface over our embedder
        def __init__(self) -> None:
            super().__init__()
            self.spent_ms = 0.0  # in the model, since the last call was timed (see serve)
            self.model = MiniLmEmbedder()
            self.model.load()

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            start = time.perf_counter()
            vector = self.model.embed([text])[0]
            self.spent_ms += (time.perf_counter() - start) * 1000
            return vector

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
            return self.model.embed(list(texts))

    memory = Memory.from_config(
        {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "locomo",
                    "embedding_model_dims": DIMENSIONS,
                    "path": str(Path(folder) / "qdrant"),
                    "on_disk": False,
                },
            },
            "history_db_path": str(Path(folder) / "history.db"),
        }
    )
    memory.embedding_model = OurMiniLm()
    return memory


def serve() -> None:
    with tempfile.TemporaryDirectory(prefix="mem0-bench-") as folder:
        memory = build(folder)
        out = sys.stdout
        for line in sys.stdin:
            if not line.strip():
                continue
            ask = json.loads(line)
            answer: dict[str, Any]
            if ask["op"] == "add":
                messages = [{"role": "user", "content": text} for text in ask["messages"]]
                start = time.perf_counter()
                added = memory.add(messages, user_id=ask["user"], infer=False)
                elapsed = (time.perf_counter() - start) * 1000
                answer = {"ids": [r["id"] for r in added["results"]], "ms": elapsed}
            elif ask["op"] == "search":
                memory.embedding_model.spent_ms = 0.0
                start = time.perf_counter()
                found = memory.search(ask["query"], filters={"user_id": ask["user"]}, top_k=ask["limit"])
                elapsed = (time.perf_counter() - start) * 1000
                answer = {
                    "ids": [r["id"] for r in found["results"]],
                    "ms": elapsed,
                    "embed_ms": memory.embedding_model.spent_ms,  # of `ms`, embedding the query
                }
            elif ask["op"] == "info":
                answer = {
                    "mem0ai": metadata.version("mem0ai"),
                    "qdrant-client": metadata.version("qdrant-client"),
                    "python": sys.version.split()[0],
                    # Its BM25 leg answers only when the sparse encoder loaded (fastembed's model).
                    "keyword_search": memory.vector_store.keyword_search("probe", top_k=1) is not None,
                }
            else:
                answer = {"error": f"unknown op {ask['op']}"}
            out.write(json.dumps(answer) + "\n")
            out.flush()


if __name__ == "__main__":
    serve()
