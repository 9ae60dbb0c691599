"""File memory through the public API (docs/file-memory.md): records with a path, one current file
per path, read sets checked in the write's transaction, the change journal, grep, and erase of a
directory, over real HTTP through the local gateway."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code
from tests.integration.test_erase import _scan_all
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow


def _create(client: Client, memory_id: str, path: str, text: str, **fields: Any) -> Any:
    return client.post(f"/v1/memories/{memory_id}/records", {"type": "note", "path": path, "content": text, **fields})


def _file(client: Client, memory_id: str, path: str) -> dict[str, Any] | None:
    # `path` is also the client's own argument: the query string is built here.
    answer = client.get(f"/v1/memories/{memory_id}/records?{urlencode({'path': path})}")
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert len(data) <= 1
    return data[0] if data else None


def _changes(client: Client, memory_id: str, cursor: str | None) -> dict[str, Any]:
    answer = client.get(f"/v1/memories/{memory_id}/changes", cursor=cursor)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture
def memory(alice: Client) -> str:
    return alice.create_memory("files")["id"]


def test_a_file_is_a_record_with_a_path_and_one_per_path(alice: Client, memory: str) -> None:
    created = _create(alice, memory, "prefs/lang.md", "---\ndescription: Language\n---\n- Reply in English.\n")
    assert created.status_code == 201, created.text
    record = created.json()
    assert record["path"] == "prefs/lang.md"
    assert _file(alice, memory, "prefs/lang.md")["id"] == record["id"]

    again = _create(alice, memory, "prefs/lang.md", "another")
    assert again.status_code == 409
    assert again.json()["error"]["conflicts"] == [
        {"path": "prefs/lang.md", "reason": "path_taken", "current_record_id": record["id"]}
    ]
    listing = alice.get(f"/v1/memories/{memory}/paths").json()
    assert [(p["path"], p["record_id"], p["description"]) for p in listing["data"]] == [
        ("prefs/lang.md", record["id"], "Language")
    ]
    assert listing["data"][0]["bytes"] == len(b"---\ndescription: Language\n---\n- Reply in English.\n")


def test_concurrent_creates_of_one_path_give_one_file(alice: Client, memory: str) -> None:
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: _create(alice, memory, "race.md", f"writer {i}"), range(4)))
    assert sorted(a.status_code for a in answers) == [201, 409, 409, 409]
    winner = next(a.json() for a in answers if a.status_code == 201)
    assert _file(alice, memory, "race.md")["id"] == winner["id"]
    current = alice.get(f"/v1/memories/{memory}/records", under="").json()["data"]
    assert [r["path"] for r in current] == ["race.md"]


def test_revise_move_and_forget_compare_and_swap(alice: Client, memory: str) -> None:
    first = _create(alice, memory, "a.md", "one").json()
    second = alice.patch(f"/v1/memories/{memory}/records/{first['id']}", {"content": "two"}).json()
    stale = alice.patch(f"/v1/memories/{memory}/records/{first['id']}", {"content": "three"})
    assert stale.status_code == 409
    assert stale.json()["error"]["current_record_id"] == second["id"]

    _create(alice, memory, "b.md", "bee")
    onto = alice.patch(f"/v1/memories/{memory}/records/{second['id']}", {"path": "b.md"})
    assert onto.status_code == 409
    assert onto.json()["error"]["conflicts"][0]["reason"] == "path_taken"

    moved = alice.patch(f"/v1/memories/{memory}/records/{second['id']}", {"path": "c/a.md"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["path"] == "c/a.md"
    assert moved.json()["content"] == "two"
    assert _file(alice, memory, "a.md") is None
    assert _file(alice, memory, "c/a.md")["id"] == moved.json()["id"]
    # The old path is free again.
    assert _create(alice, memory, "a.md", "new a").status_code == 201

    removed = alice.request("DELETE", f"/v1/memories/{memory}/records/{moved.json()['id']}",
                            {"origin": {"run_id": "run-1", "tool_call_id": "call-9"}})
    assert removed.status_code == 200, removed.text
    assert removed.json()["forgotten_by"]["origin"] == {"run_id": "run-1", "tool_call_id": "call-9"}
    assert _file(alice, memory, "c/a.md") is None


def test_a_stale_read_set_refuses_the_write_and_writes_nothing(alice: Client, memory: str) -> None:
    notes = _create(alice, memory, "notes.md", "likes tea").json()
    rules = _create(alice, memory, "rules.md", "reply in English").json()
    newer = alice.patch(f"/v1/memories/{memory}/records/{rules['id']}", {"content": "reply in Chinese"}).json()

    refused = alice.patch(
        f"/v1/memories/{memory}/records/{notes['id']}",
        {"content": "likes coffee", "conditions": [{"path": "rules.md", "record_id": rules["id"]},
                                                   {"path": "absent.md", "record_id": None}]},
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["conflicts"] == [
        {"path": "rules.md", "reason": "condition", "current_record_id": newer["id"]}
    ]
    assert _file(alice, memory, "notes.md")["content"] == "likes tea"

    accepted = alice.patch(
        f"/v1/memories/{memory}/records/{notes['id']}",
        {"content": "likes coffee", "conditions": [{"path": "rules.md", "record_id": newer["id"]}],
         "origin": {"run_id": "run-2"}},
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["origin"] == {"run_id": "run-2"}
    history = alice.get(f"/v1/memories/{memory}/records/{accepted.json()['id']}/history").json()["data"]
    assert [(v["content"], v["origin"]) for v in history] == [
        ("likes tea", None), ("likes coffee", {"run_id": "run-2"})
    ]


def test_the_change_journal_lists_each_change_once_and_never_skips(alice: Client, memory: str) -> None:
    start = _changes(alice, memory, None)
    assert start["full_resync"] is True
    assert start["changes"] == []
    cursor = start["cursor"]
    assert _changes(alice, memory, cursor)["changes"] == []

    a = _create(alice, memory, "a.md", "a").json()
    b = _create(alice, memory, "b.md", "b").json()
    alice.patch(f"/v1/memories/{memory}/records/{a['id']}", {"path": "moved/a.md"})
    alice.delete(f"/v1/memories/{memory}/records/{b['id']}")
    seen = _changes(alice, memory, cursor)
    assert seen["full_resync"] is False
    moved = _file(alice, memory, "moved/a.md")
    assert {c["path"]: c["record_id"] for c in seen["changes"]} == {
        "a.md": None, "b.md": None, "moved/a.md": moved["id"]
    }
    assert _changes(alice, memory, seen["cursor"])["changes"] == []

    paged = alice.get(f"/v1/memories/{memory}/changes", cursor=cursor, limit=2).json()
    assert paged["more"] is True
    assert error_code(alice.get(f"/v1/memories/{memory}/changes", cursor="not-a-cursor")) == "memory_invalid"


def test_grep_matches_lines_and_refuses_a_bad_pattern(alice: Client, memory: str) -> None:
    _create(alice, memory, "a/one.md", "Likes tea\nreply in English")
    _create(alice, memory, "b/two.md", "likes coffee")
    found = alice.post(f"/v1/memories/{memory}/grep", {"pattern": "likes"}).json()
    assert [(m["path"], m["line"], m["text"]) for m in found["matches"]] == [
        ("a/one.md", 1, "Likes tea"), ("b/two.md", 1, "likes coffee")
    ]
    under = alice.post(f"/v1/memories/{memory}/grep", {"pattern": "e", "under": "a/", "limit": 1}).json()
    assert len(under["matches"]) == 1
    assert under["more"] is True
    regex = alice.post(f"/v1/memories/{memory}/grep", {"pattern": "^reply", "regex": True, "case_sensitive": True})
    assert [m["line"] for m in regex.json()["matches"]] == [2]
    bad = alice.post(f"/v1/memories/{memory}/grep", {"pattern": "(a)\\1", "regex": True})
    assert bad.status_code == 422
    assert bad.json()["error"]["reason"] == "invalid_pattern"


def test_file_reads_need_read_and_hide_the_memory(alice: Client, make_client: ClientFactory, memory: str) -> None:
    _create(alice, memory, "a.md", "a")
    stranger = make_client("user:stranger")
    for answer in (
        stranger.get(f"/v1/memories/{memory}/paths"),
        stranger.get(f"/v1/memories/{memory}/changes"),
        stranger.post(f"/v1/memories/{memory}/grep", {"pattern": "a"}),
    ):
        assert answer.status_code == 404
        assert error_code(answer) == "memory_not_found"


def test_bad_paths_and_conditions_are_refused(alice: Client, memory: str) -> None:
    for path in ("/abs.md", "dir/", "a//b.md", "a/../b.md", "tab\there.md", "x" * 257, "Cafe\u0301.md"):
        answer = _create(alice, memory, path, "text")
        assert answer.status_code == 422, (path, answer.text)
    assert _create(alice, memory, "f.md", "t", conditions=[{"path": "g.md"}]).status_code == 422
    assert _create(alice, memory, "f.md", "t", origin={"run_id": 5}).status_code == 422
    episode = alice.post(f"/v1/memories/{memory}/records", {"type": "episode", "path": "e.md", "content": "x"})
    assert episode.status_code == 422


def test_erase_under_a_directory_leaves_nothing_of_its_files(
    alice: Client, memory: str, local_aws: LocalAws
) -> None:
    secret = f"secret-{secrets.token_hex(6)}"
    kept = _create(alice, memory, "keep.md", "kept").json()
    doomed = _create(alice, memory, f"gone/{secret}.md", f"{secret} text").json()
    alice.patch(f"/v1/memories/{memory}/records/{doomed['id']}", {"content": f"{secret} again"})
    cursor = _changes(alice, memory, None)["cursor"]

    erased = alice.post(f"/v1/memories/{memory}/erase", {"under": "gone/"})
    assert erased.status_code == 200, erased.text
    assert len(erased.json()["erased"]) == 2
    assert secret not in _scan_all(local_aws)
    assert [p["path"] for p in alice.get(f"/v1/memories/{memory}/paths").json()["data"]] == ["keep.md"]
    assert _file(alice, memory, "keep.md")["id"] == kept["id"]
    assert _changes(alice, memory, cursor)["full_resync"] is True
    # The path can be written again.
    assert _create(alice, memory, f"gone/{secret}.md", "new").status_code == 201


def test_every_version_of_a_file_stays_readable_as_of_and_in_history(alice: Client, memory: str) -> None:
    first = _create(alice, memory, "a.md", "one").json()
    assert alice.post(f"/v1/memories/{memory}/snapshots", {"name": "before"}).status_code == 201
    second = alice.patch(f"/v1/memories/{memory}/records/{first['id']}", {"content": "two"}).json()
    moved = alice.patch(f"/v1/memories/{memory}/records/{second['id']}", {"path": "b.md"}).json()

    def at(path: str, as_of: str) -> list[str]:
        answer = alice.get(f"/v1/memories/{memory}/records?{urlencode({'path': path, 'as_of': as_of})}")
        assert answer.status_code == 200, answer.text
        return [r["content"] for r in answer.json()["data"]]

    assert at("a.md", "before") == ["one"]
    assert at("b.md", "before") == []
    assert _file(alice, memory, "b.md")["id"] == moved["id"]
    history = alice.get(f"/v1/memories/{memory}/records/{moved['id']}/history").json()["data"]
    assert [(v["path"], v["content"]) for v in history] == [("a.md", "one"), ("a.md", "two"), ("b.md", "two")]
