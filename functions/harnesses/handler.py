"""Attaching memories to a harness (§9): PUT replaces the list (attaching is granting), GET reads it;
its owners (who may do so beside the harness itself). Prime and turns (§9.1): GET .../prime places the
attached memories' pinned records within a token budget; POST .../turns sends a turn to the default
memory as episodes. Only the harness and its owners reach any of these (domain/agents/harnesses.py)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond
from uhp_memories.domain.agents.harnesses import Attachment
from uhp_memories.domain.agents.model import Notice, ToolRun, Turn
from uhp_memories.tokens.wordpiece import TOKENIZER_NAME

app = make_resolver()


def _out(
    harness_id: str, attachments: list[Attachment], notices: list[Notice] | None = None, hidden: int = 0
) -> schemas.AttachmentsOut:
    return schemas.AttachmentsOut(
        harness_id=harness_id,
        memories=[
            schemas.AttachmentOut(memory_id=a.memory_id, access=a.access, default=a.default) for a in attachments
        ],
        hidden=hidden,
        notices=presenters.notices(notices or []),
    )


@app.put(
    "/v1/harnesses/<harness_id>/memories",
    summary="Replace the memories a harness works with; an empty list detaches every memory",
    tags=["harnesses"],
)
def handle_attach_memories(harness_id: str, body: schemas.AttachmentsIn) -> Response[schemas.AttachmentsOut]:
    entries = [Attachment(e.memory_id, e.access, e.default) for e in body.memories]
    attached = bootstrap.container().harnesses.attach_with_notices(caller_of(app), harness_id, entries)
    return respond(_out(harness_id, attached.memories, attached.notices))


@app.get("/v1/harnesses/<harness_id>/memories", summary="The memories a harness works with", tags=["harnesses"])
def handle_attached_memories(harness_id: str) -> Response[schemas.AttachmentsOut]:
    listed = bootstrap.container().harnesses.listed(caller_of(app), harness_id)
    return respond(_out(harness_id, listed.memories, hidden=listed.hidden))


def _owners(harness_id: str, owners: tuple[str, ...]) -> schemas.OwnersOut:
    return schemas.OwnersOut(harness_id=harness_id, owners=list(owners))


@app.put(
    "/v1/harnesses/<harness_id>/owners",
    summary="Replace who owns a harness beside itself (who may change its memories, prime and turns)",
    tags=["harnesses"],
)
def handle_set_owners(harness_id: str, body: schemas.OwnersIn) -> Response[schemas.OwnersOut]:
    owners = bootstrap.container().harnesses.set_owners(caller_of(app), harness_id, body.owners)
    return respond(_owners(harness_id, owners))


@app.get("/v1/harnesses/<harness_id>/owners", summary="Who owns a harness beside itself", tags=["harnesses"])
def handle_owners(harness_id: str) -> Response[schemas.OwnersOut]:
    return respond(_owners(harness_id, bootstrap.container().harnesses.owners(caller_of(app), harness_id)))



@app.get(
    "/v1/harnesses/<harness_id>/prime",
    summary="What to place in the agent's instructions: each attached memory and its pinned records, within a budget",
    tags=["harnesses"],
)
def handle_prime(
    harness_id: str,
    budget: Annotated[int | None, Query(description="tokens (MiniLM's tokenizer), 1 to 20000, default 2000")] = None,
    memory: Annotated[str | None, Query(description="§9 metadata.memory: the session's memory, primed too")] = None,
) -> Response[schemas.PrimeOut]:
    container = bootstrap.container()
    caller = container.harnesses.session_caller(caller_of(app), memory, harness_id)
    answer = container.prime.prime(caller, harness_id, budget)
    return respond(presenters.prime(answer, TOKENIZER_NAME, container.harnesses.session_notices(caller, harness_id)))


@app.post(
    "/v1/harnesses/<harness_id>/turns",
    summary="Send a turn to the harness's default memory as episodes",
    tags=["harnesses"],
    status_code=201,
)
def handle_turn(harness_id: str, body: schemas.TurnIn) -> Response[schemas.TurnOut]:
    turn = Turn(
        asked=body.asked,
        answered=body.answered,
        tools=[ToolRun(t.name, t.input, t.output) for t in body.tools],
        prime_id=body.prime_id,
    )
    container = bootstrap.container()
    caller = container.harnesses.session_caller(caller_of(app), body.memory, harness_id)
    answer = container.turns.observe_turn(caller, harness_id, turn)
    return respond(presenters.turn(answer, harness_id, container.harnesses.session_notices(caller, harness_id)), 201)


lambda_handler = make_handler(app)
