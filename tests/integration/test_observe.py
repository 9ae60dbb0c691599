"""§5.1 observe: episodes appended as they arrive, in one transaction; no derivation, no jobs."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.domain.limits import OBSERVE_BYTES

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


def test_an_observe_over_the_transaction_bound_is_refused_whole(alice: Client) -> None:
    # 50 episodes of 100 KiB: 5 MB, which DynamoDB refuses as one transaction (4 MB) and moto takes.
    memory = alice.create_memory("Sessions")
    episodes = [{"content": "x" * (100 * 1024)} for _ in range(50)]
    answer = alice.post(f"/v1/memories/{memory['id']}/observe", {"episodes": episodes})
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert str(OBSERVE_BYTES) in answer.json()["error"]["message"]
    assert alice.get(f"/v1/memories/{memory['id']}/records").json()["data"] == []
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == 0


def test_the_largest_observe_allowed_lands(alice: Client) -> None:
    # OBSERVE_BYTES exactly, each episode with its most attributes and references: one transaction.
    memory = alice.create_memory("Sessions")
    attributes = {"a": "y" * (16 * 1024 - 8)}
    attributes_bytes = len(json.dumps(attributes, separators=(",", ":")))
    references = [{"memory_id": memory["id"], "record_id": f"hrec_{n:032x}", "rel": "mentions"} for n in range(32)]
    per_episode = 100 * 1024 + attributes_bytes
    count = OBSERVE_BYTES // per_episode
    last = OBSERVE_BYTES - count * per_episode - attributes_bytes
    episodes = [{"content": "x" * (100 * 1024), "attributes": attributes, "references": references}
                for _ in range(count)]
    episodes.append({"content": "z" * last, "attributes": attributes, "references": references})
    path = f"/v1/memories/{memory['id']}/observe"
    answer = alice.post(path, {"episodes": episodes})
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["records"]) == count + 1
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == count + 1
    one_more = alice.post(path, {"episodes": [*episodes[:-1], {**episodes[-1], "content": "z" * (last + 1)}]})
    assert error_code(one_more) == "memory_invalid"
