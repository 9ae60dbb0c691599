"""The authorization model (§3) as a state machine: hypothesis builds random trees (roots, children,
moves, restricted flags), grants to principals and groups, revocations and harness attachments, and
writes and reads records (remember, revise, forget, history, recall), made by random principals; it
checks each answer, and after every step every principal's answer on every memory, against a small
reference model written here from the spec, not from domain/access.py:

- effective privileges on a memory are the union of the grants, to the principal or to a group it is
  in, on the memory and on each ancestor up to and including the nearest restricted node (§3.1, §3.2);
- whoever creates a memory holds all four privileges on it (a grant like any other);
- a memory on which the caller holds nothing is not found; one it sees without the privilege an
  operation needs is forbidden (§12); each operation needs the privilege docs/decisions.md lists;
- attaching a memory to a harness needs delete on it and grants the harness what it lacks (§9).

The model drives the server through a `Driver`: here the services over the in-memory fakes
(tests/unit/conftest.py), so thousands of steps take seconds; tests/integration/test_access_model_http.py
runs the same machine through real HTTP (the local gateway, the deployed handlers, DynamoDB on moto),
each principal with an API key of its own, fewer steps."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.fakes import InMemoryAttachmentRepository, InMemoryMemoryRepository
from tests.unit.conftest import caller, make_world
from uhp_memories.domain.errors import DomainError, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.harnesses import Attachment, HarnessService
from uhp_memories.domain.models import Caller
from uhp_memories.domain.recall import AbstainPolicy, RecallInput, RecallService
from uhp_memories.domain.records import RecordInput, RecordService
from uhp_memories.search.embedded import EmbeddedSearchIndex
from uhp_memories.search.engine import RecallEngine
from uhp_memories.search.hashing import HashingEmbedder

ALL = frozenset({"read", "write", "create", "delete"})
GROUPS = {"user:ann": (), "user:ben": ("group:sales",), "user:cat": ("group:sales", "group:eng"),
          "user:dan": ("group:eng",)}
PEOPLE = sorted(GROUPS)
GRANTEES = [*PEOPLE, "group:sales", "group:eng"]
PRIVILEGE_SETS = st.sets(st.sampled_from(sorted(ALL)), min_size=1).map(frozenset)
NEEDS = {"get": None, "list_records": "read", "remember": "write", "revise": "write", "list_grants": "delete",
         "create_child": "create"}


@dataclass
class Reference:
    """§3, written out: the tree, the restricted flags, the grants."""

    parent: dict[str, str | None] = field(default_factory=dict)
    restricted: dict[str, bool] = field(default_factory=dict)
    grants: dict[str, tuple[str, str, frozenset[str]]] = field(default_factory=dict)  # id -> (memory, who, privs)
    harnesses: list[str] = field(default_factory=list)

    def privileges(self, principal: str, memory_id: str) -> frozenset[str]:
        who = {principal, *GROUPS.get(principal, ())}
        held: set[str] = set()
        node: str | None = memory_id
        while node is not None:
            held |= {p for m, g, privs in self.grants.values() if m == node and g in who for p in privs}
            if self.restricted[node]:
                break  # the cutoff: nothing above reaches this node
            node = self.parent[node]
        return frozenset(held)

    def outcome(self, principal: str, memory_id: str, needs: str | None) -> type[DomainError] | None:
        held = self.privileges(principal, memory_id)
        if not held:
            return MemoryNotFound
        return MemoryForbidden if needs is not None and needs not in held else None

    def under(self, memory_id: str) -> set[str]:
        """The memory and its descendants."""
        found = {memory_id}
        while True:
            more = {m for m, p in self.parent.items() if p in found} - found
            if not more:
                return found
            found |= more

    def depth(self, memory_id: str) -> int:
        levels, node = 1, self.parent[memory_id]
        while node is not None:
            levels, node = levels + 1, self.parent[node]
        return levels


@dataclass(frozen=True)
class GrantSeen:
    id: str
    memory_id: str
    principal: str
    privileges: frozenset[str]


class Driver(Protocol):
    """The operations the model makes, as one principal; a refusal raises the domain's error (not
    found, forbidden, invalid)."""

    def create_memory(self, principal: str, parent: str | None, restricted: bool) -> str: ...
    def update_memory(self, principal: str, memory_id: str, changes: dict[str, Any]) -> None: ...
    def privileges(self, principal: str, memory_id: str) -> frozenset[str]: ...
    def grant(self, principal: str, memory_id: str, grantee: str, privileges: frozenset[str]) -> str: ...
    def revoke(self, principal: str, memory_id: str, grant_id: str) -> None: ...
    def grants(self, principal: str, memory_id: str) -> list[GrantSeen]: ...
    def attach(self, principal: str, harness: str, memory_id: str, access: str) -> None: ...
    def remember(self, principal: str, memory_id: str, content: str) -> tuple[str, bool]:
        """The new record's id, and whether its content was withheld from the answer."""
        ...
    def revise(self, principal: str, memory_id: str, record_id: str, content: str) -> tuple[str, bool]: ...
    def forget(self, principal: str, memory_id: str, record_id: str) -> None: ...
    def list_records(self, principal: str, memory_id: str) -> None: ...
    def history(self, principal: str, memory_id: str, record_id: str) -> None: ...
    def recall(self, principal: str, memory_id: str, text: str) -> None: ...
    def close(self) -> None: ...


def who(principal: str) -> Caller:
    return caller(principal, groups=GROUPS.get(principal, ()))


class ServiceDriver:
    """The services over the in-memory fakes."""

    def __init__(self) -> None:
        self.world = make_world()
        repo = self.world.ports.memories
        assert isinstance(repo, InMemoryMemoryRepository)
        self.harnesses = HarnessService(self.world.ports, self.world.ports.attachments)  # type: ignore[arg-type]
        embedder = HashingEmbedder(64)
        self.index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
        engine = RecallEngine(self.index, embedder)
        self.records = RecordService(self.world.ports, self.world.memories, None, lambda: engine)
        self.recalls = RecallService(
            self.world.ports, self.world.memories, self.records, lambda: engine, AbstainPolicy(0.0)
        )

    def create_memory(self, principal: str, parent: str | None, restricted: bool) -> str:
        name = "root" if parent is None else "child"
        return self.world.memories.create(who(principal), name=name, parent_id=parent, restricted=restricted).memory.id

    def update_memory(self, principal: str, memory_id: str, changes: dict[str, Any]) -> None:
        self.world.memories.update(who(principal), memory_id, changes)

    def privileges(self, principal: str, memory_id: str) -> frozenset[str]:
        return frozenset(self.world.memories.get(who(principal), memory_id).privileges)

    def grant(self, principal: str, memory_id: str, grantee: str, privileges: frozenset[str]) -> str:
        return self.world.grants.create(who(principal), memory_id, grantee, sorted(privileges)).id

    def revoke(self, principal: str, memory_id: str, grant_id: str) -> None:
        self.world.grants.delete(who(principal), memory_id, grant_id)

    def grants(self, principal: str, memory_id: str) -> list[GrantSeen]:
        return [GrantSeen(g.id, g.memory_id, g.principal, frozenset(g.privileges))
                for g in self.world.grants.list(who(principal), memory_id)]

    def attach(self, principal: str, harness: str, memory_id: str, access: str) -> None:
        self.harnesses.attach(who(principal), harness, [Attachment(memory_id, access)])

    def remember(self, principal: str, memory_id: str, content: str) -> tuple[str, bool]:
        view = self.records.remember(who(principal), memory_id, RecordInput("fact", content, {}))
        return view.record.id, "content" in view.withheld

    def revise(self, principal: str, memory_id: str, record_id: str, content: str) -> tuple[str, bool]:
        view = self.records.revise(who(principal), memory_id, record_id, {"content": content})
        return view.record.id, "content" in view.withheld

    def forget(self, principal: str, memory_id: str, record_id: str) -> None:
        self.records.forget(who(principal), memory_id, record_id)

    def list_records(self, principal: str, memory_id: str) -> None:
        self.records.list(who(principal), memory_id)

    def history(self, principal: str, memory_id: str, record_id: str) -> None:
        self.records.history(who(principal), memory_id, record_id)

    def recall(self, principal: str, memory_id: str, text: str) -> None:
        self.recalls.recall(who(principal), memory_id, RecallInput(text=text))

    def close(self) -> None:
        self.index.close()


def outcome_of(call: Callable[[], Any]) -> tuple[type[DomainError] | None, Any]:
    try:
        return None, call()
    except (MemoryNotFound, MemoryForbidden) as refused:
        return type(refused), None


class AccessModel(RuleBasedStateMachine):
    memories = Bundle("memories")

    def __init__(self) -> None:
        super().__init__()
        self.server = self.driver()
        self.model = Reference()
        self.latest: dict[str, str] = {}  # memory -> its current record (the one revise names)
        self.harness_numbers = itertools.count(1)

    def driver(self) -> Driver:
        """What the machine runs against (a fresh server, or a fresh tenant of one, per example)."""
        return ServiceDriver()

    def expect(self, principal: str, memory_id: str, needs: str | None, call: Callable[[], Any]) -> Any:
        wanted = self.model.outcome(principal, memory_id, needs)
        got, answer = outcome_of(call)
        assert got is wanted, (principal, memory_id, needs, got, wanted, self.model.privileges(principal, memory_id))
        return answer

    # -- the tree ------------------------------------------------------------------------------

    @initialize(target=memories, principal=st.sampled_from(PEOPLE))
    def first_root(self, principal: str) -> str:
        return self._root(principal, False)

    @rule(target=memories, principal=st.sampled_from(PEOPLE), restricted=st.booleans())
    def create_root(self, principal: str, restricted: bool) -> str:
        return self._root(principal, restricted)

    def _root(self, principal: str, restricted: bool) -> str:
        return self._created(principal, self.server.create_memory(principal, None, restricted), None, restricted)

    def _created(self, principal: str, memory_id: str, parent: str | None, restricted: bool) -> str:
        self.model.parent[memory_id] = parent
        self.model.restricted[memory_id] = restricted
        implicit = [g for g in self.server.grants(principal, memory_id) if g.memory_id == memory_id]
        assert [(g.principal, g.privileges) for g in implicit] == [(principal, ALL)]
        self.model.grants[implicit[0].id] = (memory_id, principal, ALL)
        self.latest[memory_id] = self.server.remember(principal, memory_id, "seed")[0]
        return memory_id

    @precondition(lambda self: len(self.model.parent) < 12)
    @rule(target=memories, principal=st.sampled_from(PEOPLE), parent=memories, restricted=st.booleans())
    def create_child(self, principal: str, parent: str, restricted: bool) -> str:
        server = self.server
        made = self.expect(principal, parent, "create", lambda: server.create_memory(principal, parent, restricted))
        if made is None:
            return parent  # refused: the bundle gets an existing memory again
        return self._created(principal, made, parent, restricted)

    @rule(principal=st.sampled_from(PEOPLE), memory_id=memories, restricted=st.booleans())
    def set_restricted(self, principal: str, memory_id: str, restricted: bool) -> None:
        needs = "delete" if restricted != self.model.restricted[memory_id] else None
        done = self.expect(principal, memory_id, needs, lambda: self.server.update_memory(
            principal, memory_id, {"restricted": restricted}) or True)
        if done is not None:
            self.model.restricted[memory_id] = restricted

    @rule(principal=st.sampled_from(PEOPLE), memory_id=memories, parent=st.one_of(st.none(), memories))
    def move(self, principal: str, memory_id: str, parent: str | None) -> None:
        """Needs delete on the memory, then create on the new parent (not found when it sees nothing
        there); never under itself or a descendant."""
        if parent == self.model.parent[memory_id]:
            return
        held = self.model.privileges(principal, memory_id)
        on_parent = self.model.privileges(principal, parent) if parent is not None else ALL
        wanted: type[DomainError] | None = None
        if not held:
            wanted = MemoryNotFound
        elif "delete" not in held:
            wanted = MemoryForbidden
        elif not on_parent:
            wanted = MemoryNotFound
        elif "create" not in on_parent:
            wanted = MemoryForbidden
        elif parent in self.model.under(memory_id):
            wanted = MemoryInvalid
        try:
            self.server.update_memory(principal, memory_id, {"parent_id": parent})
            got: type[DomainError] | None = None
        except DomainError as refused:
            got = type(refused)
        assert got is wanted, (principal, memory_id, parent, held, on_parent)
        if got is None:
            self.model.parent[memory_id] = parent

    # -- grants --------------------------------------------------------------------------------

    @rule(principal=st.sampled_from(PEOPLE), memory_id=memories, grantee=st.sampled_from(GRANTEES),
          privileges=PRIVILEGE_SETS)
    def grant(self, principal: str, memory_id: str, grantee: str, privileges: frozenset[str]) -> None:
        made = self.expect(principal, memory_id, "delete", lambda: self.server.grant(
            principal, memory_id, grantee, privileges))
        if made is not None:
            self.model.grants[made] = (memory_id, grantee, privileges)

    @precondition(lambda self: bool(self.model.grants))
    @rule(principal=st.sampled_from(PEOPLE), data=st.data())
    def revoke(self, principal: str, data: st.DataObject) -> None:
        grant_id = data.draw(st.sampled_from(sorted(self.model.grants)))
        memory_id = self.model.grants[grant_id][0]
        done = self.expect(principal, memory_id, "delete", lambda: self.server.revoke(
            principal, memory_id, grant_id) or True)
        if done is not None:
            del self.model.grants[grant_id]

    # -- harness lists (§9): attaching is granting ---------------------------------------------

    @rule(principal=st.sampled_from(PEOPLE), memory_id=memories, access=st.sampled_from(["read", "write"]))
    def attach(self, principal: str, memory_id: str, access: str) -> None:
        harness = f"h{next(self.harness_numbers)}"
        who = f"harness:{harness}"
        needed = frozenset({"read"} if access == "read" else {"read", "write"})
        lacked = not needed <= self.model.privileges(who, memory_id)
        done = self.expect(principal, memory_id, "delete", lambda: self.server.attach(
            principal, harness, memory_id, access) or True)
        if done is None:
            return
        self.model.harnesses.append(who)
        written = [g for g in self.server.grants(principal, memory_id)
                   if g.principal == who and g.memory_id == memory_id]
        assert len(written) == (1 if lacked else 0)
        for g in written:
            assert g.privileges == needed
            self.model.grants[g.id] = (memory_id, who, needed)

    # -- records: reads and writes as each principal -------------------------------------------

    @rule(principal=st.sampled_from(PEOPLE), memory_id=memories, data=st.data())
    def write(self, principal: str, memory_id: str, data: st.DataObject) -> None:
        server = self.server
        if data.draw(st.booleans(), label="revise"):
            done = self.expect(principal, memory_id, "write", lambda: server.revise(
                principal, memory_id, self.latest[memory_id], "revised"))
        else:
            done = self.expect(principal, memory_id, "write", lambda: server.remember(principal, memory_id, "more"))
        if done is not None:
            self.latest[memory_id], withheld = done
            if "read" not in self.model.privileges(principal, memory_id):
                assert withheld  # a write-only caller is not answered content

    @rule(principal=st.sampled_from(PEOPLE), memory_id=memories)
    def forget(self, principal: str, memory_id: str) -> None:
        """Forgetting needs write; the memory then gets a current record again, for revise to name."""
        server = self.server
        done = self.expect(principal, memory_id, "write", lambda: server.forget(
            principal, memory_id, self.latest[memory_id]) or True)
        if done is not None:
            self.latest[memory_id] = server.remember(principal, memory_id, "again")[0]

    @rule(principal=st.sampled_from(PEOPLE), memory_id=memories)
    def read(self, principal: str, memory_id: str) -> None:
        """A recall and a record's history need read."""
        server = self.server
        self.expect(principal, memory_id, "read", lambda: server.recall(principal, memory_id, "seed"))
        self.expect(principal, memory_id, "read", lambda: server.history(principal, memory_id, self.latest[memory_id]))

    def teardown(self) -> None:
        self.server.close()

    # -- every principal's answer on every memory, after every step ----------------------------

    @invariant()
    def every_answer_agrees_with_the_model(self) -> None:
        server = self.server
        for principal in [*PEOPLE, *self.model.harnesses]:
            for memory_id in self.model.parent:
                wanted = self.model.privileges(principal, memory_id)
                got, held = outcome_of(lambda m=memory_id, p=principal: server.privileges(p, m))
                assert (got is None) == bool(wanted), (principal, memory_id, wanted)
                if held is not None:
                    assert held == wanted, (principal, memory_id)
                self.expect(principal, memory_id, "read", lambda m=memory_id, p=principal: server.list_records(p, m))
                self.expect(principal, memory_id, "delete", lambda m=memory_id, p=principal: server.grants(p, m))


AccessModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_every_read_and_write_answer_agrees_with_the_reference_model = AccessModel.TestCase
