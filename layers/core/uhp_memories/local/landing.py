"""What a local server answers beside the API, without a key: something to land on.

- `GET /`: the service, its version, the protocol it speaks, and links;
- `GET /healthz`: 200 while the server answers;
- `GET /openapi.json`: the API's OpenAPI document (uhp_memories.api.openapi, the one `make openapi`
  writes to docs/openapi.json), with this server as its server;
- `GET /docs`: the document in Swagger UI, its assets served from the swagger-ui-py package
  (nothing fetched from the network).

Local only: a deployed stage serves the API alone, behind its API keys (docs/decisions.md, "Local
mode"). Answers are API Gateway proxy answers, sent by the local gateway like any other.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any

from uhp_memories import __version__

SERVICE = "uhp-memories"
PROTOCOL = "Harness Memories sub-protocol of UHP, version 2026-10-04"
# The Swagger UI assets the docs page loads, from the swagger_ui package's static folder.
DOCS_ASSETS = ("swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png")
DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>uhp-memories API</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui", persistAuthorization: true});
  </script>
</body>
</html>
"""

Answer = dict[str, Any]
_document: list[dict[str, Any]] = []
_document_lock = threading.Lock()


def json_answer(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(body, separators=(",", ":")),
    }


def _root(base_url: str) -> Answer:
    return json_answer(200, {
        "service": SERVICE,
        "version": __version__,
        "protocol": PROTOCOL,
        "links": {
            "providers": f"{base_url}/v1/memories/providers",
            "openapi": f"{base_url}/openapi.json",
            "docs": f"{base_url}/docs",
            "health": f"{base_url}/healthz",
        },
        "authentication": "header x-api-key on every /v1 route",
    })


def _health(base_url: str) -> Answer:
    return json_answer(200, {"status": "ok"})


def openapi_document() -> dict[str, Any]:
    """Built from the handlers once, on first use (it imports every function)."""
    if not _document:
        with _document_lock:
            if not _document:
                from uhp_memories.api import openapi

                _document.append(openapi.build())
    return _document[0]


def _openapi(base_url: str) -> Answer:
    return json_answer(200, {**openapi_document(), "servers": [{"url": base_url, "description": "this local server"}]})


def _docs(base_url: str) -> Answer:
    return {"statusCode": 200, "headers": {"Content-Type": "text/html; charset=utf-8"}, "body": DOCS_PAGE}


def _asset(name: str) -> Answer | None:
    if name not in DOCS_ASSETS:
        return None
    data = resources.files("swagger_ui").joinpath("static", name).read_bytes()
    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return {
        "statusCode": 200,
        "headers": {"Content-Type": media_type, "Cache-Control": "max-age=3600"},
        "body": base64.b64encode(data).decode(),
        "isBase64Encoded": True,
    }


PAGES: dict[str, Callable[[str], Answer]] = {
    "/": _root,
    "/healthz": _health,
    "/openapi.json": _openapi,
    "/docs": _docs,
}


def is_page(path: str) -> bool:
    return path in PAGES or (path.startswith("/docs/") and path.removeprefix("/docs/") in DOCS_ASSETS)


def answer(path: str, base_url: str) -> Answer | None:
    """The answer to GET `path` when it is one of these pages (None: not one)."""
    page = PAGES.get(path)
    if page is not None:
        return page(base_url)
    if path.startswith("/docs/"):
        return _asset(path.removeprefix("/docs/"))
    return None
