"""Files (§7): upload (small bodies inline as multipart, large ones by presigned S3 PUT), file
metadata, and a file record's bytes by version."""

import base64
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from uhp_memories import bootstrap
from uhp_memories.api import multipart, responses, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.files.model import StoredFile, Upload, content_disposition

app = make_resolver()


def _out(stored: StoredFile, upload: Upload | None = None) -> schemas.FileOut:
    return schemas.FileOut(
        id=stored.id,
        name=stored.name,
        bytes=stored.bytes,
        media_type=stored.media_type,
        status=stored.status,  # type: ignore[arg-type]
        createdAt=stored.created_at,
        upload=schemas.UploadOut(**upload.__dict__) if upload else None,
    )


@app.post(
    "/v1/files",
    summary="Upload a file: multipart/form-data with a part named file (up to 4 MiB), or JSON "
    "{name, media_type, bytes} for a presigned S3 PUT",
    tags=["files"],
    status_code=201,
)
def handle_upload_file() -> Response[schemas.FileOut]:
    event = app.current_event
    caller = caller_of(app)
    files = bootstrap.container().files
    content_type = event.headers.get("content-type", "")
    if content_type.startswith("multipart/"):
        raw = event.body or ""
        body = base64.b64decode(raw) if event.is_base64_encoded else raw.encode("utf-8", "surrogateescape")
        part = multipart.parse(content_type, body).get("file")
        if part is None:
            raise MemoryInvalid("the multipart body needs a part named file")
        stored = files.upload(caller, part.filename or "file", part.media_type, part.data)
        return respond(_out(stored), 201)
    request = schemas.FileCreate.model_validate(event.json_body or {})
    stored, upload = files.start_upload(caller, request.name, request.media_type, request.bytes)
    return respond(_out(stored, upload), 201)


@app.get("/v1/files/<file_id>", summary="A file's metadata (its uploader only)", tags=["files"])
def handle_get_file(file_id: str) -> Response[schemas.FileOut]:
    return respond(_out(bootstrap.container().files.get(caller_of(app), file_id)))


@app.get(
    "/v1/memories/<memory_id>/records/<record_id>/content",
    summary="A file record's bytes (a redirect to a presigned address when large)",
    tags=["files"],
    responses=responses.file_content(),
)
def handle_record_content(
    memory_id: str,
    record_id: str,
    version: Annotated[str | None, Query(description="a file version of this record")] = None,
    include: Annotated[str, Query(description="active (default): a forgotten record's bytes are not found; "
                                              "all: history's view, which still reads them")] = "active",
):  # no return model: the body is the file's bytes

    content = bootstrap.container().files.content(caller_of(app), memory_id, record_id, version, include)
    if content.redirect:
        return Response(status_code=302, headers={"Location": content.redirect}, body="")
    return Response(
        status_code=200,
        content_type=content.media_type,
        body=content.data,
        headers={"Content-Disposition": content_disposition(content.name)},
    )


lambda_handler = make_handler(app)
