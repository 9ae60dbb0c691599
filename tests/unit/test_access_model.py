"""The authorization model (§3, §9) as a state machine: hypothesis builds random trees (roots, children,
moves, restricted flags), grants to principals, groups and harnesses, revocations, harness lists and
their owners, and writes and reads records (remember, revise, forget, history, recall, get with
`include`), runs type operations (x.task `complete` and `blocked`) and named queries, each made by a
random principal (a person or a harness acting with its own key); it checks each answer, and after
every step every principal's answer on every memory, against a small reference model written here from
the spec and docs/decisions.md, not from domain/access/model.py or domain/agents/harnesses.py:

- effective privileges on a memory are the union of the grants, to the principal or to a group it is
  in, on the memory and on each ancestor up to and including the nearest restricted node (§3.1, §3.2);
- whoever creates a memory holds all four privileges on it (a grant like any other);
- a memory on which the caller holds nothing is not found; one it sees without the privilege an
  operation needs is forbidden (§12); each operation needs the privilege docs/decisions.md lists;
- a harness holds `write` on a memory only where the nearest entry of its list on the memory's chain
  (by placement in the tree, the memory itself first) attaches with access `write`: an entry attached
  `read` below one attached `write` is read-only, with all below it down to the next entry, and with no
  entry on the chain nothing is written; elsewhere its grants' privileges less write. What it sees is
  what its grants give. A write refused only for that is memories_not_attached when its list holds no
  entry at all, memory_forbidden otherwise ("Harness attachments (§9) and harness ownership");
- a harness's list is the harness's and its owners': a PUT replaces the whole list; every memory it
  names must be visible to the writer (not found), then the writer must own an existing list
  (forbidden), and where an entry added or changed asks for what the harness's grants lack, the writer
  needs delete there and the grant is written with the list; a list nobody has written yet is its
  tenant's administrators' (a person in group:admins), one of whom writes it first and owns it, or names
  its owners (the harness itself owns its own and is never named); reading it shows the entries on
  memories the reader can see and counts the others (`hidden`);
- a key acting as a harness never changes grants (creating, deleting, or attaching what its harness
  lacks) nor sets a harness's owners, whatever it holds: a person's act (§13), forbidden;
- what a write answers a caller without read: what it sent and the server's stamps, never the record's
  other fields (a type operation sent none); a reader is answered the whole record ("Hostile input and
  write-only callers");
- a forgotten record leaves `GET record` unless `include=all` asks for history;
- the tree mixes providers (§10): a memory is kept by the provider it names at creation (`native` or
  `mem0`, real mem0 OSS in process), or its parent's when it names none; the tree, the grants, the
  cutoff and unseen-is-404 are the server's and the same for both; what mem0 does not implement (an
  extension type's operations such as x.task's, named queries) is memory_unsupported (an x.task record
  itself it carries, §4.1), and only after the access
  check (a caller that may not see the memory is still told not found, one without the privilege
  forbidden).

The model drives the server through a `Driver`: here the services over the in-memory fakes
(tests/unit/conftest.py), so thousands of steps take seconds; tests/integration/test_access_model_http.py
runs the same machine through real HTTP (the local gateway, the deployed handlers, DynamoDB on moto),
each principal with an API key of its own, over REST and over MCP (the agent's tools, with the refusals
MCP adds before a tool runs), fewer steps."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.fakes import InMemoryMemoryRepository, InMemoryQueryRepository, InMemoryTypeRepository
from tests.unit.conftest import caller, make_world
from uhp_memories.adapters.mem0 import Mem0Provider, Mem0Settings, connect
from uhp_memories.domain.agents.harnesses import Attachment, HarnessService
from uhp_memories.domain.errors import (
    DomainError,
    MemoriesNotAttached,
    MemoryForbidden,
    MemoryInvalid,
    MemoryNotFound,
    MemoryUnsupported,
    RecordNotFound,
)
from uhp_memories.domain.model import Caller
from uhp_memories.domain.providers.ports import Providers
from uhp_memories.domain.queries.model import QueryNotFound
from uhp_memories.domain.queries.service import QueryService
from uhp_memories.domain.recall.abstain import AbstainPolicy
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import RecallAnswer, RecallInput
from uhp_memories.domain.recall.service import RecallService
from uhp_memories.domain.records.model import RecordInput, RecordView
from uhp_memories.domain.records.service import RecordService
from uhp_memories.domain.timefmt import format_ms
from uhp_memories.domain.types.builtin import BUILTIN_TYPES
from uhp_memories.domain.types.operations import OperationService
from uhp_memories.domain.types.service import TypeService
from uhp_memories.local.embedded import EmbeddedSearchIndex
from uhp_memories.local.hashing import HashingEmbedder

pytestmark = pytest.mark.slow

ALL = frozenset({"read", "write", "create", "delete"})
GROUPS = {"user:ann": ("group:admins",), "user:ben": ("group:sales",), "user:cat": ("group:sales", "group:eng"),
          "user:dan": ("group:eng",)}
PEOPLE = sorted(GROUPS)
ADMIN = "user:ann"  # the tenant's administrator (group:admins): who writes a harness list first
HARNESS_IDS = ("h1", "h2")
HARNESSES = [f"harness:{h}" for h in HARNESS_IDS]
PRINCIPALS = [*PEOPLE, *HARNESSES]  # every one calls with a key of its own
GRANTEES = [*PEOPLE, "group:sales", "group:eng", *HARNESSES]
OWNERS = GRANTEES  # who may be named an owner of a harness (the harness itself is refused: 422)
# The sets people grant most (write without read among them: a write-only caller), and any other.
PRIVILEGE_SETS = st.one_of(
    st.sampled_from([frozenset({"read"}), frozenset({"write"}), frozenset({"read", "write"}), ALL]),
    st.sets(st.sampled_from(sorted(ALL)), min_size=1).map(frozenset),
)
ACCESS_NEEDS = {"read": frozenset({"read"}), "write": frozenset({"read", "write"})}
TASK = "x.task"
QUERY_NAMES = ("q1", "q2")
NATIVE, MEM0 = "native", "mem0"  # the providers a memory may name (§10); None: its parent's
EMPTY: frozenset[str] = frozenset()

# What a record answer shows of the fields beyond the server's stamps that the machine writes.
Shown = dict[str, Any]
Written = tuple[str, Shown]  # the new version's id, and what the answer shows


@dataclass(frozen=True)
class Entry:
    """One entry of a harness's list."""

    memory_id: str
    access: str
    default: bool = False


@dataclass
class HarnessList:
    entries: list[Entry]
    owners: tuple[str, ...]  # beside the harness itself


def harness_of(principal: str) -> str | None:
    kind, _, ident = principal.partition(":")
    return ident if kind == "harness" else None


@dataclass
class Reference:
    """§3 and §9, written out: the tree, the restricted flags, the grants, the harnesses' lists."""

    parent: dict[str, str | None] = field(default_factory=dict)  # in creation order
    restricted: dict[str, bool] = field(default_factory=dict)
    provider: dict[str, str] = field(default_factory=dict)  # who keeps each memory's records
    grants: dict[str, tuple[str, str, frozenset[str]]] = field(default_factory=dict)  # id -> (memory, who, privs)
    lists: dict[str, HarnessList] = field(default_factory=dict)  # harness id -> its list, once written

    def granted(self, principal: str, memory_id: str) -> frozenset[str]:
        """What the grants give: to the principal and its groups, on the memory and up to the cutoff."""
        who = {principal, *GROUPS.get(principal, ())}
        held: set[str] = set()
        node: str | None = memory_id
        while node is not None:
            held |= {p for m, g, privs in self.grants.values() if m == node and g in who for p in privs}
            if self.restricted[node]:
                break  # the cutoff: nothing above reaches this node
            node = self.parent[node]
        return frozenset(held)

    def entries(self, harness: str) -> list[Entry]:
        found = self.lists.get(harness)
        return found.entries if found is not None else []

    def writes_at(self, principal: str, memory_id: str) -> bool:
        """Whether the list lets the principal write here: anyone but a harness; a harness where the
        nearest entry of its list on the memory's chain (by placement, whatever the cutoff; the memory
        itself first) attaches with write. An entry attached read below one attached write is read-only,
        and so is all below it down to the next entry; no entry on the chain, no write."""
        harness = harness_of(principal)
        if harness is None:
            return True
        access = {e.memory_id: e.access for e in self.entries(harness)}
        node: str | None = memory_id
        while node is not None:
            if node in access:
                return access[node] == "write"
            node = self.parent[node]
        return False

    def privileges(self, principal: str, memory_id: str) -> frozenset[str]:
        """What the principal holds: its grants', less write where its harness list narrows it."""
        held = self.granted(principal, memory_id)
        return held if self.writes_at(principal, memory_id) else held - {"write"}

    def outcome(self, principal: str, memory_id: str, needs: str | None) -> type[DomainError] | None:
        granted = self.granted(principal, memory_id)
        if not granted:
            return MemoryNotFound
        if needs is None or needs in self.privileges(principal, memory_id):
            return None
        if needs in granted:  # held, but narrowed by the harness's list
            return MemoryForbidden if self.entries(harness_of(principal) or "") else MemoriesNotAttached
        return MemoryForbidden

    def is_admin(self, principal: str) -> bool:
        return "group:admins" in GROUPS.get(principal, ()) and harness_of(principal) is None

    def persons_act(self, principal: str, memory_id: str) -> type[DomainError] | None:
        """An act that needs delete and a person (§13): changing grants. A harness's key is forbidden it
        wherever it sees the memory, whatever it holds."""
        wanted = self.outcome(principal, memory_id, "delete")
        return wanted or (MemoryForbidden if harness_of(principal) is not None else None)

    def owns(self, principal: str, harness: str) -> bool:
        found = self.lists.get(harness)
        if principal == f"harness:{harness}":
            return True
        return found is not None and bool({principal, *GROUPS.get(principal, ())} & set(found.owners))

    def write_tools_refusal(self, principal: str) -> type[DomainError] | None:
        """MCP offers a harness its write tools only when it starts from some memory attached with write
        (the entries on memories it can see); calling one otherwise says why: nothing attached that it
        sees (memories_not_attached) or nothing attached with write (memory_forbidden). Any other key is
        offered them when it holds write somewhere (memory_forbidden otherwise)."""
        harness = harness_of(principal)
        if harness is None:  # a person's key: by its grants, write held on some memory (§9.1, issue 37)
            return None if any("write" in self.privileges(principal, m) for m in self.parent) else MemoryForbidden
        starting = [e for e in self.entries(harness) if self.granted(principal, e.memory_id)]
        if any(e.access == "write" for e in starting):
            return None
        return MemoryForbidden if starting else MemoriesNotAttached

    def unsupported(self, memory_id: str, native_only: bool) -> type[DomainError] | None:
        """What the memory's provider refuses once the access check passed: what only the native
        provider implements is memory_unsupported elsewhere (§12)."""
        return MemoryUnsupported if native_only and self.provider[memory_id] != NATIVE else None

    def under(self, memory_id: str) -> set[str]:
        """The memory and its descendants."""
        found = {memory_id}
        while True:
            more = {m for m, p in self.parent.items() if p in found} - found
            if not more:
                return found
            found |= more


@dataclass(frozen=True)
class GrantSeen:
    id: str
    memory_id: str
    principal: str
    privileges: frozenset[str]


@dataclass(frozen=True)
class Operated:
    """A type operation's answer: the version a write appended, or the ids a read's records answered."""

    written: Written | None = None
    results: list[str] | None = None


class Driver(Protocol):
    """The operations the model makes, as one principal; a refusal raises the domain's error (not
    found, forbidden, not attached, invalid, record or query not found)."""

    # "service" and "rest" run every rule as the services do; "mcp" adds the refusals MCP makes before a
    # tool runs (write tools a harness is not offered, a named query's own tool).
    door: str

    def create_memory(self, principal: str, parent: str | None, restricted: bool, provider: str | None) -> str: ...
    def update_memory(self, principal: str, memory_id: str, changes: dict[str, Any]) -> None: ...
    def privileges(self, principal: str, memory_id: str) -> frozenset[str]: ...
    def grant(self, principal: str, memory_id: str, grantee: str, privileges: frozenset[str]) -> str: ...
    def revoke(self, principal: str, memory_id: str, grant_id: str) -> None: ...
    def grants(self, principal: str, memory_id: str) -> list[GrantSeen]: ...
    def attach(self, principal: str, harness: str, entries: Sequence[Entry]) -> list[Entry]:
        """Replace the harness's list; the entries answered."""
        ...
    def attached(self, principal: str, harness: str) -> tuple[list[Entry], int]:
        """The list as the caller reads it: the entries it sees, and how many others there are."""
        ...
    def set_owners(self, principal: str, harness: str, owners: Sequence[str]) -> list[str]: ...
    def owners(self, principal: str, harness: str) -> list[str]: ...
    def remember(self, principal: str, memory_id: str, type: str, content: str, attributes: dict[str, Any]) -> Written:
        ...
    def revise(self, principal: str, memory_id: str, record_id: str, content: str) -> Written: ...
    def forget(self, principal: str, memory_id: str, record_id: str) -> Shown: ...
    def operate(self, principal: str, memory_id: str, record_id: str, operation: str) -> Operated: ...
    def define_query(self, principal: str, memory_id: str, name: str, requires: str) -> None: ...
    def run_query(self, principal: str, memory_id: str, name: str, own_tool: bool) -> list[str]:
        """The memory ids of the records the query answered. `own_tool`: over MCP, through the tool the
        query is offered as (a harness's), not memory_run_query."""
        ...
    def get_record(self, principal: str, memory_id: str, record_id: str, include: str) -> str:
        """The version's status."""
        ...
    def list_records(self, principal: str, memory_id: str) -> None: ...
    def history(self, principal: str, memory_id: str, record_id: str) -> None: ...
    def recall(self, principal: str, memory_id: str, text: str) -> None: ...
    def close(self) -> None: ...


def who(principal: str) -> Caller:
    return caller(principal, groups=GROUPS.get(principal, ()))


def shown_by(view: RecordView) -> Shown:
    """What a presenter shows of a write's answer: the record less what `withheld` names."""
    r = view.record
    fields = {"content": r.content, "type": r.type, "attributes": r.attributes}
    return {name: value for name, value in fields.items() if name not in view.withheld}


def memories_of(answer: RecallAnswer) -> list[str]:
    return [r.record.record.memory_id for r in answer.results]


@functools.cache
def shared_mem0() -> Mem0Provider:
    """Real mem0 OSS in this process (its vector store and history in a folder of its own), with the
    machine's embedder: one for every example, as a stage has one (mem0 keeps each memory under its own
    id, and every example's memories are new)."""
    embedder = HashingEmbedder(64)
    return connect(Mem0Settings(mode="oss"), embedder=embedder, dimensions=embedder.dimensions,
                   now=lambda: format_ms(int(time.time() * 1000)))


class ServiceDriver:
    """The services over the in-memory fakes, wired as bootstrap.build wires them."""

    door = "service"

    def __init__(self) -> None:
        self.world = make_world(Providers({MEM0: shared_mem0()}))
        ports = self.world.ports
        repo = ports.memories
        assert isinstance(repo, InMemoryMemoryRepository)
        self.harnesses = HarnessService(ports, ports.attachments, ports.providers)  # type: ignore[arg-type]
        embedder = HashingEmbedder(64)
        self.index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
        engine = RecallEngine(self.index, embedder)
        types = TypeService(ports, InMemoryTypeRepository(), BUILTIN_TYPES)
        self.records = RecordService(ports, self.world.memories, None, lambda: engine, types=types)
        self.recalls = RecallService(ports, self.world.memories, self.records, lambda: engine, AbstainPolicy(0.0))
        self.operations = OperationService(ports, types, self.records, self.recalls, self.world.memories)
        self.queries = QueryService(
            ports, InMemoryQueryRepository(repo), self.recalls, self.world.memories, self.records, lambda: None
        )

    def create_memory(self, principal: str, parent: str | None, restricted: bool, provider: str | None) -> str:
        name = "root" if parent is None else "child"
        return self.world.memories.create(who(principal), name=name, parent_id=parent, restricted=restricted,
                                          provider=provider).memory.id

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

    def attach(self, principal: str, harness: str, entries: Sequence[Entry]) -> list[Entry]:
        sent = [Attachment(e.memory_id, e.access, e.default) for e in entries]
        return [Entry(a.memory_id, a.access, a.default) for a in self.harnesses.attach(who(principal), harness, sent)]

    def attached(self, principal: str, harness: str) -> tuple[list[Entry], int]:
        listed = self.harnesses.listed(who(principal), harness)
        return [Entry(a.memory_id, a.access, a.default) for a in listed.memories], listed.hidden

    def set_owners(self, principal: str, harness: str, owners: Sequence[str]) -> list[str]:
        return list(self.harnesses.set_owners(who(principal), harness, owners))

    def owners(self, principal: str, harness: str) -> list[str]:
        return list(self.harnesses.owners(who(principal), harness))

    def remember(self, principal: str, memory_id: str, type: str, content: str, attributes: dict[str, Any]) -> Written:
        view = self.records.remember(who(principal), memory_id, RecordInput(type, content, attributes))
        return view.record.id, shown_by(view)

    def revise(self, principal: str, memory_id: str, record_id: str, content: str) -> Written:
        view = self.records.revise(who(principal), memory_id, record_id, {"content": content})
        return view.record.id, shown_by(view)

    def forget(self, principal: str, memory_id: str, record_id: str) -> Shown:
        return shown_by(self.records.forget(who(principal), memory_id, record_id))

    def operate(self, principal: str, memory_id: str, record_id: str, operation: str) -> Operated:
        answer = self.operations.run(who(principal), memory_id, record_id, operation, {})
        if answer.record is not None:
            return Operated(written=(answer.record.record.id, shown_by(answer.record)))
        assert answer.recall is not None
        return Operated(results=[r.record.record.id for r in answer.recall.results])

    def define_query(self, principal: str, memory_id: str, name: str, requires: str) -> None:
        self.queries.define(who(principal), memory_id, name, {"body": {"text": "seed"}, "requires": requires})

    def run_query(self, principal: str, memory_id: str, name: str, own_tool: bool) -> list[str]:
        return memories_of(self.queries.run(who(principal), memory_id, name, {}))

    def get_record(self, principal: str, memory_id: str, record_id: str, include: str) -> str:
        return self.records.get(who(principal), memory_id, record_id, None, include).record.status

    def list_records(self, principal: str, memory_id: str) -> None:
        self.records.list(who(principal), memory_id)

    def history(self, principal: str, memory_id: str, record_id: str) -> None:
        self.records.history(who(principal), memory_id, record_id)

    def recall(self, principal: str, memory_id: str, text: str) -> None:
        self.recalls.recall(who(principal), memory_id, RecallInput(text=text))

    def close(self) -> None:
        self.index.close()


def outcome_of(call: Callable[[], Any]) -> tuple[type[DomainError] | None, Any]:
    """The refusal's type and the refusal (for the message), or None and the answer."""
    try:
        return None, call()
    except DomainError as refused:
        return type(refused), refused


@dataclass
class Held:
    """A record's chain as the model knows it: its version ids (the current one last) and what it holds."""

    versions: list[str]
    type: str
    content: str
    attributes: dict[str, Any]

    @property
    def current(self) -> str:
        return self.versions[-1]

    def whole(self) -> Shown:
        return {"content": self.content, "type": self.type, "attributes": self.attributes}


class AccessModel(RuleBasedStateMachine):
    memories = Bundle("memories")

    def __init__(self) -> None:
        super().__init__()
        self.server = self.driver()
        self.model = Reference()
        self.facts: dict[str, Held] = {}  # memory -> a current fact (the one revise and forget name)
        self.tasks: dict[str, Held] = {}  # memory -> a current x.task (the one operations run on)
        self.forgotten: list[tuple[str, str, str]] = []  # (memory, version, its status) of forgotten chains
        self.queries: dict[str, dict[str, str]] = {}  # memory -> query name -> what running it requires
        self.numbers = itertools.count(1)

    def driver(self) -> Driver:
        """What the machine runs against (a fresh server, or a fresh tenant of one, per example)."""
        return ServiceDriver()

    @property
    def over_mcp(self) -> bool:
        return self.server.door == "mcp"

    def check(self, wanted: type[DomainError] | None, call: Callable[[], Any], *about: Any) -> Any:
        got, answer = outcome_of(call)
        assert got is wanted, f"got {got} ({answer if got else 'answered'}), wanted {wanted}: {about}"
        return answer if got is None else None

    def expect(self, principal: str, memory_id: str, needs: str | None, call: Callable[[], Any],
               native_only: bool = False) -> Any:
        """`native_only`: what only the native provider implements (memory_unsupported elsewhere, once the
        access check passed)."""
        wanted = self.model.outcome(principal, memory_id, needs) or self.model.unsupported(memory_id, native_only)
        return self.check(wanted, call, principal, memory_id, needs, self.model.granted(principal, memory_id),
                          self.model.privileges(principal, memory_id))

    def expect_write_tool(self, principal: str, memory_id: str, call: Callable[[], Any],
                          native_only: bool = False) -> Any:
        """A record write (remember, revise, forget): over MCP a write tool first, then the service."""
        wanted = self.model.write_tools_refusal(principal) if self.over_mcp else None
        if wanted is None:
            return self.expect(principal, memory_id, "write", call, native_only)
        entries = self.model.entries(harness_of(principal) or "")
        return self.check(wanted, call, principal, memory_id, "no write tool", entries)

    def assert_shown(self, principal: str, memory_id: str, shown: Shown, sent: Shown, whole: Shown) -> None:
        """A reader is answered the whole record; any other writer only the fields it sent (§13, decisions:
        "Write-only callers")."""
        reader = "read" in self.model.privileges(principal, memory_id)
        assert shown == (whole if reader else sent), (principal, memory_id, reader, shown)

    def number(self) -> int:
        return next(self.numbers)

    def principal(self, data: st.DataObject, able: Callable[[str], bool]) -> str:
        """A principal to act: mostly one the model says may (so that answers other than not found are
        common), sometimes anyone (so refusals are too)."""
        may = [p for p in PRINCIPALS if able(p)]
        if may and data.draw(st.integers(0, 3), label="one that may") > 0:
            return data.draw(st.sampled_from(may), label="principal")
        return data.draw(st.sampled_from(PRINCIPALS), label="principal")

    def acting(self, data: st.DataObject, privilege: str, among: Sequence[str] | None = None) -> tuple[str, str]:
        """A principal and a memory (of `among`): mostly one whose grants give it `privilege` there (a
        harness's list may narrow it), each principal that holds it somewhere as often as any other, so
        the harnesses act as often as the people; sometimes anyone anywhere."""
        pool = list(self.model.parent if among is None else among)
        able = {p: [m for m in pool if privilege in self.model.granted(p, m)] for p in PRINCIPALS}
        holders = [p for p in PRINCIPALS if able[p]]
        if holders and data.draw(st.integers(0, 3), label="one that may") > 0:
            principal = data.draw(st.sampled_from(holders), label="principal")
            return principal, data.draw(st.sampled_from(able[principal]), label="memory")
        anyone = data.draw(st.sampled_from(PRINCIPALS), label="principal")
        return anyone, data.draw(st.sampled_from(pool), label="memory")

    def holding(self, data: st.DataObject, memory_id: str, privilege: str) -> str:
        """A principal, mostly one whose grants give it `privilege` here (a harness's list may narrow it)."""
        return self.principal(data, lambda p: privilege in self.model.granted(p, memory_id))

    # -- the tree ------------------------------------------------------------------------------

    @initialize(target=memories, principal=st.sampled_from(PEOPLE), access=st.sampled_from(["write", "read", None]),
                requires=st.sampled_from(["read", "write"]))
    def first_root(self, principal: str, access: str | None, requires: str) -> str:
        """A person's memory, shared write-only with a group (so that some caller may write what it cannot
        read) and with a harness that attaches nothing, which its creator mostly attaches to the other
        harness at once (so that a harness acts there)."""
        memory_id = self._root(principal, False)
        write_only = frozenset({"write"})
        self.model.grants[self.server.grant(principal, memory_id, "group:eng", write_only)] = (
            memory_id, "group:eng", write_only)
        if access is not None:
            self._hand(HARNESS_IDS[0], principal)
            self._attach(principal, HARNESS_IDS[0], [Entry(memory_id, access, access == "write")])
        # The other harness may write here by its grant, but attaches nothing: it sees the memory, holding
        # nothing there (privileges []), since its list narrows what it may do, never what it sees.
        other = f"harness:{HARNESS_IDS[1]}"
        self.model.grants[self.server.grant(principal, memory_id, other, write_only)] = (memory_id, other, write_only)
        # Every example, on every door: the group writes what it cannot read (each answer shows only what
        # it sent), a query is defined, and the attached harness runs it (by its own tool over MCP).
        writer = "user:dan" if principal != "user:dan" else "user:cat"
        self._revise(writer, memory_id)
        self._operate(writer, memory_id, "complete")
        self._forget(writer, memory_id)
        self._define_query(principal, memory_id, QUERY_NAMES[0], requires)
        self._run_query(f"harness:{HARNESS_IDS[0]}", memory_id, QUERY_NAMES[0], own_tool=True)
        return memory_id

    @initialize(target=memories, principal=st.sampled_from(PEOPLE))
    def mem0_root(self, principal: str) -> str:
        """A person's memory kept by mem0, shared write-only with a group, so that every example (on every
        door) has a mem0 memory where a caller writes what it cannot read."""
        memory_id = self._root(principal, False, MEM0)
        write_only = frozenset({"write"})
        self.model.grants[self.server.grant(principal, memory_id, "group:sales", write_only)] = (
            memory_id, "group:sales", write_only)
        writer = "user:ben" if principal != "user:ben" else "user:cat"
        self._revise(writer, memory_id)
        self._forget(writer, memory_id)
        self._define_query(principal, memory_id, QUERY_NAMES[1], "read")  # mem0 keeps no named queries
        return memory_id

    @rule(target=memories, principal=st.sampled_from(PRINCIPALS), restricted=st.booleans(),
          provider=st.sampled_from([NATIVE, MEM0]))
    def create_root(self, principal: str, restricted: bool, provider: str) -> str:
        return self._root(principal, restricted, provider)

    def _root(self, principal: str, restricted: bool, provider: str = NATIVE) -> str:
        made = self.server.create_memory(principal, None, restricted, provider)
        return self._created(principal, made, None, restricted, provider)

    def _created(self, principal: str, memory_id: str, parent: str | None, restricted: bool,
                 provider: str | None) -> str:
        self.model.parent[memory_id] = parent
        self.model.restricted[memory_id] = restricted
        # §2: the provider named at creation, else the parent's.
        self.model.provider[memory_id] = provider or self.model.provider[parent or ""]
        implicit = [g for g in self.server.grants(principal, memory_id) if g.memory_id == memory_id]
        assert [(g.principal, g.privileges) for g in implicit] == [(principal, ALL)]
        self.model.grants[implicit[0].id] = (memory_id, principal, ALL)
        # Its first records, by its creator: a harness writes only where its list lets it, its own memory too.
        self._remember(principal, memory_id, "fact")
        self._remember(principal, memory_id, TASK)
        return memory_id

    @precondition(lambda self: len(self.model.parent) < 12)
    @rule(target=memories, parent=memories, restricted=st.booleans(),
          provider=st.sampled_from([None, None, NATIVE, MEM0]), data=st.data())
    def create_child(self, parent: str, restricted: bool, provider: str | None, data: st.DataObject) -> str:
        server, principal = self.server, self.holding(data, parent, "create")
        made = self.expect(principal, parent, "create", lambda: server.create_memory(
            principal, parent, restricted, provider))
        if made is None:
            return parent  # refused: the bundle gets an existing memory again
        return self._created(principal, made, parent, restricted, provider)

    @rule(memory_id=memories, restricted=st.booleans(), data=st.data())
    def set_restricted(self, memory_id: str, restricted: bool, data: st.DataObject) -> None:
        principal = self.holding(data, memory_id, "delete")
        needs = "delete" if restricted != self.model.restricted[memory_id] else None
        done = self.expect(principal, memory_id, needs, lambda: self.server.update_memory(
            principal, memory_id, {"restricted": restricted}) or True)
        if done is not None:
            self.model.restricted[memory_id] = restricted

    @rule(memory_id=memories, parent=st.one_of(st.none(), memories), data=st.data())
    def move(self, memory_id: str, parent: str | None, data: st.DataObject) -> None:
        """Needs delete on the memory, then create on the new parent (not found when it sees nothing
        there); never under itself or a descendant."""
        if parent == self.model.parent[memory_id]:
            return
        principal = self.holding(data, memory_id, "delete")
        model = self.model
        wanted = model.outcome(principal, memory_id, "delete")
        if wanted is None and parent is not None:
            wanted = model.outcome(principal, parent, "create")  # not found where it sees nothing
        if wanted is None and parent in model.under(memory_id):
            wanted = MemoryInvalid
        self.check(wanted, lambda: self.server.update_memory(principal, memory_id, {"parent_id": parent}),
                   principal, memory_id, parent, model.granted(principal, memory_id),
                   model.granted(principal, parent) if parent is not None else None)
        if wanted is None:
            self.model.parent[memory_id] = parent

    # -- grants --------------------------------------------------------------------------------

    @rule(memory_id=memories, grantee=st.sampled_from(GRANTEES), privileges=PRIVILEGE_SETS, data=st.data())
    def grant(self, memory_id: str, grantee: str, privileges: frozenset[str], data: st.DataObject) -> None:
        principal = self.holding(data, memory_id, "delete")
        made = self.check(self.model.persons_act(principal, memory_id), lambda: self.server.grant(
            principal, memory_id, grantee, privileges), principal, memory_id, self.model.granted(principal, memory_id))
        if made is not None:
            self.model.grants[made] = (memory_id, grantee, privileges)

    @precondition(lambda self: bool(self.model.grants))
    @rule(data=st.data())
    def revoke(self, data: st.DataObject) -> None:
        # Half the time one that attaching wrote, if any: a harness then no longer sees what its list holds.
        to_harnesses = [g for g, granted in self.model.grants.items() if granted[1] in HARNESSES]
        pool = list(self.model.grants)
        if to_harnesses:
            pool = to_harnesses if data.draw(st.booleans(), label="a harness's") else pool
        grant_id = data.draw(st.sampled_from(pool), label="grant")
        memory_id = self.model.grants[grant_id][0]
        principal = self.holding(data, memory_id, "delete")
        grantee = self.model.grants[grant_id][1]
        done = self.check(self.model.persons_act(principal, memory_id), lambda: self.server.revoke(
            principal, memory_id, grant_id) or True, principal, memory_id, self.model.granted(principal, memory_id))
        if done is None:
            return
        del self.model.grants[grant_id]
        harness = harness_of(grantee)
        stored = self.model.lists.get(harness or "")
        if harness is not None and stored is not None and any(e.memory_id == memory_id for e in stored.entries):
            # An owner sends the list again as it is: an unchanged entry grants nothing, so what was revoked
            # stays revoked (and sending it needs no privilege beyond seeing each memory).
            owner = self.principal(data, lambda p: self.model.owns(p, harness))
            self._attach(owner, harness, list(stored.entries))

    # -- harness lists (§9): owned, replaced whole; attaching is granting ----------------------

    @rule(harness=st.sampled_from(HARNESS_IDS), data=st.data())
    def attach(self, harness: str, data: st.DataObject) -> None:
        """A PUT of the whole list: a fresh list, the stored one with entries added or changed, or the stored
        one sent again unchanged (which grants nothing, even where a grant was revoked since)."""
        model, stored = self.model, self.model.lists.get(harness)
        principal = self.principal(data, lambda p: self._may_own(p, harness) and any(
            model.granted(p, m) for m in model.parent))
        how = data.draw(st.sampled_from(["fresh", "add", "again"] if stored is not None else ["fresh"]), label="how")
        if how == "again":
            assert stored is not None
            self._attach(principal, harness, list(stored.entries))
            return
        # Mostly memories it may grant on (attaching what the harness lacks takes delete), else ones it sees
        # without delete (attached only where the harness holds what the entry needs), or any.
        tier = data.draw(st.integers(0, 3), label="pool")
        granting = [m for m in model.parent if "delete" in model.granted(principal, m)]
        seeing = [m for m in model.parent if model.granted(principal, m) and m not in granting]
        pool = (granting if tier > 1 else seeing if tier == 1 else []) or list(model.parent)
        detach_all = data.draw(st.integers(0, 7), label="detach all") == 0
        chosen = [] if detach_all else data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True),
                                                 label="on")
        fresh = [Entry(m, "read" if data.draw(st.integers(0, 2), label="read") == 0 else "write") for m in chosen]
        writers = [e.memory_id for e in fresh if e.access == "write"]
        default = data.draw(st.sampled_from([None, *writers]), label="default")
        fresh = [Entry(e.memory_id, e.access, e.memory_id == default) for e in fresh]
        if how == "add" and stored is not None:
            kept = [Entry(e.memory_id, e.access, e.default and default is None)
                    for e in stored.entries if e.memory_id not in chosen]
            entries = [*kept, *fresh]
        else:
            entries = fresh
        self._attach(principal, harness, entries)

    @precondition(lambda self: any(parent is not None for parent in self.model.parent.values()))
    @rule(harness=st.sampled_from(HARNESS_IDS), upper=st.sampled_from(["write", "read"]), data=st.data())
    def attach_nested(self, harness: str, upper: str, data: st.DataObject) -> None:
        """Two entries on one chain, of different access, beside what the list holds elsewhere: the
        nearest entry on a memory's chain decides whether the harness writes it (§9, "access narrows"),
        so a memory attached read below one attached write is read-only, and one attached write below
        one attached read is written."""
        model = self.model
        below = data.draw(st.sampled_from([m for m, p in model.parent.items() if p is not None]), label="below")
        chain: list[str] = []
        node = model.parent[below]
        while node is not None:
            chain.append(node)
            node = model.parent[node]
        above = data.draw(st.sampled_from(chain), label="above")
        principal = self.principal(data, lambda p: self._may_own(p, harness) and all(
            "delete" in model.privileges(p, m) for m in (above, below)))
        lower = "read" if upper == "write" else "write"
        stored = model.lists.get(harness)
        kept = [Entry(e.memory_id, e.access) for e in (stored.entries if stored is not None else [])
                if e.memory_id not in (above, below)]
        self._attach(principal, harness, [*kept, Entry(above, upper, upper == "write"),
                                          Entry(below, lower, lower == "write")])

    def _attach(self, principal: str, harness: str, entries: list[Entry]) -> None:
        model, itself = self.model, f"harness:{harness}"
        stored = model.lists.get(harness)
        before = {e.memory_id: e for e in (stored.entries if stored is not None else [])}
        changed = [e for e in entries if before.get(e.memory_id) != e]
        lacking = {e.memory_id: ACCESS_NEEDS[e.access] for e in changed
                   if not ACCESS_NEEDS[e.access] <= model.granted(itself, e.memory_id)}
        wanted: type[DomainError] | None = None
        if any(not model.granted(principal, e.memory_id) for e in entries):
            wanted = MemoryNotFound  # every memory it names, seen before anything else
        elif stored is None and not model.is_admin(principal):
            wanted = MemoryForbidden  # a list nobody has written: its administrators'
        elif stored is not None and not model.owns(principal, harness):
            wanted = MemoryForbidden  # another's list
        elif any("delete" not in model.privileges(principal, m) for m in lacking):
            wanted = MemoryForbidden  # granting what the harness lacks takes delete
        elif lacking and harness_of(principal) is not None:
            wanted = MemoryForbidden  # and a person: granting is never a harness key's act
        answer = self.check(wanted, lambda: self.server.attach(principal, harness, entries),
                            principal, harness, entries, stored)
        if wanted is not None:
            return
        assert answer == entries
        owners = (principal,) if stored is None else stored.owners
        model.lists[harness] = HarnessList(list(entries), owners)
        for memory_id in dict.fromkeys(e.memory_id for e in entries):
            if "delete" not in model.privileges(principal, memory_id):
                continue  # nothing granted there (checked above); its grants are not the caller's to list
            written = [g for g in self.server.grants(principal, memory_id)
                       if g.principal == itself and g.memory_id == memory_id and g.id not in model.grants]
            assert [g.privileges for g in written] == ([lacking[memory_id]] if memory_id in lacking else [])
            for g in written:
                model.grants[g.id] = (memory_id, itself, g.privileges)
        for entry in entries:  # the harness at once writes where it is attached (or is refused, as narrowed)
            self._remember(itself, entry.memory_id, "fact")

    def _may_own(self, principal: str, harness: str) -> bool:
        if harness not in self.model.lists:
            return self.model.is_admin(principal)
        return self.model.owns(principal, harness)

    def _hand(self, harness: str, principal: str) -> None:
        """The administrator hands a list nobody has written yet to a person, naming it the owner."""
        if harness in self.model.lists:
            return
        answer = self.check(None, lambda: self.server.set_owners(ADMIN, harness, [principal]), ADMIN, harness)
        assert answer == [principal]
        self.model.lists[harness] = HarnessList([], (principal,))

    @rule(harness=st.sampled_from(HARNESS_IDS), owners=st.lists(st.sampled_from(OWNERS), max_size=2, unique=True),
          data=st.data())
    def set_owners(self, harness: str, owners: list[str], data: st.DataObject) -> None:
        principal = self.principal(data, lambda p: self._may_own(p, harness))
        stored = self.model.lists.get(harness)
        wanted: type[DomainError] | None = None
        if harness_of(principal) is not None:
            wanted = MemoryForbidden  # a person's act: no harness sets owners, its own or another's
        elif f"harness:{harness}" in owners:
            wanted = MemoryInvalid  # it always owns itself, and is never named
        elif stored is None and not self.model.is_admin(principal):
            wanted = MemoryForbidden  # a list nobody has written: its administrators'
        elif stored is not None and not self.model.owns(principal, harness):
            wanted = MemoryForbidden
        answer = self.check(wanted, lambda: self.server.set_owners(principal, harness, owners),
                            principal, harness, owners, stored)
        if wanted is None:
            assert answer == owners
            self.model.lists[harness] = HarnessList(stored.entries if stored is not None else [], tuple(owners))

    @rule(harness=st.sampled_from(HARNESS_IDS), data=st.data())
    def read_owners(self, harness: str, data: st.DataObject) -> None:
        """The harness and its owners read who owns it; nobody reads the owners of a list that does not
        exist, nor another's."""
        principal = self.principal(data, lambda p: self.model.owns(p, harness))
        stored = self.model.lists.get(harness)
        wanted: type[DomainError] | None = None
        if stored is None:
            wanted = MemoriesNotAttached
        elif not self.model.owns(principal, harness):
            wanted = MemoryForbidden
        owners = self.check(wanted, lambda: self.server.owners(principal, harness), principal, harness, stored)
        if wanted is None and stored is not None:
            assert sorted(owners) == sorted(stored.owners)

    def check_list(self, principal: str, harness: str) -> None:
        """The harness and its owners read the entries they can see and how many others there are; nobody
        reads a list that does not exist or is empty, nor another's."""
        stored = self.model.lists.get(harness)
        wanted: type[DomainError] | None = None
        if stored is None:
            wanted = MemoriesNotAttached
        elif not self.model.owns(principal, harness):
            wanted = MemoryForbidden
        elif not stored.entries:
            wanted = MemoriesNotAttached
        listed = self.check(wanted, lambda: self.server.attached(principal, harness), principal, harness, stored)
        if wanted is None and stored is not None:
            seen = [e for e in stored.entries if self.model.granted(principal, e.memory_id)]
            entries, hidden = listed
            assert sorted(entries, key=str) == sorted(seen, key=str), (principal, harness, entries, seen)
            assert hidden == len(stored.entries) - len(seen), (principal, harness, hidden)

    # -- records: writes, and what their answers show ------------------------------------------

    @rule(type=st.sampled_from(["fact", TASK]), data=st.data())
    def remember(self, type: str, data: st.DataObject) -> None:
        self._remember(*self.acting(data, "write"), type)

    def _remember(self, principal: str, memory_id: str, type: str) -> None:
        n = self.number()
        content = f"{type} {n}"
        attributes: dict[str, Any] = {"title": f"task {n}", "status": "open"} if type == TASK else {"n": n}
        server = self.server
        done = self.expect_write_tool(principal, memory_id, lambda: server.remember(
            principal, memory_id, type, content, attributes))  # §4.1: an x. type is carried by mem0 too
        if done is None:
            return
        record_id, shown = done
        held = Held([record_id], type, content, attributes)
        self.assert_shown(principal, memory_id, shown, held.whole(), held.whole())  # it sent all of it
        (self.tasks if type == TASK else self.facts)[memory_id] = held

    @precondition(lambda self: bool(self.facts))
    @rule(data=st.data())
    def revise(self, data: st.DataObject) -> None:
        self._revise(*self.acting(data, "write", among=list(self.facts)))

    def _revise(self, principal: str, memory_id: str) -> None:
        held, content = self.facts[memory_id], f"revised {self.number()}"
        server = self.server
        done = self.expect_write_tool(principal, memory_id, lambda: server.revise(
            principal, memory_id, held.current, content))
        if done is None:
            return
        record_id, shown = done
        held.versions.append(record_id)
        held.content = content
        # Only the content was sent: a caller without read is never told the type or the attributes.
        self.assert_shown(principal, memory_id, shown, {"content": content}, held.whole())

    @precondition(lambda self: bool(self.facts))
    @rule(data=st.data())
    def forget(self, data: st.DataObject) -> None:
        self._forget(*self.acting(data, "write", among=list(self.facts)))

    def _forget(self, principal: str, memory_id: str) -> None:
        held = self.facts[memory_id]
        server = self.server
        shown = self.expect_write_tool(principal, memory_id, lambda: server.forget(principal, memory_id, held.current))
        if shown is None:
            return
        self.assert_shown(principal, memory_id, shown, {}, held.whole())  # forget sends no field
        del self.facts[memory_id]
        # A native revise appends a version of its own id; mem0 revises in place (one id, its last status).
        self.forgotten += [(memory_id, v, "superseded") for v in held.versions[:-1] if v != held.current]
        self.forgotten.append((memory_id, held.current, "forgotten"))

    # -- type operations (§8) and named queries (§6.4) -----------------------------------------

    @precondition(lambda self: bool(self.tasks))
    @rule(operation=st.sampled_from(["complete", "blocked"]), data=st.data())
    def operate(self, operation: str, data: st.DataObject) -> None:
        """x.task's `complete` writes (a revise stating no field: a caller without read is shown none of
        the record's); `blocked` reads. MCP offers memory_operate to readers too: the service decides."""
        principal, memory_id = self.acting(data, "write" if operation == "complete" else "read", among=list(self.tasks))
        self._operate(principal, memory_id, operation)

    def _operate(self, principal: str, memory_id: str, operation: str) -> None:
        needs = "write" if operation == "complete" else "read"
        held, server = self.tasks[memory_id], self.server
        answer = self.expect(principal, memory_id, needs, lambda: server.operate(
            principal, memory_id, held.current, operation), native_only=True)  # §8 operations: native only
        if answer is None:
            return
        if operation == "blocked":
            assert answer.written is None
            assert answer.results == []  # no task here depends on another
            return
        assert answer.written is not None
        assert answer.results is None
        record_id, shown = answer.written
        held.versions.append(record_id)
        held.attributes = {**held.attributes, "status": "done"}
        self.assert_shown(principal, memory_id, shown, {}, held.whole())

    @rule(name=st.sampled_from(QUERY_NAMES), requires=st.sampled_from(["read", "write"]), data=st.data())
    def define_query(self, name: str, requires: str, data: st.DataObject) -> None:
        self._define_query(*self.acting(data, "write"), name, requires)

    def _define_query(self, principal: str, memory_id: str, name: str, requires: str) -> None:
        done = self.expect(principal, memory_id, "write", lambda: self.server.define_query(
            principal, memory_id, name, requires) or True, native_only=True)
        if done is not None:
            self.queries.setdefault(memory_id, {})[name] = requires

    @rule(name=st.sampled_from(QUERY_NAMES), own_tool=st.booleans(), data=st.data())
    def run_query(self, name: str, own_tool: bool, data: st.DataObject) -> None:
        """Running needs read, then a query of that name, then what it requires. Over MCP a harness may
        call the query's own tool, offered when a memory it starts from lists the query to it."""
        principal, memory_id = self.acting(data, "read", among=list(self.queries) or None)
        defined = list(self.queries.get(memory_id, {}))
        if defined and data.draw(st.integers(0, 3), label="a defined one") > 0:
            name = data.draw(st.sampled_from(defined), label="name")
        self._run_query(principal, memory_id, name, own_tool)

    def _run_query(self, principal: str, memory_id: str, name: str, own_tool: bool) -> None:
        own_tool = own_tool and harness_of(principal) is not None
        model, requires = self.model, self.queries.get(memory_id, {}).get(name)
        wanted: type[DomainError] | None = None
        if self.over_mcp and own_tool and not self._lists_query(principal, name):
            wanted = QueryNotFound
        else:
            wanted = model.outcome(principal, memory_id, "read") or model.unsupported(memory_id, True)
            if wanted is None and requires is None:
                wanted = QueryNotFound
            elif wanted is None and requires is not None:
                wanted = model.outcome(principal, memory_id, requires)
        found = self.check(wanted, lambda: self.server.run_query(principal, memory_id, name, own_tool),
                           principal, memory_id, name, requires, own_tool, model.privileges(principal, memory_id))
        if found is not None:
            assert set(found) <= {memory_id}  # a template says what to look for, never where

    def _lists_query(self, principal: str, name: str) -> bool:
        """Whether a memory the harness starts from (an entry it can see) lists the query to it: it reads
        there and holds what the query requires."""
        model = self.model
        for entry in model.entries(harness_of(principal) or ""):
            held = model.privileges(principal, entry.memory_id)
            requires = self.queries.get(entry.memory_id, {}).get(name)
            if "read" in held and requires in held:
                return True
        return False

    # -- reads -----------------------------------------------------------------------------------

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        """A recall, a record's history and getting a record need read; a current record is active."""
        (principal, memory_id), server = self.acting(data, "read"), self.server
        self.expect(principal, memory_id, "read", lambda: server.recall(principal, memory_id, "seed"))
        held = self.facts.get(memory_id) or self.tasks.get(memory_id)
        if held is None:
            return
        self.expect(principal, memory_id, "read", lambda: server.history(principal, memory_id, held.current))
        status = self.expect(principal, memory_id, "read", lambda: server.get_record(
            principal, memory_id, held.current, "active"))
        assert status in (None, "active")

    @precondition(lambda self: bool(self.forgotten))
    @rule(data=st.data())
    def read_forgotten(self, data: st.DataObject) -> None:
        """A record whose chain is forgotten leaves GET (any of its versions), unless include=all asks for
        history, which answers the version as it is (forgotten, or superseded before)."""
        memory_id, version, status = data.draw(st.sampled_from(self.forgotten), label="forgotten")
        principal, server = self.holding(data, memory_id, "read"), self.server
        wanted = self.model.outcome(principal, memory_id, "read")
        self.check(wanted or RecordNotFound, lambda: server.get_record(principal, memory_id, version, "active"),
                   principal, memory_id, version, "active")
        found = self.check(wanted, lambda: server.get_record(principal, memory_id, version, "all"),
                           principal, memory_id, version, "all")
        assert found in (None, status)

    def teardown(self) -> None:
        self.server.close()

    # -- every principal's answer on every memory, after every step ----------------------------

    @invariant()
    def every_answer_agrees_with_the_model(self) -> None:
        server = self.server
        for principal in PRINCIPALS:
            for memory_id in self.model.parent:
                wanted = self.model.privileges(principal, memory_id)
                seen = bool(self.model.granted(principal, memory_id))
                got, held = outcome_of(lambda m=memory_id, p=principal: server.privileges(p, m))
                assert (got is None) == seen, (principal, memory_id, wanted)
                if got is None:
                    assert held == wanted, (principal, memory_id)  # a harness's narrowed set
                self.expect(principal, memory_id, "read", lambda m=memory_id, p=principal: server.list_records(p, m))
                self.expect(principal, memory_id, "delete", lambda m=memory_id, p=principal: server.grants(p, m))
            for harness in HARNESS_IDS:
                self.check_list(principal, harness)


AccessModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_every_read_and_write_answer_agrees_with_the_reference_model = AccessModel.TestCase
