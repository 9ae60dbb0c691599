"""Jobs: what a workflow that outlasted its request (erase, memory delete, the derivation after an
observe) has done since."""

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.get("/v1/memories/<memory_id>/jobs/<job_id>", summary="A job and what it has done", tags=["jobs"])
def handle_get_job(memory_id: str, job_id: str) -> Response[schemas.JobOut]:
    view = bootstrap.container().observing.job(caller_of(app), memory_id, job_id)
    return respond(presenters.job(view.job, view.records))


lambda_handler = make_handler(app)
