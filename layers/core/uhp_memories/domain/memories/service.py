"""The memory tree (§2): create, read, update and move, delete, and the listings."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from uhp_memories.domain import cursors
from uhp_memories.domain.access.model import AccessView, Grant, ordered
from uhp_memories.domain.agents.model import require_person
from uhp_memories.domain.errors import MemoryInvalid, MemoryNotFound, TreeChanged
from uhp_memories.domain.files.model import held_file, memory_prefix
from uhp_memories.domain.files.ports import FileRepository, ObjectStore
from uhp_memories.domain.limits import LIST_DEFAULT, LIST_MAX, MAX_TREE_DEPTH
from uhp_memories.domain.memories import tree
from uhp_memories.domain.memories.model import Memory, MemorySummary, MemoryView
from uhp_memories.domain.memories.move import MemoryMoves
from uhp_memories.domain.memories.ports import MemoryIndex
from uhp_memories.domain.model import NATIVE_PROVIDER, PRIVILEGES, Caller, Page
from uhp_memories.domain.ports import Ports


class MemoryService:
    """Creates, reads, lists, updates, moves and deletes the memories of the tree (§2)."""

    def __init__(
        self,
        ports: Ports,
        objects: ObjectStore | None = None,
        index: Callable[[], MemoryIndex | None] | None = None,
        files: FileRepository | None = None,
    ) -> None:
        self._ports = ports
        self._objects = objects
        self._files = files
        self._index = index
        self._moves = MemoryMoves(ports)

    # -- reads -------------------------------------------------------------------------------

    def get(self, caller: Caller, memory_id: str) -> MemoryView:
        """The memory as the caller sees it; it must be visible to the caller."""
        access = self._ports.access(caller)
        return self.view(access, access.visible(memory_id))

    def view(self, access: AccessView, memory: Memory) -> MemoryView:
        """The memory with its placement, privileges and children as this caller's access sees them."""
        ancestors = access.visible_ancestors(memory)
        return MemoryView(
            memory=memory,
            parent_id=ancestors[-1] if ancestors else None,
            ancestors=ancestors,
            privileges=ordered(access.privileges(memory.id)),
            children_count=self._children_seen(access, memory),
        )

    def summary(self, access: AccessView, memory: Memory) -> MemorySummary:
        """The short form of the memory a recall or list response names for a parent or a child."""
        return MemorySummary(
            memory.id,
            memory.name,
            memory.description,
            memory.record_count,
            self._children_seen(access, memory),
            memory.describer,
        )

    def _children_seen(self, access: AccessView, memory: Memory) -> int:
        """How many of a memory the caller sees has children it sees: from the count the memory keeps
        (ChildCount: every child not restricted, and each restricted one granted to the caller), read with
        the memory; a memory from before the count was kept has its children read to count them."""
        if memory.children is not None:
            return memory.children.seen_by(access.caller.principal_ids)
        return len(self._visible_children(access, memory.id))

    def neighbours(
        self, access: AccessView, memory: Memory, children: Sequence[Memory] | None = None
    ) -> tuple[MemorySummary | None, builtins.list[MemorySummary]]:
        """The parent and the direct children the caller may read: where a reader can go from here
        (§6.1). Only `read` counts: a write-only or create-only grantee still reaches such a memory
        by its id, but a read response does not send a reader where it cannot read. `children`: the
        memory's children as just read, if the caller has them (all of them: the readable ones are
        chosen here)."""
        parent = None
        if memory.parent_id and "read" in access.privileges(memory.parent_id):
            parent_memory = access.memory(memory.parent_id)
            parent = self.summary(access, parent_memory) if parent_memory else None
        below = [c for c in self._visible_children(access, memory.id, children) if "read" in access.privileges(c.id)]
        return parent, [self.summary(access, child) for child in below]

    def list(
        self,
        caller: Caller,
        *,
        parent: str | None = None,
        ancestor: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page:
        """A page of memories: a parent's children, an ancestor's descendants, or the caller's entry points."""
        size = cursors.check_limit(limit, LIST_DEFAULT, LIST_MAX)
        if parent is not None and ancestor is not None:
            raise MemoryInvalid("pass parent or ancestor, not both")
        access = self._ports.access(caller)
        if parent is not None:
            access.visible(parent)
            found = self._visible_children(access, parent)
            kind = "children"
        elif ancestor is not None:
            access.visible(ancestor)
            found = self._visible_descendants(access, ancestor)
            kind = "descendants"
        else:
            found = self._entry_points(access)
            kind = "entry"
        found.sort(key=lambda m: (m.created_at, m.id))
        # The entry points are the caller's own: a cursor of them names the principal.
        over = parent or ancestor or caller.principal
        after = cursors.decode(kind, cursor, (int, str), over=over)
        if after is not None:
            found = [m for m in found if [m.created_at, m.id] > after]
        page = found[:size]
        next_cursor = None
        if len(found) > size:
            last = page[-1]
            next_cursor = cursors.encode(kind, [last.created_at, last.id], over=over)
        return Page([self.view(access, m) for m in page], next_cursor)

    def _visible_children(
        self, access: AccessView, memory_id: str, children: Sequence[Memory] | None = None
    ) -> builtins.list[Memory]:
        if children is None:
            children = self._ports.memories.children(access.caller.tenant, memory_id)
        access.from_store(children)
        return [child for child in children if not child.deleting and access.can_see(child.id)]

    def _visible_descendants(self, access: AccessView, memory_id: str) -> builtins.list[Memory]:
        """Every descendant the caller may see. The walk goes on through nodes it cannot see, since a
        restricted node it cannot read may hold a child granted to it."""
        tenant = access.caller.tenant
        found: builtins.list[Memory] = []
        frontier = [memory_id]
        seen = {memory_id}
        while frontier:
            next_frontier: builtins.list[str] = []
            for node_id in frontier:
                children = self._ports.memories.children(tenant, node_id)
                access.from_store(children)
                for child in children:
                    if child.id in seen or child.deleting:
                        continue
                    seen.add(child.id)
                    next_frontier.append(child.id)
                    if access.can_see(child.id):
                        found.append(child)
            frontier = next_frontier
        return found

    def _entry_points(self, access: AccessView) -> builtins.list[Memory]:
        """Every memory the caller holds a privilege on whose parent it cannot see. Only a node with a
        direct grant can be one: below it, inheritance makes the parent visible."""
        found: builtins.list[Memory] = []
        for memory_id in access.granted_memory_ids:
            memory = access.memory(memory_id)
            if memory is not None and access.is_entry_point(memory):
                found.append(memory)
        return found

    # -- writes ------------------------------------------------------------------------------

    def create(
        self,
        caller: Caller,
        *,
        name: str,
        description: str = "",
        parent_id: str | None = None,
        restricted: bool = False,
        provider: str | None = None,
    ) -> MemoryView:
        """Create a memory, at the root or under a parent the caller may create in; its creator holds all four."""
        access = self._ports.access(caller)
        inherited_provider = NATIVE_PROVIDER
        ancestors: tuple[str, ...] = ()
        if parent_id is not None:
            parent = access.require(parent_id, "create")
            chain = tree.chain(access, parent)
            if len(chain) >= MAX_TREE_DEPTH:
                raise MemoryInvalid(f"a memory tree is at most {MAX_TREE_DEPTH} levels deep")
            ancestors = tuple(node.id for node in reversed(chain))
            inherited_provider = parent.provider
        # §2: set at creation, inherited from the parent when omitted; only a provider this server is
        # connected to (§10.1), whatever the parent's provider is.
        chosen_provider = provider or inherited_provider
        offered = self._ports.providers.ids
        if chosen_provider not in offered:
            raise MemoryInvalid(f"unknown provider '{chosen_provider}'; this server offers {list(offered)}")
        now = self._ports.clock.now_ms()
        memory = Memory(
            tenant=caller.tenant,
            id=self._ports.ids.new("hmem_"),
            name=name,
            description=description,
            parent_id=parent_id,
            restricted=restricted,
            provider=chosen_provider,
            created_by=caller.principal,
            created_at=now,
            updated_at=now,
            ancestors=ancestors,
        )
        # Whoever creates a memory holds all four privileges on it: a real grant, listed and
        # inherited like any other.
        creator_grant = Grant(
            tenant=caller.tenant,
            id=self._ports.ids.new("hgrt_"),
            memory_id=memory.id,
            principal=caller.principal,
            privileges=PRIVILEGES,
            created_at=now,
            created_by=caller.principal,
            implicit=True,
        )
        try:
            self._ports.memories.create(memory, creator_grant)
        except TreeChanged:
            raise MemoryNotFound(parent_id) from None
        return self.get(caller, memory.id)

    def update(self, caller: Caller, memory_id: str, changes: dict[str, Any]) -> MemoryView:
        """Rename, describe, restrict, or move (`parent_id` present in `changes`, null for a root).

        Renaming needs write; changing `restricted` or moving changes who can reach the memory, so it
        needs delete, and a move also needs create on the new parent. Those two are a person's acts
        (`require_person`): an agent chooses its path, never its reach (§13)."""
        access = self._ports.access(caller)
        memory = access.visible(memory_id)
        for field in ("name", "description", "restricted"):
            if field in changes and changes[field] is None:
                raise MemoryInvalid(f"{field} cannot be null")
        if "provider" in changes and changes["provider"] != memory.provider:
            raise MemoryInvalid("a memory's provider is set at creation and cannot be changed")
        if "name" in changes or "description" in changes:
            access.require(memory_id, "write")
        if "restricted" in changes and changes["restricted"] != memory.restricted:
            access.require(memory_id, "delete")
            require_person(caller, "changing a memory's restricted")
        parent_chain: builtins.list[Memory] = []
        below: builtins.list[Memory] = []
        moving = "parent_id" in changes and changes["parent_id"] != memory.parent_id
        if moving:
            parent_chain, below = self._moves.plan(caller, access, memory_id, changes["parent_id"])
            require_person(caller, "moving a memory")
        updated = memory.evolve(
            name=changes.get("name", memory.name),
            description=changes.get("description", memory.description),
            restricted=changes.get("restricted", memory.restricted),
            parent_id=changes["parent_id"] if moving else memory.parent_id,
            ancestors=tuple(n.id for n in reversed(parent_chain)) if moving else memory.ancestors,
        )
        if updated == memory:
            # Nothing changes: nothing is written, so no privilege beyond seeing the memory is needed.
            return self.view(access, memory)
        described = updated.name != memory.name or updated.description != memory.description
        updated = updated.evolve(
            updated_at=self._ports.clock.now_ms(),
            described_by=caller.principal if described else memory.described_by,
        )
        try:
            self._ports.memories.update(updated, memory.parent_id, parent_chain, below,
                                        was_restricted=memory.restricted)
        except TreeChanged:
            raise MemoryInvalid("the tree changed under this move; read the memory again and retry") from None
        # Answer with the memory as written, seen with the caller's privileges after the change: a
        # move or a restrict may cut the caller's own reach, and then it holds nothing on it (but it
        # was just told the memory exists, so the answer still names it).
        after = self._ports.access(caller)
        after.remember(updated)
        return self.view(after, updated)

    def delete(self, caller: Caller, memory_id: str) -> None:
        """Hide the whole subtree at once, then remove its records, files, grants and nodes, in this
        request (the removal workflow runs the same two steps, the second in Step Functions)."""
        self.hide(caller, memory_id)
        self.purge_hidden(caller.tenant, memory_id)

    def hide(self, caller: Caller, memory_id: str) -> builtins.list[str]:
        """Check the caller may delete (a person's act: it removes every record below, as erase does),
        then hide the memory and every descendant at once: from here on every read and write treats
        them as gone. Returns the hidden ids, root first."""
        access = self._ports.access(caller)
        access.require(memory_id, "delete")
        require_person(caller, "deleting a memory")
        subtree = tree.subtree(self._ports, caller.tenant, memory_id)
        # memory_busy when a run holds one of them: decided by the write, so a run that starts
        # between the walk above and the write is no gap (MemoryRepository.mark_deleting).
        self._ports.memories.mark_deleting(caller.tenant, subtree)
        return subtree

    def purge_hidden(self, tenant: str, memory_id: str) -> builtins.list[str]:
        """Remove a hidden subtree for good, leaves first. Idempotent: a retry finishes what an
        earlier attempt began. Returns the ids removed."""
        subtree = tree.subtree(self._ports, tenant, memory_id)
        index = self._index() if self._index is not None else None
        for node_id in reversed(subtree):
            node = self._ports.memories.get(tenant, node_id)
            provider = self._ports.providers.of(node) if node is not None else None
            if provider is not None and node is not None:  # another provider keeps its records
                provider.drop_memory(node)
            if index is not None:
                index.drop_memory(tenant, node_id)
            if self._objects is not None:
                self._objects.delete_all_versions(memory_prefix(tenant, node_id))
            if self._files is not None:
                # A file's metadata names the upload (user content): it goes before the records that
                # point at it, so a retried step still finds what is left.
                for _, version in self._ports.records.scan_versions(tenant, node_id, None, None):
                    file_id = held_file(version.content)
                    if file_id is not None:
                        self._files.delete(tenant, file_id)
            self._ports.records.purge_memory(tenant, node_id)
            self._ports.memories.purge(tenant, node_id)
        return subtree
