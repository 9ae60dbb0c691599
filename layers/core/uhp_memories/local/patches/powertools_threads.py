"""Powertools' REST resolver keeps each request's state per thread, for the local gateway.

Powertools keeps the request being resolved on the class (`BaseRouter.current_event`,
`.lambda_context`) and on the app (`context`: the matched route and its arguments). That is right in
Lambda, where an execution environment resolves one request at a time, and is what deployed
functions run. The local gateway runs every function in one process, on a thread per request: there
one request could read another's event (its caller, its route). While installed, every
APIGatewayRestResolver keeps its event, Lambda context and route context per thread, and builds each
route's middleware stack once, under a lock, before its first request (built lazily by two requests
at once, a stack can come out wrapped twice).

Replaces, on `aws_lambda_powertools.event_handler.api_gateway.APIGatewayRestResolver`,
`current_event`, `lambda_context` and `context` (with per-thread descriptors), `resolve` and
`_to_proxy_event` (both inherited from ApiGatewayResolver; uninstall deletes the replacements), and
relies on the private `_static_routes`, `_dynamic_routes`, `_router_middlewares`,
`Route._middleware_stack_built` and `Route._build_middleware_stack`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from uhp_memories.local.patches import Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("aws-lambda-powertools", "3.37.0")
_VALUES = "_uhp_per_thread"  # an app's threading.local, in its __dict__
_STACKS_BUILT = "_uhp_stacks_built"
_building = threading.Lock()


def _values(instance: Any) -> threading.local:
    found = instance.__dict__.get(_VALUES)
    if found is None:
        found = instance.__dict__.setdefault(_VALUES, threading.local())  # setdefault: one wins a race
    return found


class PerThread:
    """An attribute of which each thread sees its own value (`initial()` until it sets one). With
    `keep_on_instance`, a value set is also kept as the instance's own attribute, which is what the
    instance reads once the patch is uninstalled (Powertools sets `context` once, in __init__)."""

    def __init__(self, initial: Callable[[], Any] | None = None, *, keep_on_instance: bool = False) -> None:
        self._initial = initial
        self._keep = keep_on_instance
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def named(self, name: str) -> PerThread:
        self._name = name
        return self

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        values = _values(instance)
        if not hasattr(values, self._name) and self._initial is not None:
            setattr(values, self._name, self._initial())
        return getattr(values, self._name)

    def __set__(self, instance: Any, value: Any) -> None:
        setattr(_values(instance), self._name, value)
        if self._keep:
            instance.__dict__[self._name] = value


def _build_stacks(app: Any) -> None:
    """Build each route's middleware stack now, once."""
    if app.__dict__.get(_STACKS_BUILT):
        return
    with _building:
        if not app.__dict__.get(_STACKS_BUILT):
            for route in app._static_routes + app._dynamic_routes:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(router_middlewares=app._router_middlewares, app=app)
            app.__dict__[_STACKS_BUILT] = True


def _apply(replace: Replacements) -> None:
    from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver

    resolve, to_proxy_event = APIGatewayRestResolver.resolve, APIGatewayRestResolver._to_proxy_event

    def resolve_per_thread(self: Any, event: Any, context: Any) -> dict[str, Any]:
        _build_stacks(self)
        self.lambda_context = context
        return resolve(self, event, context)

    def to_proxy_event_per_thread(self: Any, event: dict[str, Any]) -> Any:
        # resolve() puts what this returns on the class, shared by every thread: kept per thread too.
        self.current_event = to_proxy_event(self, event)
        return self.current_event

    replace(APIGatewayRestResolver, "current_event", PerThread().named("current_event"))
    replace(APIGatewayRestResolver, "lambda_context", PerThread().named("lambda_context"))
    replace(APIGatewayRestResolver, "context", PerThread(dict, keep_on_instance=True).named("context"))
    replace(APIGatewayRestResolver, "resolve", resolve_per_thread)
    replace(APIGatewayRestResolver, "_to_proxy_event", to_proxy_event_per_thread)


PATCH = Patch(__name__, WRITTEN_FOR, _apply)
install = PATCH.install
uninstall = PATCH.uninstall
