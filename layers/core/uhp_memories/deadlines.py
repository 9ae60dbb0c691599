"""The time a request has left, which bounds every call it makes to the search domain and the model.

API Gateway gives up on a Lambda after 29 s and answers 502; the API functions stop at 28 s
(infra/constructs/compute.py). So that a slow OpenSearch domain or a slow Bedrock answers 503
`memory_unavailable` (retry) instead, each such call inside a request is bounded by the time the
request has left: `make_handler` (api/app.py) sets the deadline from the Lambda context as each
request starts (`start`), and the adapters read it (`remaining`): the OpenSearch connection as a
per-request socket timeout (adapters/opensearch/bounded.py), the Titan embedder as the longest it
waits for an answer (adapters/bedrock/embedder.py).

The deadline lies `SAFETY_MARGIN_SECONDS` before Lambda's own: what a request does after its last
bounded call (its answer, the idempotency record, logs) has that long.

A context variable: a Lambda function runs one request at a time and the local gateway runs each on
a thread of its own, so one request's deadline never reaches another. A task handed to a worker
thread sees it only when submitted with the request's context (`contextvars.copy_context().run`,
as domain/recall/engine.py does). Without a deadline (a command such as `reindex`, a test, a call outside
any request) nothing is bounded beyond each client's own timeouts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# After its last call to the index or the model a request still writes its answer to the idempotency
# table (one DynamoDB PutItem: milliseconds, a second or so when throttled and retried by the SDK)
# and returns it through API Gateway. Two seconds is that with room to spare, and leaves an API
# function 26 of its 28 s for the calls themselves.
SAFETY_MARGIN_SECONDS = 2.0

_DEADLINE: ContextVar[float | None] = ContextVar("uhp_memories_deadline", default=None)


def start(context: Any, *, margin: float = SAFETY_MARGIN_SECONDS) -> None:
    """Start this request's clock: its deadline is the Lambda's remaining time less `margin`. A call
    without a Lambda context (None, or an object without `get_remaining_time_in_millis`) has none."""
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    _DEADLINE.set(None if remaining_ms is None else time.monotonic() + remaining_ms() / 1000 - margin)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run the block with `seconds` left (a deadline of its own; the previous one is restored)."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


@contextmanager
def share(fraction: float) -> Iterator[None]:
    """Run the block with `fraction` of the time left, so what follows it has the rest (nothing
    changes without a deadline)."""
    left = remaining()
    if left is None:
        yield
        return
    with within(max(left, 0.0) * fraction):
        yield


def remaining() -> float | None:
    """Seconds this request has left (0 or less once spent); None when it has no deadline."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def bounded(timeout: float) -> float:
    """`timeout`, or the time left when that is shorter (0 or less once spent): the longest one call
    of this request may take."""
    left = remaining()
    return timeout if left is None else min(timeout, left)
