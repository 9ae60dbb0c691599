"""Workflows on AWS Step Functions: one named execution per job."""

from __future__ import annotations

import json
import time
from typing import Any


class StepFunctionsRunner:
    def __init__(self, client: Any, state_machines: dict[str, str]) -> None:
        self._client = client
        self._arns = state_machines  # workflow name -> state machine ARN

    def start(self, workflow: str, execution_name: str, payload: dict[str, Any]) -> None:
        self._client.start_execution(
            stateMachineArn=self._arns[workflow], name=execution_name, input=json.dumps(payload)
        )

    def wait(self, execution_name: str, workflow: str, seconds: float) -> str:
        arn = self._arns[workflow].replace(":stateMachine:", ":execution:") + ":" + execution_name
        deadline = time.monotonic() + seconds
        pause = 0.05
        while True:
            status = str(self._client.describe_execution(executionArn=arn)["status"])
            if status != "RUNNING" or time.monotonic() >= deadline:
                return status
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
