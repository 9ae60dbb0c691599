"""Named queries (§6.4) and free queries (§6.5).

A named query is a recall request written once by someone who may write the memory, in this
provider's language `uhp-recall`: a JSON recall request whose string values may be `{{param}}`
placeholders, with typed params described by a small JSON Schema. Running one substitutes the
validated params and runs recall on the memory in the path, with the caller's own privileges: a
template can say what to look for, never where the caller may look.

A free query is a statement the caller writes. Only an index that can confine it by a means the
statement cannot undo runs one (OpenSearch: an allowlist of clauses wrapped in the memory's filter);
elsewhere it is memory_unsupported, and the capability document does not offer it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid, MemoryNotFound, MemoryUnsupported, TreeChanged
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.queries.model import (
    LANGUAGE,
    MAX_QUERIES,
    NAME,
    NamedQuery,
    QueryNotFound,
    _check_param_schema,
    _check_params,
    _template,
    check_recall_template,
    recall_input,
    substitute,
)
from uhp_memories.domain.queries.ports import (
    FreeQueryIndex,
    MemoryNeighbours,
    QueryRepository,
    RecallRunner,
    RecordViews,
)
from uhp_memories.domain.recall.model import RecallAnswer, RecallResult


class QueryService:
    """Named queries (§6.4), defined and run, and free queries (§6.5)."""
    def __init__(
        self,
        ports: Ports,
        queries: QueryRepository,
        recall: RecallRunner,
        memories: MemoryNeighbours,
        records: RecordViews,
        free_index: Callable[[], FreeQueryIndex | None],
        free_languages: tuple[str, ...] = (),
    ) -> None:
        self._free_languages = free_languages
        self._ports = ports
        self._queries = queries
        self._recall = recall
        self._memories = memories
        self._records = records
        self._free_index = free_index

    # -- named -------------------------------------------------------------------------------

    def define(self, caller: Caller, memory_id: str, name: str, definition: dict[str, Any]) -> NamedQuery:
        """Define or replace a named query on this memory (write needed)."""
        self._ports.providers.require_native(self._ports.access(caller).require(memory_id, "write"), "named queries")
        if not NAME.match(name):
            raise MemoryInvalid("a query name is 1 to 64 lowercase letters, digits or '_', starting with a letter")
        if definition.get("name") not in (None, name):
            raise MemoryInvalid(f"the query's name '{definition['name']}' is not the name in the path, '{name}'")
        language = definition.get("language", LANGUAGE)
        if language != LANGUAGE:
            raise MemoryInvalid(f"this provider's query language is '{LANGUAGE}', a recall request template")
        requires = definition.get("requires", "read")
        if requires not in ("read", "write"):
            raise MemoryInvalid("requires is read or write")
        params = _check_param_schema(definition.get("params") or {"type": "object", "properties": {}})
        body = check_recall_template(_template(definition.get("body")), params["properties"])
        existing = self._queries.list(caller.tenant, memory_id)
        if len(existing) >= MAX_QUERIES and all(q.name != name for q in existing):
            raise MemoryInvalid(f"a memory holds at most {MAX_QUERIES} named queries")
        query = NamedQuery(
            tenant=caller.tenant,
            memory_id=memory_id,
            name=name,
            description=str(definition.get("description") or ""),
            params=params,
            requires=requires,
            language=LANGUAGE,
            body=body,
            updated_by=caller.principal,
            updated_at=self._ports.clock.now_ms(),
        )
        try:
            self._queries.put(query)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        return query

    def list(self, caller: Caller, memory_id: str) -> list[NamedQuery]:
        """The named queries this caller may run here (each offered only within its reach)."""
        access = self._ports.access(caller)
        access.require(memory_id, "read")
        held = access.privileges(memory_id)
        return [q for q in self._queries.list(caller.tenant, memory_id) if q.requires in held]

    def run(self, caller: Caller, memory_id: str, name: str, params: Any) -> RecallAnswer:
        """Run a named query with these params as recall, with the caller's own privileges."""
        access = self._ports.access(caller)
        self._ports.providers.require_native(access.require(memory_id, "read"), "named queries")
        query = self._queries.get(caller.tenant, memory_id, name) if NAME.match(name) else None
        if query is None:
            raise QueryNotFound(name)
        access.require(memory_id, query.requires)
        values = _check_params(query.params, params)
        return self._recall.recall(caller, memory_id, recall_input(substitute(query.body, values)))

    # -- free --------------------------------------------------------------------------------

    def free_languages_configured(self) -> tuple[str, ...]:
        """The free-query languages of this deployment, known without building the index."""
        return self._free_languages

    def free(
        self, caller: Caller, memory_id: str, language: str, statement: Any, params: Any, limit: int
    ) -> RecallAnswer:
        """Run a caller's statement confined to this memory, on an index that can confine it."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        self._ports.providers.require_native(memory, "free queries")
        index = self._free_index()
        if index is None or language not in getattr(index, "free_query_languages", ()):
            raise MemoryUnsupported(
                "free queries are not offered here: this provider's index cannot confine a statement "
                "to one memory by a means the statement cannot undo"
            )
        if not 1 <= limit <= 100:
            raise MemoryInvalid("limit must be between 1 and 100")
        if params:
            if not isinstance(params, dict):
                raise MemoryInvalid("params is an object")
            statement = substitute(statement, params)
        record_ids, bounds = index.free_query(caller.tenant, memory_id, language, statement, limit)
        results = []
        for rank, record_id in enumerate(record_ids):
            record = self._ports.records.get(caller.tenant, memory_id, record_id)
            # Read back from the source of truth: only current active versions of this memory.
            if record is None or not record.is_current or record.status != "active":
                continue
            results.append(RecallResult(self._records.view(access, record), round(1.0 / (rank + 1), 6), ("statement",)))
        parent, children = self._memories.neighbours(access, memory)
        return RecallAnswer(results=results, parent=parent, children=children, degraded=bounds, abstain=not results)




















__all__: Sequence[str] = ("NamedQuery", "QueryRepository", "QueryService")
