"""Moving a memory (§2, MemoryService.update with `parent_id`): the checks a move makes before it is
written, and the new chain of ancestors of every memory below the one that moves."""

from __future__ import annotations

from collections.abc import Sequence

from uhp_memories.domain.access.model import AccessView
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.limits import MAX_TREE_DEPTH, MOVE_ITEMS_MAX
from uhp_memories.domain.memories import tree
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports


class MemoryMoves:
    """Plans a move of a memory under a new parent (or to a root); MemoryService.update writes it."""

    def __init__(self, ports: Ports) -> None:
        self._ports = ports

    def plan(
        self, caller: Caller, access: AccessView, memory_id: str, new_parent_id: str | None
    ) -> tuple[list[Memory], list[Memory]]:
        """Check the caller may move the memory there and that it fits; the new parent's chain (empty
        for a root) and the memories below the moved one with their new ancestors."""
        parent_chain: list[Memory] = []
        access.require(memory_id, "delete")
        # A run holding this memory or one below it makes the move's write memory_busy
        # (MemoryRepository.update): the write decides, so no run can start in between.
        descendants = tree.descendants(self._ports, caller.tenant, memory_id)
        if new_parent_id is not None:
            new_parent = access.require(new_parent_id, "create")
            parent_chain = tree.chain(access, new_parent)
            if any(node.id == memory_id for node in parent_chain):
                raise MemoryInvalid("a memory cannot move under itself or one of its descendants")
            # The whole subtree moves: its deepest node must still fit within the depth limit, or
            # later moves could stack trees deeper than the chain walked above to find a cycle.
            room = MAX_TREE_DEPTH - len(parent_chain)
            if self._subtree_height(caller.tenant, memory_id, room) > room:
                raise MemoryInvalid(f"a memory tree is at most {MAX_TREE_DEPTH} levels deep")
        below = self._rechained(memory_id, tuple(n.id for n in reversed(parent_chain)), descendants)
        self._check_move_size(parent_chain, below)
        return parent_chain, below

    def _subtree_height(self, tenant: str, memory_id: str, limit: int) -> int:
        """Levels in the subtree rooted at the memory (1 for a leaf), counted no further than limit + 1."""
        height, frontier = 1, [memory_id]
        while height <= limit:
            frontier = [c.id for node in frontier for c in self._ports.memories.children(tenant, node)]
            if not frontier:
                break
            height += 1
        return height

    @staticmethod
    def _rechained(memory_id: str, ancestors: tuple[str, ...], descendants: Sequence[Memory]) -> list[Memory]:
        """The memories below a moved one with their ancestors where it now sits (`ancestors`: its own)."""
        chains = {memory_id: (*ancestors, memory_id)}
        rechained = []
        for node in descendants:  # a parent comes before its children
            above = chains.get(node.parent_id or "")
            if above is None:
                continue  # under a node not read as below this one (it moved meanwhile): not ours to chain
            rechained.append(node.evolve(ancestors=above))
            chains[node.id] = (*above, node.id)
        return rechained

    @staticmethod
    def _check_move_size(parent_chain: Sequence[Memory], below: Sequence[Memory]) -> None:
        """A move is one transaction: the memory, a check of each memory above where it goes (so two
        moves cannot close a cycle), and the new chain of each memory below it (domain/limits.py)."""
        items = 1 + len(parent_chain) + len(below)
        if items > MOVE_ITEMS_MAX:
            raise MemoryInvalid(
                f"a move is one transaction of at most {MOVE_ITEMS_MAX} memories: this one, the {len(below)} "
                f"below it and the {len(parent_chain)} above where it goes make {items}; move some of the "
                "memories below it first (and back under it after)"
            )
