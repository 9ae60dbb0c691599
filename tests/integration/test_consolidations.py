"""§9.2 consolidation runs: visible (runs and their changes), bounded (a budget; a stopped run is
resumed by the next), reversible (revert appends), and holding the memory while they run."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code

pytestmark = pytest.mark.slow

RUNS = "/v1/memories/{}/consolidations"


def _start(client: Client, memory_id: str, **body: Any) -> dict[str, Any]:
    answer = client.post(RUNS.format(memory_id), body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_a_run_forgets_exact_repeats_and_says_so(alice: Client) -> None:
    memory = alice.create_memory("Facts")
    first = alice.remember(memory["id"], "Acme renews in March.")
    repeat = alice.remember(memory["id"], "  acme renews in   MARCH. ")
    other = alice.remember(memory["id"], "Globex prefers email.")
    run = _start(alice, memory["id"])
    assert run["object"] == "memory.consolidation"
    assert run["status"] == "completed"
    assert run["changes"] == {"created": 0, "superseded": 0, "forgotten": 1}
    assert run["read"]["records"] == 3
    assert run["written_by"] == {"kind": "consolidator", "id": "native"}
    assert run["budget"] == {"limit": 250_000, "unit": "tokens", "exhausted": False}
    assert run["usage"]["input_tokens"] > 0  # MiniLM tokens of the three texts read
    assert run["usage"]["output_tokens"] == 0
    active = {r["id"] for r in alice.get(f"/v1/memories/{memory['id']}/records").json()["data"]}
    assert active == {first["id"], other["id"]}
    changes = alice.get(RUNS.format(memory["id"]) + f"/{run['id']}/changes").json()["data"]
    assert [(c["record_id"], c["action"]) for c in changes] == [(repeat["id"], "forgotten")]
    assert changes[0]["record"]["status"] == "forgotten"
    listed = alice.get(RUNS.format(memory["id"])).json()["data"]
    assert [r["id"] for r in listed] == [run["id"]]
    assert alice.get(RUNS.format(memory["id"]) + f"/{run['id']}").json()["status"] == "completed"


def test_revert_makes_what_the_run_forgot_current_again(alice: Client) -> None:
    memory = alice.create_memory("Facts")
    alice.remember(memory["id"], "Same words.")
    repeat = alice.remember(memory["id"], "same words.")
    run = _start(alice, memory["id"])
    reverted = alice.post(RUNS.format(memory["id"]) + f"/{run['id']}/revert")
    assert reverted.status_code == 200, reverted.text
    # The run keeps its §9.2 status; the reversal is the caller's act, stamped with the caller.
    assert (reverted.json()["status"], reverted.json()["reverted_by"]) == ("completed", "user:alice")
    history = alice.get(f"/v1/memories/{memory['id']}/records/{repeat['id']}/history").json()["data"]
    assert [v["status"] for v in history] == ["forgotten", "active"]
    assert history[-1]["written_by"] == {"kind": "user", "id": "alice"}
    assert history[-1]["origin"] == {"reverts_run_id": run["id"]}
    assert history[-1]["content"] == "same words."
    assert alice.get(f"/v1/memories/{memory['id']}").json()["records"]["count"] == 2
    again = alice.post(RUNS.format(memory["id"]) + f"/{run['id']}/revert")
    assert error_code(again) == "memory_conflict"


def test_a_budget_stops_a_run_and_the_next_resumes(alice: Client) -> None:
    memory = alice.create_memory("Facts")
    for text in ("a", "b", "a", "c", "a"):
        alice.remember(memory["id"], text)
    stopped = _start(alice, memory["id"], budget={"limit": 3})
    assert stopped["status"] == "stopped"
    assert stopped["budget"]["exhausted"] is True
    assert stopped["read"]["records"] == 3
    assert stopped["changes"]["forgotten"] == 1
    resumed = _start(alice, memory["id"])
    assert resumed["status"] == "completed"
    assert resumed["read"]["records"] == 2
    assert resumed["changes"]["forgotten"] == 1
    contents = sorted(r["content"] for r in alice.get(f"/v1/memories/{memory['id']}/records").json()["data"])
    assert contents == ["a", "b", "c"]


def test_runs_need_write_to_start_and_read_to_see(alice: Client, make_client: ClientFactory) -> None:
    memory = alice.create_memory("Facts")
    reader = make_client("user:reader")
    alice.grant(memory["id"], "user:reader", "read")
    assert error_code(reader.post(RUNS.format(memory["id"]), {})) == "memory_forbidden"
    run = _start(alice, memory["id"])
    assert reader.get(RUNS.format(memory["id"]) + f"/{run['id']}").status_code == 200
    assert error_code(reader.post(RUNS.format(memory["id"]) + f"/{run['id']}/revert")) == "memory_forbidden"
    stranger = make_client("user:stranger")
    assert error_code(stranger.get(RUNS.format(memory["id"]))) == "memory_not_found"
    assert error_code(alice.get(RUNS.format(memory["id"]) + f"/hcon_{'0' * 32}")) == "memory_consolidation_not_found"
    for budget in ({"limit": 0}, {"limit": 10_000_001}, {"limit": 5, "unit": "records"}):
        assert alice.post(RUNS.format(memory["id"]), {"budget": budget}).status_code == 422


def test_recall_follows_a_run_and_its_revert(alice: Client) -> None:
    memory = alice.create_memory("Facts")
    alice.remember(memory["id"], "The pelican nests in spring.")
    alice.remember(memory["id"], "the pelican nests in spring.")

    def found() -> int:
        answer = alice.post(f"/v1/memories/{memory['id']}/recall", {"text": "pelican"})
        return len(answer.json()["results"])

    assert found() == 2
    run = _start(alice, memory["id"])
    assert found() == 1
    alice.post(RUNS.format(memory["id"]) + f"/{run['id']}/revert")
    assert found() == 2


def _held(client: Client, memory_id: str) -> list[tuple[str, str, str]]:
    """What the memory holds (contents, types, attributes), whatever the ids of the versions holding it."""
    answer = client.get(f"/v1/memories/{memory_id}/records", limit=100)
    assert answer.status_code == 200, answer.text
    assert answer.json()["next_cursor"] is None
    return sorted((r["type"], r["content"], json.dumps(r["attributes"], sort_keys=True))
                  for r in answer.json()["data"])


def test_after_a_revert_every_changed_id_is_readable_and_the_memory_holds_what_it_held(alice: Client) -> None:
    memory = alice.create_memory("Facts")
    mid = memory["id"]
    for content, record_type, attributes in (
        ("Acme renews in March.", "fact", {"account": "acme"}),
        ("acme renews in march.", "fact", {"account": "acme"}),  # a repeat
        ("Acme renews in March.", "fact", {"account": "globex"}),  # other attributes: kept
        ("Acme renews in March.", "note", {"account": "acme"}),  # another type: kept
        ("Call Globex on Fridays.", "procedure", {}),
        ("  ACME renews in MARCH. ", "fact", {"account": "acme"}),  # a repeat
        ("Call Globex on Fridays.", "procedure", {}),  # a repeat
    ):
        alice.remember(mid, content, type=record_type, attributes=attributes)
    before = _held(alice, mid)
    run = _start(alice, mid)
    assert run["changes"] == {"created": 0, "superseded": 0, "forgotten": 3}
    assert len(_held(alice, mid)) == 4

    reverted = alice.post(RUNS.format(mid) + f"/{run['id']}/revert")
    assert reverted.status_code == 200, reverted.text
    changes = alice.get(RUNS.format(mid) + f"/{run['id']}/changes").json()["data"]
    assert len(changes) == 3
    for change in changes:
        answer = alice.get(f"/v1/memories/{mid}/records/{change['record_id']}")
        assert answer.status_code == 200, answer.text
        assert answer.json()["id"] == change["record_id"]
        assert answer.json()["status"] == "forgotten", "the version the run forgot, kept in its chain"
        got = {k: v for k, v in answer.json().items() if k not in ("parent", "children")}  # §6.1: a get's own
        assert got == change["record"]
    assert _held(alice, mid) == before
    assert alice.get(f"/v1/memories/{mid}").json()["records"]["count"] == len(before)


def _records(client: Client, memory_id: str) -> dict[str, dict[str, Any]]:
    listed = client.get(f"/v1/memories/{memory_id}/records", limit=100).json()["data"]
    return {r["content"]: r for r in listed}


def test_a_run_merges_near_duplicates_supersedes_restatements_and_expires_and_revert_undoes_it_all(
    alice: Client,
) -> None:
    memory = alice.create_memory("Facts")
    post = f"/v1/memories/{memory['id']}/records"
    kept = alice.remember(memory["id"], "Acme renews its contract every March.")
    near = alice.remember(memory["id"], "Acme renews its contract every March!")
    alice.remember(memory["id"], "Acme never renews its contract in March.")  # a near miss: kept
    alice.remember(memory["id"], "Globex renews its contract every March.")  # another subject: kept
    march = alice.post(post, {"type": "fact", "content": "Acme's renewal month is March.",
                              "attributes": {"key": "acme.renewal"}, "time": {"valid_from": "2026-01-01T00:00:00Z"}})
    april = alice.post(post, {"type": "fact", "content": "Acme's renewal month is April.",
                              "attributes": {"key": "acme.renewal"}, "time": {"valid_from": "2026-06-01T00:00:00Z"}})
    expired = alice.post(post, {"type": "fact", "content": "The 2025 price list applies.",
                                "time": {"valid_from": "2025-01-01T00:00:00Z", "valid_to": "2025-12-31T00:00:00Z"}})
    episode = alice.post(f"/v1/memories/{memory['id']}/observe", {"episodes": [{"content": "user: hi"}] * 2})
    assert all(a.status_code in (200, 201) for a in (march, april, expired, episode))
    before = _records(alice, memory["id"])

    run = _start(alice, memory["id"])
    assert run["status"] == "completed"
    # near duplicate + restated newer + expired are forgotten; the restated chain gains a version
    assert run["changes"] == {"created": 1, "superseded": 1, "forgotten": 3}
    after = _records(alice, memory["id"])
    assert set(after) == {
        "Acme renews its contract every March.", "Acme never renews its contract in March.",
        "Globex renews its contract every March.", "Acme's renewal month is April.", "user: hi",
    }
    assert after["Acme renews its contract every March."]["id"] == kept["id"]
    assert near["id"] not in {r["id"] for r in after.values()}
    assert sum(r["content"] == "user: hi" for r in alice.get(
        f"/v1/memories/{memory['id']}/records", limit=100).json()["data"]) == 2  # episodes are events
    restated = after["Acme's renewal month is April."]
    history = alice.get(f"/v1/memories/{memory['id']}/records/{restated['id']}/history").json()["data"]
    assert [v["content"] for v in history] == ["Acme's renewal month is March.", "Acme's renewal month is April."]
    assert restated["written_by"] == {"kind": "consolidator", "id": "native"}
    assert restated["origin"] == {"run_id": run["id"]}
    changes = alice.get(RUNS.format(memory["id"]) + f"/{run['id']}/changes").json()["data"]
    forgotten = [c["record"] for c in changes if c["action"] == "forgotten"]
    assert all(r["forgotten_by"]["origin"] == {"run_id": run["id"]} for r in forgotten)

    reverted = alice.post(RUNS.format(memory["id"]) + f"/{run['id']}/revert")
    assert reverted.status_code == 200, reverted.text
    restored = _records(alice, memory["id"])
    shape = {k: (v["type"], v["attributes"], v["time"]["valid_from"], v["time"]["valid_to"]) for k, v in before.items()}
    assert {k: (v["type"], v["attributes"], v["time"]["valid_from"], v["time"]["valid_to"])
            for k, v in restored.items()} == shape
    # The revert's restorations name the run they undo: the next run does not undo the revert.
    again = _start(alice, memory["id"])
    assert again["changes"] == {"created": 0, "superseded": 0, "forgotten": 0}


def test_a_run_is_many_bounded_steps_of_the_state_machine(alice: Client, monkeypatch: Any) -> None:
    """Each step reads at most STEP_RECORDS records; the state machine runs another while the run answers
    running. (The gateway runs in this process, so the bound can be made small here.)"""
    from uhp_memories.domain.consolidation import service as consolidation

    steps: list[int] = []
    real = consolidation.ConsolidationService.consolidate

    def counted(self: Any, tenant: str, memory_id: str, run_id: str) -> Any:
        run = real(self, tenant, memory_id, run_id)
        steps.append(run.records_read)
        return run

    monkeypatch.setattr(consolidation, "STEP_RECORDS", 3)
    monkeypatch.setattr(consolidation.ConsolidationService, "consolidate", counted)
    memory = alice.create_memory("Facts")
    for n in (0, 1, 2, 3, 4, 5, 6, 0):
        alice.remember(memory["id"], f"fact number {n} about nothing in particular")
    run = _start(alice, memory["id"])
    assert run["status"] == "completed"
    assert run["read"]["records"] == 8
    assert run["changes"]["forgotten"] == 1  # the repeat, found in the third step against the first's record
    assert steps == [3, 6, 8]


def test_a_run_that_outlasts_the_request_answers_202_and_finishes(
    alice: Client, workflows_answer_at_once: None
) -> None:
    """Both answers of a start, each asked for (never left to how fast the machine is): 201 with the
    finished run when it ends within the request (every other test here), 202 with the running run."""
    memory = alice.create_memory("Facts")
    alice.remember(memory["id"], "Acme renews in March.")
    alice.remember(memory["id"], "acme renews in march.")
    answer = alice.post(RUNS.format(memory["id"]), {})
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] == "running"
    run = answer.json()
    for _ in range(300):
        run = alice.get(RUNS.format(memory["id"]) + f"/{run['id']}").json()
        if run["status"] != "running":
            break
        time.sleep(0.1)
    assert run["status"] == "completed"
    assert run["changes"]["forgotten"] == 1
