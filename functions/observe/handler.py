"""Observe (§5.1): append raw episodes. The native provider derives nothing and keeps every episode,
so it answers 200 with the records at once and never makes a job."""

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import inputs, presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.post("/v1/memories/<memory_id>/observe", summary="Append episodes", tags=["observe"])
def handle_observe(memory_id: str, body: schemas.ObserveIn) -> Response[schemas.ObserveOut]:
    episodes = [inputs.record_input("episode", e.content, e.attributes, e.time, e.references) for e in body.episodes]
    views = bootstrap.container().records.observe(caller_of(app), memory_id, episodes)
    return respond(schemas.ObserveOut(records=[presenters.record(v) for v in views]))


lambda_handler = make_handler(app)
