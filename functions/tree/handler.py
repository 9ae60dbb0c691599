"""File memory's reads (docs/file-memory.md): the file tree without content, the change journal, and
grep. The writes are the records function's (a record with a `path`)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.get("/v1/memories/<memory_id>/paths", summary="The memory's files, without content, by path", tags=["files"])
def handle_list_paths(
    memory_id: str,
    under: Annotated[str, Query(description='a directory: "" (the root) or a path ending in "/"')] = "",
    limit: Annotated[int | None, Query(description="1 to 1000, default 100")] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[schemas.PathList]:
    entries, next_cursor = bootstrap.container().tree.paths(caller_of(app), memory_id, under, limit, cursor)
    data = [
        schemas.PathOut(
            path=e.path, record_id=e.record_id, bytes=e.bytes, description=e.description, written_at=e.written_at,
            written_by=schemas.WrittenBy(**e.written_by),
        )
        for e in entries
    ]
    return respond(schemas.PathList(data=data, next_cursor=next_cursor))


@app.get("/v1/memories/<memory_id>/changes", summary="The paths changed after a cursor", tags=["files"])
def handle_changes(
    memory_id: str,
    cursor: Annotated[str | None, Query(description="a cursor an earlier answer gave; none: start over")] = None,
    limit: Annotated[int | None, Query(description="journal entries per answer, 1 to 1000")] = None,
) -> Response[schemas.ChangesOut]:
    answer = bootstrap.container().tree.changes(caller_of(app), memory_id, cursor, limit)
    return respond(
        schemas.ChangesOut(
            changes=[schemas.PathChangeOut(path=c.path, record_id=c.record_id) for c in answer.changes],
            cursor=answer.cursor,
            more=answer.more,
            full_resync=answer.full_resync,
        )
    )


@app.post("/v1/memories/<memory_id>/grep", summary="Lines of the memory's files matching a pattern", tags=["files"])
def handle_grep(memory_id: str, body: schemas.GrepIn) -> Response[schemas.GrepOut]:
    found = bootstrap.container().tree.grep(
        caller_of(app), memory_id, body.pattern, regex=body.regex, case_sensitive=body.case_sensitive,
        under=body.under, limit=body.limit,
    )
    return respond(
        schemas.GrepOut(
            matches=[
                schemas.GrepMatchOut(path=m.path, line=m.line, text=m.text, record_id=m.record_id)
                for m in found.matches
            ],
            more=found.more,
            degraded=["grep:scan_capped"] if found.capped else [],
        )
    )


lambda_handler = make_handler(app)
