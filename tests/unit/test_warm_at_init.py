"""Clients at INIT (issue 35): a Lambda function's container (its AWS clients, and the recall engine's where
it searches) was built on its first request; a handler module now builds it as it is imported, during INIT."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from uhp_memories import bootstrap
from uhp_memories.api.app import make_handler, make_resolver


def test_a_handler_made_in_a_lambda_builds_its_container_and_search_at_init(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    made = SimpleNamespace(settings=SimpleNamespace(search_endpoint="https://search.example"),
                           recall_engine=lambda: built.append("engine"))
    monkeypatch.setattr(bootstrap, "_container", None)
    monkeypatch.setattr(bootstrap, "container", lambda: built.append("container") or made)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "uhp-memories-dev-recall")
    make_handler(make_resolver())
    assert built == ["container", "engine"]


def test_outside_lambda_or_once_built_nothing_is_built_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    monkeypatch.setattr(bootstrap, "container", lambda: built.append("container"))
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.setattr(bootstrap, "_container", None)
    make_handler(make_resolver())
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "uhp-memories-dev-recall")
    monkeypatch.setattr(bootstrap, "_container", object())  # local mode installed its own
    make_handler(make_resolver())
    assert built == []


def test_a_container_that_cannot_be_built_at_init_is_left_to_the_first_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> Any:
        raise RuntimeError("no region")

    monkeypatch.setattr(bootstrap, "_container", None)
    monkeypatch.setattr(bootstrap, "container", broken)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "uhp-memories-dev-recall")
    make_handler(make_resolver())  # does not raise: INIT goes on
