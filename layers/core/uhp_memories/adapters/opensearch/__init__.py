"""The recall index on Amazon OpenSearch: k-NN + BM25 + bool filters in one index.

- queries.py: every body the adapter sends (index mapping, documents, bulk actions, searches), built
  here so unit tests pin them without a cluster;
- index.py: OpenSearchIndex, the SearchIndex port over an injected opensearch-py client, and
  `connect`.

No numpy here: this package is imported by deployed handlers.
"""

from uhp_memories.adapters.opensearch.index import OpenSearchIndex, connect
from uhp_memories.adapters.opensearch.queries import (
    SCHEMA_VERSION,
    SEARCH_SOURCE,
    SIMILARITY_SCRIPT,
    bm25_body,
    bulk_delete_actions,
    bulk_index_actions,
    delete_memory_body,
    doc_id,
    document_source,
    filter_clauses,
    index_body,
    isolation_filter,
    knn_body,
    log_body,
    neighbours_body,
    predicate_query,
    recency_body,
    similarity_body,
    similarity_of,
    word_count_bodies,
    word_weights,
)

__all__ = [
    "SCHEMA_VERSION",
    "SEARCH_SOURCE",
    "SIMILARITY_SCRIPT",
    "OpenSearchIndex",
    "bm25_body",
    "bulk_delete_actions",
    "bulk_index_actions",
    "connect",
    "delete_memory_body",
    "doc_id",
    "document_source",
    "filter_clauses",
    "index_body",
    "isolation_filter",
    "knn_body",
    "log_body",
    "neighbours_body",
    "predicate_query",
    "recency_body",
    "similarity_body",
    "similarity_of",
    "word_count_bodies",
    "word_weights",
]
