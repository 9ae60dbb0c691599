"""§5.1 observe: episodes appended as they arrive, in one transaction; no derivation, no jobs."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code

pytestmark = pytest.mark.slow


def test_observe_keeps_every_episode_and_answers_with_the_records(alice: Client) -> None:
    memory = alice.create_memory("Sessions")
    answer = alice.post(
        f"/v1/memories/{memory['id']}/observe",
        {"episodes": [{"content": "user: hi"}, {"content": "agent: hello", "attributes": {"turn": 2}}]},
    )
    assert answer.status_code == 200, answer.text
    records = answer.json()["records"]
    assert [r["type"] for r in records] == ["episode", "episode"]
    assert [r["content"] for r in records] == ["user: hi", "agent: hello"]
    assert records[1]["attributes"] == {"turn": 2}
    assert {r["written_by"]["id"] for r in records} == {"alice"}
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == 2
    listed = alice.get(f"/v1/memories/{memory['id']}/records", types="episode").json()["data"]
    assert {r["id"] for r in listed} == {r["id"] for r in records}


def test_observe_is_all_or_nothing(alice: Client) -> None:
    memory = alice.create_memory("Sessions")
    too_big = "x" * (100 * 1024 + 1)
    answer = alice.post(f"/v1/memories/{memory['id']}/observe", {"episodes": [{"content": "ok"}, {"content": too_big}]})
    assert answer.status_code == 422
    assert error_code(answer) == "memory_invalid"
    assert alice.get(f"/v1/memories/{memory['id']}/records").json()["data"] == []


def test_observe_limits_and_privileges(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Sessions")
    path = f"/v1/memories/{memory['id']}/observe"
    assert alice.post(path, {"episodes": []}).status_code == 422
    assert alice.post(path, {"episodes": [{"content": "e"}] * 51}).status_code == 422
    reader = make_client("user:reader")
    alice.grant(memory["id"], "user:reader", "read")
    assert error_code(reader.post(path, {"episodes": [{"content": "e"}]})) == "memory_forbidden"
    stranger = make_client("user:stranger")
    assert error_code(stranger.post(path, {"episodes": [{"content": "e"}]})) == "memory_not_found"


def test_there_are_no_jobs(alice: Client) -> None:
    memory = alice.create_memory("Sessions")
    answer = alice.get(f"/v1/memories/{memory['id']}/jobs/hjob_00000000000000000000000000000000")
    assert answer.status_code == 404
    assert error_code(answer) == "memory_job_not_found"
