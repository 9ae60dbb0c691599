"""Prime (§9.1): what the owner of a memory marks as always relevant, placed within a token budget.

Pins are a person's act: `PUT /v1/memories/{id}/prime` replaces a memory's list and needs `delete`,
the owner's privilege, and a caller that is not a harness's key (`require_person`): no agent pins
anything, not by writing and not with a grant of delete.
A pin names a record chain and the version the owner pinned. Prime shows the chain's newest version
that is either the pinned one or was written by someone other than an agent (a principal of kind
`harness`): a person's revision of a pinned record shows at once; an agent's revision never reaches
prime until the owner pins that version again. A chain whose current version is forgotten shows
nothing.

`prime` answers, per starting memory the caller may read (the harness's list as GET
/v1/harnesses/{id}/memories reads it, then the session's memory, §9 `metadata.memory`), the memory's
name, description and readable children, then its pinned records, within the budget. Everything in it
that a principal wrote (names, descriptions, record content) is data, fenced (uhp_memories.domain.fence),
beside who wrote it (§13). Every memory's header
is placed before any record, in the list's order; then records, memory by memory, in pin order. What
does not fit whole is left out and counted (`omitted`), never cut. Tokens are counted with the
injected counter (uhp_memories.tokens: the MiniLM tokenizer) over the placed text: a header's name,
description and children's names and descriptions; a record's type, writer and fenced content.

The server records what it placed (a `Placement`: per memory, the tokens and the record versions), under
the harness, for `PLACEMENT_DAYS`, and answers its id (`prime_id`). A turn names it
(`POST .../turns {"prime_id"}`) and its `asked` episode then keeps the server's own record of what the
session was primed with, never the client's account of it. Only the principal that primed may name a
placement: another caller's turn must not copy the memory ids a harness was shown into a memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from uhp_memories.domain.agents.harnesses import HarnessService
from uhp_memories.domain.agents.model import (
    AGENT_KIND,
    BUDGET_DEFAULT,
    BUDGET_MAX,
    MAX_PINS,
    Pin,
    PinnedRecord,
    PlacedMemory,
    PlacedRecord,
    Placement,
    PrimeAnswer,
    PrimedMemory,
    require_person,
)
from uhp_memories.domain.agents.ports import MemoryNeighbours, PinRepository, PlacementRepository
from uhp_memories.domain.errors import (
    MemoriesNotAttached,
    MemoryConflict,
    MemoryInvalid,
    MemoryNotFound,
    RecordNotFound,
    TreeChanged,
)
from uhp_memories.domain.fence import Fence
from uhp_memories.domain.memories.model import Memory, MemorySummary
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records.model import ID_PATTERN, RecordVersion

PIN_PRIVILEGE = "delete"
PLACEMENT_DAYS = 7  # how long a placement can be named by a turn: a session, with days to spare
PRIME_ID_PREFIX = "hprm_"




















def agent_written(record: RecordVersion) -> bool:
    return record.written_by.get("kind") == AGENT_KIND


def shown_version(chain: Sequence[RecordVersion], pin: Pin) -> RecordVersion | None:
    """The chain's newest version that is the pinned one or a non-agent's; None when forgotten."""
    if not chain or chain[-1].status == "forgotten":
        return None
    for version in reversed(chain):
        if version.id == pin.record_id or not agent_written(version):
            return version
    return None


def header_text(memory: Memory, children: Sequence[MemorySummary]) -> str:
    """What principals wrote about a memory, as prime places it (fenced): its name, its description, and
    each readable child's name, id and description, a line each."""
    lines = [memory.name, memory.description, *(f"- {c.name} ({c.id}): {c.description}" for c in children)]
    return "\n".join(lines)


def record_text(record: RecordVersion, fenced: str) -> str:
    by = record.written_by
    return f"{record.type} by {by.get('kind')}:{by.get('id')}\n{fenced}"


class PrimeService:
    """Prime (§9.1): what a harness's session starts with, within a token budget, and pins."""
    def __init__(
        self,
        ports: Ports,
        memories: MemoryNeighbours,
        harnesses: HarnessService,
        pins: PinRepository,
        placements: PlacementRepository,
        count_tokens: Callable[[str], int],
    ) -> None:
        self._ports = ports
        self._memories = memories
        self._harnesses = harnesses
        self._pins = pins
        self._placements = placements
        self._count = count_tokens

    # -- pins -------------------------------------------------------------------------------------

    def pin(self, caller: Caller, memory_id: str, record_ids: Sequence[str]) -> list[PinnedRecord]:
        """Replace the memory's pins with these records, each a current, active record of the memory."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, PIN_PRIVILEGE)
        require_person(caller, "pinning records for prime")
        self._ports.providers.require_native(memory, "prime pins")
        if len(record_ids) > MAX_PINS:
            raise MemoryInvalid(f"a memory has at most {MAX_PINS} records pinned for prime")
        if len(set(record_ids)) != len(record_ids):
            raise MemoryInvalid("a record is pinned at most once")
        before = {p.record_id: p for p in self._pins.get(caller.tenant, memory_id)}
        pins: list[Pin] = []
        for record_id in record_ids:
            found = ID_PATTERN.match(record_id)
            record = self._ports.records.get(caller.tenant, memory_id, record_id) if found else None
            if record is None:
                raise RecordNotFound(record_id)
            if not record.is_current or record.status != "active":
                latest = self._ports.records.chain(caller.tenant, record.chain_id)[-1]
                raise MemoryConflict(
                    f"record {record_id} is not a current record; pin its current version instead",
                    current_record_id=latest.id if latest.status == "active" else None,
                )
            kept = before.get(record_id)
            pins.append(kept or Pin(record.chain_id, record.id, caller.principal, self._ports.clock.now_ms()))
        try:
            self._pins.replace(caller.tenant, memory_id, pins)
        except TreeChanged:
            raise MemoryNotFound(memory_id) from None
        return self._pinned(caller, memory_id, pins)

    def pinned(self, caller: Caller, memory_id: str) -> list[PinnedRecord]:
        """The memory's pins with what prime shows of each (read needed: prime shows them to readers)."""
        self._ports.access(caller).require(memory_id, "read")
        return self._pinned(caller, memory_id, self._pins.get(caller.tenant, memory_id))

    def _pinned(self, caller: Caller, memory_id: str, pins: Sequence[Pin]) -> list[PinnedRecord]:
        found = []
        for pin in pins:
            chain = [v for v in self._ports.records.chain(caller.tenant, pin.chain_id) if v.memory_id == memory_id]
            found.append(PinnedRecord(pin, shown_version(chain, pin)))
        return found

    # -- prime ------------------------------------------------------------------------------------

    def placement(self, caller: Caller, harness_id: str, prime_id: str) -> Placement:
        """The placement the caller's own prime recorded; memory_invalid when unknown, expired or another's."""
        found = (
            self._placements.get(caller.tenant, harness_id, prime_id)
            if prime_id.startswith(PRIME_ID_PREFIX) and ID_PATTERN.match(prime_id)
            else None
        )
        expired = found is not None and found.expires_at * 1000 <= self._ports.clock.now_ms()
        if found is None or expired or found.primed_by != caller.principal:
            raise MemoryInvalid(
                f"prime_id names no placement of this harness's prime by this caller in the last {PLACEMENT_DAYS} days"
            )
        return found

    def prime(self, caller: Caller, harness_id: str, budget: int | None = None) -> PrimeAnswer:
        """Place the harness's starting memories and their records within `budget` tokens, recorded as a placement."""
        budget = BUDGET_DEFAULT if budget is None else budget
        if not 1 <= budget <= BUDGET_MAX:
            raise MemoryInvalid(f"budget is 1 to {BUDGET_MAX} tokens")
        entries = self._harnesses.starting(caller, harness_id)  # the harness and its owners only
        if not entries:
            raise MemoriesNotAttached(harness_id)
        access = self._ports.access(caller)
        primed: list[tuple[PrimedMemory, list[PinnedRecord]]] = []
        for entry in entries:
            memory = access.memory(entry.memory_id)
            if memory is None or "read" not in access.privileges(entry.memory_id):
                continue
            _, children = self._memories.neighbours(access, memory)
            shown = [p for p in self._pinned(caller, memory.id, self._pins.get(caller.tenant, memory.id)) if p.shown]
            primed.append((PrimedMemory(entry, memory, children), shown))
        fence = Fence([
            *(p.shown.content for _, pins in primed for p in pins if p.shown),
            *(header_text(m.memory, m.children) for m, _ in primed),
        ])
        for memory_part, _ in primed:
            memory_part.header = fence.wrap(header_text(memory_part.memory, memory_part.children))
        left = budget
        for memory_part, _ in primed:
            tokens = self._count(memory_part.header)
            if tokens <= left:
                memory_part.placed, memory_part.tokens = True, tokens
                left -= tokens
        omitted_records = 0
        for memory_part, pins in primed:
            if not memory_part.placed:
                omitted_records += len(pins)
                continue
            for pinned in pins:
                record = pinned.shown
                assert record is not None
                fenced = fence.wrap(record.content)
                tokens = self._count(record_text(record, fenced))
                if tokens > left:
                    memory_part.omitted += 1
                    omitted_records += 1
                    continue
                memory_part.records.append(PlacedRecord(record, pinned.pin.record_id, fenced, tokens))
                memory_part.tokens += tokens
                left -= tokens
        placed = [m for m, _ in primed if m.placed]
        now = self._ports.clock.now_ms()
        placement = Placement(
            prime_id=self._ports.ids.new(PRIME_ID_PREFIX),
            harness_id=harness_id,
            primed_by=caller.principal,
            primed_at=now,
            budget=budget,
            tokens=budget - left,
            expires_at=now // 1000 + PLACEMENT_DAYS * 86_400,
            memories=tuple(PlacedMemory(m.memory.id, m.tokens, tuple(r.record.id for r in m.records)) for m in placed),
        )
        self._placements.record(caller.tenant, placement)
        return PrimeAnswer(
            prime_id=placement.prime_id,
            harness_id=harness_id,
            budget=budget,
            tokens=budget - left,
            fence=fence.nonce,
            memories=placed,
            omitted_memories=len(primed) - len(placed),
            omitted_records=omitted_records,
        )

