"""Observe (§5.1): append raw episodes. They are kept as records at once. Where the stage derives
(domain/observing/service.py), the answer is 202 with the job deriving from them (its records, episodes
included, at GET .../jobs/{job}); otherwise 200 with the episodes written."""

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import inputs, presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.post("/v1/memories/<memory_id>/observe", summary="Append episodes", tags=["observe"])
def handle_observe(memory_id: str, body: schemas.ObserveIn) -> Response[schemas.ObserveOut | schemas.JobAccepted]:
    episodes = [inputs.record_input("episode", e.content, e.attributes, e.time, e.references) for e in body.episodes]
    observed = bootstrap.container().observing.observe(caller_of(app), memory_id, episodes)
    if observed.job is not None:
        return respond(presenters.accepted(observed.job), 202)
    return respond(schemas.ObserveOut(records=[presenters.record(v) for v in observed.records]))


lambda_handler = make_handler(app)
