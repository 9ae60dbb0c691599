"""A loopback HTTP server that answers POST /v1/chat/completions in the OpenAI chat completions shape
(what llama.cpp's server, vLLM and Ollama answer too): the stand-in for a model in the tests of the
OpenAI-compatible deriver and of derivation through the local server.

A test gives it a `respond` function from the request's JSON body to (status, headers, body); by
default it is `facts_from_episodes`, a "model" that reads the episodes out of the prompt the deriver
rendered and answers one fact per episode, quoting it, with that episode as its source."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], bytes]

_EPISODE = re.compile(
    r"episode \d+ record_id=(?P<id>\S+) written_at=\S+\n\[\[record-content (?P<n>\w+)\]\]\n(?P<text>.*?)\n"
    r"\[\[/record-content (?P=n)\]\]",
    re.DOTALL,
)


def completion(content: str | None, *, finish_reason: str = "stop", refusal: str | None = None,
               prompt_tokens: int = 412, completion_tokens: int = 57, model: str = "local-model") -> dict[str, Any]:
    """A chat completion as OpenAI's API answers one (llama.cpp and vLLM answer the same fields)."""
    return {
        "id": "chatcmpl-9x2Jv7Qm",
        "object": "chat.completion",
        "created": 1790570000,
        "model": model,
        "system_fingerprint": "fp_local",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def json_reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode()


def episodes_in(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(record_id, text) of each episode in a deriver's rendered prompt."""
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return [(m["id"], m["text"]) for m in _EPISODE.finditer(user)]


def facts_from_episodes(request: dict[str, Any]) -> Reply:
    facts = [
        {"content": f"Noted: {text}", "type": "fact", "attributes": [{"key": "source", "value": "chat"}],
         "sources": [record_id], "valid_from": None}
        for record_id, text in episodes_in(request)
    ]
    return json_reply(completion(json.dumps({"facts": facts})))


_NEW_MESSAGES = re.compile(r"## New Messages\n(?P<block>.*?)\n## ", re.DOTALL)


def memories_from_new_messages(request: dict[str, Any]) -> Reply:
    """A "model" as mem0's extraction asks one (mem0 2.2, infer=True): one memory per new message line,
    quoting it, in mem0's answer shape {"memory": [{"text"}]}."""
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    found = _NEW_MESSAGES.search(user)
    lines = [line.split(":", 1)[-1].strip() for line in (found.group("block") if found else "").splitlines()]
    return json_reply(completion(json.dumps({"memory": [{"text": f"Noted: {line}"} for line in lines if line]})))


@dataclass
class LoopbackChat:
    respond: Callable[[dict[str, Any]], Reply] = facts_from_episodes
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)  # path, headers, body

    def __post_init__(self) -> None:
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                chat.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status, headers, payload = chat.respond(body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LoopbackChat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
