"""Who is running, on the local stage: the function whose handler the gateway runs, a workflow step by
its name, and whoever handed a task to a pool thread. The infra tests that hold each function's role
to what it did (test_least_privilege.py, test_mem0_reach.py) record each call as that one's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from infra.catalog import FUNCTION_ACCESS
from uhp_memories.local import gateway as local_gateway


class Attribution:
    """The one running now: a step's thread or a handed-over task (`as_who`), else the function whose
    handler runs (`current`)."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.local = threading.local()

    def who(self) -> str | None:
        return getattr(self.local, "who", None) or self.current

    def as_who(self, who: str | None, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        saved = getattr(self.local, "who", None)
        self.local.who = who
        try:
            return work(*args, **kwargs)
        finally:
            self.local.who = saved


def attribute_calls(patches: pytest.MonkeyPatch, running: Attribution) -> None:
    """Set `running` to each function's and step's name while it runs, across pool threads too."""
    handler_of = local_gateway._handler

    def attributed(function: str) -> Any:
        handler = handler_of(function)

        def run(event: Any, context: Any) -> Any:
            running.current = function
            try:
                return handler(event, context)
            finally:
                running.current = None

        return run

    patches.setattr(local_gateway, "_handler", attributed)
    import functions.steps.handler as steps

    for step in sorted(name for name in FUNCTION_ACCESS if name.startswith("steps.")):
        step_handler = getattr(steps, step.removeprefix("steps."))
        patches.setattr(steps, step.removeprefix("steps."),
                        lambda event, context, _h=step_handler, _n=step: running.as_who(_n, _h, event, context))
    submit = ThreadPoolExecutor.submit

    def handed_over(pool: ThreadPoolExecutor, work: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return submit(pool, running.as_who, running.who(), work, *args, **kwargs)

    patches.setattr(ThreadPoolExecutor, "submit", handed_over)
