"""Observe after a turn (§9.1): a turn becomes episodes in the harness's default memory.

One episode per part, in one observe (one transaction: all or none): what was asked, what was
answered, then each tool that ran, in order. Where the provider derives (domain/observing.py), the
answer also names the job deriving from them; no model runs before the answer. Every episode
carries `attributes.turn`: the turn's id (drawn by the server), the harness, the part (`asked`,
`answered`, `tool`) and its index; a tool's episode names the tool. A turn may name the prime its
session began with (`prime_id`, from GET .../prime): the `asked` episode then keeps `primed`, the
server's own record of what that prime placed, per memory, in tokens and record versions
(domain/prime.py, `Placement`).

Who may post: anyone whose write observe accepts on the default memory, the harness itself first.
The default is read from the harness's stored list; a caller other than the harness that cannot see
the default memory is answered as if there were none (422), so a turn never reveals which memory a
harness's default is."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.harnesses import AttachmentRepository, MemoriesNotAttached, harness_caller
from uhp_memories.domain.jobs import Job
from uhp_memories.domain.models import Caller
from uhp_memories.domain.observing import ObserveService
from uhp_memories.domain.prime import Placement, PrimeService
from uhp_memories.domain.records import OBSERVE_MAX, RecordInput, RecordView

MAX_TOOLS = OBSERVE_MAX - 2  # with what was asked and what was answered: one observe


@dataclass(frozen=True)
class ToolRun:
    name: str
    input: Any
    output: Any


@dataclass(frozen=True)
class Turn:
    asked: str
    answered: str
    tools: Sequence[ToolRun] = ()
    prime_id: str | None = None


@dataclass(frozen=True)
class TurnAnswer:
    turn_id: str
    memory_id: str
    records: list[RecordView]
    job: Job | None = None  # the derivation from the turn's episodes, where the provider derives


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
    def __init__(
        self, ports: Ports, attachments: AttachmentRepository, observing: ObserveService, prime: PrimeService
    ) -> None:
        self._ports = ports
        self._attachments = attachments
        self._observing = observing
        self._prime = prime

    def observe_turn(self, caller: Caller, harness_id: str, turn: Turn) -> TurnAnswer:
        harness = harness_caller(caller, harness_id)
        if len(turn.tools) > MAX_TOOLS:
            raise MemoryInvalid(f"a turn names at most {MAX_TOOLS} tool runs")
        stored = self._attachments.get(caller.tenant, harness_id) or []
        if not stored:
            raise MemoriesNotAttached(harness_id)
        default = next((e for e in stored if e.default), None)
        hidden = caller.principal != harness.principal and not (
            default is not None and self._ports.access(caller).can_see(default.memory_id)
        )
        if hidden:
            default = None
        if default is None:
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
        observed = self._observing.observe(caller, default.memory_id, episodes)
        return TurnAnswer(turn_id, default.memory_id, observed.records, observed.job)
