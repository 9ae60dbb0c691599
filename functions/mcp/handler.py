"""MCP (§9.1): POST /mcp, streamable HTTP, stateless, JSON responses, the caller from the x-api-key.

The route is a Powertools route like every other (the authorizer's caller, errors, the OpenAPI
document); its body is handed as it came to the official MCP SDK (uhp_memories.mcp.server), whose
answer goes back as it is. The headers go with it: `x-uhp-memory` names the session's memory (§9),
checked there against the caller's privileges before the SDK runs."""

import json

from aws_lambda_powertools.event_handler import Response

from uhp_memories.api.app import caller_of, make_handler, make_resolver
from uhp_memories.mcp import server, tools

app = make_resolver()

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
JSON_RPC_ERROR = {
    "type": "object",
    "required": ["jsonrpc", "error"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {},
        "error": {"type": "object", "required": ["code", "message"],
                  "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}},
    },
}


@app.post(
    "/mcp",
    summary="MCP (streamable HTTP, stateless, JSON responses): the agent's memory tools",
    description="A JSON-RPC request of the Model Context Protocol; list the tools with tools/list. "
    "Send Accept: application/json, text/event-stream.",
    tags=["mcp"],
    responses={
        200: {"description": "a JSON-RPC response", "content": {"application/json": {}}},
        202: {"description": "a notification, accepted"},
        # The MCP transport refuses in JSON-RPC; the API's own refusals (a body that is not UTF-8) in ErrorOut.
        400: {"description": "a JSON-RPC error (parse error, invalid request), or the API's error body",
              "content": {"application/json": {"schema": {"anyOf": [ERROR_REF, JSON_RPC_ERROR]}}}},
        406: {"description": "a JSON-RPC error: send Accept: application/json, text/event-stream",
              "content": {"application/json": {"schema": JSON_RPC_ERROR}}},
    },
)
def handle_mcp():  # the body is JSON-RPC, read and answered by the MCP SDK
    event = app.current_event
    raw = event.decoded_body if event.body else ""
    answer = server.handle(
        caller_of(app), "POST", "/mcp", dict(event.headers or {}), (raw or "").encode()
    )
    headers = {k: v for k, v in answer.headers if k.lower() not in ("content-length", "content-type")}
    content_type = next((v for k, v in answer.headers if k.lower() == "content-type"), "application/json")
    return Response(status_code=answer.status, content_type=content_type, body=answer.body.decode(), headers=headers)


# The tools whose call may write: those that write, and memory_operate, whose operations may (it is
# offered to readers too, so it is not marked as writing).
WRITING_TOOLS = frozenset({t.name for t in tools.TOOLS if t.writes} | {"memory_operate"})


def may_write(event: dict) -> bool:
    """Whether an MCP request may write, for its Idempotency-Key (api/app.py make_handler): a
    tools/call of a tool that may. Every other request (tools/list, a read tool) is run each time,
    never answered from a kept answer, so a replay reads with the caller's access as it is now."""
    try:
        message = json.loads(event.get("body") or "null")
    except ValueError:
        return False
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    return isinstance(params, dict) and params.get("name") in WRITING_TOOLS


lambda_handler = make_handler(app, writes=may_write)
