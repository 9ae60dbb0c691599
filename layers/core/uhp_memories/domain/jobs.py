"""Jobs: the record of a workflow run (erase, memory delete) that a client can poll, and the marker
that tells the tree a run holds a memory (memory_busy)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from uhp_memories.domain.clock import Clock, IdGenerator
from uhp_memories.domain.model import Caller


@dataclass(frozen=True)
class Job:
    tenant: str
    id: str
    kind: str  # erase | delete | derive
    memory_id: str
    status: str  # running (erase, delete) or pending (derive, as §5.1 names it) | completed | failed
    requested_by: str
    created_at: int
    finished_at: int | None = None
    result: dict[str, Any] = field(default_factory=dict)


class JobRepository(Protocol):
    def start(self, job: Job, hold_memory: bool) -> None:
        """Write the job; with `hold_memory`, also hold the memory (a move or a delete of it, or of a
        memory above it, is then memory_busy), in one transaction, TreeChanged when it is being deleted."""
        ...

    def finish(self, tenant: str, job_id: str, status: str, result: dict[str, Any], finished_at: int) -> Job:
        """Record the outcome and release the memory, in one transaction. Idempotent."""
        ...

    def progress(self, tenant: str, job_id: str, result: dict[str, Any]) -> bool:
        """Replace an unfinished job's result with what it has done so far (a step's write-ahead), and
        answer True; answer False, changing nothing, when the job has finished or does not exist."""
        ...

    def get(self, tenant: str, job_id: str) -> Job | None:
        ...

    def holds(self, tenant: str, memory_id: str) -> bool:
        """Whether a running job holds the memory."""
        ...


class WorkflowRunner(Protocol):
    """Step Functions: named executions of the state machines in uhp_memories/workflows/."""

    def start(self, workflow: str, execution_name: str, payload: dict[str, Any]) -> None:
        ...

    def wait(self, execution_name: str, workflow: str, seconds: float) -> str:
        """The execution's status after at most `seconds`: RUNNING, SUCCEEDED, FAILED, ..."""
        ...


class ClockAndIds(Protocol):
    """What starting a job reads of the services' ports (domain/ports.py Ports has both)."""

    @property
    def clock(self) -> Clock: ...

    @property
    def ids(self) -> IdGenerator: ...


def start_job(
    ports: ClockAndIds, jobs: JobRepository, workflows: WorkflowRunner, caller: Caller, kind: str, memory_id: str, *,
    status: str = "running", hold: bool = False, result: dict[str, Any] | None = None,
    payload: dict[str, Any] | None = None,
) -> Job:
    """Write a job (holding its memory when asked) and start its workflow (named as the kind, executed
    under the job's id, given the tenant, the memory, the job and `payload`)."""
    job = Job(
        tenant=caller.tenant,
        id=ports.ids.new("hjob_"),
        kind=kind,
        memory_id=memory_id,
        status=status,
        requested_by=caller.principal,
        created_at=ports.clock.now_ms(),
        result=result or {},
    )
    jobs.start(job, hold_memory=hold)
    state = {"tenant": caller.tenant, "memory_id": memory_id, "job_id": job.id, **(payload or {})}
    workflows.start(kind, job.id, state)
    return job
