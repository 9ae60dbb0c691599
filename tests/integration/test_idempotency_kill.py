"""A keyed write killed with kill -9 after its commit, before its answer was kept, then retried on the
restarted server (issue 27): the retry writes nothing. Powertools' in-progress mark had expired, and
the retry ran the write again; the key's marker, committed in the write's own transaction and kept
on disk with it, now answers it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import requests

from tests.integration.serve_process import EXAMPLE_KEYS, ROOT, ServeProcess

pytestmark = pytest.mark.slow

ALICE = {"x-api-key": "k-alice"}
BODY = {"type": "fact", "content": "written once"}

KILLED_AFTER_THE_COMMIT = textwrap.dedent(
    """
    import json, os, signal, sys
    import requests
    from uhp_memories.adapters.dynamodb.idempotency import PackedDynamoDBPersistenceLayer
    from uhp_memories.local import gateway as gateway_module
    from uhp_memories.local.data_dir import DataDir
    from uhp_memories.local.gateway import LocalGateway
    from uhp_memories.local.moto_env import KeyEntry, LocalAws
    from uhp_memories.settings import Settings

    # The in-progress mark expires at once (29 s deployed), so the restarted server's retry comes after it.
    gateway_module.LambdaContext.get_remaining_time_in_millis = lambda self: 1
    local = LocalAws(Settings(), data_dir=DataDir(sys.argv[1]).open()).start()
    local.add_keys([KeyEntry("k-alice", "acme", "user:alice", ("group:sales",))])
    gateway = LocalGateway("127.0.0.1", 0).start_background()
    alice = {"x-api-key": "k-alice"}
    memory = requests.post(gateway.url + "/v1/memories", json={"name": "m"}, headers=alice).json()["id"]
    print(json.dumps({"memory": memory}), flush=True)

    def killed(self, data_record):  # the write has committed and answered; its answer is never kept
        os.kill(os.getpid(), signal.SIGKILL)

    PackedDynamoDBPersistenceLayer._update_record = killed
    requests.post(f"{gateway.url}/v1/memories/{memory}/records", json=json.loads(sys.argv[2]),
                  headers={**alice, "Idempotency-Key": "written-once"}, timeout=60)
    """
)


def test_a_write_killed_before_its_answer_was_kept_is_not_written_again(tmp_path: Path) -> None:
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_THE_COMMIT, str(tmp_path), json.dumps(BODY)],
                            capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert killed.returncode == -9, killed.stderr
    memory = json.loads(killed.stdout.strip().splitlines()[-1])["memory"]

    server = ServeProcess("--keys-file", str(EXAMPLE_KEYS), "--data-dir", str(tmp_path)).wait_listening()
    try:
        records = f"{server.url}/v1/memories/{memory}/records"
        written = requests.get(records, headers=ALICE, timeout=30).json()["data"]
        assert [r["content"] for r in written] == ["written once"], "the first attempt committed before the kill"
        for _ in range(2):
            retry = requests.post(records, json=BODY, headers={**ALICE, "Idempotency-Key": "written-once"},
                                  timeout=30)
            assert retry.status_code == 409, retry.text
            assert retry.json()["error"]["code"] == "idempotency_key_committed"
            assert retry.json()["error"]["written_ids"][0] == written[0]["id"]
        assert [r["id"] for r in requests.get(records, headers=ALICE, timeout=30).json()["data"]] == [written[0]["id"]]
    finally:
        server.stop()
