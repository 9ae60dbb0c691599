"""Where registered extension types are kept."""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.recall.model import RecallAnswer, RecallInput
from uhp_memories.domain.records.model import NO_TERMS, RecordPage, RecordVersion, RecordView, WriteTerms
from uhp_memories.domain.types.model import (
    TypeDefinition,
)

# jsonschema's import is a cold start's cost (measured: docs/performance.md,
# "Figures behind design choices in the code").
if TYPE_CHECKING:  # imported when first used: only writes of typed records pay for jsonschema
    pass


class TypeRepository(Protocol):
    """A tenant's registered types: the current version of each, and every version kept."""

    def current(self, tenant: str, type_name: str) -> TypeDefinition | None:
        ...

    def list(self, tenant: str) -> list[TypeDefinition]:
        ...

    def put(self, tenant: str, definition: TypeDefinition) -> None:
        """Write `definition` as the new current version; TypeVersionTaken when a version other than
        `definition.version - 1` is current (another registration came first)."""
        ...


class RecallRunner(Protocol):
    """Recall as a read operation runs it (uhp_memories.domain.recall.service.RecallService)."""

    def recall(self, caller: Caller, memory_id: str, request: RecallInput) -> RecallAnswer:
        """Recall (§6) on one memory with the caller's own privileges."""
        ...


class MemoryNeighbours(Protocol):
    """The memory tree as a read operation's answer sees it (uhp_memories.domain.memories.service.MemoryService)."""

    def neighbours(
        self, access: AccessView, memory: Memory, children: Sequence[Memory] | None = None
    ) -> tuple[MemorySummary | None, list[MemorySummary]]:
        """The parent and the direct children the caller may read."""
        ...


class OperationRecords(Protocol):
    """Records as an operation reads and revises them (uhp_memories.domain.records.service.RecordService)."""

    def revise(
        self,
        caller: Caller,
        memory_id: str,
        record_id: str,
        changes: dict[str, Any],
        terms: WriteTerms = NO_TERMS,
        *,
        sent: Collection[str] | None = None,
    ) -> RecordView:
        """Append a new version of a record, closing the one it replaces (§5)."""
        ...

    def list(
        self,
        caller: Caller,
        memory_id: str,
        *,
        types: builtins.list[str] | None = None,
        filters: Any = None,
        include: str = "active",
        as_of: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        path: str | None = None,
        under: str | None = None,
    ) -> RecordPage:
        """A page of a memory's records, newest first, with its parent and children (§6.1)."""
        ...

    def view(self, access: AccessView, record: RecordVersion) -> RecordView:
        """A version as this reader sees it (references resolved with its privileges)."""
        ...
