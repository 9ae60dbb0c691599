"""Type operations (§8): run an operation of a record's type on the record."""

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond_as_shown

app = make_resolver()


@app.post(
    "/v1/memories/<memory_id>/records/<record_id>/operations/<name>",
    summary="Run an operation of the record's type",
    tags=["records"],
    # A write's record is RecordOut to a reader, RecordWritten to a write-only caller: answered as shown,
    # so the handler declares no return model (Powertools would validate the answer by it).
    responses={200: {"description": "the operation's answer",
                     "content": {"application/json": {"model": schemas.OperationResultOut}}}},
)
def handle_operation(memory_id: str, record_id: str, name: str, body: schemas.OperationRunIn):
    answer = bootstrap.container().operations.run(caller_of(app), memory_id, record_id, name, body.input)
    return respond_as_shown(presenters.operation(answer))


lambda_handler = make_handler(app)
