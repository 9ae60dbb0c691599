"""Memories (§2): the tree. One Lambda for /v1/memories and /v1/memories/{memory_id}."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import presenters, responses, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond
from uhp_memories.api.errors import error_response

app = make_resolver()


@app.post("/v1/memories", summary="Create a memory", tags=["memories"], status_code=201)
def handle_create_memory(body: schemas.MemoryCreate) -> Response[schemas.MemoryOut]:
    view = bootstrap.container().memories.create(caller_of(app), **body.model_dump())
    return respond(presenters.memory(view), 201)


@app.get("/v1/memories", summary="List entry points, one level, or every readable descendant", tags=["memories"])
def handle_list_memories(
    parent: Annotated[str | None, Query(description="the memory whose direct children to list")] = None,
    ancestor: Annotated[str | None, Query(description="list every descendant of this memory")] = None,
    limit: Annotated[int | None, Query(description="1 to 100, default 20")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[schemas.MemoryList]:
    page = bootstrap.container().memories.list(
        caller_of(app), parent=parent, ancestor=ancestor, limit=limit, cursor=cursor
    )
    return respond(presenters.memory_page(page))


@app.get("/v1/memories/<memory_id>", summary="Get a memory", tags=["memories"])
def handle_get_memory(memory_id: str) -> Response[schemas.MemoryOut]:
    return respond(presenters.memory(bootstrap.container().memories.get(caller_of(app), memory_id)))


@app.put("/v1/memories/<memory_id>", summary="Rename, describe, restrict or move a memory", tags=["memories"])
def handle_update_memory(memory_id: str, body: schemas.MemoryUpdate) -> Response[schemas.MemoryOut]:
    changes = {field: getattr(body, field) for field in body.model_fields_set}
    view = bootstrap.container().memories.update(caller_of(app), memory_id, changes)
    return respond(presenters.memory(view))


@app.delete(
    "/v1/memories/<memory_id>", summary="Delete a memory, its records and its descendants", tags=["memories"],
    responses=responses.workflow(schemas.Deleted, 200, "the delete"),
)
def handle_delete_memory(memory_id: str):
    """Hidden at once; removed by the delete workflow (202 with a job when it outlasts the request)."""
    job = bootstrap.container().removal.delete_memory(caller_of(app), memory_id)
    if job.status == "running":
        return respond(presenters.accepted(job), 202)
    if job.status == "failed":
        return error_response(
            503, "memory_unavailable", "the memory is hidden but its removal failed; the job reports it", job_id=job.id
        )
    return respond(schemas.Deleted(id=memory_id, object="memory"))



@app.put(
    "/v1/memories/<memory_id>/prime",
    summary="Replace the records prime always places from this memory (the owner's act: needs delete)",
    tags=["memories"],
)
def handle_pin_for_prime(memory_id: str, body: schemas.PinsIn) -> Response[schemas.PinsOut]:
    pinned = bootstrap.container().prime.pin(caller_of(app), memory_id, body.record_ids)
    return respond(presenters.pins(memory_id, pinned))


@app.get("/v1/memories/<memory_id>/prime", summary="The records prime places from this memory", tags=["memories"])
def handle_pinned_for_prime(memory_id: str) -> Response[schemas.PinsOut]:
    return respond(presenters.pins(memory_id, bootstrap.container().prime.pinned(caller_of(app), memory_id)))


lambda_handler = make_handler(app)
