"""The MCP server (§9.1 tools) on the official `mcp` SDK: streamable HTTP, stateless, JSON responses.

The SDK does all of MCP: JSON-RPC, protocol version negotiation (the handshake era and the
2026-07-28 single-exchange era alike), tool, prompt and resource listing and calling. This module adds
only what is ours: the tools (mcp/tools.py), prime as a prompt and a resource (mcp/prime.py), the
caller the authorizer resolved from the x-api-key (never anything the client sends), the session's
memory a request may name (`x-uhp-memory`, checked before the SDK runs), and `handle`, which runs one
HTTP request through the SDK's own ASGI entry (`StreamableHTTPSessionManager`, stateless) and hands
back status, headers and body, so a Lambda answers API Gateway's proxy event with it
(functions/mcp/handler.py).

The SDK's `Server` is built once per process (`server()`); each request gets a fresh stateless session
manager and its own event loop (the local gateway runs requests on threads at once; Lambda one at a
time). DNS-rebinding protection (Host and Origin checks) is left off: every request is authenticated
by its API key, and behind API Gateway the Host is the API's own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from uhp_memories import __version__, bootstrap
from uhp_memories.api.errors import status_of
from uhp_memories.domain.errors import DomainError
from uhp_memories.domain.fence import INSTRUCTIONS
from uhp_memories.domain.model import Caller
from uhp_memories.mcp import prime, tools

CALLER_SCOPE_KEY = "uhp_memories.caller"  # where `handle` puts the caller (with its session's memory)
REFUSAL_SCOPE_KEY = "uhp_memories.refusal"  # where `refuse` puts the error result a tools/call answers
SESSION_MEMORY_HEADER = "x-uhp-memory"  # §9 metadata.memory over MCP: one more memory for the session
SERVER_NAME = "uhp-memories"


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    caller = request.scope.get(CALLER_SCOPE_KEY) if request is not None else None
    if not isinstance(caller, Caller):
        raise RuntimeError("no authenticated caller on this request")
    return caller


def _tool(tool: tools.Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=not tool.writes, destructive_hint=tool.name == "memory_forget"
        ),
    )


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    offered = tools.offered(bootstrap.container(), _caller(ctx))
    # Per caller, and changed by attaching memories or defining queries: never cached for others.
    return types.ListToolsResult(tools=[_tool(t) for t in offered], cache_scope="private", ttl_ms=0)


async def _call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    refusal = ctx.request.scope.get(REFUSAL_SCOPE_KEY) if ctx.request is not None else None
    if isinstance(refusal, str):  # `refuse`: the tool does not run
        return types.CallToolResult(content=[types.TextContent(type="text", text=refusal)], is_error=True)
    text, is_error = tools.call(bootstrap.container(), _caller(ctx), params.name, params.arguments)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _refused(error: prime.PrimeRefused) -> MCPError:
    return MCPError(types.INVALID_PARAMS, error.message, {"code": error.code})


async def _list_prompts(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    offered = [] if prime.offered(_caller(ctx)) is None else [
        types.Prompt(
            name=prime.PROMPT_NAME,
            description=prime.PROMPT_DESCRIPTION,
            arguments=[
                types.PromptArgument(name=prime.BUDGET_ARGUMENT, description="tokens, 1 to 20000", required=False)
            ],
        )
    ]
    return types.ListPromptsResult(prompts=offered, cache_scope="private", ttl_ms=0)


async def _get_prompt(
    ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name != prime.PROMPT_NAME:
        raise MCPError(types.INVALID_PARAMS, f"no prompt named {params.name}")
    try:
        budget = prime.budget_of((params.arguments or {}).get(prime.BUDGET_ARGUMENT))
        primed = prime.prime_text(bootstrap.container(), _caller(ctx), budget)
    except prime.PrimeRefused as error:
        raise _refused(error) from None
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=primed.text))
    return types.GetPromptResult(description=prime.PROMPT_DESCRIPTION, messages=[message])


async def _list_resources(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    harness = prime.offered(_caller(ctx))
    offered = [] if harness is None else [
        types.Resource(
            name=prime.PROMPT_NAME,
            uri=prime.resource_uri(harness),
            description=prime.PROMPT_DESCRIPTION,
            mime_type="application/json",
        )
    ]
    return types.ListResourcesResult(resources=offered, cache_scope="private", ttl_ms=0)


async def _read_resource(
    ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    try:
        primed = prime.read_uri(bootstrap.container(), _caller(ctx), str(params.uri))
    except prime.PrimeRefused as error:
        raise _refused(error) from None
    contents = types.TextResourceContents(uri=str(params.uri), mime_type="application/json", text=primed.text)
    # Each read places and records anew, and pins change: never cached.
    return types.ReadResourceResult(contents=[contents], cache_scope="private", ttl_ms=0)


def _input_schema(name: str) -> Mapping[str, Any] | None:
    """The static tools' schemas, for the SDK's Mcp-Param header check without listing the caller's tools
    on every call; a named query's tool has none to check (None: nothing to validate)."""
    tool = tools.BY_NAME.get(name)
    return tool.input_schema if tool is not None else None


_built: list[Server[Any]] = []
_lock = threading.Lock()


def server() -> Server[Any]:
    """The SDK server, built once per process."""
    if not _built:
        with _lock:
            if not _built:
                _built.append(
                    Server(
                        SERVER_NAME,
                        version=__version__,
                        instructions=INSTRUCTIONS,
                        get_tool_input_schema=_input_schema,
                        on_list_tools=_list_tools,
                        on_call_tool=_call_tool,
                        on_list_prompts=_list_prompts,
                        on_get_prompt=_get_prompt,
                        on_list_resources=_list_resources,
                        on_read_resource=_read_resource,
                    )
                )
    return _built[0]


@dataclass
class HttpAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def handle(caller: Caller, method: str, path: str, headers: Mapping[str, str], body: bytes) -> HttpAnswer:
    """One HTTP request through the SDK's stateless streamable-HTTP entry, answered as status, headers, body.

    A request naming its session's memory (`x-uhp-memory: hmem_...`, §9 `metadata.memory`) has it checked
    against the caller's privileges first, exactly as an attached memory is: one the caller holds nothing
    on, or a malformed id, is answered 404 `memory_not_found` with the API's error body, before the SDK
    reads the request, whatever it asks (every MCP request of that session alike)."""
    named = next((v for k, v in headers.items() if k.lower() == SESSION_MEMORY_HEADER), None)
    if named is not None:
        try:
            caller = tools.session_caller(bootstrap.container(), caller, str(named).strip())
        except DomainError as error:
            refused = json.dumps({"error": {"code": error.code, "message": error.message}}).encode()
            return HttpAnswer(status_of(error.code), [("content-type", "application/json")], refused)
    return _as_json_rpc(anyio.run(_handle, caller, method, path, headers, body))


def refuse(caller: Caller, path: str, headers: Mapping[str, str], body: bytes, refusal: str) -> HttpAnswer:
    """A tools/call answered with the error result `refusal` (the tool's error body, JSON) without
    running the tool: the SDK answers it, so the answer has this request's id and its protocol
    version's shape (2026-07-28 requires `resultType`) as every tool's answer does. For refusals made
    before any tool runs, of what the request's Idempotency-Key names (functions/mcp/handler.py)."""
    return _as_json_rpc(anyio.run(_handle, caller, "POST", path, headers, body, refusal))


# JSON-RPC's "Invalid Request": what the transport refused before any method ran.
INVALID_REQUEST = -32600


def _as_json_rpc(answer: HttpAnswer) -> HttpAnswer:
    """The SDK answers a request its transport refuses (no JSON content type, say) in plain text; every
    other refusal of /mcp is a JSON-RPC error, and a client reads all of them the same way. So a
    non-JSON refusal becomes a JSON-RPC error with the SDK's text as its message."""
    if answer.status < 400:
        return answer
    try:
        json.loads(answer.body)
        return answer
    except ValueError:
        pass
    message = answer.body.decode("utf-8", "replace").strip() or "the request was refused"
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    headers = [(k, v) for k, v in answer.headers if k.lower() not in ("content-type", "content-length")]
    return HttpAnswer(answer.status, [*headers, ("content-type", "application/json")], json.dumps(error).encode())


async def _handle(
    caller: Caller, method: str, path: str, headers: Mapping[str, str], body: bytes, refusal: str | None = None
) -> HttpAnswer:
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()],
        "server": ("uhp-memories", 443),
        "client": None,
        CALLER_SCOPE_KEY: caller,
        REFUSAL_SCOPE_KEY: refusal,
    }
    answered = anyio.Event()
    delivered = False
    answer = HttpAnswer(500, [], b"")
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client "disconnects" once the answer is complete
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = int(message["status"])
            answer.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    manager = StreamableHTTPSessionManager(app=server(), json_response=True, stateless=True)
    async with manager.run():
        await manager.handle_request(scope, receive, send)  # type: ignore[arg-type]
    answer.body = b"".join(chunks)
    return answer
