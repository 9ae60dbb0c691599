"""Effective privileges: the union of a principal's grants over the ancestor chain, cut by `restricted`.

Pure rules over loaded data. `AccessView` is built once per request and memoizes every memory it
touches, so a request walks each chain once. A memory is read with the grants on it, and the caller's
privileges on a chain come from the grants on the nodes of that chain: no read of all the caller's
grants, which grow with every memory it holds (only listing the entry points needs those).

The first check of a memory id the caller named reads the same whether the memory exists or not, and
whatever its depth (issue 27, item 9; docs/decisions.md, "The 404 of an unseen memory"): two batch
reads, the memory beside one padding item, then `CHAIN_READ_WIDTH` memories, its ancestors as its item
lists them, made up to that width by the store with padding items that read like memories. A missing
id's second batch is all padding, one item more, in place of the memory not found. The walk over the
parent links then decides, as it always did, from what the reads put in the cache; and a not-found
answer is held to the time checks usually take (CheckTiming), which leaves what the process does differently
with an item found and with none nothing to show in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from uhp_memories.domain.access.ports import CheckTiming
from uhp_memories.domain.agents.model import Attachment
from uhp_memories.domain.errors import MemoriesNotAttached, MemoryForbidden, MemoryNotFound
from uhp_memories.domain.limits import MAX_TREE_DEPTH
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import PRIVILEGES, Caller


@dataclass(frozen=True)
class Grant:
    tenant: str
    id: str
    memory_id: str
    principal: str
    privileges: tuple[str, ...]
    created_at: int  # epoch ms
    created_by: str
    implicit: bool = False


MemoryLoader = Callable[[str], Memory | None]
# A memory (None if it does not exist) and every grant on it, read together.
MemoryAndGrantsLoader = Callable[[str], tuple[Memory | None, Sequence[Grant]]]
# Memories with every grant on each (those that exist), read in one batch of at least `width` items
# however few are asked for: the store pads it (adapters/dynamodb/memories.py, get_many_with_grants).
ManyMemoriesAndGrantsLoader = Callable[[Sequence[str], int], Mapping[str, tuple[Memory, Sequence[Grant]]]]
WRITE = "write"
# The batch every first check of a named id reads: the most ancestors a memory can have, so no chain
# needs a second read and a missing id reads as much as the deepest memory.
CHAIN_READ_WIDTH = MAX_TREE_DEPTH - 1




@dataclass(frozen=True)
class HarnessReach:
    """How a harness's list narrows what its grants give it (§9: "access narrows; it never widens").

    A key acting as `harness:<id>` holds `write` on a memory only where the nearest attachment on the
    memory's chain (by placement in the tree, the memory itself first, whoever may see the nodes
    between) is `write`: a memory attached `read`, and whatever lies below it down to the next
    attachment, is read-only even under one attached `write`, and with no attachment on the chain it
    writes nothing. Its session's memory (§9 `metadata.memory`) counts as one more attachment of the
    access it already has: that of the nearest attachment on its own chain, so it widens nothing, and
    `write` where none lies on its chain (the session's own starting point). This holds whichever door
    the harness comes through (REST, MCP, operations); its other privileges are its grants' (create and
    delete are no agent's tools). This is the one place that rule lives."""

    harness_id: str
    access: Mapping[str, str]  # memory id -> the access its attachment gives (read | write)
    session_memory: str | None
    listed: bool  # whether anything is attached at all

    @staticmethod
    def of(caller: Caller, attached: Sequence[Attachment] | None) -> HarnessReach:
        assert caller.harness_id is not None
        access = {a.memory_id: a.access for a in attached or ()}
        return HarnessReach(caller.harness_id, access, caller.session_memory, bool(attached))

    def writes(self, chain: Iterable[str]) -> bool:
        """Whether the harness writes the first memory of `chain` (it, then its ancestors, nearest
        first): the nearest attachment on it decides; past the session's memory with none, it writes."""
        session_passed = False
        for node in chain:
            if node in self.access:
                return self.access[node] == WRITE
            session_passed = session_passed or node == self.session_memory
        return session_passed

    def refusal(self, privilege: str) -> Exception:
        """Why a privilege the harness's grants give it is not its here."""
        where = f"PUT /v1/harnesses/{self.harness_id}/memories"
        if not self.listed and self.session_memory is None:
            return MemoriesNotAttached(
                self.harness_id,
                f"harness {self.harness_id} has no memories attached, so it writes nowhere: attach the memory "
                f"it should write to with access write ({where}, by an owner of the harness)",
            )
        return MemoryForbidden(
            privilege,
            f"harness {self.harness_id} reaches this memory read-only: it writes only where the nearest memory "
            f"attached on its chain (this one or an ancestor) is attached with access write ({where})",
        )


def effective_privileges(
    memory_id: str, load: MemoryLoader, direct: Mapping[str, frozenset[str]]
) -> frozenset[str]:
    """Union of direct grants on the memory and its ancestors, up to and including the nearest
    restricted node (its own grants still apply; those above it do not). `direct` is read for each
    node after `load` returned it (AccessView's loader fills it as it reads)."""
    privileges: set[str] = set()
    node = load(memory_id)
    seen: set[str] = set()
    while node is not None and node.id not in seen:
        seen.add(node.id)
        privileges |= direct.get(node.id, frozenset())
        if node.restricted or node.parent_id is None:
            break
        node = load(node.parent_id)
    return frozenset(privileges)


def direct_privileges(grants: Iterable[Grant]) -> dict[str, frozenset[str]]:
    by_memory: dict[str, set[str]] = {}
    for grant in grants:
        by_memory.setdefault(grant.memory_id, set()).update(grant.privileges)
    return {memory_id: frozenset(privs) for memory_id, privs in by_memory.items()}


def ordered(privileges: Iterable[str]) -> list[str]:
    chosen = set(privileges)
    return [p for p in PRIVILEGES if p in chosen]


class AccessView:
    """What one caller may see and do, computed lazily for one request."""

    def __init__(
        self,
        caller: Caller,
        load: MemoryAndGrantsLoader,
        caller_grants: Callable[[], Iterable[Grant]],
        reach: Callable[[], HarnessReach] | None = None,
        *,
        load_many: ManyMemoriesAndGrantsLoader | None = None,
        timing: CheckTiming | None = None,
    ) -> None:
        self.caller = caller
        self._load = load
        self._load_many = load_many  # the chain read ahead; without it, each parent is read as the walk reaches it
        self._timing = timing  # holds a not-found answer to the usual time of a check; None: never held
        self._caller_grants = caller_grants  # everywhere: read only to list entry points
        self._reach_loader = reach  # a harness's list, read only when it could narrow something
        self._reach: HarnessReach | None = None
        self._principals = frozenset(caller.principal_ids)
        self._cache: dict[str, Memory | None] = {}
        self._direct: dict[str, frozenset[str]] = {}  # the caller's own grants on each memory read
        self._granted: dict[str, frozenset[str]] = {}  # what the grants give, before a harness's list narrows
        self._privileges: dict[str, frozenset[str]] = {}
        self._from_store: set[str] = set()  # ids the request found in the store, not ids a caller named
        self._read_ahead: dict[str, list[str]] = {}  # for each named memory, the chain its check read

    @property
    def granted_memory_ids(self) -> list[str]:
        """The memories the caller holds a grant on (one read of all its grants)."""
        found = sorted({g.memory_id for g in self._caller_grants() if g.tenant == self.caller.tenant})
        self._from_store.update(found)
        return found

    def from_store(self, memories: Iterable[Memory]) -> None:
        """Memories this request found in the store (a listing's children), not ids its caller named:
        their existence is no secret, so checking them reads only what the walk needs."""
        self._from_store.update(m.id for m in memories)

    def memory(self, memory_id: str) -> Memory | None:
        """A live memory (one being deleted is already gone for every reader)."""
        if memory_id not in self._cache:
            found, grants = self._load(memory_id)
            self._keep(memory_id, found, grants)
        return self._cache[memory_id]

    def _keep(self, memory_id: str, found: Memory | None, grants: Iterable[Grant]) -> None:
        self._direct[memory_id] = self._mine(memory_id, grants) if found is not None else frozenset()
        self._cache[memory_id] = found if found is not None and not found.deleting else None

    def _named(self, memory_id: str) -> None:
        """The first check of an id a caller named: the memory, then its chain in one batch of fixed
        width, so that neither the number nor the kind of reads, nor what they bring back, says whether
        it exists or how deep it sits. A memory already read in this request (the caller named it
        before, or it lies on a chain read before) is not read again: one request's reads stay one
        consistent picture."""
        if memory_id in self._cache or memory_id in self._from_store:
            return
        if self._load_many is None:
            self.memory(memory_id)
            return
        # Read as the chain is, in a batch, beside one padding item: whether the memory exists, the
        # answer holds an item, and what the memory costs is what an item of the next batch costs (an
        # answer with no item at all costs less than one with any).
        found, grants = self._load_many([memory_id], 2).get(memory_id, (None, ()))
        self._keep(memory_id, found, grants)
        if found is None:
            # One more in place of the memory the first read did not find: both reads together bring
            # back as many items as they do for a memory that exists (the store's padding items read
            # like the memories of a chain: adapters/dynamodb/memories.py).
            self._load_many([], CHAIN_READ_WIDTH + 1)
            return
        # Items written before ancestors were kept list none: the walk then reads each parent itself.
        chain = found.ancestors or ()
        wanted = [a for a in dict.fromkeys(chain) if a not in self._cache]
        ahead = self._load_many(wanted, CHAIN_READ_WIDTH)
        for ancestor in wanted:
            found_ancestor, ancestor_grants = ahead.get(ancestor, (None, ()))
            self._keep(ancestor, found_ancestor, ancestor_grants)
        self._read_ahead[memory_id] = wanted

    def _let_go(self, memory_id: str) -> None:
        """Drop the chain read ahead for a memory the caller turned out not to see. The check of a
        missing id frees its padding as it reads it; this frees the chain before the answer is held
        (visible), not after it, when the request ends. Answers stay the same: a later check of one of
        these memories in this request reads it again."""
        for ancestor in self._read_ahead.pop(memory_id, ()):
            for kept in (self._cache, self._direct, self._granted, self._privileges):
                kept.pop(ancestor, None)

    def _mine(self, memory_id: str, grants: Iterable[Grant]) -> frozenset[str]:
        """The caller's own privileges among the grants on a memory (its principal's and its groups')."""
        mine = (g for g in grants if g.tenant == self.caller.tenant and g.principal in self._principals)
        return direct_privileges(mine).get(memory_id, frozenset())

    def remember(self, memory: Memory) -> None:
        """Record a memory this request just wrote, so later checks see the new state (with the grants
        on it, read if this view has not read them yet)."""
        if memory.id not in self._direct:
            self._direct[memory.id] = self._mine(memory.id, self._load(memory.id)[1])
        self._cache[memory.id] = memory
        self._privileges.clear()
        self._granted.clear()

    def granted(self, memory_id: str) -> frozenset[str]:
        """What the caller's grants give it on the memory, before a harness's list narrows them."""
        self._named(memory_id)
        return self._granted_on(memory_id)

    def _granted_on(self, memory_id: str) -> frozenset[str]:
        if memory_id not in self._granted:
            if self.memory(memory_id) is None:
                self._granted[memory_id] = frozenset()
            else:
                self._granted[memory_id] = effective_privileges(memory_id, self.memory, self._direct)
        return self._granted[memory_id]

    def privileges(self, memory_id: str) -> frozenset[str]:
        """The caller's effective privileges: its grants', narrowed for a harness by its list."""
        if memory_id not in self._privileges:
            held = self.granted(memory_id)
            if self._reach_loader is not None and WRITE in held and not self._within_write_reach(memory_id):
                held = held - {WRITE}
            self._privileges[memory_id] = held
        return self._privileges[memory_id]

    def _harness_reach(self) -> HarnessReach:
        assert self._reach_loader is not None
        if self._reach is None:
            self._reach = self._reach_loader()
        return self._reach

    def _within_write_reach(self, memory_id: str) -> bool:
        """Whether the harness's list lets it write the memory (HarnessReach.writes, over the memory's
        chain by placement in the tree, whoever may see the nodes between)."""
        return self._harness_reach().writes(self._chain(memory_id))

    def _chain(self, memory_id: str) -> Iterable[str]:
        """The memory, then its ancestors nearest first, read as the walk reaches them."""
        node: str | None = memory_id
        seen: set[str] = set()
        while node is not None and node not in seen:
            yield node
            seen.add(node)
            found = self.memory(node)
            node = found.parent_id if found is not None else None

    def can_see(self, memory_id: str | None) -> bool:
        """Whether the caller's grants give it anything on the memory (a harness's list narrows what it
        may do there, never what it sees)."""
        return memory_id is not None and bool(self.granted(memory_id))

    def _sees(self, memory_id: str | None) -> bool:
        """can_see for a memory the store named (a parent link), not the caller."""
        return memory_id is not None and bool(self._granted_on(memory_id))

    def visible(self, memory_id: str) -> Memory:
        """The memory, or memory_not_found when it does not exist or the caller holds nothing on it.
        The first check of an id answers not found no sooner than checks usually decide (CheckTiming): both
        kinds of not found read alike, and are then answered alike."""
        first = memory_id not in self._cache and memory_id not in self._from_store
        began = self._timing.now() if self._timing is not None and first else None
        self._named(memory_id)
        memory = self.memory(memory_id)
        seen = memory is not None and bool(self.granted(memory_id))
        if self._timing is not None and began is not None:
            self._timing.decided(began)
            if not seen:
                self._let_go(memory_id)
                self._timing.hold(began)
        if memory is None or not seen:
            raise MemoryNotFound(memory_id)
        return memory

    def holds(self, memory_id: str, privilege: str) -> bool:
        """Whether the caller holds `privilege` on the memory, decided as `visible` decides: a memory
        the caller cannot see and an id no memory has take alike to answer no."""
        try:
            self.visible(memory_id)
        except MemoryNotFound:
            return False
        return privilege in self.privileges(memory_id)

    def require(self, memory_id: str, privilege: str) -> Memory:
        """The memory when the caller holds `privilege`; 404 if unseen, 403 if seen without it."""
        memory = self.visible(memory_id)
        if privilege not in self.privileges(memory_id):
            if privilege in self.granted(memory_id):  # held, but the harness's list narrows it here
                raise self._harness_reach().refusal(privilege)
            raise MemoryForbidden(privilege)
        return memory

    def visible_ancestors(self, memory: Memory) -> list[str]:
        """Ancestor ids from the highest visible one down to the parent, stopping at the first the
        caller cannot see: a memory the caller cannot see is never named."""
        ancestors: list[str] = []
        parent_id = memory.parent_id
        while parent_id is not None and self._sees(parent_id) and parent_id not in ancestors:
            ancestors.append(parent_id)
            parent = self.memory(parent_id)
            parent_id = parent.parent_id if parent else None
        return list(reversed(ancestors))

    def is_entry_point(self, memory: Memory) -> bool:
        return self._sees(memory.id) and not self._sees(memory.parent_id)
