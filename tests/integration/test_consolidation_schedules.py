"""Consolidation on a schedule through the public API: the schedule set over HTTP lands in (moto's)
EventBridge Scheduler through the deployed adapter, and the local ticker fires it as Scheduler would,
by the timer function's own handler: a run with `trigger: schedule`."""

from __future__ import annotations

import time

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow


def test_a_schedule_set_over_http_starts_runs_as_it_fires_until_it_is_cleared(
    alice: Client, local_aws: LocalAws
) -> None:
    memory = alice.create_memory("Notes")["id"]
    alice.remember(memory, "Acme renews in March")
    alice.remember(memory, "Acme renews in March")
    path = f"/v1/memories/{memory}/consolidation-schedule"
    assert error_code(alice.get(path)) == "memory_schedule_not_found"

    answer = alice.put(path, {"every_minutes": 60, "budget": {"limit": 10_000}})
    assert answer.status_code == 200, answer.text
    assert answer.json() | {"set_at": 0} == {
        "object": "memory.consolidation_schedule", "memory_id": memory, "every_minutes": 60,
        "budget": {"limit": 10_000, "unit": "tokens"}, "set_by": "user:alice", "set_at": 0,
    }
    assert alice.get(path).json() == answer.json()

    ticker = local_aws.ticker()
    assert ticker.tick(time.time() + 30 * 60) == 0
    assert ticker.tick(time.time() + 61 * 60) >= 1
    runs = alice.get(f"/v1/memories/{memory}/consolidations").json()["data"]
    assert [(r["trigger"], r["budget"]["limit"]) for r in runs] == [("schedule", 10_000)]
    deadline = time.monotonic() + 30
    while alice.get(f"/v1/memories/{memory}/consolidations/{runs[0]['id']}").json()["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert alice.get(f"/v1/memories/{memory}/consolidations/{runs[0]['id']}").json()["changes"]["forgotten"] == 1

    cleared = alice.delete(path)
    assert cleared.status_code == 200, cleared.text
    assert error_code(alice.get(path)) == "memory_schedule_not_found"
    ticker.tick(time.time() + 10 * 3600)
    assert len(alice.get(f"/v1/memories/{memory}/consolidations").json()["data"]) == 1


def test_a_schedule_needs_write_and_bounds(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Notes")["id"]
    path = f"/v1/memories/{memory}/consolidation-schedule"
    reader, stranger = make_client("user:reader"), make_client("user:stranger")
    alice.grant(memory, "user:reader", "read")
    assert error_code(reader.put(path, {"every_minutes": 60})) == "memory_forbidden"
    assert error_code(stranger.put(path, {"every_minutes": 60})) == "memory_not_found"
    assert error_code(alice.put(path, {"every_minutes": 5})) == "memory_invalid"
    assert error_code(alice.put(path, {"every_minutes": "60"})) == "memory_invalid"  # never coerced
    assert error_code(alice.get(path)) == "memory_schedule_not_found"
