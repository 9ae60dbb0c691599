"""The README's "Mount a memory in a13n-harness" snippet works as written, against the local server,
with a scripted model in place of gpt-5 (the one part that needs a model provider's key)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from tests.harness.conftest import Stage
from tests.integration.conftest import Client

ROOT = Path(__file__).resolve().parents[2]
GPT = 'AgentSpec(model="openai-responses:gpt-5"), output_type=str,'


def _snippet() -> str:
    section = (ROOT / "README.md").read_text().split("## Mount a memory in a13n-harness", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


async def _model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    prompt = str(messages)
    answered = any(isinstance(m, ModelResponse) for m in messages)
    if "Remember that" in prompt and not answered:
        args = json.dumps({"memory": "facts", "text": "Alice drinks green tea."})
        yield {0: DeltaToolCall(name="memory_record_add", json_args=args, tool_call_id="call-add")}
    elif "Remember that" in prompt:
        yield "Noted: green tea."
    else:
        recalled = "Alice drinks green tea." in prompt
        yield "A green tea." if recalled else "I do not know what you like."


def test_the_readme_mount_snippet_runs_as_written(
    alice: Client, memory: str, stage: Stage, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _snippet()
    assert GPT in source
    monkeypatch.setenv("UHP", stage.url)
    monkeypatch.setenv("MEM", memory)
    script = source.replace('"k-alice"', repr(alice.key)).replace(GPT, "AgentSpec(), output_type=str, model=MODEL,")

    exec(compile(script, "README.md", "exec"), {"__name__": "__main__", "MODEL": FunctionModel(stream_function=_model)})

    assert capsys.readouterr().out.splitlines() == ["Noted: green tea.", "A green tea."]
    stored = alice.get(f"/v1/memories/{memory}/records", types="fact").json()["data"]
    assert [(r["content"], r["written_by"]["id"]) for r in stored] == [("Alice drinks green tea.", "alice")]


# -- the file memory snippet ---------------------------------------------------------------------

RULE = "Answer customers in English."


def _file_snippet() -> str:
    section = (ROOT / "README.md").read_text().split("### File memory", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


async def _file_model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    prompt = str(messages)
    if "In which language" in prompt:
        yield "In English." if RULE in prompt else "I do not know."
    elif "call-create" not in prompt:  # the first run, before its tool call
        args = json.dumps({"memory": "team", "path": "conventions.md", "content": RULE})
        yield {0: DeltaToolCall(name="memory_file_create", json_args=args, tool_call_id="call-create")}
    else:
        yield "Noted."


def test_the_readme_file_memory_snippet_runs_as_written(
    alice: Client, memory: str, stage: Stage, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _file_snippet()
    assert GPT in source
    monkeypatch.setenv("UHP", stage.url)
    monkeypatch.setenv("MEM", memory)
    script = source.replace('"k-alice"', repr(alice.key)).replace(GPT, "AgentSpec(), output_type=str, model=MODEL,")

    exec(compile(script, "README.md", "exec"),
         {"__name__": "__main__", "MODEL": FunctionModel(stream_function=_file_model)})

    assert capsys.readouterr().out.splitlines() == ["Noted.", "In English."]
    files = alice.get(f"/v1/memories/{memory}/paths").json()["data"]
    assert [(f["path"], f["description"], f["written_by"]["id"]) for f in files] == [
        ("conventions.md", RULE, "alice")
    ]
