"""A loopback stand-in for mem0's hosted Platform API, as mem0's own `MemoryClient` (mem0ai 2.2.1) calls it:
the endpoints that client uses for what the provider adapter asks (ping, add, get, list, search, update,
delete, history), with an in-memory store, and every request kept (method, path, headers, body) so a test
checks what crosses the HTTP boundary. Search scores by words shared with the query: the Platform's own
ranking is not what is tested. The adapter is declared untested against the hosted service itself."""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_ONE = re.compile(r"^/v1/memories/(?P<id>[^/]+)/$")
_HISTORY = re.compile(r"^/v1/memories/(?P<id>[^/]+)/history/$")


@dataclass
class FakePlatform:
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length", "0") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                url = urlsplit(self.path)
                platform.requests.append((method, url.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status, answer = platform.route(method, url.path, parse_qs(url.query), body)
                self._answer(status, answer)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakePlatform:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        now = datetime.now(UTC).isoformat()
        if (method, path) == ("GET", "/v1/ping/"):
            return 200, {"org_id": "org_1", "project_id": "proj_1", "user_email": "ops@example.com"}
        if (method, path) == ("POST", "/v3/memories/add/"):
            added = []
            for message in body["messages"]:
                memory_id = str(uuid.uuid4())
                self.memories[memory_id] = {"id": memory_id, "memory": message["content"], "user_id": body["user_id"],
                                            "metadata": body.get("metadata") or {}, "created_at": now,
                                            "updated_at": now}
                self.history[memory_id] = [{"memory_id": memory_id, "old_memory": None,
                                            "new_memory": message["content"], "event": "ADD"}]
                added.append({"id": memory_id, "memory": message["content"], "event": "ADD"})
            return 200, {"results": added}
        if (method, path) == ("POST", "/v3/memories/"):
            found = [m for m in self.memories.values() if _matches(m, body["filters"])]
            size, page = int(query.get("page_size", ["100"])[0]), int(query.get("page", ["1"])[0])
            chunk = found[(page - 1) * size: page * size]
            more = len(found) > page * size
            return 200, {"count": len(found), "next": "more" if more else None, "previous": None, "results": chunk}
        if (method, path) == ("POST", "/v3/memories/search/"):
            words = set(body["query"].lower().split())
            found = [m for m in self.memories.values() if m["user_id"] == body["filters"]["user_id"]]
            scored = [{**m, "score": len(words & set(m["memory"].lower().split())) / max(len(words), 1)}
                      for m in found]
            scored.sort(key=lambda m: m["score"], reverse=True)
            return 200, {"results": scored[: body.get("top_k", 10)]}
        if (one := _HISTORY.match(path)) and method == "GET":
            return 200, self.history.get(one["id"], [])
        if (one := _ONE.match(path)) is not None:
            memory = self.memories.get(one["id"])
            if memory is None:
                return 404, {"detail": "Memory not found"}
            if method == "GET":
                return 200, memory
            if method == "PUT":
                old = memory["memory"]
                if body.get("text") is not None:
                    memory["memory"] = body["text"]
                if body.get("metadata") is not None:
                    memory["metadata"] = {**memory["metadata"], **body["metadata"]}
                memory["updated_at"] = now
                self.history[one["id"]].append({"memory_id": one["id"], "old_memory": old,
                                                "new_memory": memory["memory"], "event": "UPDATE"})
                return 200, {"message": "Memory updated successfully!"}
            if method == "DELETE":
                del self.memories[one["id"]]  # the Platform keeps the history: the adapter must say so
                return 200, {"message": "Memory deleted successfully!"}
        return 404, {"detail": f"no route {method} {path}"}


def _matches(memory: dict[str, Any], filters: dict[str, Any]) -> bool:
    """The Platform's v2 filters as the adapter sends them: `{"user_id": ...}`, or an AND of it and
    `{"metadata": {key: value}}`."""
    if "AND" in filters:
        return all(_matches(memory, each) for each in filters["AND"])
    if "metadata" in filters:
        return all(memory["metadata"].get(k) == v for k, v in filters["metadata"].items())
    return all(memory.get(k) == v for k, v in filters.items())
