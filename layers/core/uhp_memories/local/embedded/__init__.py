"""The embedded search engine: stdlib sqlite3 (FTS5 for BM25) with numpy vectors, on disk or in memory.

Local mode and tests use it; it is never imported by a deployed handler (numpy). By concern:

- store.py: the SQLite schema, writes, secure delete (erase leaves no bytes behind), reads by id;
- sql.py: a request's filter compiled to SQL, and which documents it admits;
- vectors.py: each memory's vectors as one matrix in memory, and the vector signal;
- words.py: the BM25 signal over each memory's FTS5 table;
- log.py: each memory's episode log in write order, for ranking's context;
- index.py: EmbeddedSearchIndex, the SearchIndex port over them.
"""

from uhp_memories.local.embedded.index import EmbeddedSearchIndex
from uhp_memories.local.embedded.store import SCHEMA_VERSION
from uhp_memories.local.embedded.words import COMMON_DOCS

__all__ = ["COMMON_DOCS", "SCHEMA_VERSION", "EmbeddedSearchIndex"]
