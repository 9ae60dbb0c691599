"""Records (§4, §5): remember, list, get, revise, forget, history."""

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import inputs, json_limits, presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond, respond_as_shown
from uhp_memories.api.errors import JSON

app = make_resolver()


@app.post(
    "/v1/memories/<memory_id>/records", summary="Remember: write one record as stated", tags=["records"],
    status_code=201,
)
def handle_remember(memory_id: str, body: schemas.RecordCreate) -> Response[schemas.RecordOut]:
    given = inputs.record_input(body.type, body.content, body.attributes, body.time, body.references, body.path)
    view = bootstrap.container().records.remember(caller_of(app), memory_id, given, inputs.write_terms(body))
    return respond(presenters.record(view), 201)


LISTING_SHAPE: dict[int, Any] = {
    200: {"description": "a page, with parent and children (§6.1)",
          "content": {"application/json": {"model": schemas.RecordListing}}}
}


@app.get(
    "/v1/memories/<memory_id>/records", summary="List records; filters; as_of", tags=["records"],
    responses=LISTING_SHAPE,
)
def handle_list_records(
    memory_id: str,
    types: Annotated[str | None, Query(description="comma-separated record types")] = None,
    filters: Annotated[str | None, Query(description="a filter as JSON, as in recall")] = None,
    include: Annotated[str, Query(description="active (default) or all")] = "active",
    as_of: Annotated[str | None, Query(description="an RFC 3339 time or a snapshot name")] = None,
    limit: Annotated[int | None, Query(description="1 to 100, default 20")] = None,
    cursor: Annotated[str | None, Query()] = None,
    path: Annotated[str | None, Query(description="only the file at this path")] = None,
    under: Annotated[str | None, Query(description='only the files under this directory ("" or ending in "/")')] = None,
):  # §6.1: `parent` left out when absent, as in recall
    parsed_filters = json_limits.loads_query(filters, "filters") if filters is not None else None
    page = bootstrap.container().records.list(
        caller_of(app),
        memory_id,
        types=[t for t in (types or "").split(",") if t] or None,
        filters=parsed_filters,
        include=include,
        as_of=as_of,
        limit=limit,
        cursor=cursor,
        path=path,
        under=under,
    )
    listing = json.dumps(presenters.record_listing(page), separators=(",", ":"))  # compact, as Powertools answers
    return Response(status_code=200, content_type=JSON, body=listing)


READ_SHAPE: dict[int, Any] = {
    200: {"description": "the record, with its memory's parent and children (§6.1)",
          "content": {"application/json": {"model": schemas.RecordRead}}}
}


@app.get(
    "/v1/memories/<memory_id>/records/<record_id>", summary="Get one record; as_of", tags=["records"],
    responses=READ_SHAPE,
)
def handle_get_record(
    memory_id: str,
    record_id: str,
    as_of: Annotated[str | None, Query(description="an RFC 3339 time or a snapshot name")] = None,
    include: Annotated[str, Query(description="active or all: the same answer (an id names its version)")] = "active",
):  # §6.1: `parent` left out when absent, as in a listing
    view = bootstrap.container().records.get(caller_of(app), memory_id, record_id, as_of, include)
    return respond_as_shown(presenters.record_read(view))


# A revise or forget answers the record to a reader, and to a caller that may only write what it
# sent and the server's stamps (RecordWritten).
WRITTEN_SHAPE: dict[int, Any] = {
    200: {"description": "the record (RecordOut); to a caller without read, RecordWritten",
          "content": {"application/json": {"model": schemas.RecordOut | schemas.RecordWritten}}}
}


def _written(view: Any) -> Response:
    return respond_as_shown(presenters.written_record(view))


@app.patch(
    "/v1/memories/<memory_id>/records/<record_id>", summary="Revise: append a version", tags=["records"],
    responses=WRITTEN_SHAPE,
)
def handle_revise_record(memory_id: str, record_id: str, body: schemas.RecordRevise):
    changes = inputs.revision(body)
    view = bootstrap.container().records.revise(caller_of(app), memory_id, record_id, changes,
                                                inputs.write_terms(body))
    return _written(view)


@app.delete(
    "/v1/memories/<memory_id>/records/<record_id>",
    summary="Forget: close a record (an optional JSON body carries conditions and origin)",
    tags=["records"],
    responses=WRITTEN_SHAPE,
)
def handle_forget_record(memory_id: str, record_id: str):
    raw = app.current_event.body
    body = schemas.RecordForget.model_validate(app.current_event.json_body) if raw else None
    view = bootstrap.container().records.forget(caller_of(app), memory_id, record_id, inputs.write_terms(body))
    return _written(view)


@app.get(
    "/v1/memories/<memory_id>/records/<record_id>/history", summary="Every version of a record", tags=["records"]
)
def handle_record_history(
    memory_id: str,
    record_id: str,
    limit: Annotated[int | None, Query(description="1 to 100, default 20")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[schemas.RecordList]:
    page = bootstrap.container().records.history(caller_of(app), memory_id, record_id, limit, cursor)
    return respond(presenters.record_page(page))


lambda_handler = make_handler(app)
