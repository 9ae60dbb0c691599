"""Where named queries are kept, and the index a free query runs on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.queries.model import (
    NamedQuery,
)
from uhp_memories.domain.recall.model import RecallAnswer, RecallInput
from uhp_memories.domain.records.model import RecordVersion, RecordView


class QueryRepository(Protocol):
    def put(self, query: NamedQuery) -> None:
        """Define or replace. Raises TreeChanged when the memory is missing or being deleted."""
        ...

    def get(self, tenant: str, memory_id: str, name: str) -> NamedQuery | None:
        ...

    def list(self, tenant: str, memory_id: str) -> list[NamedQuery]:
        ...


class FreeQueryIndex(Protocol):
    """An index that can run a caller's statement confined to one memory."""

    free_query_languages: tuple[str, ...]

    def free_query(
        self, tenant: str, memory_id: str, language: str, statement: Any, limit: int
    ) -> tuple[list[str], list[str]]:
        """(record ids best first, bounds applied for `degraded`)."""
        ...


class RecallRunner(Protocol):
    """Recall as a named query runs it (uhp_memories.domain.recall.service.RecallService)."""

    def recall(self, caller: Caller, memory_id: str, request: RecallInput) -> RecallAnswer:
        """Recall (§6) on one memory with the caller's own privileges."""
        ...


class MemoryNeighbours(Protocol):
    """The memory tree as a free query's answer sees it (uhp_memories.domain.memories.service.MemoryService)."""

    def neighbours(
        self, access: AccessView, memory: Memory, children: Sequence[Memory] | None = None
    ) -> tuple[MemorySummary | None, list[MemorySummary]]:
        """The parent and the direct children the caller may read."""
        ...


class RecordViews(Protocol):
    """Records as a free query's answer shows them (uhp_memories.domain.records.service.RecordService)."""

    def view(self, access: AccessView, record: RecordVersion) -> RecordView:
        """A version as this reader sees it (references resolved with its privileges)."""
        ...
