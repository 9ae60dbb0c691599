"""MCP (§9.1): POST /mcp, streamable HTTP, stateless, JSON responses, the caller from the x-api-key.

The route is a Powertools route like every other (the authorizer's caller, errors, the OpenAPI
document); its body is handed as it came to the official MCP SDK (uhp_memories.mcp.server), whose
answer goes back as it is. The headers go with it: `x-uhp-memory` names the session's memory (§9),
checked there against the caller's privileges before the SDK runs."""

from aws_lambda_powertools.event_handler import Response

from uhp_memories.api.app import caller_of, make_handler, make_resolver
from uhp_memories.mcp import server

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


lambda_handler = make_handler(app)
