"""Every operation of the OpenAPI document is named for SDK generators (issue 28): the operationId its
route names in the routes table, camelCase, unique, never a handler's generated name
(`handle_capabilities_v1_capabilities_get`)."""

from __future__ import annotations

import re

from uhp_memories.api import openapi
from uhp_memories.api.routes import ROUTES

CAMEL_CASE = re.compile(r"^[a-z][a-zA-Z0-9]*$")


def test_every_operation_is_named_from_the_routes_table() -> None:
    named = {
        (path, method): operation["operationId"]
        for path, item in openapi.build()["paths"].items()
        for method, operation in item.items()
    }
    assert named == {(route.path, route.method.lower()): route.operation_id for route in ROUTES}
    assert all(CAMEL_CASE.match(name) for name in named.values())
    assert len(set(named.values())) == len(named)


def test_the_spec_verbs_name_their_operations() -> None:
    named = {(route.method, route.path): route.operation_id for route in ROUTES}
    records, memory = "/v1/memories/{memory_id}/records", "/v1/memories/{memory_id}"
    assert named["POST", "/v1/memories"] == "createMemory"
    assert named["POST", records] == "remember"
    assert named["PATCH", records + "/{record_id}"] == "revise"
    assert named["DELETE", records + "/{record_id}"] == "forget"
    assert named["POST", memory + "/recall"] == "recall"
    assert named["POST", memory + "/observe"] == "observe"
    assert named["POST", memory + "/erase"] == "erase"
