"""Grants (§3.1): who holds what on a memory."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.get("/v1/memories/<memory_id>/grants", summary="List the grants that reach a memory", tags=["grants"])
def handle_list_grants(
    memory_id: str,
    limit: Annotated[int | None, Query(description="1 to 100, default 20")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[schemas.GrantList]:
    page = bootstrap.container().grants.page(caller_of(app), memory_id, limit, cursor)
    return respond(schemas.GrantList(data=[presenters.grant(g) for g in page.items], next_cursor=page.next_cursor))


@app.post(
    "/v1/memories/<memory_id>/grants", summary="Grant privileges on a memory", tags=["grants"], status_code=201
)
def handle_create_grant(memory_id: str, body: schemas.GrantCreate) -> Response[schemas.GrantOut]:
    grant = bootstrap.container().grants.create(caller_of(app), memory_id, body.principal, body.privileges)
    return respond(presenters.grant(grant), 201)


@app.delete("/v1/memories/<memory_id>/grants/<grant_id>", summary="Revoke a grant", tags=["grants"])
def handle_delete_grant(memory_id: str, grant_id: str) -> Response[schemas.Deleted]:
    bootstrap.container().grants.delete(caller_of(app), memory_id, grant_id)
    return respond(schemas.Deleted(id=grant_id, object="memory.grant"))


lambda_handler = make_handler(app)
