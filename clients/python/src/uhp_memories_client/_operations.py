"""Each operation of the API as a `Call`: its route (docs/openapi.json), its query or body, and the
model its answer is read into. The sync and async clients send the same calls."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from uhp_memories_client._core import Call, body, query, segment
from uhp_memories_client.models import (
    Deleted,
    EraseResult,
    Grant,
    Job,
    JobAccepted,
    Memory,
    ObserveResult,
    Page,
    RecallAnswer,
    Record,
    RecordPage,
)

M = TypeVar("M", bound=BaseModel)


class Unset(enum.Enum):
    """A field left as it is (where None means something: `parent_id=None` moves a memory to the root)."""

    UNSET = "UNSET"


UNSET = Unset.UNSET
Include = Literal["active", "all"]
Episode = str | Mapping[str, Any]


def _as(model: type[M]) -> Callable[[int, Any], M]:
    return lambda _status, parsed: model.model_validate(parsed)


def _done_or_job(model: type[M]) -> Callable[[int, Any], M | JobAccepted]:
    """A 200 in `model`, a 202 (the work goes on) as its job."""

    def read(status: int, parsed: Any) -> M | JobAccepted:
        if status == 202 or (isinstance(parsed, dict) and set(parsed) == {"job"}):
            return JobAccepted.model_validate(parsed)
        return model.model_validate(parsed)

    return read


def _memory(memory_id: str) -> str:
    return f"/v1/memories/{segment(memory_id)}"


def _record(memory_id: str, record_id: str) -> str:
    return f"{_memory(memory_id)}/records/{segment(record_id)}"


# Memories (§2)


def create_memory(
    name: str, description: str | None, parent_id: str | None, restricted: bool | None, provider: str | None
) -> Call[Memory]:
    fields = body(name=name, description=description, parent_id=parent_id, restricted=restricted, provider=provider)
    return Call("POST", "/v1/memories", _as(Memory), body=fields, write=True)


def get_memory(memory_id: str) -> Call[Memory]:
    return Call("GET", _memory(memory_id), _as(Memory))


def list_memories(
    parent: str | None, ancestor: str | None, limit: int | None, cursor: str | None
) -> Call[Page[Memory]]:
    params = query(parent=parent, ancestor=ancestor, limit=limit, cursor=cursor)
    return Call("GET", "/v1/memories", _as(Page[Memory]), params=params)


def update_memory(
    memory_id: str,
    name: str | None,
    description: str | None,
    parent_id: str | Unset | None,
    restricted: bool | None,
) -> Call[Memory]:
    fields = body(name=name, description=description, restricted=restricted)
    if parent_id is not UNSET:
        fields["parent_id"] = parent_id  # None: to the root
    return Call("PUT", _memory(memory_id), _as(Memory), body=fields, write=True)


def delete_memory(memory_id: str) -> Call[Deleted | JobAccepted]:
    return Call("DELETE", _memory(memory_id), _done_or_job(Deleted), write=True)


# Grants (§3)


def create_grant(memory_id: str, principal: str, privileges: Sequence[str]) -> Call[Grant]:
    fields = {"principal": principal, "privileges": list(privileges)}
    return Call("POST", f"{_memory(memory_id)}/grants", _as(Grant), body=fields, write=True)


def list_grants(memory_id: str, limit: int | None, cursor: str | None) -> Call[Page[Grant]]:
    return Call("GET", f"{_memory(memory_id)}/grants", _as(Page[Grant]), params=query(limit=limit, cursor=cursor))


def delete_grant(memory_id: str, grant_id: str) -> Call[Deleted]:
    return Call("DELETE", f"{_memory(memory_id)}/grants/{segment(grant_id)}", _as(Deleted), write=True)


# Records (§4, §5)


def remember(
    memory_id: str,
    content: str | Mapping[str, Any],
    type: str,
    attributes: Mapping[str, Any] | None,
    references: Sequence[Mapping[str, Any]] | None,
    time: Mapping[str, Any] | None,
    path: str | None,
) -> Call[Record]:
    fields = body(type=type, content=content, attributes=attributes, time=time, path=path,
                  references=list(references) if references is not None else None)
    return Call("POST", f"{_memory(memory_id)}/records", _as(Record), body=fields, write=True)


def get_record(memory_id: str, record_id: str, as_of: str | None, include: Include | None) -> Call[Record]:
    return Call("GET", _record(memory_id, record_id), _as(Record), params=query(as_of=as_of, include=include))


def list_records(
    memory_id: str,
    types: Sequence[str] | None,
    filters: Mapping[str, Any] | None,
    include: Include | None,
    as_of: str | None,
    path: str | None,
    under: str | None,
    limit: int | None,
    cursor: str | None,
) -> Call[RecordPage]:
    params = query(types=types, filters=filters, include=include, as_of=as_of, path=path, under=under,
                   limit=limit, cursor=cursor)
    return Call("GET", f"{_memory(memory_id)}/records", _as(RecordPage), params=params)


def revise(
    memory_id: str,
    record_id: str,
    content: str | Mapping[str, Any] | None,
    type: str | None,
    attributes: Mapping[str, Any] | None,
    references: Sequence[Mapping[str, Any]] | None,
    time: Mapping[str, Any] | None,
    path: str | None,
) -> Call[Record]:
    fields = body(content=content, type=type, attributes=attributes, time=time, path=path,
                  references=list(references) if references is not None else None)
    return Call("PATCH", _record(memory_id, record_id), _as(Record), body=fields, write=True)


def forget(memory_id: str, record_id: str) -> Call[Record]:
    return Call("DELETE", _record(memory_id, record_id), _as(Record), write=True)


def history(memory_id: str, record_id: str, limit: int | None, cursor: str | None) -> Call[Page[Record]]:
    params = query(limit=limit, cursor=cursor)
    return Call("GET", f"{_record(memory_id, record_id)}/history", _as(Page[Record]), params=params)


def observe(memory_id: str, episodes: Sequence[Episode]) -> Call[ObserveResult]:
    given = [{"content": e} if isinstance(e, str) else dict(e) for e in episodes]
    return Call("POST", f"{_memory(memory_id)}/observe", _as(ObserveResult), body={"episodes": given}, write=True)


def get_job(memory_id: str, job_id: str) -> Call[Job]:
    return Call("GET", f"{_memory(memory_id)}/jobs/{segment(job_id)}", _as(Job))


# Recall (§6): a read, though a POST; no Idempotency-Key unless the caller gives one.


def recall(
    memory_id: str,
    query_text: str | None,
    text: str | None,
    filters: Mapping[str, Any] | None,
    types: Sequence[str] | None,
    limit: int | None,
    depth: int | None,
    as_of: str | None,
    include: Include | None,
    query_words: bool | None,
) -> Call[RecallAnswer]:
    fields = body(query=query_text, text=text, filters=filters, limit=limit, depth=depth, as_of=as_of,
                  include=include, query_words=query_words, types=list(types) if types is not None else None)
    return Call("POST", f"{_memory(memory_id)}/recall", _as(RecallAnswer), body=fields)


# Erase (§5.2)


def erase(
    memory_id: str, record_ids: Sequence[str] | None, filters: Mapping[str, Any] | None, under: str | None
) -> Call[EraseResult | JobAccepted]:
    fields = body(record_ids=list(record_ids) if record_ids is not None else None, filters=filters, under=under)
    return Call("POST", f"{_memory(memory_id)}/erase", _done_or_job(EraseResult), body=fields, write=True)


# Anything else the API offers, as JSON.


def raw(method: str, path: str, params: Mapping[str, Any] | None, json_body: Any) -> Call[Any]:
    method = method.upper()
    return Call(method, path if path.startswith("/") else "/" + path, lambda _status, parsed: parsed,
                params=query(**params) if params else None, body=json_body, write=method != "GET")
