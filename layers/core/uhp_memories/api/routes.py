"""Every route of the API and the function (one per API resource) that serves it.

One table, read by the local gateway to dispatch requests and by CDK to build API Gateway
resources, so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    function: str  # package under functions/
    method: str
    path: str  # API Gateway resource path, with {params}
    # Takes a multipart/form-data body (a file upload); every other body of the API is JSON.
    multipart: bool = False
    # A POST that only reads (a body too large for a query string): an Idempotency-Key does not keep
    # its answer, which would replay what the caller may no longer read (api/app.py make_handler).
    reads: bool = False


M = "/v1/memories/{memory_id}"
R = M + "/records/{record_id}"

ROUTES: tuple[Route, ...] = (
    Route("discovery", "GET", "/v1/capabilities"),
    Route("discovery", "GET", "/v1/memories/providers"),
    Route("types", "GET", "/v1/memories/types"),
    Route("types", "PUT", "/v1/memories/types/{type_name}"),  # a tenant's extension type (§8)
    Route("memories", "POST", "/v1/memories"),
    Route("memories", "GET", "/v1/memories"),
    Route("memories", "GET", M),
    Route("memories", "PUT", M),
    Route("memories", "DELETE", M),
    Route("grants", "GET", M + "/grants"),
    Route("grants", "POST", M + "/grants"),
    Route("grants", "DELETE", M + "/grants/{grant_id}"),
    Route("records", "POST", M + "/records"),
    Route("records", "GET", M + "/records"),
    Route("records", "GET", R),
    Route("records", "PATCH", R),
    Route("records", "DELETE", R),
    Route("records", "GET", R + "/history"),
    Route("tree", "GET", M + "/paths"),
    Route("tree", "GET", M + "/changes"),
    Route("tree", "POST", M + "/grep", reads=True),
    Route("snapshots", "POST", M + "/snapshots"),
    Route("snapshots", "GET", M + "/snapshots"),
    Route("recall", "POST", M + "/recall", reads=True),
    Route("queries", "GET", M + "/queries"),
    Route("queries", "PUT", M + "/queries/{name}"),
    Route("queries", "POST", M + "/queries/{name}", reads=True),
    Route("queries", "POST", M + "/query", reads=True),
    Route("observe", "POST", M + "/observe"),
    Route("jobs", "GET", M + "/jobs/{job_id}"),
    Route("erase", "POST", M + "/erase"),
    Route("files", "POST", "/v1/files", multipart=True),
    Route("files", "GET", "/v1/files/{file_id}"),
    Route("files", "GET", R + "/content"),
    Route("operations", "POST", R + "/operations/{name}"),
    Route("consolidations", "POST", M + "/consolidations"),
    Route("consolidations", "GET", M + "/consolidations"),
    Route("consolidations", "GET", M + "/consolidations/{run_id}"),
    Route("consolidations", "GET", M + "/consolidations/{run_id}/changes"),
    Route("consolidations", "POST", M + "/consolidations/{run_id}/revert"),
    Route("consolidations", "PUT", M + "/consolidation-schedule"),  # runs on a schedule (domain/schedules.py)
    Route("consolidations", "GET", M + "/consolidation-schedule"),
    Route("consolidations", "DELETE", M + "/consolidation-schedule"),
    Route("harnesses", "PUT", "/v1/harnesses/{harness_id}/memories"),
    Route("harnesses", "GET", "/v1/harnesses/{harness_id}/memories"),
    Route("harnesses", "PUT", "/v1/harnesses/{harness_id}/owners"),  # who may change the list (domain/harnesses)
    Route("harnesses", "GET", "/v1/harnesses/{harness_id}/owners"),
    Route("harnesses", "GET", "/v1/harnesses/{harness_id}/prime"),  # §9.1 prime
    Route("harnesses", "POST", "/v1/harnesses/{harness_id}/turns"),  # §9.1 observe after a turn
    Route("memories", "PUT", M + "/prime"),  # the owner's pins for prime (delete)
    Route("memories", "GET", M + "/prime"),
    Route("mcp", "POST", "/mcp"),  # the agent's tools over MCP (§9.1): uhp_memories.mcp
)

FUNCTIONS: tuple[str, ...] = tuple(dict.fromkeys(route.function for route in ROUTES))


def powertools_path(path: str) -> str:
    """API Gateway's {param} as Powertools' <param>."""
    return path.replace("{", "<").replace("}", ">")
