"""moto's Lambda invokes answered by the real step handlers in this process.

moto runs state machines for real (mock_aws(config={"stepfunctions": {"execute_state_machine":
True}})) and hands each Lambda task to its Lambda backend; without Docker, that backend answers with
a canned payload. While installed, a task's invoke goes to the step runner of the local runtime that
installed the patch (LocalAws: it runs functions/steps/handler.py and knows which steps are to fail);
a step that raises answers as Lambda does for an unhandled error, and the state machine's retries
and catches take it from there.

Replaces `moto.awslambda_simple.models.LambdaSimpleBackend.invoke`.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

from uhp_memories.local.patches import Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")


class StepRunner(Protocol):
    def __call__(self, function_name: str, event: Any) -> Any:
        """The step's answer (JSON-serializable); raises when the step fails."""
        ...


_runners: list[StepRunner] = []  # of the runtimes that installed the patch; the latest answers
_runners_lock = threading.Lock()


def _invoke(self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any) -> bytes:
    event = json.loads(body) if body else {}
    with _runners_lock:
        run = _runners[-1]
    try:
        return json.dumps(run(function_name, event)).encode()
    except Exception as error:
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": type(error).__name__, "errorMessage": "step failed"}).encode()


def _apply(replace: Replacements) -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend

    replace(LambdaSimpleBackend, "invoke", _invoke)


PATCH = Patch(__name__, WRITTEN_FOR, _apply)


def install(runner: StepRunner) -> None:
    PATCH.install()
    with _runners_lock:
        _runners.append(runner)


def uninstall(runner: StepRunner) -> None:
    with _runners_lock:
        if runner not in _runners:
            return
        _runners.remove(runner)
    PATCH.uninstall()
