"""uhp-memories mounted in a13n-harness: the client side, over the REST API (the server never imports it).

`UHP_MEMORIES` is an a13n-harness `MemoryProviderDefinition`: `UHP_MEMORIES.open({"base_url": URL},
{"api_key": KEY}, namespace=MEMORY_ID, http=...)` is an async context manager yielding a `RecordStore`
over the memory's facts. Installed with the `harness` extra.
"""

from uhp_memories.harness.records import (
    UHP_MEMORIES,
    UhpMemoriesConfiguration,
    UhpMemoriesCredential,
    UhpRecordStore,
)

__all__ = ["UHP_MEMORIES", "UhpMemoriesConfiguration", "UhpMemoriesCredential", "UhpRecordStore"]
