"""a13n-harness's own RecordMemoryCapability over UHP_MEMORIES, end to end: a scripted model
(pydantic-ai's FunctionModel, streaming, as the harness runs models) remembers and updates facts
through the memory_record_* tools, and each later run starts with a recall block holding the records
closest to its input, named by ids that stay valid across updates."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

from a13n_harness import AgentSpec, HarnessBuilder
from a13n_harness.capabilities import RecordMemoryCapability, RecordMount
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from tests.harness.conftest import ClientFactory, OpenRecords
from tests.integration.conftest import Client

pytestmark = pytest.mark.anyio

RECALL_OPENING = '<memory-recall memory="facts" trust="untrusted">'


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any]


@dataclass
class ScriptedModel:
    """Per prompt, the model's turns in order: a tool call, or the final text. Each run's messages are kept."""

    turns: dict[str, list[ToolCall | str]]
    runs: dict[str, list[list[ModelMessage]]] = field(default_factory=dict)

    def model(self) -> FunctionModel:
        return FunctionModel(stream_function=self._stream)

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        prompt = next(text for text in _user_texts(messages) if text in self.turns)
        self.runs.setdefault(prompt, []).append(list(messages))
        turn = self.turns[prompt][sum(isinstance(m, ModelResponse) for m in messages)]
        if isinstance(turn, str):
            yield turn
        else:
            yield {0: DeltaToolCall(name=turn.name, json_args=json.dumps(turn.args), tool_call_id=f"call-{turn.name}")}


def _user_texts(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def recalled(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """The records of the facts memory's recall block at the run's start ([] without a block)."""
    for text in _user_texts(messages):
        if text.startswith(RECALL_OPENING):
            lines = text.splitlines()
            assert lines[-1] == "</memory-recall>"
            return list(json.loads(lines[2])["records"])
    return []


def tool_results(messages: Sequence[ModelMessage]) -> list[Any]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def facts(client: Client, memory_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/memories/{memory_id}/records", types="fact", limit=100)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


REMEMBER = "I drink green tea, never coffee. Remember that."
ORDER = "What should I order at the cafe?"
SWITCH = "I switched to oolong tea. Update what you know."
OOLONG = "Alice drinks oolong tea."


@pytest.mark.slow
async def test_a_fact_remembered_through_the_tool_is_recalled_first_in_a_later_run(
    alice: Client, memory: str, make_client: ClientFactory, open_records: OpenRecords
) -> None:
    # The harness acts as its own principal, granted on Alice's memory as attaching would grant it.
    alice.attach("assistant", memory)
    assistant = make_client("harness:assistant")
    for text in ("The office moved to Berlin in 2024.", "Bob's birthday is in May.", "Deploys happen on Tuesdays."):
        alice.remember(memory, text)

    script = ScriptedModel(
        {
            REMEMBER: [ToolCall("memory_record_add", {"memory": "facts", "text": "Alice drinks green tea."}), "Noted."],
            ORDER: ["A green tea."],
        }
    )
    async with open_records(assistant, memory) as store:
        capability = RecordMemoryCapability([RecordMount("facts", store, "write")])
        agent = HarnessBuilder(instrumentation=None).build(
            AgentSpec(), output_type=str, capabilities=(capability,), model=script.model()
        )
        first = await agent.run(REMEMBER)
        second = await agent.run(ORDER)

    assert first.output_or_raise() == "Noted."
    assert second.output_or_raise() == "A green tea."
    ((added,),) = [tool_results(messages) for messages in script.runs[REMEMBER][1:]]
    assert added["memory"] == "facts"
    # Stored as the fact the model stated, stamped with the harness as its writer.
    tea = next(r for r in facts(alice, memory) if r["id"] == added["id"])
    assert (tea["type"], tea["content"], tea["written_by"]) == (
        "fact",
        "Alice drinks green tea.",
        {"kind": "harness", "id": "assistant"},
    )
    # The later run starts with the recall block: the closest record first, under its id.
    (start,) = script.runs[ORDER]
    records = recalled(start)
    assert records[0]["id"] == added["id"]
    assert records[0]["text"] == "Alice drinks green tea."
    assert len(records) <= 5
    scores = [record["score"] for record in records]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
async def test_an_update_through_the_tool_keeps_the_id_the_recall_showed(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        tea = await store.add("Alice drinks green tea.")
        await store.add("The office moved to Berlin in 2024.")
        script = ScriptedModel(
            {
                SWITCH: [
                    ToolCall("memory_record_update", {"memory": "facts", "id": tea.id, "text": OOLONG}),
                    "Updated.",
                ],
                ORDER: ["An oolong tea."],
            }
        )
        capability = RecordMemoryCapability([RecordMount("facts", store, "write")])
        agent = HarnessBuilder(instrumentation=None).build(
            AgentSpec(), output_type=str, capabilities=(capability,), model=script.model()
        )
        switched = await agent.run(SWITCH)
        ordered = await agent.run(ORDER)

    assert (switched.output_or_raise(), ordered.output_or_raise()) == ("Updated.", "An oolong tea.")
    shown = recalled(script.runs[SWITCH][0])[0]
    assert {key: value for key, value in shown.items() if key != "score"} == {
        "id": tea.id,
        "text": "Alice drinks green tea.",
        "updated_at": tea.updated_at.isoformat() if tea.updated_at else None,
    }
    assert 0 < shown["score"] <= 1  # recall's confidence in its best match, on one scale across requests
    ((updated,),) = [tool_results(messages) for messages in script.runs[SWITCH][1:]]
    assert updated == {"memory": "facts", "id": tea.id}
    first = recalled(script.runs[ORDER][0])[0]
    assert (first["id"], first["text"]) == (tea.id, "Alice drinks oolong tea.")
    # One chain on the server: the update is its second version.
    versions = alice.get(f"/v1/memories/{memory}/records/{tea.id}/history").json()["data"]
    assert [v["content"] for v in versions] == ["Alice drinks green tea.", "Alice drinks oolong tea."]


async def test_a_read_mount_offers_search_and_list_only(alice: Client, memory: str, open_records: OpenRecords) -> None:
    offered: list[list[str]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        offered.append(sorted(tool.name for tool in info.function_tools))
        yield "ok"

    async with open_records(alice, memory) as store:
        capability = RecordMemoryCapability([RecordMount("facts", store, "read")])
        agent = HarnessBuilder(instrumentation=None).build(
            AgentSpec(), output_type=str, capabilities=(capability,), model=FunctionModel(stream_function=stream)
        )
        await agent.run("Hello.")

    assert offered == [["memory_record_list", "memory_record_search"]]
