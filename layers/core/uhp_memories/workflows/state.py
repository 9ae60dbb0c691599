"""The workflows' state, as the ASL files beside this module shape it: what each step reads and returns.

A task receives the whole state so far, and its result lands at the task's ResultPath
(erase.asl.json: ResolveTargets -> $.targets, a Catch -> $.error). An input model names only the
fields its step reads (the rest is ignored: the state grows as the workflow runs); an output model
is exactly what lands at the ResultPath. The step handlers (functions/steps/handler.py) parse and
serialize these and hand the domain its own values, so a change to the ASL's paths changes this
module and the handlers, never a service. The state carries ids and filters only, never content.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from uhp_memories.domain.removal.model import ChainTarget, EraseTargets, VersionTarget

DEFAULT_ERROR = "States.TaskFailed"


class State(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class CaughtError(State):
    """What a Catch puts at $.error: the error's name (the exception type, or a States.* error)."""

    model_config = ConfigDict(populate_by_name=True)

    name: str = Field(default=DEFAULT_ERROR, alias="Error")


class AfterFailure(State):
    """The input of a step a Catch leads to."""

    error: CaughtError | None = None

    @property
    def error_name(self) -> str:
        return self.error.name if self.error is not None else DEFAULT_ERROR


# -- erase (erase.asl.json) and delete (delete_memory.asl.json) -----------------------------------


class JobStepDone(State):
    """FinishErase, FinishDelete and RecordFailure, at $.finish or $.failure: the job's status."""

    status: str


class EraseStarted(State):
    """The erase execution's input (RemovalService.erase starts it); ResolveTargets reads it."""

    tenant: str
    memory_id: str
    job_id: str
    record_ids: list[str] | None = None
    filters: Any = None
    under: str | None = None  # every file under a directory (docs/file-memory.md)


class ChainState(State):
    memory_id: str
    chain_id: str


class VersionState(State):
    id: str
    memory_id: str

    def to_domain(self) -> VersionTarget:
        return VersionTarget(self.id, self.memory_id)


class TargetsState(State):
    """ResolveTargets' output, at $.targets: what every later erase step removes."""

    chains: list[ChainState]
    versions: list[VersionState]
    files: list[str]

    @classmethod
    def of(cls, targets: EraseTargets) -> TargetsState:
        return cls(
            chains=[ChainState(memory_id=c.memory_id, chain_id=c.chain_id) for c in targets.chains],
            versions=[VersionState(id=v.id, memory_id=v.memory_id) for v in targets.versions],
            files=list(targets.files),
        )

    def to_domain(self) -> EraseTargets:
        return EraseTargets(
            chains=tuple(ChainTarget(c.memory_id, c.chain_id) for c in self.chains),
            versions=tuple(VersionTarget(v.id, v.memory_id) for v in self.versions),
            files=tuple(self.files),
        )


class EraseResolved(State):
    """The input of every erase step after ResolveTargets (FinishErase's also holds EraseRecords')."""

    tenant: str
    job_id: str
    targets: TargetsState
    records: RecordsErased | None = None


class IndexErased(State):
    """EraseFromIndex, at $.index."""

    index: Literal["erased", "none"]


class FilesErased(State):
    """EraseFiles, at $.files: S3 object versions removed."""

    object_versions: int


class ResponsesErased(State):
    """EraseCachedResponses, at $.responses: kept idempotent responses removed."""

    responses: int


class RecordsErased(State):
    """EraseRecords, at $.records: version chains removed, and the versions of records derived from the
    targets after they were resolved, swept after them (RemovalService.sweep_derived)."""

    chains: int
    swept: list[VersionState] = []


class JobFailed(AfterFailure):
    """RecordFailure's input, in erase and delete alike: targets once ResolveTargets has run (never,
    in a delete)."""

    tenant: str
    job_id: str
    targets: TargetsState | None = None


class DeleteStarted(State):
    """The delete execution's input (RemovalService.delete_memory starts it); every delete step reads it."""

    tenant: str
    memory_id: str
    job_id: str


class SubtreePurged(State):
    """PurgeSubtree, at $.purge: memories removed."""

    memories: int


# -- consolidation (consolidate.asl.json) ------------------------------------------------------


class ConsolidationStarted(State):
    """The consolidation execution's input (ConsolidationService.start starts it)."""

    tenant: str
    memory_id: str
    run_id: str


class ConsolidationFailed(AfterFailure, ConsolidationStarted):
    """RecordConsolidationFailure's input."""


class PassDone(State):
    """Consolidate, at $.pass, and RecordConsolidationFailure, at $.failure: the run's status
    ("missing" for a run that does not exist)."""

    status: str


# -- derivation (derive.asl.json) ----------------------------------------------------------------


class DerivationStarted(State):
    """The derive execution's input (ObserveService.observe starts it)."""

    tenant: str
    memory_id: str
    job_id: str


class DerivationFailed(AfterFailure, DerivationStarted):
    """RecordDerivationFailure's input."""
