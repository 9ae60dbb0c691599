"""What every deployed entry point shares for operations: a trace (Powertools Tracer, X-Ray), metrics
(Powertools Metrics, CloudWatch embedded metric format on stdout, flushed after each invocation) and
a correlation id on every log line of the invocation. Applied in one place per kind of entry point:
`make_handler` (every API function), the workflow steps' `Step`, the indexer.

Deployed, CDK turns both on (UHP_TRACING, UHP_METRICS: uhp_memories.settings). Off, as in local mode
and in tests, nothing is traced (the X-Ray SDK never patches a client, nothing is sent to a daemon)
and no metric is written: the local server's output stays its request log.

Nothing of a request's content reaches either: the trace records the handler's name, cold start and
the AWS calls the X-Ray SDK sees (service, operation, table or host; never a body), never the
handler's answer or an error's message; a metric is a name and a count, or a phase's milliseconds;
the correlation id is the API Gateway request id, a workflow job's id or the Lambda request id.

The phases of a request (`phase`: an access check's reads, embedding, the recall index's searches,
the hits read back from DynamoDB) are timed at the ports that run them, where the composition root
builds them (uhp_memories.bootstrap), so the domain knows nothing of it; each is written once per
invocation, the time its calls took added up (docs/decisions.md, "Alarms and phase metrics").
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, Literal

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from uhp_memories.settings import Settings

NAMESPACE = "uhp-memories"
# What the recall handler counts (infra/constructs/monitoring.py alarms on the second).
RECALLS = "Recalls"
RECALLS_DEGRADED = "RecallsDegraded"
# A request's phases, each one metric of its own (a name per phase, not a `phase` dimension: Powertools
# writes one dimension set for every metric of an invocation, so a dimension per phase would take a
# log line per phase; either way a phase of a function is one custom metric). The dashboard graphs them.
Phase = Literal["access", "embed", "search", "read_back"]
ACCESS: Phase = "access"  # the access check's reads: memories with their grants, the caller's grants, a harness's list
EMBED: Phase = "embed"  # texts embedded: a recall's query, a write's new versions
SEARCH: Phase = "search"  # the recall index's searches of one recall
READ_BACK: Phase = "read_back"  # a recall's hits read back from DynamoDB, the source of truth
PHASE_METRICS: dict[Phase, str] = {
    ACCESS: "AccessMilliseconds",
    EMBED: "EmbedMilliseconds",
    SEARCH: "SearchMilliseconds",
    READ_BACK: "ReadBackMilliseconds",
}
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


class _PhaseTimes:
    """What each phase took in one invocation, in milliseconds, added up over its calls. Calls come from
    the invocation's thread and from the worker threads that carry its context (a recall's query is
    embedded beside the access check; a write's texts on two threads), hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._took: dict[Phase, float] = {}

    def add(self, phase: Phase, milliseconds: float) -> None:
        with self._lock:
            self._took[phase] = self._took.get(phase, 0.0) + milliseconds

    def took(self) -> dict[Phase, float]:
        with self._lock:
            return dict(self._took)


# Set for the length of one invocation when metrics are on (`_flushed`); a context variable, so the
# local server's requests side by side in one process each add to their own.
_phase_times: ContextVar[_PhaseTimes | None] = ContextVar("uhp_phase_times", default=None)


@contextlib.contextmanager
def phase(name: Phase) -> Iterator[None]:
    """Time one call of a phase into this invocation's figure, failed calls too (a timeout is time
    spent); nothing when metrics are off or outside an invocation (a reindex, local mode)."""
    times = _phase_times.get()
    if times is None:
        yield
        return
    began = time.perf_counter()
    try:
        yield
    finally:
        times.add(name, (time.perf_counter() - began) * 1000)


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
    on = _settings.metrics
    token = _phase_times.set(_PhaseTimes()) if on else None
    try:
        yield
    finally:
        if token is not None:
            times = _phase_times.get()
            _phase_times.reset(token)  # a worker still embedding for it adds to a figure no longer read
            for name, milliseconds in (times.took() if times is not None else {}).items():
                metrics.add_metric(name=PHASE_METRICS[name], unit=MetricUnit.Milliseconds, value=round(milliseconds, 3))
        if on and metrics.metric_set:
            metrics.flush_metrics()
