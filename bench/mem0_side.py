"""mem0 OSS beside our server: a worker process that bench/recall_locomo.py drives, call by call.

Not a test, and never imported by the project: it runs in the bench-only venv (`make .venv-bench`,
PyPI `mem0ai` pinned in bench/requirements-mem0.txt), so mem0 and its dependencies never enter the
project's venv or `make test`.

mem0 runs as a new user would run it without a hosted LLM: `Memory()` with its local vector store
(Qdrant's embedded mode, in memory; the history in SQLite in a temporary folder), every write with
`infer=False` (each message stored as it is, no LLM), and our own embedder,
all-MiniLM-L6-v2 int8 (uhp_memories.local.minilm), wrapped as a mem0 custom embedder, so both
sides embed the same texts with the same model and arithmetic. Nothing reaches the network:
telemetry off, the OpenAI LLM and embedder that `Memory()` builds by default are never called
(a placeholder key satisfies their constructors). mem0's hybrid keyword signal needs fastembed's
`Qdrant/bm25` and spaCy's `en_core_web_sm`, both fetched from model hubs at run time, which this
machine cannot reach: without them mem0 searches by meaning alone (it says so in its log), which is
what `pip install mem0ai` gives offline.

Two layouts (Stores): `shared`, one Memory for every user, searches filtered by `user_id`, as mem0
documents; `per-user`, a Memory of its own per user. Qdrant's embedded mode checks a payload filter
in Python point by point, so a shared store's search costs in proportion to every user's memories.

Protocol: one JSON request a line on standard input, one JSON answer a line on standard output.
Each answer carries `ms`, the time of the mem0 call alone, measured in this process (so mem0 pays no
HTTP and no pipe: the comparison favours it). `layout` is "shared" (the default) or "per-user".
  {"op": "add", "layout": L, "user": U, "messages": ["Speaker: text", ...]} -> {"ids": [...], "ms": t}
  {"op": "search", "layout": L, "user": U, "query": Q, "limit": K} -> {"ids": [...], "ms": t, "embed_ms": e}
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


def offline(folder: str) -> None:
    """Before mem0 is first imported (it reads these at import): no telemetry (PostHog would try
    the network), its own folder under `folder`, and a placeholder key for the OpenAI clients that
    `Memory()` builds and `infer=False` never calls."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(Path(folder) / "mem0-home")
    os.environ.setdefault("OPENAI_API_KEY", "not-used-infer-is-false")
    logging.getLogger("mem0").setLevel(logging.ERROR)
    if str(ROOT / "layers" / "core") not in sys.path:
        sys.path.insert(0, str(ROOT / "layers" / "core"))


def build(folder: str, embedder: Any = None) -> Any:
    """A mem0 `Memory` keeping its store and history under `folder`, embedding with ours (the model
    is loaded once and shared by every Memory of the process)."""
    from mem0 import Memory

    from uhp_memories.local.minilm import DIMENSIONS

    Path(folder).mkdir(parents=True, exist_ok=True)
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
    memory.embedding_model = embedder or our_minilm()
    return memory


def our_minilm() -> Any:
    from mem0.embeddings.base import EmbeddingBase

    from uhp_memories.local.minilm import MiniLmEmbedder

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
            return [self.embed(text) for text in texts]

    return OurMiniLm()


class Stores:
    """mem0 in its two local layouts: `shared`, one Memory for every user, each search filtered by
    `user_id` (mem0's documented way to keep users apart); `per-user`, a Memory (a Qdrant collection
    and a history) of its own for each user, so a search never looks at another user's memories."""

    def __init__(self, folder: str) -> None:
        offline(folder)
        self.folder = folder
        self.embedder = our_minilm()
        self.shared = build(str(Path(folder) / "shared"), self.embedder)
        self.own: dict[str, Any] = {}

    def of(self, layout: str, user: str) -> Any:
        if layout == "shared":
            return self.shared
        if user not in self.own:
            self.own[user] = build(str(Path(self.folder) / f"user-{len(self.own)}"), self.embedder)
        return self.own[user]


def serve() -> None:
    with tempfile.TemporaryDirectory(prefix="mem0-bench-") as folder:
        stores = Stores(folder)
        out = sys.stdout
        for line in sys.stdin:
            if not line.strip():
                continue
            ask = json.loads(line)
            answer: dict[str, Any]
            if ask["op"] == "add":
                memory = stores.of(ask.get("layout", "shared"), ask["user"])
                messages = [{"role": "user", "content": text} for text in ask["messages"]]
                start = time.perf_counter()
                added = memory.add(messages, user_id=ask["user"], infer=False)
                elapsed = (time.perf_counter() - start) * 1000
                answer = {"ids": [r["id"] for r in added["results"]], "ms": elapsed}
            elif ask["op"] == "search":
                memory = stores.of(ask.get("layout", "shared"), ask["user"])
                stores.embedder.spent_ms = 0.0
                start = time.perf_counter()
                found = memory.search(ask["query"], filters={"user_id": ask["user"]}, top_k=ask["limit"])
                elapsed = (time.perf_counter() - start) * 1000
                answer = {
                    "ids": [r["id"] for r in found["results"]],
                    "ms": elapsed,
                    "embed_ms": stores.embedder.spent_ms,  # of `ms`, embedding the query
                }
            elif ask["op"] == "info":
                answer = {
                    "mem0ai": metadata.version("mem0ai"),
                    "qdrant-client": metadata.version("qdrant-client"),
                    "python": sys.version.split()[0],
                    # Its BM25 leg answers only when the sparse encoder loaded (fastembed's model).
                    "keyword_search": stores.shared.vector_store.keyword_search("probe", top_k=1) is not None,
                }
            else:
                answer = {"error": f"unknown op {ask['op']}"}
            out.write(json.dumps(answer) + "\n")
            out.flush()


if __name__ == "__main__":
    serve()
