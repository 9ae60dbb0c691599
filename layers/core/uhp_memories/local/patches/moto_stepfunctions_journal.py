"""moto's workflow executions reported when they start and when they end (persistent local mode).

While installed with a listener (the journal of `serve --data-dir`), a StartExecution is reported
(state machine, name, input) before moto starts running it, and its end (succeeded, failed, aborted)
once moto has recorded it. What started and never ended (the server stopped or was killed while it
ran) is started again with the same name and input when the server starts: every step is idempotent
(DESIGN.md), so a job ends.

Replaces `moto.stepfunctions.parser.models.StepFunctionsParserBackend.start_execution` and
`moto.stepfunctions.parser.backend.execution.BaseExecutionWorkerCommunication.terminated`.
"""

from __future__ import annotations

from typing import Any, Protocol

from uhp_memories.local.journal import Execution
from uhp_memories.local.patches import Listened, Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")


class ExecutionListener(Protocol):
    def execution_started(self, execution: Execution) -> None: ...

    def execution_ended(self, execution_arn: str) -> None: ...


def execution_arn(state_machine_arn: str, name: str) -> str:
    return state_machine_arn.replace(":stateMachine:", ":execution:") + ":" + name


def _apply(replace: Replacements) -> None:
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original_start = StepFunctionsParserBackend.start_execution
    original_terminated = BaseExecutionWorkerCommunication.terminated

    def start_execution(
        self: Any, state_machine_arn: str, name: Any = None, execution_input: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        listener = HOOK.listener()
        if listener is None or name is None:
            return original_start(self, state_machine_arn, name, execution_input, *args, **kwargs)
        arn = execution_arn(state_machine_arn, name)
        listener.execution_started(Execution(arn, state_machine_arn, name, execution_input or "{}"))
        try:
            execution = original_start(self, state_machine_arn, name, execution_input, *args, **kwargs)
        except BaseException:
            listener.execution_ended(arn)  # never started: nothing to run again
            raise
        if execution.exec_status is not None and execution.exec_status.value != "RUNNING":
            listener.execution_ended(arn)  # the same name and input again: moto answers the ended one
        return execution

    def terminated(self: Any) -> None:
        original_terminated(self)
        listener = HOOK.listener()
        if listener is not None:
            listener.execution_ended(self.execution.exec_arn)

    replace(StepFunctionsParserBackend, "start_execution", start_execution)
    replace(BaseExecutionWorkerCommunication, "terminated", terminated)


HOOK: Listened[ExecutionListener] = Listened(Patch(__name__, WRITTEN_FOR, _apply))
install = HOOK.install
uninstall = HOOK.uninstall
PATCH = HOOK.patch
