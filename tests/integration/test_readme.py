"""The README's walkthrough works as written, against `uhp-memories serve` started as a user would:
in memory, twice in a row against one server, as commented both times; and with a data dir (what `make dev`
runs), then again after a restart on the same folder, as when `make dev` is started again with `.data` kept."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.serve_process import EXAMPLE_KEYS, ROOT, ServeProcess

pytestmark = pytest.mark.slow

# What the walkthrough prints, in order: grant, snapshot, the stale revise, history, as_of, Bob's write,
# Mallory's read, the harness's list before it is attached, the administrator naming its owners, the attach,
# observe, forget, the facts listed, the facts with include=all, the file's bytes (second version, then
# first), the file's history, the note at a path, the file at that path, erase, the erased bytes, the
# remember in the deal's memory, its delete, its GET, the detach.
PRINTED = ["201", "201", "409", "200", "200", "403", "404", "404", "200", "200",
           "200", "200", "200", "200", "200", "200", "200", "201", "200", "200", "404", "201", "200", "404", "200"]
# What it captures into variables (the answers go to stderr): create, remember, revise, the agent's remember,
# the first upload, the note holding it, the second upload, the note's revision, the deal's memory.
CAPTURED = ["201", "201", "200", "201", "201", "201", "201", "200", "201"]
FIRST_BYTES = "Acme call: renewal in April, keep the annual discount.\n"
SECOND_BYTES = FIRST_BYTES + "Call booked for Friday.\n"


def _walkthrough_script() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Walkthrough", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize("persistent", [False, True], ids=["in-memory", "data-dir"])
def test_readme_walkthrough_runs_as_written(persistent: bool, tmp_path: Path) -> None:
    args = ["--keys-file", str(EXAMPLE_KEYS)] + (["--data-dir", str(tmp_path)] if persistent else [])
    memories = []
    server = ServeProcess(*args).wait_listening()
    try:
        memories.append(_run_walkthrough(server.url))
        if not persistent:  # again on one server, as written: nothing collides with the first run
            memories.append(_run_walkthrough(server.url))
    finally:
        assert server.stop() == 0
    if persistent:  # `make dev` started again on the same `.data`: the walkthrough still runs as written
        server = ServeProcess(*args).wait_listening()
        try:
            memories.append(_run_walkthrough(server.url))
        finally:
            assert server.stop() == 0
    assert len(set(memories)) == len(memories)  # each run made a memory of its own


def _run_walkthrough(url: str) -> str:
    """Run the walkthrough once and check every answer it prints; return the memory it made."""
    script = _walkthrough_script().replace("http://127.0.0.1:8080", url)
    answer = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=180)
    assert answer.returncode == 0, answer.stderr
    printed, captured = _answers(answer.stdout), _answers(answer.stderr)
    assert [status for status, _ in printed] == PRINTED, answer.stdout
    assert [status for status, _ in captured] == CAPTURED, answer.stderr
    (
        grant, snapshot, conflict, history, as_of, forbidden, hidden, unattached, owned, attached,
        observed, forgotten, facts, every_fact, second_bytes, first_bytes, file_history, at_path_note, at_path,
        erased, erased_bytes, deal_record, deleted, deal_gone, detached,
    ) = (body for _, body in printed)
    created, remembered, revised, agents, first_file, note, second_file, revised_note, deal = (
        body for _, body in captured
    )
    memory_id = created["id"]

    assert grant["principal"] == "user:bob"
    assert snapshot["name"] == "before-call"
    assert conflict["error"]["code"] == "memory_conflict"
    assert revised["supersedes"] == remembered["id"]
    assert conflict["error"]["current_record_id"] == revised["id"]
    assert [(v["id"], v["content"], v["status"], v["version"]) for v in history["data"]] == [
        (remembered["id"], "Acme renews in March.", "superseded", 1),
        (revised["id"], "Acme renews in April and wants the annual discount kept.", "active", 2),
    ]
    # As the memory stood at the snapshot: the first version alone, still active then.
    assert [(r["id"], r["content"], r["status"]) for r in as_of["data"]] == [
        (remembered["id"], "Acme renews in March.", "active")
    ]
    assert forbidden["error"]["code"] == "memory_forbidden"
    assert hidden["error"]["code"] == "memory_not_found"
    # Before it is attached, on every run: the last run's detach left the harness with nothing attached.
    assert unattached["error"]["code"] == "memories_not_attached"
    assert owned["owners"] == ["user:alice", "group:admins"]
    assert attached["memories"] == [{"memory_id": memory_id, "access": "write", "default": True}]
    agent = {"kind": "harness", "id": "chrn_41c0"}
    assert (agents["memory_id"], agents["written_by"]) == (memory_id, agent)

    # observe: the episodes kept as records, as they arrived (no derivation model: 200, no job).
    assert [(r["type"], r["content"], r["written_by"], r["memory_id"]) for r in observed["records"]] == [
        ("episode", "user: Book the Acme call for Friday.", agent, memory_id),
        ("episode", "assistant: Booked, Friday 10:00.", agent, memory_id),
    ]
    # forget: the agent's fact is closed, gone from the list, still listed with include=all.
    assert (forgotten["id"], forgotten["status"]) == (agents["id"], "forgotten")
    assert [(r["id"], r["status"]) for r in facts["data"]] == [(revised["id"], "active")]
    assert sorted((r["id"], r["status"]) for r in every_fact["data"]) == sorted([
        (remembered["id"], "superseded"), (revised["id"], "active"), (agents["id"], "forgotten"),
    ])

    # files: each upload a file, each version of the note its own bytes, history both versions.
    for uploaded, data in ((first_file, FIRST_BYTES), (second_file, SECOND_BYTES)):
        shown = (uploaded["object"], uploaded["name"], uploaded["media_type"])
        assert shown == ("file", "acme-call.md", "text/markdown")
        assert uploaded["bytes"] == len(data.encode())
    assert (note["type"], note["content"]["file"]["id"]) == ("note", first_file["id"])
    assert (revised_note["content"]["file"]["id"], revised_note["supersedes"]) == (second_file["id"], note["id"])
    assert (second_bytes, first_bytes) == (SECOND_BYTES, FIRST_BYTES)
    assert [(v["id"], v["version"], v["status"], v["content"]["file"]["id"]) for v in file_history["data"]] == [
        (note["id"], 1, "superseded", first_file["id"]),
        (revised_note["id"], 2, "active", second_file["id"]),
    ]
    assert (at_path_note["path"], at_path_note["type"]) == ("playbooks/renewals.md", "note")
    assert [(r["id"], r["content"]) for r in at_path["data"]] == [
        (at_path_note["id"], "# Renewals\nCall 60 days before the date.\n")
    ]

    # erase: every version of the note and the files they held, nothing unreachable; the bytes are gone.
    assert erased["object"] == "memory.erase"
    assert sorted(erased["erased"]) == sorted([note["id"], revised_note["id"]])
    assert sorted(erased["erased_files"]) == sorted([first_file["id"], second_file["id"]])
    assert erased["unreachable"] == []
    assert erased_bytes["error"]["code"] == "memory_record_not_found"

    # delete: a memory under Sales, with a record, deleted; then not found, for its creator too.
    assert (deal["parent_id"], deal["ancestors"]) == (memory_id, [memory_id])
    assert deal_record["memory_id"] == deal["id"]
    assert deleted == {"id": deal["id"], "object": "memory", "deleted": True}
    assert deal_gone["error"]["code"] == "memory_not_found"

    # The detach: the harness as the next run finds it.
    assert detached["memories"] == []
    return str(memory_id)


def _answers(out: str) -> list[tuple[str, Any]]:
    """The answers the walkthrough's curl commands print one after another, in order, each followed by
    its status (` -> 201`): (status, answer), the answer parsed when it is JSON, else the bytes as text (a
    file's content)."""
    answers: list[tuple[str, Any]] = []
    for found in re.finditer(r"(.*?) -> (\d{3})\n", out, re.S):
        body = found.group(1)
        try:
            answers.append((found.group(2), json.loads(body)))
        except json.JSONDecodeError:
            answers.append((found.group(2), body))
    return answers
