"""Typed answers of the API (docs/openapi.json). Every model keeps the fields it does not know
(`extra="allow"`, readable as attributes and in `model_extra`), so a newer server never breaks an older
client; only the fields a caller cannot do without are required."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Count(Model):
    count: int = 0


class MemorySummary(Model):
    """A memory as a read names it: the parent and the children to go to next (§6.1)."""

    id: str
    name: str = ""
    description: str = ""
    records: Count | None = None
    children: Count | None = None


class Memory(Model):
    id: str
    object: str = "memory"
    name: str = ""
    description: str = ""
    parent_id: str | None = None
    ancestors: list[str] = Field(default_factory=list)
    restricted: bool = False
    provider: str | None = None
    privileges: list[str] = Field(default_factory=list)
    records: Count | None = None
    children: Count | None = None
    created_at: int | None = Field(default=None, alias="createdAt")  # epoch milliseconds
    updated_at: int | None = Field(default=None, alias="updatedAt")


class Grant(Model):
    id: str
    object: str = "memory.grant"
    memory_id: str | None = None
    principal: str = ""
    privileges: list[str] = Field(default_factory=list)
    implicit: bool = False
    created_at: int | None = Field(default=None, alias="createdAt")
    created_by: str | None = None


class WrittenBy(Model):
    kind: str
    id: str


class RecordTime(Model):
    valid_from: str | None = None
    valid_to: str | None = None
    written_at: str | None = None
    invalidated_at: str | None = None


class Reference(Model):
    memory_id: str
    record_id: str
    rel: str | None = None
    available: bool | None = None


class Record(Model):
    """A record version. A revise or forget by a caller without read answers the server's stamps only
    (RecordWritten): then `type` and `content` are None."""

    id: str
    object: str = "memory.record"
    memory_id: str
    type: str | None = None
    content: str | dict[str, Any] | None = None
    attributes: dict[str, Any] | None = None
    version: int | None = None
    status: str | None = None
    supersedes: str | None = None
    time: RecordTime | None = None
    written_by: WrittenBy | None = None
    references: list[Reference] | None = None
    trust: str | None = None
    path: str | None = None
    # On a get: where to go next (§6.1).
    parent: MemorySummary | None = None
    children: list[MemorySummary] | None = None


T = TypeVar("T", bound=BaseModel)


class Page(Model, Generic[T]):
    """One page of a listing; `next_cursor` asks for the next (None on the last)."""

    object: str = "list"
    data: list[T] = Field(default_factory=list)
    next_cursor: str | None = None


class RecordPage(Page[Record]):
    """A page of a memory's records, with where to go next (§6.1)."""

    parent: MemorySummary | None = None
    children: list[MemorySummary] = Field(default_factory=list)


class RecallResult(Model):
    record: Record
    score: float = 0.0
    why: list[str] = Field(default_factory=list)


class RecallAnswer(Model):
    """§6.3: results best first; read `abstain` first (True: nothing returned answers the question)."""

    results: list[RecallResult] = Field(default_factory=list)
    parent: MemorySummary | None = None
    children: list[MemorySummary] = Field(default_factory=list)
    degraded: list[str] = Field(default_factory=list)
    abstain: bool = False


class Job(Model):
    """Work that goes on after its answer (an observe that derives, an erase, a delete): read it again
    with `get_job` until `status` is completed or failed."""

    id: str
    status: str = "pending"


class JobAccepted(Model):
    """A 202: the work goes on, in `job`."""

    job: Job


class Deleted(Model):
    id: str
    object: str = ""
    deleted: bool = True


class ObserveResult(Model):
    """The episodes kept as records (200), or the job deriving from them (202: `job`, no records yet)."""

    records: list[Record] = Field(default_factory=list)
    job: Job | None = None


class Unreachable(Model):
    where: str
    reason: str = ""
    until: str | None = None
    record_id: str | None = None
    count: int | None = None


class EraseResult(Model):
    """What an erase removed for good; `unreachable` the copies it could not remove ([]: a guarantee)."""

    object: str = "memory.erase"
    job_id: str | None = None
    erased: list[str] = Field(default_factory=list)
    erased_files: list[str] = Field(default_factory=list)
    erased_elsewhere: int = 0
    unreachable: list[Unreachable] = Field(default_factory=list)
