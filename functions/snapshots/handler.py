"""Snapshots (§5.3): a name for an instant, readable with as_of."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.post("/v1/memories/<memory_id>/snapshots", summary="Name this instant", tags=["snapshots"], status_code=201)
def handle_create_snapshot(memory_id: str, body: schemas.SnapshotCreate) -> Response[schemas.SnapshotOut]:
    snapshot = bootstrap.container().records.create_snapshot(caller_of(app), memory_id, body.name, body.message)
    return respond(presenters.snapshot(snapshot), 201)


@app.get("/v1/memories/<memory_id>/snapshots", summary="List a memory's snapshots", tags=["snapshots"])
def handle_list_snapshots(
    memory_id: str,
    limit: Annotated[int | None, Query(description="1 to 100, default 20")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[schemas.SnapshotList]:
    page = bootstrap.container().records.list_snapshots(caller_of(app), memory_id, limit, cursor)
    snapshots = [presenters.snapshot(s) for s in page.items]
    return respond(schemas.SnapshotList(data=snapshots, next_cursor=page.next_cursor))


lambda_handler = make_handler(app)
