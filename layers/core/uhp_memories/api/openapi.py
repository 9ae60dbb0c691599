"""One OpenAPI document for the whole API, generated from the handlers (`make openapi`).

Each function's resolver describes its own routes; this merges them and adds what every route
shares: the x-api-key scheme, the error body, the Idempotency-Key header on writes, and each
operation's operationId from the routes table (api/routes.py), named for SDK generators rather than
after the handler's Python function (`handle_capabilities_v1_capabilities_get`)."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn

from uhp_memories import __version__
from uhp_memories.api.routes import FUNCTIONS, ROUTES
from uhp_memories.api.schemas import ErrorOut

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
ERROR_STATUSES = {
    "400": "Malformed request (invalid_request)",
    "401": "Missing or unknown API key (unauthenticated)",
    "403": "The caller sees the memory and lacks the privilege (memory_forbidden)",
    "404": "No such memory or record, or one the caller may not see",
    "409": "Stale version (memory_conflict), a run holds the memory (memory_busy), a request with this "
    "Idempotency-Key is still running (idempotency_in_progress), or already wrote and its answer was not kept "
    "(idempotency_key_committed, with written_ids)",
    "413": "A body larger than 6 MB (request_too_large)",
    "422": "Invalid fields, limits, JSON nested too deep, an unknown query parameter, or an unsupported operation "
    "(memory_invalid, memory_unsupported, idempotency_key_reused)",
    "429": "Throttled (rate_limited)",
    "503": "The provider did not answer in time (memory_unavailable): retry later, with the same Idempotency-Key",
}


def build() -> dict[str, Any]:
    merge = OpenAPIMerge(
        title="uhp-memories",
        version=__version__,
        description="The Harness Memories sub-protocol (UHP 2026-10-04), served by the native provider.",
        security_schemes={"apiKey": APIKey.model_validate({"name": "x-api-key", "in": APIKeyIn.header})},
        security=[{"apiKey": []}],
        on_conflict="error",
    )
    for function in FUNCTIONS:
        if function == "authorizer":
            continue
        module = importlib.import_module(f"functions.{function}.handler")
        merge.add_schema(json.loads(module.app.get_openapi_json_schema()))
    document = merge.get_openapi_schema()
    document = json.loads(json.dumps(document, default=_model_dump))
    _add_shared_parts(document)
    _name_operations(document)
    return document


def _name_operations(document: dict[str, Any]) -> None:
    """Every operation named from the routes table; one the table does not know fails the build."""
    names = {(route.path, route.method.lower()): route.operation_id for route in ROUTES}
    if len(set(names.values())) != len(names):
        raise ValueError("two routes share an operationId (api/routes.py)")
    for path, path_item in document.get("paths", {}).items():
        for method, operation in path_item.items():
            if (path, method) not in names:
                raise ValueError(f"{method.upper()} {path} is not in the routes table (api/routes.py)")
            operation["operationId"] = names[path, method]


def _model_dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def _add_shared_parts(document: dict[str, Any]) -> None:
    components = document.setdefault("components", {}).setdefault("schemas", {})
    error_schema = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(error_schema.pop("$defs", {}))
    components["ErrorOut"] = error_schema
    for path_item in document.get("paths", {}).values():
        for method, operation in path_item.items():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)  # Powertools' own validation body; ours is ErrorOut
            for status, description in ERROR_STATUSES.items():
                responses.setdefault(
                    status, {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}
                )
            if method.upper() in ("POST", "PUT", "PATCH", "DELETE"):
                operation.setdefault("parameters", []).append(
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "description": "Replays the first answer for a repeated write; another body is refused",
                        "schema": {"type": "string", "maxLength": 255},
                    }
                )


def main() -> int:
    json.dump(build(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
