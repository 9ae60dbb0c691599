"""uhp-memories mounted in a13n-harness: the client side, over the REST API (the server never imports it).

`UHP_MEMORIES` is an a13n-harness `MemoryProviderDefinition`: `UHP_MEMORIES.open({"base_url": URL},
{"api_key": KEY}, namespace=MEMORY_ID, http=...)` is an async context manager yielding a `RecordStore`
over the memory's facts. `open_file_store(base_url=URL, api_key=KEY, memory_id=MEMORY_ID, http=...)`
yields a `SearchableFileStore` over the memory's files (records with a path, docs/file-memory.md).
Installed with the `harness` extra.
"""

from uhp_memories.harness.files import UhpFileStore, open_file_store
from uhp_memories.harness.records import (
    UHP_MEMORIES,
    UhpMemoriesConfiguration,
    UhpMemoriesCredential,
    UhpRecordStore,
)

__all__ = [
    "UHP_MEMORIES",
    "UhpFileStore",
    "UhpMemoriesConfiguration",
    "UhpMemoriesCredential",
    "UhpRecordStore",
    "open_file_store",
]
