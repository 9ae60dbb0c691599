"""The README's "Mount a memory in a13n-harness" snippets work against the local server: with a scripted
model in place of gpt-5 (the one part that needs a model provider's key), and as written with no key at
all, as the README says to run them: `MODEL=test` (pydantic-ai's test model) and `MODEL=ollama:...` (a
model server on the machine, here a loopback server answering in the OpenAI chat shape)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from tests.harness.conftest import Stage
from tests.integration.conftest import Client
from tests.loopback_chat import LoopbackChat, Reply, completion, json_reply

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GPT = 'AgentSpec(model=os.environ.get("MODEL", "openai-responses:gpt-5")), output_type=str,'


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


# -- as written, without a model provider's key -------------------------------------------------------


def _run_as_written(source: str, alice: Client) -> None:
    """The snippet exactly as the README shows it (only the example key swapped for this test's)."""
    exec(compile(source.replace('"k-alice"', repr(alice.key)), "README.md", "exec"), {"__name__": "__main__"})


@pytest.mark.parametrize("snippet", ["records", "files"])
def test_the_snippets_run_as_written_with_the_test_model(
    snippet: str, alice: Client, memory: str, stage: Stage, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`MODEL=test .venv/bin/python mount.py`: the test model calls each memory tool once with "a"."""
    monkeypatch.setenv("UHP", stage.url)
    monkeypatch.setenv("MEM", memory)
    monkeypatch.setenv("MODEL", "test")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    _run_as_written(_snippet() if snippet == "records" else _file_snippet(), alice)

    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    if snippet == "records":
        assert first["memory_record_add"]["memory"] == "facts"
        # The second run's search found what the first added.
        assert "a" in [r["text"] for r in second["memory_record_search"]["records"]]
        stored = alice.get(f"/v1/memories/{memory}/records", types="fact").json()["data"]
        assert {(r["content"], r["written_by"]["id"]) for r in stored} == {("a", "alice")}
    else:
        assert first["memory_file_create"]["path"] == "a"
        files = alice.get(f"/v1/memories/{memory}/paths").json()["data"]
        assert [(f["path"], f["written_by"]["id"]) for f in files] == [("a", "alice")]


def _chat(request: dict[str, Any]) -> Reply:
    """A model server on the machine, as Ollama answers (OpenAI chat completions, streamed or not): the
    record snippet's conversation, read from what the harness sends it."""
    sent = json.dumps(request["messages"])
    if "Remember that" in sent and '"role": "tool"' not in sent:
        arguments = json.dumps({"memory": "facts", "text": "Alice drinks green tea."})
        call = {"id": "call-add", "type": "function", "function": {"name": "memory_record_add", "arguments": arguments}}
        return _answer(request, {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
    if "Remember that" in sent:
        return _answer(request, {"role": "assistant", "content": "Noted: green tea."}, "stop")
    recalled = "Alice drinks green tea." in sent
    return _answer(request, {"role": "assistant", "content": "A green tea." if recalled else "No idea."}, "stop")


def _answer(request: dict[str, Any], message: dict[str, Any], finish: str) -> Reply:
    if not request.get("stream"):
        body = completion(message.get("content"), finish_reason=finish)
        body["choices"][0]["message"] = message
        return json_reply(body)
    delta = dict(message)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": 0, **call} for call in delta["tool_calls"]]
    chunks = [
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1790570000, "model": "llama3.2",
         "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1790570000, "model": "llama3.2",
         "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    stream = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return 200, {"Content-Type": "text/event-stream"}, stream.encode()


def test_the_record_snippet_runs_as_written_with_a_model_server_on_the_machine(
    alice: Client, memory: str, stage: Stage, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`MODEL=ollama:llama3.2 OLLAMA_BASE_URL=http://127.0.0.1:11434/v1 .venv/bin/python mount.py`."""
    with LoopbackChat(respond=_chat) as chat:
        monkeypatch.setenv("UHP", stage.url)
        monkeypatch.setenv("MEM", memory)
        monkeypatch.setenv("MODEL", "ollama:llama3.2")
        monkeypatch.setenv("OLLAMA_BASE_URL", chat.url + "/v1")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)

        _run_as_written(_snippet(), alice)

    assert capsys.readouterr().out.splitlines() == ["Noted: green tea.", "A green tea."]
    assert {path for path, _, _ in chat.requests} == {"/v1/chat/completions"}
    stored = alice.get(f"/v1/memories/{memory}/records", types="fact").json()["data"]
    assert [(r["content"], r["written_by"]["id"]) for r in stored] == [("Alice drinks green tea.", "alice")]
