"""The README's "Connect an MCP client" snippet works as written, against the local server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.conftest import Client
from uhp_memories.domain.fence import unwrap

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    return (ROOT / "README.md").read_text().split("### Connect an MCP client", 1)[1].split("\n## ", 1)[0]


def test_the_readme_mcp_snippet_runs_as_written(
    alice: Client, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    section = _section()
    assert 'claude mcp add --transport http uhp http://127.0.0.1:8080/mcp --header "x-api-key: k-alice"' in section
    source = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    memory = alice.create_memory("Alice")
    alice.remember(memory["id"], "Alice drinks green tea.")
    monkeypatch.setenv("UHP", alice.base_url)
    monkeypatch.setenv("MEM", memory["id"])
    script = source.replace('"k-alice"', repr(alice.key))

    exec(compile(script, "README.md", "exec"), {"__name__": "__main__"})

    tools, recalled = capsys.readouterr().out.splitlines()
    assert "memory_recall" in tools
    assert "memory_remember" in tools
    answer = json.loads(recalled)
    assert [unwrap(r["content"], answer["fence"]) for r in answer["results"]] == ["Alice drinks green tea."]
