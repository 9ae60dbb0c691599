"""MCP (§9.1): POST /mcp, streamable HTTP, stateless, JSON responses, the caller from the x-api-key.

The route is a Powertools route like every other (the authorizer's caller, errors, the OpenAPI
document); its body is handed as it came to the official MCP SDK (uhp_memories.mcp.server), whose
answer goes back as it is. The headers go with it: `x-uhp-memory` names the session's memory (§9),
checked there against the caller's privileges before the SDK runs."""

import json

from aws_lambda_powertools.event_handler import Response

from uhp_memories.api.app import MCP_PATH, caller_in, caller_of, make_handler, make_resolver
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


def compared_request(event: dict) -> str:
    """What a retry of a tool call repeats, compared for its Idempotency-Key (api/app.py make_handler:
    the same key with anything else is 422 idempotency_key_reused): the JSON-RPC message without its
    `id` and without `params._meta`, which a client makes anew for every request it sends (the SDK
    numbers its requests, its progress token is the id again, and trace context is per request), and
    the session's memory (`x-uhp-memory`: where a memory_remember without memory_id writes). A retry
    with a new id is answered the kept answer, under its own id."""
    message = json.loads(event.get("body") or "null")  # a tools/call: may_write read it
    params = {k: v for k, v in message["params"].items() if k != "_meta"}
    repeated = {k: v for k, v in message.items() if k not in ("id", "params")}
    memory = str(event["headers"].get(server.SESSION_MEMORY_HEADER) or "").strip()
    return json.dumps({**repeated, "params": params, "session_memory": memory}, separators=(",", ":"))


def refused_as_tool(event: dict, refusal: dict) -> dict:
    """A refusal of what a tool call's Idempotency-Key names (reused, in progress, committed), as any
    refusal of a tool is answered: the tool's error result with the same body, to this request's id,
    answered by the SDK (server.refuse) in the request's protocol version. An HTTP error reached the
    SDK's client as "Server returned an error response", its code lost."""
    text = json.dumps(refusal, separators=(",", ":"))
    answer = server.refuse(caller_in(event), MCP_PATH, event["headers"], (event.get("body") or "").encode(), text)
    headers = {k: v for k, v in answer.headers if k.lower() != "content-length"}
    return {"statusCode": answer.status, "headers": headers, "body": answer.body.decode(), "isBase64Encoded": False}


def to_this_request(event: dict, answer: dict) -> dict:
    """A kept answer, addressed to this request: a client's retry is a new JSON-RPC request, with a new
    id (the SDK numbers each request it sends), and takes its answer only under that id."""
    request_id = json.loads(event.get("body") or "null").get("id")  # a tools/call: may_write read it
    try:
        message = json.loads(answer.get("body") or "null")
    except ValueError:
        return answer
    if not isinstance(message, dict) or "id" not in message or message["id"] == request_id:
        return answer
    return {**answer, "body": json.dumps({**message, "id": request_id}, separators=(",", ":"), ensure_ascii=False)}


lambda_handler = make_handler(
    app, writes=may_write, compared=compared_request, refuse=refused_as_tool, replayed=to_this_request
)
