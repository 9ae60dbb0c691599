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
    # The OpenAPI operationId, for SDK generators (`client.remember(...)`): the spec's verb where it has
    # one (remember, recall, revise, forget, observe, erase), else what the route does, in camelCase.
    operation_id: str
    # Takes a multipart/form-data body (a file upload); every other body of the API is JSON.
    multipart: bool = False
    # A POST that only reads (a body too large for a query string): an Idempotency-Key does not keep
    # its answer, which would replay what the caller may no longer read (api/app.py make_handler).
    reads: bool = False


M = "/v1/memories/{memory_id}"
R = M + "/records/{record_id}"

ROUTES: tuple[Route, ...] = (
    Route("discovery", "GET", "/v1/capabilities", "getCapabilities"),
    Route("discovery", "GET", "/v1/memories/providers", "getProviders"),
    Route("types", "GET", "/v1/memories/types", "listTypes"),
    Route("types", "PUT", "/v1/memories/types/{type_name}", "registerType"),  # a tenant's extension type (§8)
    Route("memories", "POST", "/v1/memories", "createMemory"),
    Route("memories", "GET", "/v1/memories", "listMemories"),
    Route("memories", "GET", M, "getMemory"),
    Route("memories", "PUT", M, "updateMemory"),
    Route("memories", "DELETE", M, "deleteMemory"),
    Route("grants", "GET", M + "/grants", "listGrants"),
    Route("grants", "POST", M + "/grants", "createGrant"),
    Route("grants", "DELETE", M + "/grants/{grant_id}", "deleteGrant"),
    Route("records", "POST", M + "/records", "remember"),
    Route("records", "GET", M + "/records", "listRecords"),
    Route("records", "GET", R, "getRecord"),
    Route("records", "PATCH", R, "revise"),
    Route("records", "DELETE", R, "forget"),
    Route("records", "GET", R + "/history", "getHistory"),
    Route("tree", "GET", M + "/paths", "listPaths"),
    Route("tree", "GET", M + "/changes", "listChanges"),
    Route("tree", "POST", M + "/grep", "grep", reads=True),
    Route("snapshots", "POST", M + "/snapshots", "createSnapshot"),
    Route("snapshots", "GET", M + "/snapshots", "listSnapshots"),
    Route("recall", "POST", M + "/recall", "recall", reads=True),
    Route("queries", "GET", M + "/queries", "listQueries"),
    Route("queries", "PUT", M + "/queries/{name}", "defineQuery"),
    Route("queries", "POST", M + "/queries/{name}", "runQuery", reads=True),
    Route("queries", "POST", M + "/query", "freeQuery", reads=True),
    Route("observe", "POST", M + "/observe", "observe"),
    Route("jobs", "GET", M + "/jobs/{job_id}", "getJob"),
    Route("erase", "POST", M + "/erase", "erase"),
    Route("files", "POST", "/v1/files", "uploadFile", multipart=True),
    Route("files", "GET", "/v1/files/{file_id}", "getFile"),
    Route("files", "GET", R + "/content", "getRecordContent"),
    Route("operations", "POST", R + "/operations/{name}", "runOperation"),
    Route("consolidations", "POST", M + "/consolidations", "startConsolidation"),
    Route("consolidations", "GET", M + "/consolidations", "listConsolidations"),
    Route("consolidations", "GET", M + "/consolidations/{run_id}", "getConsolidation"),
    Route("consolidations", "GET", M + "/consolidations/{run_id}/changes", "listConsolidationChanges"),
    Route("consolidations", "POST", M + "/consolidations/{run_id}/revert", "revertConsolidation"),
    # A memory's consolidation runs on a schedule (domain/consolidation/schedules.py).
    Route("consolidations", "PUT", M + "/consolidation-schedule", "setConsolidationSchedule"),
    Route("consolidations", "GET", M + "/consolidation-schedule", "getConsolidationSchedule"),
    Route("consolidations", "DELETE", M + "/consolidation-schedule", "deleteConsolidationSchedule"),
    Route("harnesses", "PUT", "/v1/harnesses/{harness_id}/memories", "attachMemories"),
    Route("harnesses", "GET", "/v1/harnesses/{harness_id}/memories", "listAttachedMemories"),
    # Who may change the list (domain/harnesses).
    Route("harnesses", "PUT", "/v1/harnesses/{harness_id}/owners", "setHarnessOwners"),
    Route("harnesses", "GET", "/v1/harnesses/{harness_id}/owners", "getHarnessOwners"),
    Route("harnesses", "GET", "/v1/harnesses/{harness_id}/prime", "getPrime"),  # §9.1 prime
    Route("harnesses", "POST", "/v1/harnesses/{harness_id}/turns", "postTurn"),  # §9.1 observe after a turn
    Route("memories", "PUT", M + "/prime", "setPrimePins"),  # the owner's pins for prime (delete)
    Route("memories", "GET", M + "/prime", "getPrimePins"),
    Route("mcp", "POST", "/mcp", "mcp"),  # the agent's tools over MCP (§9.1): uhp_memories.mcp
)

FUNCTIONS: tuple[str, ...] = tuple(dict.fromkeys(route.function for route in ROUTES))


def powertools_path(path: str) -> str:
    """API Gateway's {param} as Powertools' <param>."""
    return path.replace("{", "<").replace("}", ">")
