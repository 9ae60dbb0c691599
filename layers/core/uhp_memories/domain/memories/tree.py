"""Walks of the memory tree shared by MemoryService and its moves (domain/memories/move.py): a memory's
chain of ancestors and the memories below it."""

from __future__ import annotations

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.limits import MAX_TREE_DEPTH
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.ports import Ports


def chain(access: AccessView, memory: Memory) -> list[Memory]:
    """The memory and all its ancestors, as read now (whether or not the caller may see them)."""
    found = [memory]
    node = memory
    while node.parent_id is not None and len(found) <= MAX_TREE_DEPTH + 1:
        parent = access.memory(node.parent_id)
        if parent is None:
            break
        found.append(parent)
        node = parent
    return found


def descendants(ports: Ports, tenant: str, memory_id: str) -> list[Memory]:
    """Every memory below this one as read, level by level (a parent before its children)."""
    found: list[Memory] = []
    frontier = [memory_id]
    while frontier:
        children = [c for node in frontier for c in ports.memories.children(tenant, node)]
        found.extend(children)
        frontier = [c.id for c in children]
    return found


def subtree(ports: Ports, tenant: str, memory_id: str) -> list[str]:
    """The memory's id and its descendants', root first; empty when the memory is gone."""
    if ports.memories.get(tenant, memory_id) is None:
        return []
    return [memory_id, *(d.id for d in descendants(ports, tenant, memory_id))]
