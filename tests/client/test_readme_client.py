"""The README's "Python client" example runs as written, against the local server."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.client.conftest import Keyed

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    return (ROOT / "README.md").read_text().split("## Python client", 1)[1].split("\n## ", 1)[0]


@pytest.mark.slow
def test_the_readme_client_example_runs_as_written(
    key_of: Callable[..., Keyed], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    section = _section()
    assert "pip install ./clients/python" in section
    source = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    assert len(source.strip().splitlines()) <= 12
    url, key = key_of("user:alice")
    monkeypatch.setenv("UHP_MEMORIES_URL", url)
    monkeypatch.setenv("UHP_MEMORIES_API_KEY", key)

    exec(compile(source, "README.md", "exec"), {"__name__": "__main__"})

    first, second, recalled = capsys.readouterr().out.splitlines()
    assert first == "1 superseded Acme renews in March."
    assert second == "2 active Acme renews in April."
    assert recalled == "False ['Acme renews in April.']"
