"""`uhp-memories serve` driven as a user drives it, in processes of its own: an operator's mistake is
one line and exit status 2; a data dir keeps everything across a restart; a server killed with
kill -9 at any moment of a write loses nothing it acknowledged; a workflow cut short ends after the
restart."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.integration.serve_process import CLI, EXAMPLE_KEYS, ROOT, ServeProcess, free_port

pytestmark = pytest.mark.slow

ALICE = {"x-api-key": "k-alice"}
KILL_ROUNDS = 3  # bounded: each round is a start (model load) and a kill


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def assert_one_line_refusal(answer: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert answer.returncode == 2, (answer.stdout, answer.stderr)
    assert answer.stdout == ""  # nothing printed as if the server were starting: no key, no "listening"
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1, answer.stderr  # one line, no traceback
    assert lines[0].startswith("uhp-memories: ")
    for text in expected:
        assert text in lines[0]


# -- operator errors ---------------------------------------------------------------------------


def test_a_port_in_use_is_one_line_before_any_key_is_printed() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        answer = run_cli("serve", "--port", str(port))
    assert_one_line_refusal(answer, f"port {port}", "in use", "--port")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, ["does not exist"]),
        ("{not json", ["is not JSON"]),
        ('{"keys": {}}', ['expected {"keys"']),
        ('{"keys": []}', ["holds no keys"]),
        ('{"keys": [{"key": "a", "tenant": "acme", "principal": "user:a"}, {"key": "b", "tenant": "acme"}]}',
         ["entry 2", '"principal"']),
        ('{"keys": [{"key": "a", "tenant": "Not A Tenant", "principal": "user:a"}]}', ["entry 1", '"tenant"']),
        ('{"keys": [{"key": "a", "tenant": "acme", "principal": "user:a", "group": ["group:x"]}]}',
         ["entry 1", 'unknown field "group"']),
        ('{"keys": [{"key": "a", "tenant": "acme", "principal": "user:a", "groups": "group:x"}]}',
         ["entry 1", '"groups"']),
        ('{"keys": [{"key": "a", "tenant": "acme", "principal": "user:a"}, '
         '{"key": "a", "tenant": "acme", "principal": "user:b"}]}', ["entry 2", "repeats an earlier key"]),
    ],
    ids=["missing", "not-json", "no-list", "empty", "no-principal", "bad-tenant", "unknown-field", "bad-groups",
         "repeated"],
)
def test_a_keys_file_mistake_names_the_entry_and_the_field(
    tmp_path: Path, content: str | None, expected: list[str]
) -> None:
    keys = tmp_path / "keys.json"
    if content is not None:
        keys.write_text(content)
    answer = run_cli("serve", "--port", str(free_port()), "--keys-file", str(keys))
    assert_one_line_refusal(answer, str(keys), *expected)


def test_an_unusable_data_dir_is_one_line(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    answer = run_cli("serve", "--port", str(free_port()), "--data-dir", str(not_a_folder / "data"))
    assert_one_line_refusal(answer, "data dir", str(not_a_folder / "data"), "not usable")

    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "journal.sqlite3").write_bytes(b"this is not a database" * 100)
    answer = run_cli("serve", "--port", str(free_port()), "--data-dir", str(junk))
    assert_one_line_refusal(answer, "data dir", "not a readable journal")


def test_a_data_dir_in_use_by_another_server_is_one_line(tmp_path: Path) -> None:
    server = ServeProcess("--data-dir", str(tmp_path)).wait_listening()
    try:
        answer = run_cli("serve", "--port", str(free_port()), "--data-dir", str(tmp_path))
        assert_one_line_refusal(answer, "in use by another uhp-memories server")
    finally:
        assert server.stop() == 0


# -- a data dir kept across restarts --------------------------------------------------------------


def _post(url: str, body: object, **kwargs: object) -> requests.Response:
    return requests.post(url, json=body, headers=ALICE, timeout=30, **kwargs)  # type: ignore[arg-type]


def test_a_data_dir_keeps_records_versions_files_and_the_index_across_a_restart(tmp_path: Path) -> None:
    keys = ("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(tmp_path))
    server = ServeProcess(*keys).wait_listening()
    try:
        base = server.url
        memory = _post(f"{base}/v1/memories", {"name": "Sales"}).json()["id"]
        assert _post(f"{base}/v1/memories/{memory}/grants", {"principal": "user:bob", "privileges": ["read"]}).ok
        first = _post(f"{base}/v1/memories/{memory}/records", {"type": "fact", "content": "Acme renews in March."})
        assert _post(f"{base}/v1/memories/{memory}/snapshots", {"name": "before-call"}).status_code == 201
        revised = requests.patch(f"{base}/v1/memories/{memory}/records/{first.json()['id']}", headers=ALICE,
                                 json={"content": "Acme renews in April."}, timeout=30).json()
        upload = requests.post(f"{base}/v1/files", headers=ALICE, timeout=30,
                               files={"file": ("notes.txt", b"the first bytes", "text/plain")}).json()
        file_record = _post(f"{base}/v1/memories/{memory}/records",
                            {"type": "note", "content": {"file": {"id": upload["id"]}}}).json()
    finally:
        assert server.stop() == 0
    assert any(line == "stopping" for line in server.lines)

    server = ServeProcess(*keys).wait_listening()
    try:
        base = server.url
        assert not any("did not stop cleanly" in line for line in server.lines)
        bob = {"x-api-key": "k-bob"}
        history = requests.get(f"{base}/v1/memories/{memory}/records/{revised['id']}/history", headers=bob, timeout=30)
        assert [v["content"] for v in history.json()["data"]] == ["Acme renews in March.", "Acme renews in April."]
        as_of = requests.get(f"{base}/v1/memories/{memory}/records", params={"as_of": "before-call"}, headers=bob,
                             timeout=30).json()["data"]
        assert [r["content"] for r in as_of] == ["Acme renews in March."]
        content = requests.get(f"{base}/v1/memories/{memory}/records/{file_record['id']}/content", headers=ALICE,
                               timeout=30)
        assert (content.status_code, content.content) == (200, b"the first bytes")
        assert content.headers["Content-Type"].startswith("text/plain")
        version = file_record["content"]["file"]["version"]
        assert requests.get(f"{base}/v1/memories/{memory}/records/{file_record['id']}/content",
                            params={"version": version}, headers=ALICE, timeout=30).content == b"the first bytes"
        recall = _post(f"{base}/v1/memories/{memory}/recall", {"query": "When does Acme renew?", "limit": 3}).json()
        assert recall["results"][0]["record"]["id"] == revised["id"]
        # The same keys file again: its keys are kept, and the 403 and 404 hold as before.
        assert requests.get(f"{base}/v1/memories/{memory}", headers={"x-api-key": "k-mallory"},
                            timeout=30).status_code == 404
    finally:
        assert server.stop() == 0


def test_the_dev_key_of_a_data_dir_outlives_a_restart(tmp_path: Path) -> None:
    keys = []
    for _ in range(2):
        server = ServeProcess("--data-dir", str(tmp_path)).wait_listening()
        try:
            keys.append(next(line.rsplit(" ", 1)[1] for line in server.lines if line.startswith("dev API key")))
            assert requests.get(server.url + "/v1/memories", headers={"x-api-key": keys[-1]}, timeout=30).ok
        finally:
            server.stop()
    assert keys[0] == keys[1]
    assert (tmp_path / "dev-key").stat().st_mode & 0o077 == 0


def test_a_keys_file_that_repoints_a_stored_key_is_refused(tmp_path: Path) -> None:
    server = ServeProcess("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(tmp_path)).wait_listening()
    server.stop()
    repointed = tmp_path / "keys.json"
    repointed.write_text(json.dumps({"keys": [{"key": "k-alice", "tenant": "globex", "principal": "user:alice"}]}))
    answer = run_cli("serve", "--port", str(free_port()), "--keys-file", str(repointed), "--data-dir", str(tmp_path))
    assert answer.returncode == 2
    assert "stored already for tenant acme" in answer.stderr
    assert "listening on" not in answer.stdout


# -- keys on a data dir (issue 28) ----------------------------------------------------------------


def _key(answer: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert answer.returncode == 0, answer.stderr
    return dict(json.loads(answer.stdout))


def _memories(base: str, key: str) -> int:
    return requests.get(f"{base}/v1/memories", headers={"x-api-key": key}, timeout=30).status_code


def test_keys_added_to_a_running_servers_data_dir_work_at_once_and_a_revoked_one_stops_at_once(
    tmp_path: Path,
) -> None:
    server = ServeProcess("--data-dir", str(tmp_path)).wait_listening()
    try:
        made = _key(run_cli("keys", "create", "--data-dir", str(tmp_path), "--tenant", "acme",
                            "--principal", "user:carol", "--group", "group:admins", "--json"))
        assert (made["tenant"], made["principal"], made["groups"]) == ("acme", "user:carol", ["group:admins"])
        assert _memories(server.url, made["key"]) == 200  # at once: no restart, no keys file
        listed = json.loads(run_cli("keys", "list", "--data-dir", str(tmp_path), "--tenant", "acme", "--json").stdout)
        assert [(k["key_id"], k["revoked"]) for k in listed] == [(made["key_id"], False)]
        assert made["key"] not in json.dumps(listed)

        revoked = _key(run_cli("keys", "revoke", made["key_id"], "--data-dir", str(tmp_path), "--json"))
        assert revoked["revoked"] is True
        # Refused at once, although the authorizer's allowing answer was cached a moment ago.
        assert _memories(server.url, made["key"]) == 401
        assert_one_line_refusal(run_cli("keys", "revoke", "key_nope", "--data-dir", str(tmp_path)), "no key 'key_nope'")
    finally:
        assert server.stop() == 0
    assert not (tmp_path / "control.json").exists()  # the endpoint closes with the server


def test_keys_added_to_a_data_dir_no_server_holds_work_when_one_starts(tmp_path: Path) -> None:
    ServeProcess("--data-dir", str(tmp_path)).wait_listening().stop()
    made = _key(run_cli("keys", "create", "--data-dir", str(tmp_path), "--tenant", "globex", "--json"))
    assert made["principal"] == f"key:{made['key_id']}"
    server = ServeProcess("--data-dir", str(tmp_path)).wait_listening()
    try:
        assert _memories(server.url, made["key"]) == 200
        # A clean stop before the command: nothing to catch up.
        assert not any("did not stop cleanly" in line for line in server.lines)
    finally:
        server.stop()


def test_a_keys_command_leaves_an_uncleanly_stopped_data_dir_to_be_caught_up(tmp_path: Path) -> None:
    ServeProcess("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(tmp_path)).wait_listening().kill()
    assert (tmp_path / "control.json").exists()  # left behind by kill -9: the command finds no one there
    made = _key(run_cli("keys", "create", "--data-dir", str(tmp_path), "--tenant", "acme", "--json"))
    server = ServeProcess("--data-dir", str(tmp_path)).wait_listening()
    try:
        assert any("did not stop cleanly" in line for line in server.lines), server.lines
        assert _memories(server.url, made["key"]) == 200
        assert _memories(server.url, "k-alice") == 200
    finally:
        server.stop()


def test_a_keys_command_on_a_missing_data_dir_or_with_a_stage_too_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert_one_line_refusal(run_cli("keys", "list", "--data-dir", str(missing)), str(missing), "does not exist")
    assert not missing.exists()
    assert_one_line_refusal(
        run_cli("keys", "list", "--data-dir", str(tmp_path), "--stack", "uhp-memories-prod"), "--data-dir", "--stack"
    )


# -- make dev and how it stops (issue 28) -------------------------------------------------------------


@pytest.mark.parametrize("how", ["ctrl-c", "kill"])
def test_make_dev_stops_as_the_readme_says(tmp_path: Path, how: str) -> None:
    """Ctrl-C signals make's whole process group; `kill <make's pid>` sends SIGTERM, which make passes on
    to the server. (A SIGINT to make alone is not passed on: GNU make leaves SIGINT to the terminal.)"""
    import os
    import signal

    port = free_port()
    make = subprocess.Popen(
        ["make", "--no-print-directory", "dev", f"PORT={port}", f"DATA_DIR={tmp_path}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, start_new_session=True,
    )
    try:
        assert make.stdout is not None
        deadline = time.monotonic() + 90
        for line in make.stdout:
            if line.startswith("listening on") or time.monotonic() > deadline:
                break
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=30).ok
        if how == "ctrl-c":
            os.killpg(make.pid, signal.SIGINT)
        else:
            make.terminate()
        make.wait(timeout=60)  # make ends with the server rather than waiting on it
        rest = make.stdout.read()
        assert "stopping" in rest
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)


# -- kill -9 -----------------------------------------------------------------------------------


class Writer(threading.Thread):
    """Writes records (and now and then a file) as fast as the server answers; keeps what it
    acknowledged. Stops at the first answer that does not come (the server was killed)."""

    def __init__(self, base: str, memory: str, name: str) -> None:
        super().__init__(daemon=True)
        self.base, self.memory, self.name = base, memory, name
        self.records: dict[str, str] = {}  # record id -> content
        self.files: dict[str, bytes] = {}  # record id -> bytes

    def run(self) -> None:
        session = requests.Session()
        session.headers.update(ALICE)
        number = 0
        try:
            while True:
                number += 1
                token = f"{self.name}w{number}x{random.randrange(10**9)}"
                if number % 4 == 0:
                    data = f"bytes of {token}".encode()
                    upload = session.post(f"{self.base}/v1/files", files={"file": (f"{token}.txt", data, "text/plain")},
                                          timeout=30)
                    if upload.status_code != 201:
                        return
                    answer = session.post(f"{self.base}/v1/memories/{self.memory}/records", timeout=30,
                                          json={"type": "note", "content": {"file": {"id": upload.json()["id"]}}})
                    if answer.status_code == 201:
                        self.files[answer.json()["id"]] = data
                    continue
                answer = session.post(f"{self.base}/v1/memories/{self.memory}/records", timeout=30,
                                      json={"type": "fact", "content": f"note {token}"})
                if answer.status_code != 201:
                    return
                self.records[answer.json()["id"]] = f"note {token}"
        except requests.RequestException:
            return


def test_kill_9_in_the_middle_of_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    args = ("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(tmp_path))
    acknowledged: dict[str, str] = {}
    files: dict[str, bytes] = {}
    memory = ""
    for round_number in range(KILL_ROUNDS):
        server = ServeProcess(*args).wait_listening()
        if round_number > 0:
            assert any("did not stop cleanly" in line for line in server.lines), server.lines
        if not memory:
            memory = _post(f"{server.url}/v1/memories", {"name": "Crash"}).json()["id"]
        writers = [Writer(server.url, memory, f"r{round_number}t{n}") for n in range(2)]
        for writer in writers:
            writer.start()
        time.sleep(random.uniform(0.5, 2.0))
        server.kill()
        for writer in writers:
            writer.join(timeout=60)
            acknowledged.update(writer.records)
            files.update(writer.files)
        assert any(writer.records for writer in writers), "no write was acknowledged before the kill"

    server = ServeProcess(*args).wait_listening()
    try:
        session = requests.Session()
        session.headers.update(ALICE)
        for record_id, content in acknowledged.items():
            answer = session.get(f"{server.url}/v1/memories/{memory}/records/{record_id}", timeout=30)
            assert answer.status_code == 200, (record_id, answer.text)
            assert answer.json()["content"] == content
        for record_id, data in files.items():
            answer = session.get(f"{server.url}/v1/memories/{memory}/records/{record_id}/content", timeout=30)
            assert (answer.status_code, answer.content) == (200, data)
        # The index caught up with the tables: the newest acknowledged notes are found by their words.
        for record_id, content in list(acknowledged.items())[-3:]:
            found = session.post(f"{server.url}/v1/memories/{memory}/recall", timeout=30,
                                 json={"text": content.split()[-1], "limit": 5}).json()
            assert record_id in [hit["record"]["id"] for hit in found["results"]], content
    finally:
        server.stop()


# -- workflows cut short --------------------------------------------------------------------------

CUT_SHORT = textwrap.dedent(
    """
    import json, os, signal, sys, threading
    import requests
    from uhp_memories.local.data_dir import DataDir
    from uhp_memories.local.gateway import LocalGateway
    from uhp_memories.local.moto_env import KeyEntry, LocalAws
    from uhp_memories.settings import Settings

    held = threading.Event()

    class HeldAtEraseRecords(LocalAws):
        def _run_step(self, function_name, event):
            if function_name.endswith("erase_records"):
                held.set()
                threading.Event().wait()  # until the process is killed
            return super()._run_step(function_name, event)

    local = HeldAtEraseRecords(Settings(workflow_wait_seconds=0.2), data_dir=DataDir(sys.argv[1]).open()).start()
    local.add_keys([KeyEntry("k-alice", "acme", "user:alice", ("group:sales",))])
    gateway = LocalGateway("127.0.0.1", 0).start_background()
    alice = {"x-api-key": "k-alice"}
    memory = requests.post(gateway.url + "/v1/memories", json={"name": "m"}, headers=alice).json()["id"]
    record = requests.post(f"{gateway.url}/v1/memories/{memory}/records", headers=alice,
                           json={"type": "fact", "content": "erase me"}).json()["id"]
    answer = requests.post(f"{gateway.url}/v1/memories/{memory}/erase", json={"record_ids": [record]}, headers=alice)
    held.wait(60)
    print(json.dumps({"memory": memory, "record": record, "status": answer.status_code,
                      "job": answer.json()["job"]["id"]}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_workflow_cut_short_by_kill_9_is_run_again_and_its_job_ends(tmp_path: Path) -> None:
    cut = subprocess.run([sys.executable, "-c", CUT_SHORT, str(tmp_path)], capture_output=True, text=True,
                         cwd=ROOT, timeout=180)
    assert cut.returncode == -9, cut.stderr
    state = json.loads(cut.stdout.strip().splitlines()[-1])
    assert state["status"] == 202  # the erase was still running when the process died

    server = ServeProcess("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(tmp_path)).wait_listening()
    try:
        assert any(line.startswith("resumed 1 workflows") for line in server.lines), server.lines
        job_url = f"{server.url}/v1/memories/{state['memory']}/jobs/{state['job']}"
        deadline = time.monotonic() + 60
        while (job := requests.get(job_url, headers=ALICE, timeout=30).json())["status"] == "running":
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["status"] == "completed", job
        gone = requests.get(f"{server.url}/v1/memories/{state['memory']}/records/{state['record']}", headers=ALICE,
                            timeout=30)
        assert gone.status_code == 404
    finally:
        server.stop()
    # Ended, so not run again at the next start.
    server = ServeProcess("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(tmp_path)).wait_listening()
    server.stop()
    assert not any(line.startswith("resumed") for line in server.lines)


# -- derivation --------------------------------------------------------------------------------


def test_serve_derives_with_an_openai_compatible_endpoint_named_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.loopback_chat import LoopbackChat

    with LoopbackChat() as chat:
        monkeypatch.setenv("UHP_DERIVATION_API_KEY", "sk-from-the-environment")
        server = ServeProcess("--keys-file", str(EXAMPLE_KEYS), "--derive-url", chat.url,
                              "--derive-model", "qwen2.5-7b-instruct")
        try:
            server.wait_listening()
            assert f"observe derives with qwen2.5-7b-instruct at {chat.url}" in server.lines
            assert not any("sk-from-the-environment" in line for line in server.lines)
            providers = requests.get(server.url + "/v1/memories/providers", headers=ALICE, timeout=30).json()
            assert providers["data"][0]["derivation"] == "background"
            memory = _post(server.url + "/v1/memories", {"name": "Derived"}).json()["id"]
            observed = _post(server.url + f"/v1/memories/{memory}/observe", {"episodes": [{"content": "I like tea"}]})
            assert observed.status_code == 202, observed.text
            job_path = server.url + f"/v1/memories/{memory}/jobs/{observed.json()['job']['id']}"
            deadline = time.monotonic() + 60
            while (job := requests.get(job_path, headers=ALICE, timeout=30).json())["status"] == "pending":
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert job["status"] == "completed", job
            assert "Noted: I like tea" in [r["content"] for r in job["records"]]
            assert chat.requests[0][1]["authorization"] == "Bearer sk-from-the-environment"
        finally:
            server.stop()


def test_a_derive_url_without_a_model_is_refused() -> None:
    answer = run_cli("serve", "--derive-url", "http://127.0.0.1:9")
    assert answer.returncode == 2
    assert "--derive-url and --derive-model go together" in answer.stderr


def test_serve_connects_mem0_which_derives_with_the_model_and_keeps_its_records_in_the_data_dir(
    tmp_path: Path,
) -> None:
    """`--mem0 oss` with `--derive-url`: mem0 derives with that model (infer=True, derivation write_time),
    so attaching a mem0 memory answers the §9 notice that every turn is sent out of the server; its
    stores live in the data dir and outlast a restart."""
    from tests.loopback_chat import LoopbackChat, memories_from_new_messages

    data = tmp_path / "data"
    with LoopbackChat(memories_from_new_messages) as chat:
        args = ("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(data), "--mem0", "oss",
                "--derive-url", chat.url, "--derive-model", "qwen2.5-7b-instruct")
        server = ServeProcess(*args)
        try:
            server.wait_listening()
            assert any("mem0 (oss) is connected" in line for line in server.lines)
            providers = {p["id"]: p for p in requests.get(
                server.url + "/v1/memories/providers", headers=ALICE, timeout=30).json()["data"]}
            assert (providers["mem0"]["derivation"], providers["mem0"]["observe"]["keeps_episodes"]) == (
                "write_time", False)
            memory = _post(server.url + "/v1/memories", {"name": "Derived", "provider": "mem0"}).json()["id"]
            observed = _post(server.url + f"/v1/memories/{memory}/observe",
                             {"episodes": [{"content": "I moved to Lisbon"}]})
            assert observed.status_code == 200, observed.text
            assert [(r["type"], r["content"], r["written_by"]) for r in observed.json()["records"]] == [
                ("fact", "Noted: I moved to Lisbon", {"kind": "provider", "id": "mem0"})]
            handed = requests.put(server.url + "/v1/harnesses/chrn_41c0/owners", headers={"x-api-key": "k-admin"},
                                  timeout=30, json={"owners": ["user:alice"]})  # the tenant's administrator
            assert handed.status_code == 200, handed.text
            attached = requests.put(server.url + "/v1/harnesses/chrn_41c0/memories", headers=ALICE, timeout=30,
                                    json={"memories": [{"memory_id": memory, "access": "write", "default": True}]})
            assert attached.status_code == 200, attached.text
            [notice] = attached.json()["notices"]
            assert (notice["code"], notice["provider"], notice["memory_id"]) == ("outside_provider", "mem0", memory)
        finally:
            server.stop()
        server = ServeProcess(*args)
        try:
            server.wait_listening()
            kept = requests.get(server.url + f"/v1/memories/{memory}/records", headers=ALICE, timeout=30).json()
            assert [r["content"] for r in kept["data"]] == ["Noted: I moved to Lisbon"]
        finally:
            server.stop()
