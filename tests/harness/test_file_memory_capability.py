"""a13n-harness's own FileMemoryCapability over open_file_store, end to end: a scripted model
(pydantic-ai's FunctionModel, streaming, as the harness runs models) views and edits memory files
through the memory_file_* tools, and each run starts with the memory's context block, as the harness
delivers it over any FileStore. The server behind the store is the real local one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

from a13n_harness import AgentSpec, HarnessBuilder
from a13n_harness.capabilities import FileMemoryCapability, FileMount, MemoryCursors
from a13n_harness.providers.memory import FileStore, Origin
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from tests.harness.conftest import OpenFiles
from tests.integration.conftest import Client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PREFS = "prefs.md"
TEA_AND_ENGLISH = "likes tea\nreply in English\n"
CONTEXT_OPENING = '<memory-context memory="user" trust="untrusted"'


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any]


@dataclass
class ScriptedModel:
    """Per prompt, the model's turns in order: a tool call, or the final text. Each turn's messages are kept.

    A conversation's later runs carry its earlier messages, so a run's turn is counted from its own prompt.
    """

    turns: dict[str, list[ToolCall | str]]
    seen: dict[str, list[list[ModelMessage]]] = field(default_factory=dict)

    def model(self) -> FunctionModel:
        return FunctionModel(stream_function=self._stream)

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        start, prompt = max((i, text) for i, text in _prompts(messages) if text in self.turns)
        self.seen.setdefault(prompt, []).append(list(messages))
        number = sum(isinstance(message, ModelResponse) for message in messages[start:])
        turn = self.turns[prompt][number]
        if isinstance(turn, str):
            yield turn
        else:
            call_id = f"call-{len(self.seen)}-{number}"
            yield {0: DeltaToolCall(name=turn.name, json_args=json.dumps(turn.args), tool_call_id=call_id)}

    def results(self, prompt: str) -> list[Any]:
        """The tool results the model saw in the run of `prompt`, in order; a failure as its parsed JSON."""
        last = self.seen[prompt][-1]
        start = max(i for i, text in _prompts(last) if text == prompt)
        return [_result(part) for part in _parts(last[start:]) if isinstance(part, ToolReturnPart)]

    def context(self, prompt: str) -> dict[str, Any] | None:
        """The user memory's context block at the start of the run of `prompt`: its kind and JSON body."""
        first = self.seen[prompt][0]
        start = max(i for i, text in _prompts(first) if text == prompt)
        request = first[start]
        assert isinstance(request, ModelRequest)
        blocks = [
            part.content
            for part in request.parts
            if isinstance(part, UserPromptPart) and isinstance(part.content, str)
            and part.content.startswith(CONTEXT_OPENING)
        ]
        if not blocks:
            return None
        (block,) = blocks
        lines = block.splitlines()
        assert lines[-1] == "</memory-context>"
        return {"kind": lines[0].split('kind="')[1].split('"')[0], "body": json.loads(lines[2]), "text": block}


def _parts(messages: Sequence[ModelMessage]) -> list[Any]:
    return [part for message in messages if isinstance(message, ModelRequest) for part in message.parts]


def _prompts(messages: Sequence[ModelMessage]) -> list[tuple[int, str]]:
    return [
        (index, part.content)
        for index, message in enumerate(messages)
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def _result(part: ToolReturnPart) -> Any:
    if isinstance(part.content, str):
        try:
            return json.loads(part.content)
        except ValueError:
            return part.content
    return part.content


def agent(script: ScriptedModel, capability: FileMemoryCapability) -> Any:
    return HarnessBuilder(instrumentation=None).build(
        AgentSpec(), output_type=str, capabilities=(capability,), model=script.model()
    )


def view(path: str = PREFS) -> ToolCall:
    return ToolCall("memory_file_view", {"memory": "user", "path": path})


def edit(old: str, new: str, path: str = PREFS) -> ToolCall:
    return ToolCall("memory_file_edit", {"memory": "user", "path": path, "old_string": old, "new_string": new})


async def seeded(store: FileStore, path: str = PREFS, text: str = TEA_AND_ENGLISH) -> str:
    return await store.write(path, text, expected=None, origin=Origin())


A_VIEWS, B_VIEWS = "A: what do you know about me?", "B: what do you know about me?"
A_CHINESE, B_COFFEE = "A: reply in Chinese from now on.", "B: I drink coffee now."
ENGLISH_AGAIN = "A: reply in English again, please."


async def test_two_conversations_edit_different_lines_and_both_changes_remain(
    alice: Client, memory: str, open_files: OpenFiles
) -> None:
    script = ScriptedModel(
        {
            A_VIEWS: [view(), "You like tea."],
            B_VIEWS: [view(), "You like tea."],
            A_CHINESE: [edit("reply in English", "reply in Chinese"), "Noted."],
            B_COFFEE: [edit("likes tea", "likes coffee"), "Noted."],
            ENGLISH_AGAIN: [edit("reply in English", "reply in French"), "That line is gone."],
        }
    )
    async with open_files(alice, memory) as store:
        first = await seeded(store)
        capability = FileMemoryCapability([FileMount("user", store, "write")])
        a = await agent(script, capability).run(A_VIEWS)
        b = await agent(script, capability).run(B_VIEWS)
        a = await agent(script, capability).run(A_CHINESE, previous_state=a.state)
        b = await agent(script, capability).run(B_COFFEE, previous_state=b.state)
        later = await agent(script, capability).run(ENGLISH_AGAIN, previous_state=a.state)
        final = await store.read(PREFS)

    assert [script.results(prompt)[0]["content"] for prompt in (A_VIEWS, B_VIEWS)] == [TEA_AND_ENGLISH] * 2
    assert [script.results(prompt)[0]["version"] for prompt in (A_VIEWS, B_VIEWS)] == [first] * 2
    assert final.text == "likes coffee\nreply in Chinese\n"
    assert script.results(B_COFFEE)[0]["version"] == final.version
    # The later edit's old_string is gone: it fails, changes nothing, and shows the file as it is now.
    (failed,) = script.results(ENGLISH_AGAIN)
    assert failed["error"] == "no_match"
    assert failed["current"] == {
        "path": PREFS,
        "version": final.version,
        "size": len(final.text.encode()),
        "content": "likes coffee\nreply in Chinese\n",
    }
    assert later.output_or_raise() == "That line is gone."
    assert b.output_or_raise() == "Noted."


@pytest.mark.parametrize("viewed", ["lang.md", "tea.md"])
async def test_a_write_after_another_conversation_changed_a_file_it_read_is_refused_with_that_file(
    alice: Client, memory: str, open_files: OpenFiles, viewed: str
) -> None:
    """Within one run, the model views a file, another conversation changes that file, and the model then
    edits tea.md: the model's read set holds the version it viewed, so the edit is refused (read_conflict)
    with the viewed file as it is now, whether it is another file or tea.md itself."""
    async with open_files(alice, memory) as store:
        texts = {"lang.md": "reply in English\n", "tea.md": "likes tea\n"}
        versions = {path: await seeded(store, path, text) for path, text in texts.items()}
        changed_text = texts[viewed] + "and biscuits\n"
        changed: list[str] = []

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
            turn = sum(isinstance(message, ModelResponse) for message in messages)
            if turn == 0:
                args = {"memory": "user", "path": viewed}
                yield {0: DeltaToolCall(name="memory_file_view", json_args=json.dumps(args), tool_call_id="c0")}
            elif turn == 1:
                # The other conversation, between this model's view and its edit.
                written = await store.write(viewed, changed_text, expected=versions[viewed], origin=Origin())
                changed.append(written)
                args = {"memory": "user", "path": "tea.md", "old_string": "tea", "new_string": "green tea"}
                yield {0: DeltaToolCall(name="memory_file_edit", json_args=json.dumps(args), tool_call_id="c1")}
            else:
                yield "Done."

        capability = FileMemoryCapability([FileMount("user", store, "write")])
        run = await HarnessBuilder(instrumentation=None).build(
            AgentSpec(), output_type=str, capabilities=(capability,), model=FunctionModel(stream_function=stream)
        ).run("Since I reply in English, I must like tea.")
        tea = await store.read("tea.md")

    refusal = [_result(part) for part in _parts(run.all_messages()) if isinstance(part, ToolReturnPart)][-1]
    assert refusal["error"] == "read_conflict"
    assert refusal["current"] == {
        "path": viewed,
        "version": changed[0],
        "size": len(changed_text.encode()),
        "content": changed_text,
    }
    assert tea.text == (changed_text if viewed == "tea.md" else "likes tea\n")


async def test_with_cursors_a_later_run_gets_only_the_changed_files_or_nothing(
    alice: Client, memory: str, open_files: OpenFiles
) -> None:
    first, second, third = "First run.", "Second run.", "Third run."
    script = ScriptedModel({first: ["ok"], second: ["ok"], third: ["ok"]})
    async with open_files(alice, memory) as store:
        tea = await seeded(store, "tea.md", "likes tea\n")
        await seeded(store, "lang.md", "reply in English\n")
        await seeded(store, "old.md", "to be deleted\n")
        cursors = MemoryCursors()
        capability = FileMemoryCapability([FileMount("user", store, "write")], cursors=cursors)
        conversation = await agent(script, capability).run(first)
        # Another conversation changes two files meanwhile.
        await store.write("tea.md", "likes coffee\n", expected=tea, origin=Origin())
        await store.delete("old.md", expected=(await store.read("old.md")).version, origin=Origin())
        conversation = await agent(script, capability).run(second, previous_state=conversation.state)
        await agent(script, capability).run(third, previous_state=conversation.state)
        saved = cursors.snapshot()

    full, changes = script.context(first), script.context(second)
    assert full is not None
    assert changes is not None
    assert full["kind"] == "full"
    assert full["body"]["index"] == ["lang.md: reply in English", "old.md: to be deleted", "tea.md: likes tea"]
    assert changes["kind"] == "changes"
    assert changes["body"]["changed"] == ["old.md (deleted)", "tea.md: likes coffee"]
    assert script.context(third) is None
    assert set(saved) == {"user"}
    assert saved["user"]


async def test_always_load_files_come_first_in_the_context_block(
    alice: Client, memory: str, open_files: OpenFiles
) -> None:
    prompt = "Hello."
    script = ScriptedModel({prompt: ["Hi."]})
    readme = "---\ndescription: How this memory is organized\n---\nOne file per topic.\n"
    async with open_files(alice, memory) as store:
        await seeded(store, "a.md", "alpha\n")
        await seeded(store, "README.md", readme)
        await seeded(store, "z/tea.md", "likes tea\n")
        capability = FileMemoryCapability([FileMount("user", store, "write", always_load=("README.md",))])
        await agent(script, capability).run(prompt)

    context = script.context(prompt)
    assert context is not None
    assert list(context["body"]) == ["files", "index"]
    assert context["body"]["files"] == [{"path": "README.md", "content": readme}]
    assert context["body"]["index"] == ["README.md: How this memory is organized", "a.md: alpha", "z/tea.md: likes tea"]
    text = context["text"]
    assert text.index("One file per topic.") < text.index('"index"')


async def test_a_read_mount_offers_only_view_and_grep(alice: Client, memory: str, open_files: OpenFiles) -> None:
    offered: list[list[str]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        offered.append(sorted(tool.name for tool in info.function_tools))
        yield "ok"

    async with open_files(alice, memory) as store:
        capability = FileMemoryCapability([FileMount("user", store, "read")])
        await HarnessBuilder(instrumentation=None).build(
            AgentSpec(), output_type=str, capabilities=(capability,), model=FunctionModel(stream_function=stream)
        ).run("Hello.")

    assert offered == [["memory_file_grep", "memory_file_view"]]


async def test_grep_through_the_tool_searches_on_the_server(alice: Client, memory: str, open_files: OpenFiles) -> None:
    prompt = "Where did I say tea?"
    grep = ToolCall("memory_file_grep", {"memory": "user", "pattern": "TEA"})
    script = ScriptedModel({prompt: [grep, "In prefs.md."]})
    async with open_files(alice, memory) as store:
        await seeded(store)
        capability = FileMemoryCapability([FileMount("user", store, "read")])
        await agent(script, capability).run(prompt)

    assert script.results(prompt) == [
        {"memory": "user", "matches": [{"path": PREFS, "line": 1, "text": "likes tea"}], "truncated": False}
    ]


async def test_the_history_of_a_file_shows_each_version_with_its_origin(
    alice: Client, memory: str, open_files: OpenFiles
) -> None:
    create = ToolCall("memory_file_create", {"memory": "user", "path": PREFS, "content": TEA_AND_ENGLISH})
    prompt = "Remember my preferences, then switch me to Chinese."
    script = ScriptedModel({prompt: [create, edit("reply in English", "reply in Chinese"), "Done."]})
    async with open_files(alice, memory) as store:
        origin = Origin(run_id="run-42", principal_id="user:alice")
        capability = FileMemoryCapability([FileMount("user", store, "write")], origin=origin)
        await agent(script, capability).run(prompt)
        current = await store.read(PREFS)

    answer = alice.get(f"/v1/memories/{memory}/records/{current.version}/history")
    assert answer.status_code == 200, answer.text
    versions = answer.json()["data"]
    created, edited = script.results(prompt)
    assert [(v["id"], v["content"], v["path"]) for v in versions] == [
        (created["version"], TEA_AND_ENGLISH, PREFS),
        (edited["version"], "likes tea\nreply in Chinese\n", PREFS),
    ]
    call_ids = [v["origin"]["tool_call_id"] for v in versions]
    assert [v["origin"] for v in versions] == [
        {"run_id": "run-42", "principal_id": "user:alice", "tool_call_id": call_id} for call_id in call_ids
    ]
    assert call_ids[0] != call_ids[1]
    assert all(v["written_by"] == {"kind": "user", "id": "alice"} for v in versions)
