"""§5.1 derivation through the public API: a local stage whose derivation model is an OpenAI-compatible
endpoint (a loopback server answering in the chat completions shape, tests/loopback_chat.py). observe
answers 202 with a job; the derive workflow runs in moto's Step Functions with the real step handlers;
the job, then recall, then erase, all through HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code
from tests.loopback_chat import LoopbackChat, completion, json_reply
from uhp_memories.adapters.openai_compat import OpenAICompatDeriver
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow


@pytest.fixture
def chat(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackChat]:
    """The stage derives with the loopback model for this test (what `settings.derivation = "openai"`
    builds: bootstrap.build_deriver)."""
    with LoopbackChat() as server:
        assert local_aws.container is not None
        observing = local_aws.container.observing
        deriver = OpenAICompatDeriver(server.url, "local-model", api_key="sk-local", timeout_s=10)
        monkeypatch.setattr(observing, "_deriver", lambda: deriver)
        monkeypatch.setattr(observing, "derives", True)
        yield server


def settled(client: Client, memory_id: str, job_id: str, seconds: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        job = client.get(f"/v1/memories/{memory_id}/jobs/{job_id}")
        assert job.status_code == 200, job.text
        if job.json()["status"] != "pending" or time.monotonic() > deadline:
            return job.json()
        time.sleep(0.05)


def observe(client: Client, memory_id: str, *texts: str) -> Any:
    return client.post(f"/v1/memories/{memory_id}/observe", {"episodes": [{"content": t} for t in texts]})


def test_observe_answers_a_job_whose_records_are_the_episodes_and_the_facts_derived_from_them(
    alice: Client, chat: LoopbackChat
) -> None:
    memory = alice.create_memory("Sessions")["id"]
    answer = observe(alice, memory, "user: I only drink green tea.", "agent: Noted, green tea.")
    assert answer.status_code == 202, answer.text
    job = answer.json()["job"]
    assert job["status"] == "pending"
    assert "records" not in answer.json()  # §5.1: no records yet

    done = settled(alice, memory, job["id"])
    assert done["status"] == "completed", done
    episodes = [r for r in done["records"] if r["type"] == "episode"]
    facts = [r for r in done["records"] if r["type"] == "fact"]
    assert [e["content"] for e in episodes] == ["user: I only drink green tea.", "agent: Noted, green tea."]
    assert sorted(f["content"] for f in facts) == [
        "Noted: agent: Noted, green tea.", "Noted: user: I only drink green tea."
    ]
    by_source = {f["references"][0]["record_id"]: f for f in facts}
    assert set(by_source) == {e["id"] for e in episodes}
    fact = by_source[episodes[0]["id"]]
    assert fact["references"] == [{"rel": "derived_from", "memory_id": memory, "record_id": episodes[0]["id"],
                                   "available": True}]
    assert fact["written_by"] == {"kind": "deriver", "id": "native"}
    assert fact["origin"] == {"job_id": job["id"], "model": "local-model", "prompt_version": "derive-v1"}
    assert fact["attributes"] == {"source": "chat"}
    assert done["usage"] == {"input_tokens": 412, "output_tokens": 57}
    assert done["model"] == "local-model"
    (request,) = [body for path, headers, body in chat.requests]
    assert chat.requests[0][1]["authorization"] == "Bearer sk-local"
    assert request["model"] == "local-model"

    found = alice.post(f"/v1/memories/{memory}/recall", {"query": "What does the user drink?", "types": ["fact"]})
    assert found.status_code == 200
    assert fact["id"] in {r["record"]["id"] for r in found.json()["results"]}


def test_the_capability_document_says_the_stage_derives_in_the_background(alice: Client, chat: LoopbackChat) -> None:
    provider = next(p for p in alice.get("/v1/memories/providers").json()["data"] if p["id"] == "native")
    assert provider["derivation"] == "background"
    assert provider["observe"] == {"keeps_episodes": True, "answers": "job"}


def test_a_model_that_answers_badly_fails_the_job_and_loses_no_episode(alice: Client, chat: LoopbackChat) -> None:
    chat.respond = lambda request: json_reply(completion("I'd rather chat about the weather."))
    memory = alice.create_memory("Sessions")["id"]
    answer = observe(alice, memory, "user: remember my locker code is 4411")
    assert answer.status_code == 202
    done = settled(alice, memory, answer.json()["job"]["id"])
    assert (done["status"], done["error"]) == ("failed", "not_json")
    assert [r["content"] for r in done["records"]] == ["user: remember my locker code is 4411"]
    listed = alice.get(f"/v1/memories/{memory}/records").json()["data"]
    assert [r["type"] for r in listed] == ["episode"]


def test_erasing_an_episode_erases_what_was_derived_from_it(alice: Client, chat: LoopbackChat) -> None:
    memory = alice.create_memory("Sessions")["id"]
    answer = observe(alice, memory, "user: my doctor is Dr. Okafor", "user: I like jazz")
    done = settled(alice, memory, answer.json()["job"]["id"])
    private, kept = (r for r in done["records"] if r["type"] == "episode")
    derived = {f["references"][0]["record_id"]: f["id"] for f in done["records"] if f["type"] == "fact"}

    erased = alice.post(f"/v1/memories/{memory}/erase", {"record_ids": [private["id"]]})
    assert erased.status_code == 200, erased.text
    assert sorted(erased.json()["erased"]) == sorted([private["id"], derived[private["id"]]])
    for gone in (private["id"], derived[private["id"]]):
        assert error_code(alice.get(f"/v1/memories/{memory}/records/{gone}")) == "memory_record_not_found"
    assert alice.get(f"/v1/memories/{memory}/records/{derived[kept['id']]}").status_code == 200
    again = alice.get(f"/v1/memories/{memory}/jobs/{answer.json()['job']['id']}").json()
    assert private["id"] not in {r["id"] for r in again["records"]}


def test_a_derive_job_lists_only_what_is_still_readable(alice: Client, chat: LoopbackChat) -> None:
    """§5.2: a forgotten record leaves every read that does not ask for history, and a job's `records`
    is such a read: a forgotten episode or fact is left out, its id and content too, and stays readable
    through GET record with include=all and history (issue 36)."""
    memory = alice.create_memory("Sessions")["id"]
    answer = observe(alice, memory, "user: my locker code is 4411", "user: I like jazz")
    done = settled(alice, memory, answer.json()["job"]["id"])
    private, kept = (r for r in done["records"] if r["type"] == "episode")
    derived = {f["references"][0]["record_id"]: f for f in done["records"] if f["type"] == "fact"}
    fact = derived[private["id"]]
    revised = alice.patch(f"/v1/memories/{memory}/records/{fact['id']}", {"content": "The locker code changed."})
    for forgotten in (private["id"], revised.json()["id"]):  # a revised fact: forgotten at its current version
        assert alice.delete(f"/v1/memories/{memory}/records/{forgotten}").json()["status"] == "forgotten"

    again = alice.get(f"/v1/memories/{memory}/jobs/{answer.json()['job']['id']}")
    assert again.status_code == 200, again.text
    assert [r["id"] for r in again.json()["records"]] == [kept["id"], derived[kept["id"]]["id"]]
    assert "4411" not in again.text
    assert "locker" not in again.text
    for gone in (private["id"], fact["id"]):
        assert alice.get(f"/v1/memories/{memory}/records/{gone}", include="all").status_code == 200


def test_a_derive_job_is_its_memorys_and_needs_read(alice: Client, make_client: ClientFactory, chat: LoopbackChat
                                                    ) -> None:
    memory, other = alice.create_memory("Sessions")["id"], alice.create_memory("Other")["id"]
    job_id = observe(alice, memory, "user: hi").json()["job"]["id"]
    settled(alice, memory, job_id)
    writer = make_client("user:writer")
    alice.grant(memory, "user:writer", "write")
    assert error_code(writer.get(f"/v1/memories/{memory}/jobs/{job_id}")) == "memory_forbidden"
    assert error_code(alice.get(f"/v1/memories/{other}/jobs/{job_id}")) == "memory_job_not_found"
    stranger = make_client("user:stranger")
    assert error_code(stranger.get(f"/v1/memories/{memory}/jobs/{job_id}")) == "memory_not_found"


def test_a_turn_names_the_job_deriving_from_its_episodes(alice: Client, make_client: ClientFactory,
                                                         chat: LoopbackChat) -> None:
    memory = alice.create_memory("Assistant")["id"]
    alice.claim("helper")
    attached = alice.put("/v1/harnesses/helper/memories",
                         {"memories": [{"memory_id": memory, "access": "write", "default": True}]})
    assert attached.status_code == 200, attached.text
    harness = make_client("harness:helper")
    turn = harness.post("/v1/harnesses/helper/turns", {"asked": "I moved to Lisbon.", "answered": "Noted."})
    assert turn.status_code == 201, turn.text
    job = turn.json()["job"]
    assert job["status"] == "pending"
    done = settled(alice, memory, job["id"])
    assert done["status"] == "completed"
    assert "Noted: I moved to Lisbon." in {r["content"] for r in done["records"] if r["type"] == "fact"}
