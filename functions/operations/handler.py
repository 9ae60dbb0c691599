"""Type operations (§8): run an operation of a record's type on the record."""

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.post(
    "/v1/memories/<memory_id>/records/<record_id>/operations/<name>",
    summary="Run an operation of the record's type",
    tags=["records"],
)
def handle_operation(
    memory_id: str, record_id: str, name: str, body: schemas.OperationRunIn
) -> Response[schemas.OperationResultOut]:
    answer = bootstrap.container().operations.run(caller_of(app), memory_id, record_id, name, body.input)
    return respond(presenters.operation(answer))


lambda_handler = make_handler(app)
