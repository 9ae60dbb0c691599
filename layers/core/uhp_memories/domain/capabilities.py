"""The capability document (§10.2, §11): what the native provider does today, and nothing more.

Each issue that adds a capability changes this document; a test checks that every feature marked
absent here answers memory_unsupported."""

from __future__ import annotations

from typing import Any

from uhp_memories.domain.limits import MAX_DEPTH
from uhp_memories.domain.model import NATIVE_PROVIDER


def native_provider(free_query_languages: tuple[str, ...] = (), *, derives: bool = False) -> dict[str, Any]:
    """`free_query_languages`: what this deployment's index can confine (OpenSearch), else none.
    `derives`: whether the deployment has a derivation model (domain/observing/service.py)."""
    free: Any = {"languages": list(free_query_languages), "write": False} if free_query_languages else False
    return {
        "id": NATIVE_PROVIDER,
        "object": "memory.provider",
        # Records sit under a key that starts with the memory's id; the server adds it to every read
        # and write and checks it on every record fetched by id.
        "isolation": "enforced_filter",
        # With a model, a job derives facts and notes after observe answers (202); without one, nothing.
        "derivation": "background" if derives else "none",
        # Episodes are kept as records as they arrive, before any derivation.
        "observe": {"keeps_episodes": True, "answers": "job" if derives else "records"},
        "recall": {"signals": ["query", "text", "filters"], "abstain": True, "max_depth": MAX_DEPTH},
        "history": {"content": "versions", "structure": "none"},
        "snapshots": True,
        "revise": "native",
        "forget": "native",
        # Erase reports what the deployment keeps beyond reach (backups, streams, snapshots).
        "erase": {"unreachable": "reported"},
        # Owners pin records (PUT /v1/memories/{id}/prime); GET /v1/harnesses/{id}/prime places them within a
        # budget of MiniLM tokens (domain/agents/prime.py).
        "prime": True,
        # Passes run as visible, bounded, reversible runs (§9.2); the native pass forgets exact repeats.
        "consolidate": "runs",
        "queries": {"named": True, "free": free},
        # Extension types with operations (§8): x.calendar.event and x.task built in, and a tenant's own
        # registered through PUT /v1/memories/types/{type} (domain/types/service.py).
        "types": True,
        "files": True,
        # The agent's tools (§9.1) over MCP on the same API, with the x-api-key; a request may name its
        # session's memory (§9 metadata.memory) in this header (mcp/server.py).
        "mcp": {"path": "/mcp", "transport": "streamable-http", "session_memory_header": "x-uhp-memory"},
    }


def server_capabilities() -> dict[str, bool]:
    return {"memories": True}

