"""The tasks of the state machines in uhp_memories/workflows/. Each handler is its own Lambda (CDK
points each at `functions.steps.handler.<name>`, the name uhp_memories.workflows.STEPS gives it);
each is idempotent, so a retry does no harm.

A handler is an adapter, like an API route: it parses the state into its input model
(uhp_memories.workflows.state), calls one service method with domain values, and returns the output
model that lands at its task's ResultPath. The state carries ids and filters only, never record content."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from uhp_memories import bootstrap
from uhp_memories.api import observability
from uhp_memories.domain.consolidation.service import ConsolidationService
from uhp_memories.domain.observing.service import ObserveService
from uhp_memories.domain.removal.service import RemovalService
from uhp_memories.workflows import STEPS
from uhp_memories.workflows import state as s


@dataclass(frozen=True)
class Step[In: BaseModel]:
    """One task: the model its state is parsed into, and what it runs. Called as a Lambda handler."""

    name: str
    input: type[In]
    run: Callable[[In], BaseModel]

    @observability.observed  # traced, metrics flushed, log lines correlated by the job's id
    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return self.run(self.input.model_validate(event)).model_dump(mode="json")


# step handler name (STEPS' values) -> its step
REGISTRY: dict[str, Step[Any]] = {}


def step[In: BaseModel](input_model: type[In]) -> Callable[[Callable[[In], BaseModel]], Step[In]]:
    """Register a function as the step of its name, reading its state as `input_model`."""

    def register(run: Callable[[In], BaseModel]) -> Step[In]:
        registered = Step(run.__name__, input_model, run)
        REGISTRY[registered.name] = registered
        return registered

    return register


def _removal() -> RemovalService:
    return bootstrap.container().removal


def _consolidation() -> ConsolidationService:
    return bootstrap.container().consolidation


def _observing() -> ObserveService:
    return bootstrap.container().observing


# -- erase -----------------------------------------------------------------------------------


@step(s.EraseStarted)
def resolve_erase_targets(state: s.EraseStarted) -> s.TargetsState:
    targets = _removal().resolve_erase_targets(
        state.tenant, state.memory_id, state.record_ids, state.filters, state.under
    )
    return s.TargetsState.of(targets)


@step(s.EraseResolved)
def erase_from_index(state: s.EraseResolved) -> s.IndexErased:
    erased = _removal().erase_from_index(state.tenant, state.targets.to_domain().versions)
    return s.IndexErased(index="erased" if erased else "none")


@step(s.EraseResolved)
def erase_files(state: s.EraseResolved) -> s.FilesErased:
    return s.FilesErased(object_versions=_removal().erase_files(state.tenant, state.targets.to_domain()))


@step(s.EraseResolved)
def erase_cached_responses(state: s.EraseResolved) -> s.ResponsesErased:
    return s.ResponsesErased(responses=_removal().erase_cached_responses(state.tenant, state.targets.to_domain()))


@step(s.EraseResolved)
def erase_records(state: s.EraseResolved) -> s.RecordsErased:
    targets = state.targets.to_domain()
    swept = _removal().erase_records(state.tenant, targets)
    return s.RecordsErased(chains=len(targets.chains) + len(swept.chains), swept=s.TargetsState.of(swept).versions)


@step(s.EraseResolved)
def finish_erase(state: s.EraseResolved) -> s.JobStepDone:
    targets = state.targets.to_domain()
    swept = tuple(v.to_domain() for v in state.records.swept) if state.records is not None else ()
    job = _removal().finish_erase(state.tenant, state.job_id, targets.versions + swept, targets.files)
    return s.JobStepDone(status=job.status)


@step(s.JobFailed)
def record_failure(state: s.JobFailed) -> s.JobStepDone:
    """Erase and delete alike."""
    versions = state.targets.to_domain().versions if state.targets is not None else ()
    job = _removal().record_failure(state.tenant, state.job_id, versions, state.error_name)
    return s.JobStepDone(status=job.status)


# -- delete ----------------------------------------------------------------------------------


@step(s.DeleteStarted)
def purge_subtree(state: s.DeleteStarted) -> s.SubtreePurged:
    return s.SubtreePurged(memories=len(_removal().purge_subtree(state.tenant, state.memory_id)))


@step(s.DeleteStarted)
def finish_delete(state: s.DeleteStarted) -> s.JobStepDone:
    return s.JobStepDone(status=_removal().finish_delete(state.tenant, state.job_id).status)


# -- consolidation ---------------------------------------------------------------------------


@step(s.ConsolidationStarted)
def consolidate(state: s.ConsolidationStarted) -> s.PassDone:
    run = _consolidation().consolidate(state.tenant, state.memory_id, state.run_id)
    return s.PassDone(status=run.status if run is not None else "missing")


@step(s.ConsolidationFailed)
def record_consolidation_failure(state: s.ConsolidationFailed) -> s.PassDone:
    _consolidation().record_failure(state.tenant, state.memory_id, state.run_id, state.error_name)
    return s.PassDone(status="failed")


# -- derivation ------------------------------------------------------------------------------


@step(s.DerivationStarted)
def derive(state: s.DerivationStarted) -> s.JobStepDone:
    job = _observing().derive(state.tenant, state.memory_id, state.job_id)
    return s.JobStepDone(status=job.status if job is not None else "missing")


@step(s.DerivationFailed)
def record_derivation_failure(state: s.DerivationFailed) -> s.JobStepDone:
    job = _observing().record_failure(state.tenant, state.job_id, state.error_name)
    return s.JobStepDone(status=job.status if job is not None else "missing")


# A step the ASL names without a handler would fail only when an execution reaches it; a handler
# no state machine names would be a Lambda nothing invokes. Both fail the import instead.
if set(REGISTRY) != set(STEPS.values()):
    raise RuntimeError(f"steps without a handler or handlers without a step: {set(REGISTRY) ^ set(STEPS.values())}")
