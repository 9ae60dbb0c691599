"""Recall's search engine: ports (SearchIndex, Embedder), the engine that keeps an index in step with
record versions, the ranking above the index (ranking.py, with its maths in fusion.py: one ranking
for every adapter), and adapters.

Importing this package pulls in neither numpy nor onnxruntime nor opensearch-py. The adapters are
imported by name where they are wired:

- `uhp_memories.search.embedded.EmbeddedSearchIndex`: sqlite3 + FTS5 + numpy (local mode, tests)
- `uhp_memories.search.opensearch.OpenSearchIndex`: Amazon OpenSearch (AWS)
- `uhp_memories.search.minilm.MiniLmEmbedder`: all-MiniLM-L6-v2 int8 on onnxruntime (local mode)
- `uhp_memories.search.bedrock.TitanEmbedder`: Bedrock Titan Text Embeddings v2 (AWS)
- `uhp_memories.search.hashing.HashingEmbedder`: deterministic bag of words (tests)
"""

from uhp_memories.search.engine import RecallEngine, document_for, text_of
from uhp_memories.search.errors import EmbeddingModelMismatch, SearchError, SearchUnavailable
from uhp_memories.search.ports import (
    Embedder,
    Fusion,
    Hit,
    SearchDocument,
    SearchIndex,
    SearchRequest,
)

__all__ = [
    "Embedder",
    "EmbeddingModelMismatch",
    "Fusion",
    "Hit",
    "RecallEngine",
    "SearchDocument",
    "SearchError",
    "SearchIndex",
    "SearchRequest",
    "SearchUnavailable",
    "document_for",
    "text_of",
]
