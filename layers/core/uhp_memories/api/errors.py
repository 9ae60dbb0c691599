"""One error body for the whole API: {"error": {"code", "message", ...}} with the codes of §12."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from uhp_memories.domain.errors import DomainError

JSON = "application/json"

# Error code -> HTTP status, for every code a domain error carries (§12) and the resolver's own. The
# only place a status is chosen for an error: the domain raises codes, and an unknown code is a 500.
HTTP_STATUS: dict[str, int] = {
    "invalid_request": 400,
    "unauthenticated": 401,
    "memory_forbidden": 403,
    "not_found": 404,  # no such route
    "memory_not_found": 404,
    "memory_record_not_found": 404,
    "memory_grant_not_found": 404,
    "memory_job_not_found": 404,
    "memory_query_not_found": 404,
    "memory_consolidation_not_found": 404,
    "memory_schedule_not_found": 404,
    "memories_not_attached": 404,
    "file_not_found": 404,
    "memory_conflict": 409,
    "memory_busy": 409,
    "idempotency_key_committed": 409,  # a retry whose key already wrote, its answer not kept (docs/decisions.md)
    "idempotency_in_progress": 409,  # a request with this Idempotency-Key is still running
    "request_too_large": 413,
    "memory_invalid": 422,
    "idempotency_key_reused": 422,  # the same Idempotency-Key with another request (api/app.py make_handler)
    "memory_unsupported": 422,
    "internal_error": 500,
    "memory_unavailable": 503,  # not connected, or this server's own storage or search did not answer
    "memory_unavailable:provider_failed": 502,  # the memory's provider did not answer, or answered an error
}


def status_of(code: str, cause: str | None = None) -> int:
    """The status of a code, or of one cause of it where the table tells causes apart."""
    if cause is not None and f"{code}:{cause}" in HTTP_STATUS:
        return HTTP_STATUS[f"{code}:{cause}"]
    return HTTP_STATUS.get(code, 500)


def code_response(code: str, message: str, **details: Any) -> Response:
    """The error answer for a code, with the status the table gives it."""
    return error_response(status_of(code), code, message, **details)


def domain_error_response(error: DomainError) -> Response:
    """A domain error as the API answers it: its code, its message and its details (a conflict's
    current_record_id), with its code's status (its cause's, where the table tells causes apart)."""
    return error_response(status_of(error.code, error.cause), error.code, error.message, **error.details)


def error_response(status: int, code: str, message: str, **details: Any) -> Response:
    body = {"error": {"code": code, "message": message, **details}}
    return Response(status_code=status, content_type=JSON, body=json.dumps(body))


def error_dict(status: int, code: str, message: str) -> dict[str, Any]:
    """The same body as a raw API Gateway proxy answer (for code outside the resolver)."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON},
        "body": json.dumps({"error": {"code": code, "message": message}}),
        "isBase64Encoded": False,
    }


def describe_validation_errors(errors: list[dict[str, Any]]) -> str:
    """A short, human message naming each bad field; never echoes the value sent."""
    parts = []
    for error in errors[:5]:
        loc = [str(p) for p in error.get("loc", ()) if p not in ("body", "query", "path")]
        where = ".".join(loc) or "request"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request is invalid"


# Every 401 says how to authenticate (RFC 9110 §11.6.1; the MCP authorization spec asks it of /mcp): an
# API key in x-api-key. API Gateway's UNAUTHORIZED responses carry it (infra/constructs/api.py), and so
# do the local gateway's (local/gateway.py).
CHALLENGE = {"WWW-Authenticate": 'ApiKey realm="uhp-memories", header="x-api-key"'}
