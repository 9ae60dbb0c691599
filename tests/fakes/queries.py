"""In-memory fakes for named and free queries: the contract of DynamoQueryRepository, and an index
that answers a caller's statement with the record ids a test planted for the memory."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.tree import InMemoryMemoryRepository
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.queries.model import NamedQuery

QUERY = "query"


class InMemoryQueryRepository:
    """Named queries kept under their memory, so the memory's purge removes them (as in DynamoDB)."""

    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories

    def put(self, query: NamedQuery) -> None:
        with self.memories.lock:
            if not self.memories.live(query.tenant, query.memory_id):
                raise TreeChanged(query.memory_id)
            # A copy: the stored definition never changes with the caller's dicts, as a stored item does not.
            self.memories.keep(query.tenant, query.memory_id, QUERY, query.name, copy.deepcopy(query))

    def get(self, tenant: str, memory_id: str, name: str) -> NamedQuery | None:
        found = self.memories.kept_under(tenant, memory_id, QUERY).get(name)
        return copy.deepcopy(found)

    def list(self, tenant: str, memory_id: str) -> list[NamedQuery]:
        """By name, the order of their DynamoDB sort keys."""
        return [copy.deepcopy(q) for q in self.memories.kept_under(tenant, memory_id, QUERY).values()]


@dataclass(frozen=True)
class FreeQueryCall:
    tenant: str
    memory_id: str
    language: str
    statement: Any
    limit: int


@dataclass
class InMemoryFreeQueryIndex:
    """An index that can confine a statement: it answers, best first, the ids planted for the memory
    (`answers`), cut at the limit, with `bounds` as what it applied; every call is kept in `calls`."""

    free_query_languages: tuple[str, ...] = ("opensearch-dsl",)
    answers: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    bounds: list[str] = field(default_factory=list)
    calls: list[FreeQueryCall] = field(default_factory=list)

    def free_query(
        self, tenant: str, memory_id: str, language: str, statement: Any, limit: int
    ) -> tuple[list[str], list[str]]:
        self.calls.append(FreeQueryCall(tenant, memory_id, language, statement, limit))
        return list(self.answers.get((tenant, memory_id), []))[:limit], list(self.bounds)
