"""Consolidation runs (§9.2): visible, bounded, reversible background passes over one memory."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import presenters, responses, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()
RUNS = "/v1/memories/<memory_id>/consolidations"


@app.post(
    RUNS, summary="Start a consolidation pass now (budget optional)", tags=["consolidations"],
    responses={
        201: responses.model("the run, finished within the request", schemas.ConsolidationOut),
        202: responses.model("the run, still running: read it at its own route", schemas.ConsolidationOut),
    },
)
def handle_start_consolidation(memory_id: str, body: schemas.ConsolidationStart):
    budget = body.budget.limit if body.budget else None
    run = bootstrap.container().consolidation.start(caller_of(app), memory_id, budget)
    return respond(presenters.consolidation(run), 202 if run.status in ("queued", "running") else 201)


@app.get(RUNS, summary="Consolidation runs, newest first", tags=["consolidations"])
def handle_list_consolidations(
    memory_id: str,
    limit: Annotated[int | None, Query(description="1 to 100, default 20")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[schemas.ConsolidationList]:
    page = bootstrap.container().consolidation.list(caller_of(app), memory_id, limit, cursor)
    return respond(
        schemas.ConsolidationList(data=[presenters.consolidation(r) for r in page.items], next_cursor=page.next_cursor)
    )


@app.get(RUNS + "/<run_id>", summary="One consolidation run", tags=["consolidations"])
def handle_get_consolidation(memory_id: str, run_id: str) -> Response[schemas.ConsolidationOut]:
    return respond(presenters.consolidation(bootstrap.container().consolidation.get(caller_of(app), memory_id, run_id)))


@app.get(RUNS + "/<run_id>/changes", summary="The records a run wrote, superseded or forgot", tags=["consolidations"])
def handle_consolidation_changes(memory_id: str, run_id: str) -> Response[schemas.ChangeList]:
    container = bootstrap.container()
    caller = caller_of(app)
    run = container.consolidation.get(caller, memory_id, run_id)
    changes = []
    for change in run.changes:
        view = container.records.find_view(caller, memory_id, change.record_id)
        record = presenters.record(view) if view else None
        changes.append(schemas.ChangeOut(record_id=change.record_id, action=change.action, record=record))  # type: ignore[arg-type]
    return respond(schemas.ChangeList(data=changes))


@app.post(RUNS + "/<run_id>/revert", summary="Revert a run: what it forgot is current again", tags=["consolidations"])
def handle_revert_consolidation(memory_id: str, run_id: str) -> Response[schemas.ConsolidationOut]:
    run = bootstrap.container().consolidation.revert(caller_of(app), memory_id, run_id)
    return respond(presenters.consolidation(run))


SCHEDULE = "/v1/memories/<memory_id>/consolidation-schedule"


@app.put(SCHEDULE, summary="Run consolidation on a schedule (replaces the memory's schedule)", tags=["consolidations"])
def handle_set_schedule(memory_id: str, body: schemas.ScheduleIn) -> Response[schemas.ScheduleOut]:
    budget = body.budget.limit if body.budget else None
    schedule = bootstrap.container().schedules.set(caller_of(app), memory_id, body.every_minutes, budget)
    return respond(presenters.schedule(schedule))


@app.get(SCHEDULE, summary="The memory's consolidation schedule", tags=["consolidations"])
def handle_get_schedule(memory_id: str) -> Response[schemas.ScheduleOut]:
    return respond(presenters.schedule(bootstrap.container().schedules.get(caller_of(app), memory_id)))


@app.delete(SCHEDULE, summary="Stop running consolidation on a schedule", tags=["consolidations"])
def handle_clear_schedule(memory_id: str) -> Response[schemas.Deleted]:
    bootstrap.container().schedules.clear(caller_of(app), memory_id)
    return respond(schemas.Deleted(id=memory_id, object="memory.consolidation_schedule"))


lambda_handler = make_handler(app)
