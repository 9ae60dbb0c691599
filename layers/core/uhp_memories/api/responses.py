"""The answers a route gives besides its one model, as Powertools' `responses=` takes them, so the
OpenAPI document (`make openapi`) lists what the API really answers: a workflow's 202 with a job, a
redirect, a 503 that names a job. The errors every route shares are added by api/openapi.py."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from uhp_memories.api import schemas

JSON = "application/json"


def model(description: str, shape: Any) -> Any:  # an OpenAPIResponse of Powertools
    return {"description": description, "content": {JSON: {"model": shape}}}


ERROR = schemas.ErrorOut


def workflow(done: type[BaseModel], done_status: int, what: str) -> dict[int, Any]:
    """A request that runs a workflow and waits for it (docs/decisions.md, "Erase and workflows"):
    `done_status` with its answer when the workflow finished within the request, 202 with a job
    otherwise, 503 naming the job when the workflow failed after its retries."""
    return {
        done_status: model(f"{what} finished within the request", done),
        202: model(f"{what} still runs: read the job at GET /v1/memories/{{id}}/jobs/{{job}}", schemas.JobAccepted),
        503: model(f"{what} failed after its retries (memory_unavailable); error.job_id names the job", ERROR),
    }


def file_content() -> dict[int, Any]:
    """A file record's bytes: inline (the file's own media type) or a redirect to a presigned GET."""
    return {
        200: {"description": "the file's bytes, in its own media type", "content": {"*/*": {}}},
        302: {"description": "a presigned address of the bytes (large files), valid five minutes",
              "headers": {"Location": {"schema": {"type": "string"}}}},
    }
