"""Record types (§8): the core types, the extension types built in, and those a tenant registers."""

from typing import Any

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import presenters, schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond

app = make_resolver()


@app.get("/v1/memories/types", summary="The record types this server understands", tags=["types"])
def handle_types() -> Response[schemas.TypeList]:
    return respond(presenters.types(bootstrap.container().types.list(caller_of(app))))


@app.put(
    "/v1/memories/types/<type_name>",
    summary="Register or replace a tenant's extension type (a tenant administrator's act)",
    tags=["types"],
)
def handle_register_type(type_name: str, body: schemas.TypeDefinitionIn) -> Response[schemas.TypeOut]:
    raw: dict[str, Any] = body.model_dump(by_alias=True, exclude_none=True)
    definition = bootstrap.container().types.register(caller_of(app), type_name, raw)
    return respond(presenters.extension_type(definition).model_dump(mode="json", by_alias=True))


lambda_handler = make_handler(app)
