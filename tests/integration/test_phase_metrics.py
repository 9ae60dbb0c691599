"""A request's phases as metrics (issue 35): access, embed, search and read-back, each timed at the port
that runs it (uhp_memories/phases.py) and written once per invocation in milliseconds
(uhp_memories/api/observability.py), only where metrics are on."""

from __future__ import annotations

import json
import threading
from contextvars import copy_context
from typing import Any

import pytest

from tests.integration.conftest import Client
from uhp_memories.api import observability
from uhp_memories.settings import Settings

PHASE_METRICS = set(observability.PHASE_METRICS.values())
SERVICE = "uhp-memories-recall"


@pytest.fixture
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics on, as CDK deploys every function (UHP_METRICS)."""
    from aws_lambda_powertools import Metrics

    monkeypatch.setattr(observability, "_settings", Settings(metrics=True))
    monkeypatch.setattr(observability, "metrics", Metrics(namespace=observability.NAMESPACE, service=SERVICE))


def written(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def phases_of(blob: dict[str, Any]) -> dict[str, list[float]]:
    return {name: blob[name] for name in PHASE_METRICS if name in blob}


def test_a_recall_writes_one_value_per_phase_in_milliseconds(
    metrics_on: None, alice: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = alice.create_memory("phased")["id"]
    for n in range(3):
        alice.remember(memory, f"Globex renewal note {n}: prefers email over calls.")
    capsys.readouterr()

    answer = alice.post(f"/v1/memories/{memory}/recall", {"query": "how does globex like to be reached"})

    assert answer.status_code == 200, answer.text
    assert answer.json()["results"]
    assert not answer.json()["degraded"]
    (blob,) = written(capsys.readouterr().out)
    found = phases_of(blob)
    assert set(found) == PHASE_METRICS  # access, embed, search, read-back
    for name, values in found.items():
        (value,) = values  # one value per phase, however many calls it took (several searches, say)
        assert value > 0, name
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == observability.NAMESPACE
    assert directive["Dimensions"] == [["service"]]
    assert blob["service"] == SERVICE
    units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert {units[name] for name in PHASE_METRICS} == {"Milliseconds"}
    assert blob[observability.RECALLS] == [1.0]
    assert "Globex" not in json.dumps(blob)


def test_a_remember_writes_its_access_and_embed_phases(
    metrics_on: None, alice: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = alice.create_memory("written")["id"]
    capsys.readouterr()

    alice.remember(memory, "Acme renews in March.")

    (blob,) = written(capsys.readouterr().out)
    assert set(phases_of(blob)) == {"AccessMilliseconds", "EmbedMilliseconds"}


def test_without_metrics_nothing_is_timed_or_written(alice: Client, capsys: pytest.CaptureFixture[str]) -> None:
    """Local mode and tests, as the local server runs: its output stays its own."""
    assert observability._settings.metrics is False
    memory = alice.create_memory("quiet")["id"]
    alice.remember(memory, "Initech pays on the 5th.")
    capsys.readouterr()

    assert alice.post(f"/v1/memories/{memory}/recall", {"query": "initech payment"}).status_code == 200

    assert written(capsys.readouterr().out) == []


def test_a_phase_adds_up_its_calls_across_the_threads_that_carry_the_invocation(
    metrics_on: None, capsys: pytest.CaptureFixture[str]
) -> None:
    @observability.observed
    def entry(event: dict[str, Any], context: Any) -> None:
        with observability.phase(observability.SEARCH):
            pass
        with observability.phase(observability.SEARCH):
            pass
        worker = threading.Thread(target=copy_context().run, args=(beside,))
        worker.start()
        worker.join()
        alone = threading.Thread(target=beside)  # without the invocation's context: not counted
        alone.start()
        alone.join()

    def beside() -> None:
        with observability.phase(observability.EMBED):
            pass

    entry({}, None)
    with observability.phase(observability.ACCESS):  # outside an invocation: nothing to add to
        pass

    (blob,) = written(capsys.readouterr().out)
    assert set(phases_of(blob)) == {"SearchMilliseconds", "EmbedMilliseconds"}
    assert [len(blob["SearchMilliseconds"]), len(blob["EmbedMilliseconds"])] == [1, 1]
