"""In-memory fakes of jobs (DynamoJobRepository's contract) and of the workflow runner (Step Functions)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tests.fakes.tree import HOLD, InMemoryMemoryRepository
from uhp_memories.domain.errors import AlreadyExists, TreeChanged
from uhp_memories.domain.jobs import Job


class InMemoryJobRepository:
    """Starting an id twice raises AlreadyExists (DynamoDB's adapter lets its ConditionFailed through:
    job ids are fresh, so neither happens in use)."""

    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories
        self.jobs: dict[tuple[str, str], Job] = {}

    def start(self, job: Job, hold_memory: bool) -> None:
        with self.memories.lock:
            if (job.tenant, job.id) in self.jobs:
                raise AlreadyExists(job.id)
            if hold_memory and not self.memories.live(job.tenant, job.memory_id):
                raise TreeChanged(job.memory_id)
            self.jobs[(job.tenant, job.id)] = copy.deepcopy(job)
            if hold_memory:
                self.memories.keep(job.tenant, job.memory_id, HOLD, job.id, job.id)

    def finish(self, tenant: str, job_id: str, status: str, result: dict[str, Any], finished_at: int) -> Job:
        with self.memories.lock:
            job = self.jobs.get((tenant, job_id))
            if job is None:
                raise LookupError(job_id)
            done = replace(job, status=status, result=copy.deepcopy(result), finished_at=finished_at)
            self.jobs[(tenant, job_id)] = done
            self.memories.drop(tenant, job.memory_id, HOLD, job_id)
            return copy.deepcopy(done)

    def progress(self, tenant: str, job_id: str, result: dict[str, Any]) -> bool:
        with self.memories.lock:
            job = self.jobs.get((tenant, job_id))
            if job is None or job.finished_at is not None:
                return False
            self.jobs[(tenant, job_id)] = replace(job, result=copy.deepcopy(result))
            return True

    def get(self, tenant: str, job_id: str) -> Job | None:
        return copy.deepcopy(self.jobs.get((tenant, job_id)))

    def holds(self, tenant: str, memory_id: str) -> bool:
        return bool(self.memories.kept_under(tenant, memory_id, HOLD))


class ExecutionAlreadyExists(Exception):
    """A second execution of the same name with another input (Step Functions' ExecutionAlreadyExists)."""


@dataclass
class Execution:
    workflow: str
    name: str
    payload: dict[str, Any]
    status: str = "RUNNING"
    error: BaseException | None = None


@dataclass
class InMemoryWorkflowRunner:
    """Step Functions as unit tests need it. Each start is kept in `executions`; a workflow given a
    handler runs it at once, inside start, as a state machine that finished before the wait (SUCCEEDED,
    or FAILED when the handler raised); without one the execution stays RUNNING. Names are unique per
    workflow: the same name with the same input starts nothing new, with another it is refused."""

    handlers: Mapping[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    executions: dict[tuple[str, str], Execution] = field(default_factory=dict)

    def start(self, workflow: str, execution_name: str, payload: dict[str, Any]) -> None:
        started = self.executions.get((workflow, execution_name))
        if started is not None:
            if started.payload != payload:
                raise ExecutionAlreadyExists(execution_name)
            return
        execution = Execution(workflow, execution_name, copy.deepcopy(payload))
        self.executions[(workflow, execution_name)] = execution
        handler = self.handlers.get(workflow)
        if handler is None:
            return
        try:
            handler(copy.deepcopy(payload))
        except Exception as error:  # a failed step fails the execution, as in Step Functions
            execution.status, execution.error = "FAILED", error
        else:
            execution.status = "SUCCEEDED"

    def wait(self, execution_name: str, workflow: str, seconds: float) -> str:
        return self.executions[(workflow, execution_name)].status

    def started(self, workflow: str) -> list[Execution]:
        return [e for (w, _), e in self.executions.items() if w == workflow]
