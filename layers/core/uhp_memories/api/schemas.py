"""API schemas: what goes over the wire. Kept apart from domain entities and persistence items."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from uhp_memories.domain.files.model import CONDITIONS_MAX, ORIGIN_CHARS
from uhp_memories.domain.limits import DESCRIPTION_CHARS, ERASE_NAMED_MAX, NAME_CHARS


class Strict(BaseModel):
    """A request body, validated strictly. Unknown fields are refused: a field the server ignored
    silently would be a lie. Wrong JSON types are refused, never coerced: `"restricted": "yes"` is not
    true, `"limit": "5"` is not 5, a number is not a string (pydantic's strict mode; JSON numbers stay
    acceptable where a float is asked)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# -- errors ------------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str
    message: str
    current_record_id: str | None = None
    job_id: str | None = Field(default=None, description="a workflow that failed: its job reports what remains")


class ErrorOut(BaseModel):
    error: ErrorDetail


# -- memories ----------------------------------------------------------------------------------


class MemoryCreate(Strict):
    name: str = Field(min_length=1, max_length=NAME_CHARS)
    description: str = Field(default="", max_length=DESCRIPTION_CHARS)
    parent_id: str | None = None
    restricted: bool = False
    provider: str | None = None


class MemoryUpdate(Strict):
    """Every field optional; a field sent is a change. `parent_id: null` moves the memory to the root."""

    name: str | None = Field(default=None, min_length=1, max_length=NAME_CHARS)
    description: str | None = Field(default=None, max_length=DESCRIPTION_CHARS)
    restricted: bool | None = None
    parent_id: str | None = None
    provider: str | None = None


class Count(BaseModel):
    count: int


class MemoryOut(BaseModel):
    id: str
    object: Literal["memory"] = "memory"
    name: str
    description: str
    parent_id: str | None
    ancestors: list[str]
    restricted: bool
    provider: str
    privileges: list[str]
    records: Count
    children: Count
    createdAt: int
    updatedAt: int


class MemoryList(BaseModel):
    object: Literal["list"] = "list"
    data: list[MemoryOut]
    next_cursor: str | None


class Deleted(BaseModel):
    id: str
    object: str
    deleted: bool = True


# -- grants ------------------------------------------------------------------------------------


class GrantCreate(Strict):
    principal: str = Field(min_length=1, max_length=160, examples=["user:alice", "group:sales"])
    privileges: list[str] = Field(min_length=1, max_length=4, examples=[["read"], ["read", "write"]])


class GrantOut(BaseModel):
    id: str
    object: Literal["memory.grant"] = "memory.grant"
    memory_id: str
    principal: str
    privileges: list[str]
    implicit: bool
    createdAt: int
    created_by: str


class GrantList(BaseModel):
    object: Literal["list"] = "list"
    data: list[GrantOut]
    next_cursor: str | None = None


# -- records -----------------------------------------------------------------------------------


class TimeIn(Strict):
    """Only validity is the client's to say; written_at and invalidated_at come from the server."""

    valid_from: str | None = None
    valid_to: str | None = None


class ReferenceIn(Strict):
    rel: str = Field(default="related", min_length=1, max_length=64)
    memory_id: str
    record_id: str


class PathConditionIn(Strict):
    """One entry of a write's read set (docs/file-memory.md): the current record at `path` is
    `record_id`, or none when null."""

    path: str
    record_id: str | None


class OriginIn(Strict):
    """Who a change is attributed to beyond the API key: the run, the principal and the tool call."""

    run_id: str | None = Field(default=None, min_length=1, max_length=ORIGIN_CHARS)
    principal_id: str | None = Field(default=None, min_length=1, max_length=ORIGIN_CHARS)
    tool_call_id: str | None = Field(default=None, min_length=1, max_length=ORIGIN_CHARS)


class WriteTermsIn(Strict):
    conditions: list[PathConditionIn] | None = Field(default=None, max_length=CONDITIONS_MAX)
    origin: OriginIn | None = None


class RecordCreate(WriteTermsIn):
    type: str = Field(min_length=1, max_length=100, examples=["fact", "episode"])
    content: str | dict[str, Any]
    attributes: dict[str, Any] = Field(default_factory=dict)
    time: TimeIn | None = None
    references: list[ReferenceIn] = Field(default_factory=list)
    path: str | None = Field(default=None, description="makes the record a file of its memory")


class RecordRevise(WriteTermsIn):
    """A revision: the fields sent replace the current version's; the rest carry over. A new
    `path` moves the file."""

    # Each may be left out (it carries over) but never sent as null (inputs.revision refuses it):
    # the document says so (SkipJsonSchema), so a client built from it never sends one.
    type: str | SkipJsonSchema[None] = None
    content: str | dict[str, Any] | SkipJsonSchema[None] = None
    attributes: dict[str, Any] | SkipJsonSchema[None] = None
    time: TimeIn | None = None
    references: list[ReferenceIn] | None = None
    path: str | SkipJsonSchema[None] = None


class RecordForget(WriteTermsIn):
    """Forget's optional body: the read set and the origin of the change."""


class RecordTime(BaseModel):
    valid_from: str | None
    valid_to: str | None
    written_at: str
    invalidated_at: str | None


class WrittenBy(BaseModel):
    kind: str
    id: str


class RecordOut(BaseModel):
    id: str
    object: Literal["memory.record"] = "memory.record"
    memory_id: str
    type: str
    content: str | dict[str, Any]
    attributes: dict[str, Any]
    version: int
    status: Literal["active", "superseded", "forgotten"]
    supersedes: str | None
    time: RecordTime
    written_by: WrittenBy
    references: list[dict[str, Any]]
    path: str | None = None
    origin: dict[str, str] | None = None
    forgotten_by: dict[str, Any] | None = None
    trust: Literal["untrusted"] = "untrusted"


class RecordWrittenTime(BaseModel):
    valid_from: str | None = None
    valid_to: str | None = None
    written_at: str
    invalidated_at: str | None


class RecordWritten(BaseModel):
    """A revise's or forget's answer to a caller with write and without read: the server's stamps
    and what the caller sent, nothing it could not read (docs/decisions.md, "Write-only callers")."""

    id: str
    object: Literal["memory.record"] = "memory.record"
    memory_id: str
    version: int
    status: Literal["active", "superseded", "forgotten"]
    supersedes: str | None
    time: RecordWrittenTime
    type: str | None = None
    content: str | dict[str, Any] | None = None
    attributes: dict[str, Any] | None = None
    written_by: WrittenBy | None = None
    references: list[dict[str, Any]] | None = None
    path: str | None = None
    origin: dict[str, str] | None = None
    forgotten_by: dict[str, Any] | None = None
    trust: Literal["untrusted"] = "untrusted"


class RecordList(BaseModel):
    object: Literal["list"] = "list"
    data: list[RecordOut]
    next_cursor: str | None


class EpisodeIn(Strict):
    content: str
    attributes: dict[str, Any] = Field(default_factory=dict)
    time: TimeIn | None = None
    references: list[ReferenceIn] = Field(default_factory=list)


class ObserveIn(Strict):
    episodes: list[EpisodeIn] = Field(min_length=1, max_length=50)


class ObserveOut(BaseModel):
    records: list[RecordOut]


class FileCreate(Strict):
    """A large file: its metadata first; the bytes then go straight to S3 with the presigned PUT."""

    name: str = Field(min_length=1, max_length=255)
    media_type: str = Field(default="application/octet-stream", max_length=255)
    bytes: int = Field(ge=0)


class UploadOut(BaseModel):
    url: str
    method: str
    headers: dict[str, str]
    expires_in: int


class FileOut(BaseModel):
    id: str
    object: Literal["file"] = "file"
    name: str
    bytes: int
    media_type: str
    status: Literal["pending", "uploaded", "attached"]
    createdAt: int
    upload: UploadOut | None = None


class EraseIn(Strict):
    """Named records (each erased with its whole version chain), or every record a filter matches."""

    # At least one, said in the document only: the service refuses an empty list after the caller's
    # access is checked (an outsider is told not found, never what its body lacks).
    record_ids: list[str] | None = Field(
        default=None, max_length=ERASE_NAMED_MAX, json_schema_extra={"minItems": 1}
    )
    filters: dict[str, Any] | None = None
    under: str | None = Field(default=None, description='every file under a directory ("" for every file)')


class UnreachableOut(BaseModel):
    """A place that still holds a copy an erase could not remove (§5.2: an empty list is a guarantee)."""

    record_id: str | None = Field(
        default=None, description="the erased record version still held there; null for copies in memories the "
        "caller cannot see, which are counted and never named"
    )
    count: int = Field(default=1, description="how many erased record versions the entry stands for: 1 when "
                                              "it names one, else how many in memories the caller cannot see")
    where: str
    reason: str
    until: str = Field(description="when the copy goes: a time, or what ends it (always given)")


class EraseOut(BaseModel):
    object: Literal["memory.erase"] = "memory.erase"
    job_id: str
    erased: list[str]
    erased_elsewhere: int = Field(description="records derived from these in memories the caller cannot see")
    erased_files: list[str] = Field(default_factory=list, description="the files the erased records held")
    unreachable: list[UnreachableOut]


class JobRef(BaseModel):
    id: str
    status: Literal["pending", "running", "completed", "failed"]


class RetryingOut(BaseModel):
    failures: int = Field(description="how many times the job's step has failed so far")
    last_error: str = Field(description="the last failure's reason (unavailable, throttled, ...)")
    next_attempt_at: str | None = Field(
        description="when the workflow tries again; null after the last attempt (the job then fails)")


class JobOut(BaseModel):
    id: str
    object: Literal["memory.job"] = "memory.job"
    kind: str
    memory_id: str
    status: Literal["pending", "running", "completed", "failed"]
    records: list[RecordOut] = Field(
        default_factory=list, description="a derive job: the episodes observed and the records derived from them, "
        "as a read that does not ask for history shows them (a forgotten or erased one is left out)"
    )
    erased: list[str] | None = None
    erased_elsewhere: int | None = None
    erased_files: list[str] | None = None
    unreachable: list[UnreachableOut] | None = None
    error: str | None = None
    usage: dict[str, int] | None = Field(default=None, description="a derive job: the model's tokens")
    model: str | None = Field(default=None, description="a derive job: the model that derived")
    retrying: RetryingOut | None = Field(
        default=None, description="a pending derive job whose model call failed and is being tried again")


class JobAccepted(BaseModel):
    job: dict[str, str]


class RecallIn(Strict):
    """§6.2. Any of query, text and filters (or types) alone, or together (fused into one ranking)."""

    query: str | None = Field(
        default=None, max_length=8_000,
        description="meaning: a question in natural language; without `text`, its words are matched too",
    )
    text: str | None = Field(
        default=None, max_length=8_000, description="words: a full-text match (in place of the query's words)"
    )
    query_words: bool = Field(
        default=True, description="false: a query without `text` is searched by its meaning only, not its words"
    )
    filters: dict[str, Any] | None = Field(default=None, description="fields: type, attributes.*, time.*")
    types: list[str] = Field(default_factory=list, max_length=50)
    as_of: str | None = Field(default=None, description="an RFC 3339 time or a snapshot name")
    include: Literal["active", "all"] = "active"
    limit: int | None = Field(default=None, description="1 to 100, default 10")
    depth: int = Field(default=0, ge=0, description="levels of readable descendants to search too (capped at 3)")


class MemorySummaryOut(BaseModel):
    id: str
    name: str
    description: str
    records: Count
    children: Count


class RecordRead(RecordOut):
    """One record as get answers it, with where the reader can go from its memory (§6.1): the parent
    (left out where there is none the caller may read) and the readable children, as a listing names them."""

    parent: MemorySummaryOut | None = Field(
        default=None, description="absent on a root, and when the caller may not read the parent"
    )
    children: list[MemorySummaryOut]


class RecordListing(RecordList):
    """A page of a memory's records, with the parent (left out where there is none the caller may
    read) and the children a reader can go to, as recall names them (§6.1)."""

    parent: MemorySummaryOut | None = None
    children: list[MemorySummaryOut]


class RecallResultOut(BaseModel):
    record: RecordOut
    score: float
    why: list[str]


class RecallOut(BaseModel):
    results: list[RecallResultOut]
    parent: MemorySummaryOut | None = Field(
        default=None, description="absent on a root, and when the caller may not read the parent"
    )
    children: list[MemorySummaryOut]
    degraded: list[str]
    abstain: bool


class NamedQueryIn(Strict):
    """§6.4, the object exactly as the spec shows it. In this provider's language `uhp-recall`, `body`
    is a recall request whose string values may be {{param}} placeholders, given as a JSON object or as
    a string holding one (the protocol's `body` is opaque, often a string); `params` a JSON Schema of
    type object; `name`, when given, the name in the path."""

    name: str | None = None
    description: str = Field(default="", max_length=2000)
    params: dict[str, Any] | None = None
    requires: Literal["read", "write"] = "read"
    language: str = "uhp-recall"
    body: dict[str, Any] | str


class NamedQueryOut(BaseModel):
    name: str
    object: Literal["memory.query"] = "memory.query"
    memory_id: str
    description: str
    params: dict[str, Any]
    requires: str
    language: str
    body: dict[str, Any]
    updated_by: str
    updatedAt: int


class NamedQueryList(BaseModel):
    object: Literal["list"] = "list"
    data: list[NamedQueryOut]
    next_cursor: str | None = None


class QueryRunIn(Strict):
    params: dict[str, Any] = Field(default_factory=dict)


class FreeQueryIn(Strict):
    language: str
    statement: Any
    params: dict[str, Any] = Field(default_factory=dict)
    limit: int = 10


class BudgetIn(Strict):
    limit: int = Field(ge=1, le=10_000_000, description="tokens a run may read (the MiniLM tokenizer's count)")
    unit: Literal["tokens"] = "tokens"


class ConsolidationStart(Strict):
    budget: BudgetIn | None = None


class ScheduleIn(Strict):
    """A memory's consolidation schedule (docs/decisions.md, "Consolidation schedules")."""

    every_minutes: int = Field(ge=15, le=10_080, description="a run starts this often (15 minutes to 7 days)")
    budget: BudgetIn | None = Field(default=None, description="each run's budget (default 250,000 tokens)")


class ScheduleOut(BaseModel):
    object: Literal["memory.consolidation_schedule"] = "memory.consolidation_schedule"
    memory_id: str
    every_minutes: int
    budget: dict[str, Any] = Field(description="{limit, unit: tokens}; limit null: the default budget")
    set_by: str
    set_at: int = Field(description="epoch ms")


class ConsolidationOut(BaseModel):
    """§9.2. Times in epoch seconds; the budget is counted in tokens of what the run read (the native
    consolidator runs no model: `usage.output_tokens` is 0)."""

    id: str
    object: Literal["memory.consolidation"] = "memory.consolidation"
    memory_id: str
    status: Literal["queued", "running", "completed", "stopped", "failed", "reverted"]
    trigger: str
    started_at: int
    finished_at: int | None
    read: dict[str, Any]
    changes: dict[str, int]
    usage: dict[str, int]
    budget: dict[str, Any]
    written_by: dict[str, str]
    reverted_by: str | None = None
    error: str


class ConsolidationList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ConsolidationOut]
    next_cursor: str | None


class ChangeOut(BaseModel):
    record_id: str
    action: Literal["created", "superseded", "forgotten"]
    record: RecordOut | None = Field(default=None, description="the version as it is now, when it still exists")


class ChangeList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ChangeOut]
    next_cursor: str | None = None


class SnapshotCreate(Strict):
    name: str = Field(min_length=1, max_length=100)
    message: str = Field(default="", max_length=2000)


class SnapshotOut(BaseModel):
    id: str
    object: Literal["memory.snapshot"] = "memory.snapshot"
    memory_id: str
    name: str
    message: str
    time: str
    created_by: str


class SnapshotList(BaseModel):
    object: Literal["list"] = "list"
    data: list[SnapshotOut]
    next_cursor: str | None


# -- discovery ---------------------------------------------------------------------------------


class CapabilitiesOut(BaseModel):
    capabilities: dict[str, bool]


class ProviderList(BaseModel):
    data: list[dict[str, Any]]


class OperationOut(BaseModel):
    name: str
    description: str
    input: dict[str, Any]
    requires: Literal["read", "write"]
    set: dict[str, Any] | None = Field(default=None, description="a registered write operation: what it sets")
    recall: dict[str, Any] | None = Field(default=None, description="a registered read operation: its template")


class TypeOut(BaseModel):
    object: Literal["memory.type"] = "memory.type"
    type: str
    description: str
    core: bool
    builtin: bool = Field(description="built into the server (core types and x.calendar.event, x.task)")
    schema_: dict[str, Any] = Field(alias="schema", serialization_alias="schema")
    text: str | None = Field(description="the projection recall searches a record of this type by")
    operations: list[OperationOut]
    version: int | None = None
    registered_by: str | None = None
    registered_at: str | None = None


class TypeList(BaseModel):
    object: Literal["list"] = "list"
    data: list[TypeOut]


class TypeDefinitionIn(Strict):
    """A tenant's extension type (§8): its schema (JSON Schema of the attributes, an object), its text
    projection (`{field}` placeholders over the attributes and `{content}`), and operations, each a
    write that `set`s attributes (constants or `{{param}}` of its input) or a read that runs a `recall`
    template on the record's memory."""

    type: str | None = None
    description: str = Field(default="", max_length=1000)
    schema_: dict[str, Any] = Field(alias="schema")
    text: str = Field(min_length=1, max_length=1000)
    operations: list[dict[str, Any]] = Field(default_factory=list, max_length=16)


class OperationRunIn(Strict):
    input: dict[str, Any] = Field(default_factory=dict)


class OperationResultOut(BaseModel):
    """What an operation answers: the version a write appended (`record`), the records a read found in
    §6.3's shape (`results`, `parent`, `children`, `degraded`, `abstain`), or a read's own `result`."""

    object: Literal["memory.operation"] = "memory.operation"
    operation: str
    record: RecordOut | RecordWritten | None = None  # RecordWritten: a write-only caller (presenters.operation)
    results: list[RecallResultOut] | None = None
    parent: MemorySummaryOut | None = None
    children: list[MemorySummaryOut] | None = None
    degraded: list[str] | None = None
    abstain: bool | None = None
    result: dict[str, Any] | None = None


# -- harnesses ---------------------------------------------------------------------------------


class AttachmentIn(Strict):
    memory_id: str
    access: Literal["read", "write"]
    default: bool = False


class AttachmentsIn(Strict):
    memories: list[AttachmentIn] = Field(max_length=50)


class AttachmentOut(BaseModel):
    memory_id: str
    access: str
    default: bool


class NoticeOut(BaseModel):
    """What the person attaching, or naming a session's memory, must be told (§9.1): `outside_provider`,
    every turn goes to it."""

    code: str
    message: str
    memory_id: str
    provider: str


class AttachmentsOut(BaseModel):
    object: Literal["harness.memories"] = "harness.memories"
    harness_id: str
    memories: list[AttachmentOut]
    hidden: int = Field(
        default=0, description="entries on memories the caller cannot see (never named); a PUT replaces them too"
    )
    notices: list[NoticeOut] = Field(default_factory=list)


class OwnersIn(Strict):
    """Who owns the harness beside itself: principals (user:..., service:..., group:...) that may read and
    change its memories, prime and turns."""

    owners: list[str] = Field(max_length=20, examples=[["user:alice", "group:platform"]])


class OwnersOut(BaseModel):
    object: Literal["harness.owners"] = "harness.owners"
    harness_id: str
    owners: list[str]


# -- prime and turns (§9.1) ------------------------------------------------------------------------


class PinsIn(Strict):
    """Replace the memory's pins: each a current record of the memory, at most 20, in prime's order."""

    record_ids: list[str] = Field(max_length=20)


class PinShownOut(BaseModel):
    id: str
    type: str
    content: str | dict[str, Any]
    written_by: WrittenBy
    written_at: str
    trust: Literal["untrusted"] = "untrusted"


class PinOut(BaseModel):
    record_id: str  # the version pinned
    pinned_by: str
    pinned_at: str
    shown: PinShownOut | None  # the version prime shows now (None: forgotten or gone)


class PinsOut(BaseModel):
    object: Literal["memory.prime"] = "memory.prime"
    memory_id: str
    pins: list[PinOut]


class PrimeChildOut(BaseModel):
    """A readable child, in the order the header names it (its name and description are in the header)."""

    id: str
    described_by: str


class PrimeRecordOut(BaseModel):
    id: str
    pinned_record_id: str
    type: str
    content: str  # fenced: between the answer's `fence` markers (uhp_memories.domain.fence)
    written_by: WrittenBy
    written_at: str
    trust: Literal["untrusted"] = "untrusted"
    tokens: int


class PrimeMemoryOut(BaseModel):
    memory_id: str
    header: str = Field(
        description="fenced, as record content is: the memory's name, its description, then a line per readable "
        "child (- name (id): description); what principals wrote reaches the agent as data (§13)"
    )
    described_by: str = Field(description="who wrote the memory's name and description")
    access: str
    default: bool
    children: list[PrimeChildOut]
    records: list[PrimeRecordOut]
    omitted: int
    tokens: int


class PlacedOut(BaseModel):
    memory_id: str
    tokens: int
    records: int


class PrimeOut(BaseModel):
    object: Literal["harness.prime"] = "harness.prime"
    prime_id: str = Field(description="the server's record of what this prime placed; a turn names it")
    harness_id: str
    budget: int
    tokens: int
    tokenizer: str
    fence: str
    memories: list[PrimeMemoryOut]
    placed: list[PlacedOut]
    omitted: int  # pinned records left out: not whole within the budget
    omitted_memories: int  # memories whose header did not fit (their records are counted in omitted)
    notices: list[NoticeOut] = Field(
        default_factory=list,
        description="what the one naming the session's memory (`memory`) is told, as on attaching (§9.1): "
        "outside_provider when a provider outside this server keeps it",
    )


class ToolRunIn(Strict):
    name: str = Field(min_length=1, max_length=128)
    input: Any = None
    output: Any = None


class TurnIn(Strict):
    """One turn of a session: what was asked, what was answered, the tools that ran, and (optionally) the
    prime the session began with (`prime_id` of GET .../prime): its `asked` episode then keeps what the
    server recorded that prime placed, per memory, in tokens."""

    asked: str = Field(min_length=1)
    answered: str = Field(min_length=1)
    tools: list[ToolRunIn] = Field(default_factory=list, max_length=48)
    prime_id: str | None = Field(default=None, max_length=64)
    memory: str | None = Field(
        default=None, max_length=80,
        description="§9 metadata.memory: the session's memory (hmem_...); the turn goes there when the harness "
        "may write it, else to the list's default",
    )


class TurnOut(BaseModel):
    object: Literal["harness.turn"] = "harness.turn"
    turn_id: str
    harness_id: str
    memory_id: str
    records: list[RecordOut]
    job: JobRef | None = Field(
        default=None, description="the derivation from these episodes, where the provider derives"
    )
    notices: list[NoticeOut] = Field(
        default_factory=list,
        description="what the one naming the session's memory (`memory`) is told, as on attaching (§9.1): "
        "outside_provider when a provider outside this server keeps it",
    )


class PathOut(BaseModel):
    path: str
    record_id: str
    bytes: int
    description: str | None
    written_at: str
    written_by: WrittenBy


class PathList(BaseModel):
    object: Literal["list"] = "list"
    data: list[PathOut]
    next_cursor: str | None


class PathChangeOut(BaseModel):
    path: str
    record_id: str | None = Field(description="the record at the path now; null when it holds none")


class ChangesOut(BaseModel):
    object: Literal["memory.changes"] = "memory.changes"
    changes: list[PathChangeOut]
    cursor: str
    more: bool
    full_resync: bool


class GrepIn(Strict):
    pattern: str = Field(min_length=1, max_length=512)
    regex: bool = False
    case_sensitive: bool = False
    under: str = ""
    limit: int = Field(default=50, ge=1, le=200)


class GrepMatchOut(BaseModel):
    path: str
    line: int
    text: str
    record_id: str


class GrepOut(BaseModel):
    object: Literal["memory.grep"] = "memory.grep"
    matches: list[GrepMatchOut]
    more: bool
    degraded: list[str]
