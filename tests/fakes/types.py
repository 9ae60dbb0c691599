"""In-memory fake of a tenant's registered extension types: the contract of DynamoTypeRepository."""

from __future__ import annotations

import copy
import threading

from uhp_memories.domain.types.model import TypeDefinition, TypeVersionTaken


class InMemoryTypeRepository:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.versions: dict[tuple[str, str], list[TypeDefinition]] = {}

    def current(self, tenant: str, type_name: str) -> TypeDefinition | None:
        kept = self.versions.get((tenant, type_name))
        return copy.deepcopy(kept[-1]) if kept else None

    def list(self, tenant: str) -> list[TypeDefinition]:
        """By type name, the order of their DynamoDB sort keys."""
        return [copy.deepcopy(v[-1]) for (t, _), v in sorted(self.versions.items()) if t == tenant]

    def put(self, tenant: str, definition: TypeDefinition) -> None:
        with self.lock:
            kept = self.versions.setdefault((tenant, definition.type), [])
            if len(kept) != definition.version - 1:
                raise TypeVersionTaken(definition.type)
            kept.append(copy.deepcopy(definition))
