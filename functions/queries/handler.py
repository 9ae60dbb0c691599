"""Named queries (§6.4) and free queries (§6.5)."""

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond
from uhp_memories.api.errors import JSON
from uhp_memories.domain.queries.model import NamedQuery

app = make_resolver()
RECALL_SHAPE: dict[int, Any] = {
    200: {"description": "§6.3", "content": {"application/json": {"model": schemas.RecallOut}}}
}


def _out(query: NamedQuery) -> schemas.NamedQueryOut:
    return schemas.NamedQueryOut(
        name=query.name,
        memory_id=query.memory_id,
        description=query.description,
        params=query.params,
        requires=query.requires,
        language=query.language,
        body=query.body,
        updated_by=query.updated_by,
        updatedAt=query.updated_at,
    )


@app.get("/v1/memories/<memory_id>/queries", summary="The named queries the caller may run here", tags=["queries"])
def handle_list_queries(memory_id: str) -> Response[schemas.NamedQueryList]:
    queries = bootstrap.container().queries.list(caller_of(app), memory_id)
    return respond(schemas.NamedQueryList(data=[_out(q) for q in queries]))


@app.put("/v1/memories/<memory_id>/queries/<name>", summary="Define or replace a named query", tags=["queries"])
def handle_define_query(memory_id: str, name: str, body: schemas.NamedQueryIn) -> Response[schemas.NamedQueryOut]:
    query = bootstrap.container().queries.define(caller_of(app), memory_id, name, body.model_dump())
    return respond(_out(query))


@app.post(
    "/v1/memories/<memory_id>/queries/<name>", summary="Run a named query", tags=["queries"], responses=RECALL_SHAPE
)
def handle_run_query(memory_id: str, name: str, body: schemas.QueryRunIn):  # §6.3, `parent` left out when absent
    answer = bootstrap.container().queries.run(caller_of(app), memory_id, name, body.params)
    return Response(status_code=200, content_type=JSON, body=json.dumps(presenters.recall(answer)))


@app.post("/v1/memories/<memory_id>/query", summary="Run a free query", tags=["queries"], responses=RECALL_SHAPE)
def handle_free_query(memory_id: str, body: schemas.FreeQueryIn):  # §6.3, `parent` left out when absent
    answer = bootstrap.container().queries.free(
        caller_of(app), memory_id, body.language, body.statement, body.params, body.limit
    )
    return Response(status_code=200, content_type=JSON, body=json.dumps(presenters.recall(answer)))


lambda_handler = make_handler(app)
