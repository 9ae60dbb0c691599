"""Discovery (§10.2, §11): capabilities and providers (record types: functions/types)."""

from aws_lambda_powertools.event_handler import Response

from uhp_memories import bootstrap
from uhp_memories.api import schemas
from uhp_memories.api.app import caller_of, make_handler, make_resolver, respond
from uhp_memories.domain import capabilities

app = make_resolver()


@app.get("/v1/capabilities", summary="What this server implements", tags=["discovery"])
def handle_capabilities() -> Response[schemas.CapabilitiesOut]:
    caller_of(app)
    return respond(schemas.CapabilitiesOut(capabilities=capabilities.server_capabilities()))


@app.get("/v1/memories/providers", summary="The providers and their capability documents", tags=["discovery"])
def handle_providers() -> Response[schemas.ProviderList]:
    caller_of(app)
    container = bootstrap.container()
    languages = container.queries.free_languages_configured()
    document = capabilities.native_provider(languages, derives=container.observing.derives)
    others = [provider.capabilities() for provider in container.ports.providers.connected()]
    return respond(schemas.ProviderList(data=[document, *others]))


lambda_handler = make_handler(app)
