"""One error body for the whole API: {"error": {"code", "message", ...}} with the codes of §12."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

JSON = "application/json"


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
