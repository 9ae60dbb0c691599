"""Attaching memories to a harness (§9): PUT replaces the list (attaching is granting), GET reads it."""

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond
from uhp_memories.domain.harnesses import Attachment

app = make_resolver()


def _out(harness_id: str, attachments: list[Attachment]) -> schemas.AttachmentsOut:
    return schemas.AttachmentsOut(
        harness_id=harness_id,
        memories=[
            schemas.AttachmentOut(memory_id=a.memory_id, access=a.access, default=a.default) for a in attachments
        ],
    )


@app.put(
    "/v1/harnesses/<harness_id>/memories",
    summary="Replace the memories a harness works with; an empty list detaches every memory",
    tags=["harnesses"],
)
def handle_attach_memories(harness_id: str, body: schemas.AttachmentsIn) -> Response[schemas.AttachmentsOut]:
    entries = [Attachment(e.memory_id, e.access, e.default) for e in body.memories]
    attached = bootstrap.container().harnesses.attach(caller_of(app), harness_id, entries)
    return respond(_out(harness_id, attached))


@app.get("/v1/harnesses/<harness_id>/memories", summary="The memories a harness works with", tags=["harnesses"])
def handle_attached_memories(harness_id: str) -> Response[schemas.AttachmentsOut]:
    return respond(_out(harness_id, bootstrap.container().harnesses.attached(caller_of(app), harness_id)))


lambda_handler = make_handler(app)
