"""Lambda's 6 MB each way (api/payloads.py), held locally as deployed: a request whose event would be
larger never reaches its function, and an answer that would be larger is a 500 that says why."""

from __future__ import annotations

import os

import pytest

from tests.integration.conftest import Client, error_code
from uhp_memories.api.payloads import LAMBDA_PAYLOAD_BYTES

pytestmark = pytest.mark.slow


def test_an_upload_larger_than_lambda_takes_once_base64_is_refused(alice: Client) -> None:
    # 4.6 MiB of bytes that are not UTF-8 travel base64-encoded: 6.1 MiB, over Lambda's 6 MB.
    data = os.urandom(int(4.6 * 1024 * 1024))
    answer = alice.session.post(alice.base_url + "/v1/files",
                                files={"file": ("big.bin", data, "application/octet-stream")},
                                headers={"x-api-key": alice.key}, timeout=60)
    assert answer.status_code == 413, answer.text
    assert error_code(answer) == "request_too_large"
    assert str(LAMBDA_PAYLOAD_BYTES) in answer.json()["error"]["message"]


def test_an_answer_larger_than_lambda_returns_is_a_500_that_says_why(alice: Client) -> None:
    memory = alice.create_memory("Big")
    for _ in range(3):  # 90 episodes of 100 KiB: a page of them is about 9 MB
        answer = alice.post(f"/v1/memories/{memory['id']}/observe",
                            {"episodes": [{"content": "x" * (100 * 1024)} for _ in range(30)]})
        assert answer.status_code == 200, answer.text
    listed = alice.get(f"/v1/memories/{memory['id']}/records", limit=100)
    assert listed.status_code == 500, listed.status_code
    assert error_code(listed) == "internal_error"
    assert "smaller limit" in listed.json()["error"]["message"]
    assert alice.get(f"/v1/memories/{memory['id']}/records", limit=40).status_code == 200
