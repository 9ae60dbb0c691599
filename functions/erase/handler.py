"""Erase (§5.2): remove content for good, and report what could not be reached. Needs delete; it is
a person's act and never an agent's tool. Runs the erase state machine; answers with the report when
it finishes within the request, with 202 and a job otherwise."""


from uhp_memories import bootstrap
from uhp_memories.api import presenters, responses, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond
from uhp_memories.api.errors import error_response

app = make_resolver()


@app.post(
    "/v1/memories/<memory_id>/erase", summary="Erase records for good", tags=["erase"],
    responses=responses.workflow(schemas.EraseOut, 200, "the erase"),
)
def handle_erase(memory_id: str, body: schemas.EraseIn):
    job = bootstrap.container().removal.erase(caller_of(app), memory_id, body.record_ids, body.filters, body.under)
    if job.status == "running":
        return respond(presenters.accepted(job), 202)
    out = presenters.job(job)
    if job.status == "failed":
        return error_response(
            503, "memory_unavailable", "the erase failed after its retries; the job reports what remains",
            job_id=job.id, unreachable=[u.model_dump() for u in out.unreachable or []],
        )
    return respond(
        schemas.EraseOut(
            job_id=job.id,
            erased=out.erased or [],
            erased_elsewhere=out.erased_elsewhere or 0,
            erased_files=out.erased_files or [],
            unreachable=out.unreachable or [],
        )
    )


lambda_handler = make_handler(app)
