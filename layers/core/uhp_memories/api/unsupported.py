"""Routes of operations the native provider does not implement yet. Each answers
memory_unsupported (422), never a 500 and never a silent success; a memory the caller cannot see is
still memory_not_found, so an unsupported route reveals nothing either."""

from __future__ import annotations

import inspect
import re
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from uhp_memories import bootstrap
from uhp_memories.api.app import caller_of, make_resolver
from uhp_memories.api.routes import ROUTES, powertools_path
from uhp_memories.domain.errors import MemoryUnsupported


def unsupported_resolver(function: str, feature: str) -> APIGatewayRestResolver:
    app = make_resolver()
    for route in (r for r in ROUTES if r.function == function):

        def handle_unsupported(**params: Any) -> None:
            caller = caller_of(app)
            memory_id = params.get("memory_id")
            if memory_id is not None:
                bootstrap.container().ports.access(caller).visible(memory_id)
            raise MemoryUnsupported(f"{feature} is not supported by provider 'native'")

        # Powertools reads the path parameters from the handler's signature.
        handle_unsupported.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str)
                for name in re.findall(r"{(\w+)}", route.path)
            ]
        )
        app.route(
            powertools_path(route.path),
            route.method,
            summary=f"{feature} (not yet supported: answers memory_unsupported)",
            tags=[function],
        )(handle_unsupported)
    return app
