"""What every deployed entry point shares for operations: a trace (Powertools Tracer, X-Ray), metrics
(Powertools Metrics, CloudWatch embedded metric format on stdout, flushed after each invocation) and
a correlation id on every log line of the invocation. Applied in one place per kind of entry point:
`make_handler` (every API function), the workflow steps' `Step`, the indexer.

Deployed, CDK turns both on (UHP_TRACING, UHP_METRICS: uhp_memories.settings). Off, as in local mode
and in tests, nothing is traced (the X-Ray SDK never patches a client, nothing is sent to a daemon)
and no metric is written: the local server's output stays its request log.

Nothing of a request's content reaches either: the trace records the handler's name, cold start and
the AWS calls the X-Ray SDK sees (service, operation, table or host; never a body), never the
handler's answer or an error's message; a metric is a name and a count; the correlation id is the
API Gateway request id, a workflow job's id or the Lambda request id.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from uhp_memories.settings import Settings

NAMESPACE = "uhp-memories"
# What the recall handler counts (infra/constructs/monitoring.py alarms on the second).
RECALLS = "Recalls"
RECALLS_DEGRADED = "RecallsDegraded"
CORRELATION_KEY = "correlation_id"

_settings = Settings.from_env()
# The X-Ray SDK patches only the clients the functions use (botocore; http.client under urllib3, which
# opensearch-py and the OpenAI-compatible client use). None lets Powertools decide, which is off
# outside Lambda even when the setting is on.
tracer = Tracer(disabled=None if _settings.tracing else True, patch_modules=("botocore", "httplib"))
metrics = Metrics(namespace=NAMESPACE)
logger = Logger(service="uhp-memories")  # the API's logger (api/app.py): the same underlying logger


def count(name: str, value: float = 1) -> None:
    """Add to a count of this invocation (flushed when the entry point returns); nothing when off."""
    if _settings.metrics:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def recalled(degraded: Sequence[str]) -> None:
    """One recall answered, and whether it was degraded (what is missing from it, never its content)."""
    count(RECALLS)
    if degraded:
        count(RECALLS_DEGRADED)


def correlation_id(event: Any, context: Any) -> str | None:
    """The id to find one request's lines by: API Gateway's request id (what the access log and the
    caller's error answers carry), else a workflow step's job or run id, else Lambda's request id."""
    if isinstance(event, dict):
        request_id = (event.get("requestContext") or {}).get("requestId")
        if request_id:
            return str(request_id)
        for key in ("job_id", "run_id"):
            if isinstance(event.get(key), str):
                return str(event[key])
    return getattr(context, "aws_request_id", None)


def observed(handler: Callable[..., Any] | None = None, *, log: Logger | None = None) -> Any:
    """A Lambda entry point (a function of (event, context), or a method whose last two arguments
    they are) traced, its metrics flushed and its log lines correlated; `log` is the Powertools
    logger whose lines get the correlation id (the API's by default). `@observed(log=...)` too."""
    if handler is None:
        return lambda given: observed(given, log=log)
    name = getattr(handler, "__qualname__", "handler")
    chosen = log or logger

    @functools.wraps(handler)
    def entry(*args: Any) -> Any:
        event, context = args[-2], args[-1]
        with _correlated(chosen, correlation_id(event, context)), _traced(name), _flushed():
            return handler(*args)

    return entry


@contextlib.contextmanager
def _correlated(log: Logger, correlation: str | None) -> Iterator[None]:
    # Per thread: the local gateway runs requests side by side in one process.
    if correlation is None:
        yield
        return
    log.thread_safe_append_keys(**{CORRELATION_KEY: correlation})
    try:
        yield
    finally:
        log.thread_safe_remove_keys([CORRELATION_KEY])


_cold = [True]


@contextlib.contextmanager
def _traced(name: str) -> Iterator[None]:
    if tracer.disabled:
        yield
        return
    # As Tracer.capture_lambda_handler does, without capturing the answer or an error's message
    # (either can hold record content).
    with tracer.provider.in_subsegment(name=f"## {name}") as subsegment:
        subsegment.put_annotation(key="ColdStart", value=_cold[0])
        subsegment.put_annotation(key="Service", value=tracer.service)
        _cold[0] = False
        yield


@contextlib.contextmanager
def _flushed() -> Iterator[None]:
    try:
        yield
    finally:
        if _settings.metrics and metrics.metric_set:
            metrics.flush_metrics()
