"""Recall (§6): one memory by meaning, words and fields, with where to go next."""

import json

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import inputs, observability, presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver
from uhp_memories.api.errors import JSON

app = make_resolver()


@app.post(
    "/v1/memories/<memory_id>/recall",
    summary="Recall: query, text and filters, fused; why, parent, children, degraded, abstain",
    tags=["recall"],
    responses={200: {"description": "§6.3", "content": {"application/json": {"model": schemas.RecallOut}}}},
)
def handle_recall(memory_id: str, body: schemas.RecallIn):  # the body is §6.3, with `parent` left out when absent
    answer = bootstrap.container().recall.recall(caller_of(app), memory_id, inputs.recall_input(body))
    observability.recalled(answer.degraded)  # the degraded-recall alarm's metric (infra/constructs/monitoring.py)
    return Response(status_code=200, content_type=JSON, body=json.dumps(presenters.recall(answer)))


lambda_handler = make_handler(app)
