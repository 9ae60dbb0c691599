"""The agent's tools (§9.1) as thin adapters: each validates its arguments with the REST operation's own
request schema (api/schemas.py), runs the very same service method with the caller's privileges, and
answers compactly, record content fenced (domain/fence.py).

Where an agent starts and how far it reaches (§9, §13):
- A key acting as `harness:<id>` starts from that harness's attached memories (`memory_list` without a
  memory); any other key from its entry points. From there it walks to the parent and children an
  answer names, as far as its own privileges reach: every call is checked by the service it runs.
- `access: read` narrows: a harness writes only at or below a memory it attached with `write`. The
  write tools are offered only when some attachment allows writing.
- `memory_remember` without `memory_id` writes to the harness's default attachment.
- One more memory may be named for the session (§9 `metadata.memory`; over MCP the `x-uhp-memory`
  header, checked by `session_memory` before any tool runs): it is added to the starting memories, with
  `write` when the caller may write it (and then it is the default) and `read` otherwise.
- A memory the caller cannot see is `memory_not_found`, whatever the reason. Erase is never a tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from uhp_memories.api import inputs, schemas
from uhp_memories.api.errors import describe_validation_errors
from uhp_memories.bootstrap import Container
from uhp_memories.domain.errors import DomainError, MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.fence import Fence
from uhp_memories.domain.harnesses import Attachment, MemoriesNotAttached
from uhp_memories.domain.memories import MemorySummary, MemoryView
from uhp_memories.domain.models import Caller
from uhp_memories.domain.queries import NAME as QUERY_NAME
from uhp_memories.domain.queries import NamedQuery, QueryNotFound
from uhp_memories.domain.recall import RecallAnswer
from uhp_memories.domain.records import RecordView
from uhp_memories.search.errors import SearchUnavailable

HARNESS_PREFIX = "harness:"
QUERY_TOOL_PREFIX = "memory_run_query_"
MEMORY_ID = {"type": "string", "description": "the memory, by id (from memory_list or an answer's parent/children)"}
RECORD_ID = {"type": "string", "description": "the record, by id"}
QUERY = {"type": "string", "description": "the named query, as the memory lists it"}


class ToolError(Exception):
    """A tool's refusal, answered as an error result: {"error": {"code", "message"}}."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- the caller's starting points -----------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """Who runs the tools, and the one more memory its request named (§9 `metadata.memory`; over MCP the
    `x-uhp-memory` header), already checked against the caller's privileges (`session_memory`)."""

    caller: Caller
    memory: Attachment | None = None


MEMORY_ID_SHAPE = re.compile(r"^hmem_[0-9A-Za-z]{1,64}$")


def session_memory(container: Container, caller: Caller, memory_id: str) -> Attachment:
    """The memory a request names for its session, checked as an attached memory is: memory_not_found
    when the caller holds nothing on it (or the id is malformed, which is never echoed). Its access is
    write when the caller may write it, else read; a memory the caller may write is the session's default."""
    if not MEMORY_ID_SHAPE.match(memory_id):
        raise MemoryNotFound()
    view = container.memories.get(caller, memory_id)  # memory_not_found when it holds nothing on it
    writes = "write" in view.privileges
    return Attachment(memory_id, "write" if writes else "read", default=writes)


def harness_id(caller: Caller) -> str | None:
    return caller.principal[len(HARNESS_PREFIX) :] if caller.principal.startswith(HARNESS_PREFIX) else None


def attachments(container: Container, s: Session) -> list[Attachment]:
    """Where the session starts: the harness's attachments it can see ([] for a key that is no harness, or
    a harness with none), then the session's own memory. An attached memory keeps its attachment (access
    narrows, never widens); the session's memory, when it may be written, is the default in place of
    the harness's."""
    harness = harness_id(s.caller)
    attached: list[Attachment] = []
    if harness is not None:
        try:
            attached = container.harnesses.attached(s.caller, harness)
        except (MemoriesNotAttached, MemoryInvalid):
            attached = []
    extra = s.memory
    if extra is None:
        return attached
    same = next((a for a in attached if a.memory_id == extra.memory_id), None)
    default_id = extra.memory_id if (same or extra).access == "write" else None
    if default_id is None:
        return attached if same is not None else [*attached, extra]
    listed = attached if same is not None else [*attached, extra]
    return [Attachment(a.memory_id, a.access, a.memory_id == default_id) for a in listed]


def may_write(container: Container, s: Session) -> bool:
    """Write tools are offered to a harness attached somewhere to write (its session's memory counts);
    any other key is checked per call."""
    if harness_id(s.caller) is None:
        return True
    return any(a.access == "write" for a in attachments(container, s))


def _check_write_reach(container: Container, s: Session, memory_id: str) -> None:
    """A harness writes only at or below a memory it attached with `write` (`read` narrows, §9)."""
    if harness_id(s.caller) is None:
        return
    writable = {a.memory_id for a in attachments(container, s) if a.access == "write"}
    if memory_id in writable:
        return
    view = container.memories.get(s.caller, memory_id)  # memory_not_found for one it cannot see
    if not writable.intersection(view.ancestors):
        raise MemoryForbidden("write")


def _default_memory(container: Container, s: Session) -> str:
    default = next((a for a in attachments(container, s) if a.default), None)
    if default is not None:
        return default.memory_id
    if harness_id(s.caller) is None:
        raise MemoryInvalid("memory_id is required: this key is no harness, so it has no default memory")
    raise MemoryInvalid("memory_id is required: the harness has no default memory attached")


# -- answers ----------------------------------------------------------------------------------------


def _record(view: RecordView) -> dict[str, Any]:
    r = view.record
    out: dict[str, Any] = {
        "id": r.id,
        "memory_id": r.memory_id,
        "type": r.type,
        "content": r.content,
        "written_by": {"kind": r.written_by["kind"], "id": r.written_by["id"]},
        "trust": "untrusted",
        "written_at": r.written_at,
        "version": r.version,
        "status": r.status,
    }
    if r.attributes:
        out["attributes"] = r.attributes
    if r.path is not None:
        out["path"] = r.path
    if view.references:
        out["references"] = view.references
    if r.valid_from or r.valid_to:
        out["valid"] = {"from": r.valid_from, "to": r.valid_to}
    return out


def _summary(s: MemorySummary) -> dict[str, Any]:
    return {
        "id": s.id,
        "name": s.name,
        "description": s.description,
        "records": s.records_count,
        "children": s.children_count,
    }


def _memory(view: MemoryView, attachment: Attachment | None = None) -> dict[str, Any]:
    m = view.memory
    out: dict[str, Any] = {
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "parent_id": view.parent_id,
        "privileges": view.privileges,
        "records": m.record_count,
        "children": view.children_count,
    }
    if attachment is not None:
        out["attached"] = {"access": attachment.access, "default": attachment.default}
    return out


def _recall(answer: RecallAnswer) -> dict[str, Any]:
    out: dict[str, Any] = {
        "results": [{**_record(r.record), "score": r.score, "why": list(r.why)} for r in answer.results],
    }
    if answer.parent is not None:
        out["parent"] = _summary(answer.parent)
    out["children"] = [_summary(c) for c in answer.children]
    out["degraded"] = answer.degraded
    out["abstain"] = answer.abstain
    return out


def present(answer: dict[str, Any]) -> str:
    """The answer as compact JSON text, every record's content fenced with one nonce (domain/fence.py)."""
    records = [*answer.get("results", ()), *([answer["record"]] if "record" in answer else ())]
    if records:
        fence = Fence(r["content"] for r in records)
        for r in records:
            r["content"] = fence.wrap(r["content"])
        answer = {"fence": fence.nonce, **answer}
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))


# -- arguments ----------------------------------------------------------------------------------------


def _body[M: BaseModel](model: type[M], arguments: dict[str, Any], *taken: str) -> M:
    """The REST request body of the tool's operation, validated as the REST API validates it (JSON)."""
    rest = {k: v for k, v in arguments.items() if k not in taken}
    return model.model_validate_json(json.dumps(rest))


def _text(arguments: dict[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise MemoryInvalid(f"{name} is a non-empty string")
    return value


def _required(arguments: dict[str, Any], name: str) -> str:
    value = _text(arguments, name)
    if value is None:
        raise MemoryInvalid(f"{name} is required")
    return value


def _schema(model: type[BaseModel] | None, extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A tool's input schema: its ids, then the REST operation's own body fields."""
    body = model.model_json_schema() if model is not None else {"properties": {}}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {**extra, **body.get("properties", {})},
        "required": [*required, *body.get("required", [])],
        "additionalProperties": False,
    }
    if "$defs" in body:
        schema["$defs"] = body["$defs"]
    return schema


# -- the tools ----------------------------------------------------------------------------------------


def memory_list(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id = _text(a, "memory_id")
    cursor = _text(a, "cursor")
    if memory_id is None:
        attached = attachments(c, s)
        if harness_id(s.caller) is not None:
            return {"memories": [_memory(c.memories.get(s.caller, e.memory_id), e) for e in attached]}
        # Any other key: the session's memory (first page only), then its entry points.
        first = [] if cursor is not None else [_memory(c.memories.get(s.caller, e.memory_id), e) for e in attached]
        page = c.memories.list(s.caller, cursor=cursor)
        rest = [_memory(v) for v in page.items if all(v.memory.id != e.memory_id for e in attached)]
        return {"memories": [*first, *rest], "next_cursor": page.next_cursor}
    here = c.memories.get(s.caller, memory_id)
    children = c.memories.list(s.caller, parent=memory_id, cursor=cursor)
    parent = None
    if here.parent_id is not None:
        try:
            parent = _memory(c.memories.get(s.caller, here.parent_id))
        except DomainError:
            parent = None
    out: dict[str, Any] = {"memory": _memory(here)}
    if parent is not None:
        out["parent"] = parent
    out["children"] = [_memory(v) for v in children.items]
    out["next_cursor"] = children.next_cursor
    return out


def memory_recall(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id = _required(a, "memory_id")
    body = _body(schemas.RecallIn, a, "memory_id")
    return _recall(c.recall.recall(s.caller, memory_id, inputs.recall_input(body)))


def memory_get(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id, record_id = _required(a, "memory_id"), _required(a, "record_id")
    as_of = _text(a, "as_of")
    return {"record": _record(c.records.get(s.caller, memory_id, record_id, as_of, "active"))}


def memory_remember(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id = _text(a, "memory_id") or _default_memory(c, s)
    body = _body(schemas.RecordCreate, a, "memory_id")
    _check_write_reach(c, s, memory_id)
    given = inputs.record_input(body.type, body.content, body.attributes, body.time, body.references, body.path)
    return {"record": _record(c.records.remember(s.caller, memory_id, given, inputs.write_terms(body)))}


def memory_revise(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id, record_id = _required(a, "memory_id"), _required(a, "record_id")
    body = _body(schemas.RecordRevise, a, "memory_id", "record_id")
    _check_write_reach(c, s, memory_id)
    view = c.records.revise(s.caller, memory_id, record_id, inputs.revision(body), inputs.write_terms(body))
    return {"record": _record(view)}


def memory_forget(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id, record_id = _required(a, "memory_id"), _required(a, "record_id")
    body = _body(schemas.RecordForget, a, "memory_id", "record_id")
    _check_write_reach(c, s, memory_id)
    return {"record": _record(c.records.forget(s.caller, memory_id, record_id, inputs.write_terms(body)))}


def memory_run_query(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id, name = _required(a, "memory_id"), _required(a, "name")
    body = _body(schemas.QueryRunIn, a, "memory_id", "name")
    return _recall(c.queries.run(s.caller, memory_id, name, body.params))


def memory_query(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id = _required(a, "memory_id")
    body = _body(schemas.FreeQueryIn, a, "memory_id")
    return _recall(c.queries.free(s.caller, memory_id, body.language, body.statement, body.params, body.limit))


def memory_operate(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
    memory_id, record_id = _required(a, "memory_id"), _required(a, "record_id")
    name = _required(a, "operation")
    given = a.get("input", {})
    prepared = c.operations.prepare(s.caller, memory_id, record_id, name)
    if prepared.operation.requires == "write":
        _check_write_reach(c, s, memory_id)
    answer = c.operations.run_prepared(s.caller, prepared, given)
    if answer.record is not None:
        return {"operation": name, "record": _record(answer.record)}
    if answer.recall is not None:
        return {"operation": name, **_recall(answer.recall)}
    return {"operation": name, "result": answer.result}


def operations_described(c: Container, caller: Caller) -> str:
    """The types with operations this caller's records may have, and what each operation needs."""
    lines = []
    for definition in c.types.list(caller):
        ops = ", ".join(f"{o.name} ({o.requires})" for o in definition.operations)
        if ops:
            lines.append(f"{definition.type}: {ops}")
    return "; ".join(lines)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    writes: bool
    run: Callable[[Container, Session, dict[str, Any]], dict[str, Any]]
    free_query: bool = False


WITH_RECORD = {"memory_id": MEMORY_ID, "record_id": RECORD_ID}

TOOLS: tuple[Tool, ...] = (
    Tool(
        "memory_list",
        "Without memory_id: the memories you start from (a harness's attached memories). With memory_id: that "
        "memory, its parent and its children, to walk to.",
        _schema(None, {"memory_id": MEMORY_ID, "cursor": {"type": "string"}}, []),
        False,
        memory_list,
    ),
    Tool(
        "memory_recall",
        "Recall from one memory by meaning (query), words (text) and fields (filters), fused into one ranking; "
        "depth adds readable descendants. Answers results with why, parent and children, degraded and abstain.",
        _schema(schemas.RecallIn, {"memory_id": MEMORY_ID}, ["memory_id"]),
        False,
        memory_recall,
    ),
    Tool(
        "memory_get",
        "One record of a memory, by id (as_of: an RFC 3339 time or a snapshot name).",
        _schema(None, {**WITH_RECORD, "as_of": {"type": "string"}}, ["memory_id", "record_id"]),
        False,
        memory_get,
    ),
    Tool(
        "memory_remember",
        "Write one record, as stated, to a memory; without memory_id, to the harness's default memory.",
        _schema(schemas.RecordCreate, {"memory_id": MEMORY_ID}, []),
        True,
        memory_remember,
    ),
    Tool(
        "memory_revise",
        "Revise a record: the fields sent replace the current version's, as a new version.",
        _schema(schemas.RecordRevise, WITH_RECORD, ["memory_id", "record_id"]),
        True,
        memory_revise,
    ),
    Tool(
        "memory_forget",
        "Forget a record: its current version is closed (history keeps it; erase is a person's act, not a tool).",
        _schema(schemas.RecordForget, WITH_RECORD, ["memory_id", "record_id"]),
        True,
        memory_forget,
    ),
    Tool(
        "memory_run_query",
        "Run a named query a memory lists (its params as the query declares them); the starting memories' "
        "queries are also offered as tools of their own (memory_run_query_<name>).",
        _schema(schemas.QueryRunIn, {"memory_id": MEMORY_ID, "name": QUERY}, ["memory_id", "name"]),
        False,
        memory_run_query,
    ),
    Tool(
        "memory_operate",
        "Run an operation of a typed record's type on that record (input as the operation declares it). A write "
        "operation appends a version; a read one answers records or its own result.",
        _schema(
            None,
            {
                **WITH_RECORD,
                "operation": {"type": "string", "description": "the operation's name, as its type lists it"},
                "input": {"type": "object", "description": "the operation's input"},
            },
            ["memory_id", "record_id", "operation"],
        ),
        False,  # offered to readers too: a write operation is checked for write reach on each call
        memory_operate,
    ),
    Tool(
        "memory_query",
        "Run a free query (a statement in one of the provider's languages), confined to one memory.",
        _schema(schemas.FreeQueryIn, {"memory_id": MEMORY_ID}, ["memory_id"]),
        False,
        memory_query,
        free_query=True,
    ),
)
BY_NAME = {t.name: t for t in TOOLS}


# -- named queries as tools of their own -------------------------------------------------------------


def starting_memories(c: Container, s: Session) -> list[str]:
    attached = [a.memory_id for a in attachments(c, s)]
    if harness_id(s.caller) is not None:
        return attached
    return [*attached, *(v.memory.id for v in c.memories.list(s.caller).items if v.memory.id not in attached)]


def named_queries(c: Container, s: Session) -> dict[str, list[NamedQuery]]:
    """The named queries the starting memories list (each only where the caller may run it), by name."""
    found: dict[str, list[NamedQuery]] = {}
    for memory_id in starting_memories(c, s):
        try:
            listed = c.queries.list(s.caller, memory_id)
        except DomainError:
            continue
        for query in listed:
            if "memory_id" not in query.params.get("properties", {}):
                found.setdefault(query.name, []).append(query)
    return found


def query_tool(name: str, queries: list[NamedQuery]) -> Tool:
    """One named query as a tool: its params are the input schema; memory_id picks among the starting
    memories that list it (optional when only one does)."""
    params = queries[0].params
    memory_ids = [q.memory_id for q in queries]
    schema = {
        "type": "object",
        "description": queries[0].description,
        "properties": {"memory_id": {**MEMORY_ID, "enum": memory_ids}, **params.get("properties", {})},
        "required": [*([] if len(memory_ids) == 1 else ["memory_id"]), *params.get("required", [])],
        "additionalProperties": False,
    }
    description = queries[0].description or f"the named query {name}"

    def run(c: Container, s: Session, a: dict[str, Any]) -> dict[str, Any]:
        memory_id = a.get("memory_id") or (memory_ids[0] if len(memory_ids) == 1 else None)
        if not isinstance(memory_id, str):
            raise MemoryInvalid("memory_id is required: more than one memory lists this query")
        values = {k: v for k, v in a.items() if k != "memory_id"}
        return _recall(c.queries.run(s.caller, memory_id, name, values))

    return Tool(QUERY_TOOL_PREFIX + name, f"Named query: {description}", schema, False, run)


# -- listing and calling --------------------------------------------------------------------------------


def offered(c: Container, caller: Caller, memory: Attachment | None = None) -> list[Tool]:
    """The tools this caller holds (with its session's memory, when its request named one): write tools
    only where it may write, free queries only where offered, and one tool per named query of its
    starting memories."""
    s = Session(caller, memory)
    writes = may_write(c, s)
    free = bool(c.queries.free_languages_configured())
    tools = [t for t in TOOLS if (writes or not t.writes) and (free or not t.free_query)]
    tools = [_with_operations(c, caller, t) if t.name == "memory_operate" else t for t in tools]
    tools += [query_tool(name, qs) for name, qs in sorted(named_queries(c, s).items())]
    return tools


def _with_operations(c: Container, caller: Caller, tool: Tool) -> Tool:
    described = operations_described(c, caller)
    return replace(tool, description=f"{tool.description} Operations by type: {described}.") if described else tool


def find(c: Container, s: Session, name: str) -> Tool:
    """The tool of that name, as offered to this caller (a write tool a harness is not offered is refused)."""
    tool = BY_NAME.get(name)
    if tool is not None:
        if tool.writes and not may_write(c, s):
            raise MemoryForbidden("write")
        if tool.free_query and not c.queries.free_languages_configured():
            raise ToolError("memory_unsupported", "free queries are not offered here")
        return tool
    query = name[len(QUERY_TOOL_PREFIX) :] if name.startswith(QUERY_TOOL_PREFIX) else ""
    if QUERY_NAME.match(query):
        found = named_queries(c, s).get(query)
        if found:
            return query_tool(query, found)
        raise QueryNotFound(query)
    raise ToolError("unknown_tool", f"no tool named {name!r}")


def call(
    c: Container, caller: Caller, name: str, arguments: dict[str, Any] | None, memory: Attachment | None = None
) -> tuple[str, bool]:
    """Run one tool (with the session's memory, when the request named one): (the answer's text, whether
    it is an error)."""
    s = Session(caller, memory)
    try:
        tool = find(c, s, name)
        return present(tool.run(c, s, dict(arguments or {}))), False
    except DomainError as error:
        return _error(error.code, error.message), True
    except ToolError as error:
        return _error(error.code, error.message), True
    except ValidationError as error:
        return _error("memory_invalid", describe_validation_errors([dict(e) for e in error.errors()])), True
    except SearchUnavailable:
        return _error("memory_unavailable", "the provider's search did not answer; retry later"), True


def _error(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}}, separators=(",", ":"))
