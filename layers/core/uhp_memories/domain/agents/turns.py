"""Observe after a turn (§9.1): a turn becomes episodes in the harness's default memory.

One episode per part, in one observe (one transaction: all or none): what was asked, what was
answered, then each tool that ran, in order. Where the provider derives (domain/observing/service.py), the
answer also names the job deriving from them; no model runs before the answer. Every episode
carries `attributes.turn`: the turn's id (drawn by the server), the harness, the part (`asked`,
`answered`, `tool`) and its index; a tool's episode names the tool. A turn may name the prime its
session began with (`prime_id`, from GET .../prime): the `asked` episode then keeps `primed`, the
server's own record of what that prime placed, per memory, in tokens and record versions
(domain/agents/prime.py, `Placement`).

Who may post: the harness and its owners (domain/agents/harnesses.py), whose write observe accepts on the
default memory. The default is the session's memory when the request names one the harness may write
(§9 `metadata.memory`; the harness's privileges decide, narrowed by its list, never an owner's), else the
one the harness's list marks; an owner that cannot see the default memory is answered as if there were
none (422), so a turn never reveals which memory it is."""

from __future__ import annotations

import json
from typing import Any

from uhp_memories.domain.agents.harnesses import HarnessService
from uhp_memories.domain.agents.model import Placement, ToolRun, Turn, TurnAnswer
from uhp_memories.domain.agents.ports import TurnObserver
from uhp_memories.domain.agents.prime import PrimeService
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records.model import OBSERVE_MAX, RecordInput

MAX_TOOLS = OBSERVE_MAX - 2  # with what was asked and what was answered: one observe








def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def primed(placement: Placement) -> dict[str, Any]:
    """What the `asked` episode keeps of the session's prime."""
    return {
        "prime_id": placement.prime_id,
        "budget": placement.budget,
        "tokens": placement.tokens,
        "memories": [
            {"memory_id": m.memory_id, "tokens": m.tokens, "record_ids": list(m.record_ids)} for m in placement.memories
        ],
    }


def tool_text(tool: ToolRun) -> str:
    return f"tool {tool.name}\ninput: {_as_text(tool.input)}\noutput: {_as_text(tool.output)}"


class TurnService:
    """Turns (§9.1): a harness's turn observed as episodes in its default memory."""
    def __init__(
        self, ports: Ports, harnesses: HarnessService, observing: TurnObserver, prime: PrimeService
    ) -> None:
        self._ports = ports
        self._harnesses = harnesses
        self._observing = observing
        self._prime = prime

    def observe_turn(self, caller: Caller, harness_id: str, turn: Turn) -> TurnAnswer:
        """Observe a turn as one episode per part in the harness's default memory."""
        if len(turn.tools) > MAX_TOOLS:
            raise MemoryInvalid(f"a turn names at most {MAX_TOOLS} tool runs")
        stored = self._harnesses.owned(caller, harness_id).entries  # the harness and its owners only
        access = self._ports.access(caller)
        session = caller.session_memory
        if session is not None and self._harnesses.session_writes(caller, harness_id):
            default_id: str | None = session
        else:
            marked = next((e for e in stored if e.default), None)
            default_id = marked.memory_id if marked is not None and access.can_see(marked.memory_id) else None
        if default_id is None:
            raise MemoryInvalid(f"harness {harness_id} has no default memory: mark one attachment default")
        placement = None if turn.prime_id is None else self._prime.placement(caller, harness_id, turn.prime_id)
        turn_id = self._ports.ids.new("htrn_")

        def part(name: str, index: int, content: str, **more: Any) -> RecordInput:
            about = {"id": turn_id, "harness_id": harness_id, "part": name, "index": index, **more}
            return RecordInput("episode", content, {"turn": about})

        episodes = [
            part("asked", 0, turn.asked, **({"primed": primed(placement)} if placement is not None else {})),
            part("answered", 1, turn.answered),
            *(part("tool", 2 + i, tool_text(t), tool=t.name) for i, t in enumerate(turn.tools)),
        ]
        observed = self._observing.observe(caller, default_id, episodes)
        return TurnAnswer(turn_id, default_id, observed.records, observed.job)
