"""What every function's handler shares: the resolver with its error mapping, the caller taken from
the authorizer's context, and Idempotency-Key handling on writes."""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ValidationError

from uhp_memories import bootstrap, deadlines
from uhp_memories.adapters.dynamodb.idempotency import (
    PackedDynamoDBPersistenceLayer,
    WriteKey,
    WriteKeyTaken,
    writing_under,
)
from uhp_memories.adapters.dynamodb.table import Contended
from uhp_memories.api import json_limits, observability, payloads
from uhp_memories.api.errors import (
    JSON,
    code_response,
    describe_validation_errors,
    domain_error_response,
    error_dict,
    status_of,
)
from uhp_memories.api.routes import ROUTES
from uhp_memories.domain.errors import DomainError, MemoryInvalid, Unauthenticated
from uhp_memories.domain.model import Caller
from uhp_memories.domain.recall.model import SearchUnavailable

logger = Logger(service="uhp-memories")

# AWS answers that mean "not now" (throttled, busy, a transaction that lost its race), after the SDK's
# own retries: the request wrote nothing, and 503 memory_unavailable tells the caller to retry (§12).
AWS_NOT_ANSWERING = frozenset({
    "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "TransactionConflictException", "TransactionInProgressException", "InternalServerError",
    "ServiceUnavailable", "SlowDown", "RequestTimeout", "RequestTimeoutException",
})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
IDEMPOTENCY_HEADER = "idempotency-key"
# The key is scoped to the tenant, the principal and the route, so one client's key never meets
# another's; the body is checked so a reused key with another body is refused, not replayed.
IDEMPOTENCY_KEY_PATH = (
    '[requestContext.authorizer.tenant, requestContext.authorizer.principal, httpMethod, path, '
    'headers."idempotency-key"]'
)


def make_resolver() -> APIGatewayRestResolver:
    # Powertools keeps the request being resolved on the class and on the app: right in Lambda (one
    # request per execution environment). The local gateway, a thread per request, installs
    # uhp_memories.local.patches.powertools_threads to keep it per thread.
    # Every JSON body a handler or Powertools' validation reads is parsed under the one JSON rule
    # (api/json_limits.py): malformed JSON is 400 wherever it is read, never a 500.
    app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=json_limits.loads)
    app.use(middlewares=[_check_query_parameters])

    # Each answer's status comes from its code (api/errors.HTTP_STATUS), never from the error.
    @app.exception_handler(DomainError)
    def handle_domain_error(error: DomainError) -> Response:
        return domain_error_response(error)

    @app.exception_handler(WriteKeyTaken)
    def handle_write_key_taken(error: WriteKeyTaken) -> Response:
        # Another attempt with this Idempotency-Key committed first: this one wrote nothing.
        answer = _already_written(app.current_event.raw_event, error)
        return Response(status_code=answer["statusCode"], content_type=JSON, body=answer["body"])

    @app.exception_handler(SearchUnavailable)
    def handle_search_unavailable(error: SearchUnavailable) -> Response:
        return code_response("memory_unavailable", "the provider's search did not answer; retry later")

    @app.exception_handler(ClientError)
    def handle_aws_error(error: ClientError) -> Response:
        code = error.response.get("Error", {}).get("Code", "")
        if code in AWS_NOT_ANSWERING or error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
            logger.warning("an AWS service did not answer", extra={"error_code": code})
            return code_response("memory_unavailable", "the provider's storage did not answer in time; retry later")
        return handle_unexpected(error)

    @app.exception_handler([BotoCoreError, Contended])
    def handle_no_answer(error: Exception) -> Response:
        logger.warning("an AWS service did not answer", extra={"error_type": type(error).__name__})
        return code_response("memory_unavailable", "the provider's storage did not answer in time; retry later")

    @app.exception_handler(RequestValidationError)
    def handle_validation_error(error: RequestValidationError) -> Response:
        errors: list[dict[str, Any]] = [dict(e) for e in error.errors()]
        if any(e.get("type") == "json_invalid" for e in errors):
            return code_response("invalid_request", "the request body is not valid JSON")
        return code_response("memory_invalid", describe_validation_errors(errors))

    @app.exception_handler(ValidationError)
    def handle_model_error(error: ValidationError) -> Response:
        # A body a handler validates itself (one whose shape depends on its content type).
        return code_response("memory_invalid", describe_validation_errors([dict(e) for e in error.errors()]))

    @app.not_found
    def handle_not_found(_: NotFoundError) -> Response:
        return code_response("not_found", "no such route")

    @app.exception_handler(Exception)
    def handle_unexpected(error: Exception) -> Response:
        # The type only: a message could carry record content, and content is never logged.
        logger.error("unhandled error", extra={"error_type": type(error).__name__})
        return code_response("internal_error", "the server failed; the request may be retried")

    return app


_INTEGER = re.compile(r"^[+-]?[0-9]{1,18}$")


def _check_query_parameters(app: APIGatewayRestResolver, next_middleware: Callable[..., Any]) -> Any:
    """A query parameter the route does not define is refused (422 memory_invalid), as an unknown body
    field is: `?limit=abc` on a route that does not page would otherwise answer 200, and the caller
    would believe it had been applied. An integer parameter is digits: "5.0" and "5e0" are not 5, as
    they are not in a body (docs/decisions.md, "Hostile input")."""
    params = {p.alias: p for p in app.context["_route"].dependant.query_params}
    given = app.current_event.query_string_parameters or {}
    unknown = sorted(set(given) - set(params))
    if unknown:
        allowed = f"; it takes {', '.join(sorted(params))}" if params else "; it takes none"
        raise MemoryInvalid(f"unknown query parameter {', '.join(unknown)}{allowed}")
    for name, value in given.items():
        if int in getattr(params[name].type_, "__args__", (params[name].type_,)) and not _INTEGER.match(value):
            raise MemoryInvalid(f"{name} must be an integer")
    return next_middleware(app)


def caller_of(app: APIGatewayRestResolver) -> Caller:
    """The caller the authorizer resolved from the API key. Never read from the request body."""
    return caller_in(app.current_event.raw_event)


def caller_in(event: dict[str, Any]) -> Caller:
    """The caller of a proxy event, from its authorizer's context (caller_of, before resolution)."""
    context = (event.get("requestContext") or {}).get("authorizer") or {}
    tenant, principal = context.get("tenant"), context.get("principal")
    if not tenant or not principal:
        raise Unauthenticated("missing or unknown API key")
    groups = tuple(g for g in str(context.get("groups") or "").split(",") if g)
    return Caller(tenant=str(tenant), principal=str(principal), groups=groups)


def respond(model: BaseModel | dict[str, Any], status: int = 200) -> Response:
    return Response(status_code=status, content_type=JSON, body=model)


def respond_as_shown(shown: dict[str, Any], status: int = 200) -> Response:
    """An answer whose shape depends on what the caller may read (a write-only caller is answered what it
    sent and the server's stamps, schemas.RecordWritten): sent as the presenter built it, because the
    route's declared model would refill what was withheld with nulls or refuse it as a 422."""
    return Response(status_code=status, content_type=JSON, body=json.dumps(shown, separators=(",", ":")))


class _ServerFailure(Exception):
    """Carries an answer out of the idempotent call, so Powertools does not keep it: a 5xx (a retry
    with the same key must run again, not replay a failure), a refusal of another body under a key
    that wrote (the key's own body must still get its answer), or a 4xx produced after the request's
    write committed (a retry is told what was written, never a refusal that says nothing was)."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__("server failure")
        self.answer = answer


# The routes whose body may be multipart/form-data (a file upload): (method, resource path).
MULTIPART_ROUTES = frozenset((route.method, route.path) for route in ROUTES if route.multipart)
# The POSTs that only read (recall, queries, grep): an Idempotency-Key keeps nothing of theirs.
READING_ROUTES = frozenset((route.method, route.path) for route in ROUTES if route.reads)


def writes_by_route(event: dict[str, Any]) -> bool:
    """Whether a request may write, by its route: every POST, PUT, PATCH and DELETE but the reads."""
    return (event.get("httpMethod"), event.get("resource")) not in READING_ROUTES


def body_as_sent(event: dict[str, Any]) -> str | None:
    """What a retry under the same Idempotency-Key must repeat to be the same request: the body, as
    sent, byte for byte (MCP compares less: functions/mcp/handler.py `compared_request`)."""
    body = event.get("body")
    return body if isinstance(body, str) else None


# Where make_handler puts what is compared (`compared`) in the event, for Powertools and the write key.
COMPARED = "idempotencyBody"
# How a refusal of what an Idempotency-Key names is answered: (event, {"error": {...}}) -> the answer.
Refused = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _normalize_event(event: dict[str, Any]) -> dict[str, Any]:
    """Lowercase header names (Powertools' idempotency reads them case-sensitively; HTTP does not),
    and read a body sent without a JSON content type as JSON: every body of this API is JSON except
    multipart file uploads (routes.Route.multipart), and `curl -d` labels JSON as a form. A multipart
    label elsewhere is read as JSON too: Powertools would parse it as a form (a 500 without a
    boundary, a misleading 422 with one), and the route reads JSON only."""
    event = dict(event)
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    content_type = headers.get("content-type", "")
    takes_multipart = (event.get("httpMethod"), event.get("resource")) in MULTIPART_ROUTES
    kept = ("application/json", "multipart/") if takes_multipart else ("application/json",)
    if event.get("body") and not content_type.startswith(kept):
        headers["content-type"] = "application/json"
    event["headers"] = headers
    if event.get("multiValueHeaders"):
        multi: dict[str, list[str]] = {}
        for name, values in event["multiValueHeaders"].items():
            multi.setdefault(name.lower(), []).extend(values or [])
        if "content-type" in headers:
            multi["content-type"] = [headers["content-type"]]
        event["multiValueHeaders"] = multi
    return event


def _refused_body(event: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to a body the JSON rule refuses (api/json_limits.py: size, depth, values JSON
    cannot hold), for every route before anything reads it (MCP's body goes to its SDK unparsed by
    Powertools); None when the body may be read. A JSON body sent
    base64-encoded (the local gateway does so with bytes that are not UTF-8) is decoded here, so
    later readers see text. Multipart uploads are bytes, and only their own parser reads them."""
    raw = event.get("body")
    if not raw or event["headers"].get("content-type", "").startswith("multipart/"):
        return None
    try:
        data: bytes | str = base64.b64decode(raw) if event.get("isBase64Encoded") else raw
        text = json_limits.text_of(data)
        json_limits.check(text)
    except binascii.Error:
        return error_dict(400, "invalid_request", "the request body is not valid base64")
    except DomainError as refused:
        return error_dict(status_of(refused.code), refused.code, refused.message)
    try:
        json_limits.check_values(text)  # MCP's SDK parses its body itself: the value rule holds there too
    except MemoryInvalid as refused:
        if event.get("resource") == MCP_PATH:
            return _json_rpc_refusal(text, refused)
        return error_dict(status_of(refused.code), refused.code, refused.message)
    event["body"], event["isBase64Encoded"] = text, False
    return None


MCP_PATH = "/mcp"


def _json_rpc_refusal(text: str, refused: MemoryInvalid) -> dict[str, Any]:
    """A value the JSON rule refuses in an MCP request, answered as MCP answers bad arguments: a
    JSON-RPC error (invalid params, `data.code` memory_invalid) to the request's id, which the SDK's
    client shows the agent as it is (an HTTP 422 reached it as "Server returned an error response")."""
    try:
        message = json.loads(text, parse_constant=lambda _: None)
    except ValueError:
        message = None
    request_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    body = {"jsonrpc": "2.0", "id": request_id,
            "error": {"code": -32602, "message": refused.message, "data": {"code": refused.code}}}
    return {"statusCode": 200, "headers": {"Content-Type": JSON}, "body": json.dumps(body), "isBase64Encoded": False}


def _write_key(event: dict[str, Any], settings: Any) -> WriteKey:
    """The request's write key: the kept answer's scope (IDEMPOTENCY_KEY_PATH) and its body."""
    context = (event.get("requestContext") or {}).get("authorizer") or {}
    scope = [context.get("tenant"), context.get("principal"), event.get("httpMethod"), event.get("path"),
             event["headers"].get(IDEMPOTENCY_HEADER)]
    return WriteKey.of(settings.idempotency_table_name, scope, event.get(COMPARED), settings.idempotency_seconds)


def refused_as_error(event: dict[str, Any], refusal: dict[str, Any]) -> dict[str, Any]:
    """A refusal of what a request's Idempotency-Key names (`{"error": {code, ...}}`: reused, in
    progress, committed), answered with its code's status (MCP answers it as a tool's refusal)."""
    return {"statusCode": status_of(refusal["error"]["code"]), "headers": {"Content-Type": JSON},
            "body": json.dumps(refusal), "isBase64Encoded": False}


def as_kept(event: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """A kept answer, given to a retry as it was kept (MCP addresses it to the retry's JSON-RPC id)."""
    return answer


def _key_refusal(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **details}}


KEY_REUSED = "this Idempotency-Key was already used with a different request body"
KEY_IN_PROGRESS = "a request with this Idempotency-Key is in progress"


def _already_written(event: dict[str, Any], error: WriteKeyTaken,
                     refuse: Refused = refused_as_error) -> dict[str, Any]:
    """The answer to a retry whose key wrote before and whose answer was not kept: 409
    idempotency_key_committed with the ids written."""
    return refuse(event, _key_refusal(error.code, error.message, **error.details))


def _resolve_under_write_key(
    app: APIGatewayRestResolver, event: dict[str, Any], context: Any, refuse: Refused
) -> dict[str, Any]:
    """Resolve an idempotent request under its write key, unless an attempt before this one wrote
    and left no kept answer (killed after its commit, its answer lost): that is answered from the
    key's marker, and nothing runs again.

    A 4xx that follows this request's own commit is answered and not kept: the write happened, so a
    retry replaying the refusal would tell the client nothing was written. The retry is answered from
    the marker instead (409 idempotency_key_committed, with what was written)."""
    container = bootstrap.container()
    write = _write_key(event, container.settings)
    marker = write.find(container.dynamodb)
    if marker is not None and marker.payload != write.payload:
        raise _ServerFailure(refuse(event, _key_refusal("idempotency_key_reused", KEY_REUSED)))
    if marker is not None:
        return _already_written(event, WriteKeyTaken(marker.written), refuse)
    with writing_under(write):
        answer = app.resolve(event, context)
    if write.committed and 400 <= answer.get("statusCode", 500) < 500:
        raise _ServerFailure(answer)
    return answer


def make_handler(
    app: APIGatewayRestResolver,
    writes: Callable[[dict[str, Any]], bool] = writes_by_route,
    compared: Callable[[dict[str, Any]], str | None] = body_as_sent,
    refuse: Refused = refused_as_error,
    replayed: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] = as_kept,
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda entry point for one function: plain resolution, or idempotent resolution when a
    request that may write (`writes`: by its route; MCP says by its tool) carries an Idempotency-Key.
    The same key with another request (`compared`: the body as sent; MCP says what of its message a
    retry repeats) is refused, 422 idempotency_key_reused; `refuse` answers that refusal and the
    key's others, `replayed` gives a kept answer to the request at hand (MCP: functions/mcp/handler.py).

    Idempotent resolution keeps the answer (Powertools), and runs the request under its write key
    (adapters/dynamodb/idempotency.py): a retry of a request that wrote is answered from the answer
    kept, else from the key's marker, and never writes again. A read's answer is never kept: a
    replay would answer what the caller may no longer read (a recall after its grant was revoked)."""
    bootstrap.warm_at_init()  # a handler module is imported at INIT: its clients are made there
    idempotent_resolvers: dict[int, Callable[[dict[str, Any], Any], dict[str, Any]]] = {}
    building = threading.Lock()
    # The answer the request on this thread produced, for when the store cannot keep it.
    produced = threading.local()

    def resolve_or_raise(event: dict[str, Any], context: Any) -> dict[str, Any]:
        answer = _resolve_under_write_key(app, event, context, refuse)
        if answer.get("statusCode", 500) >= 500:
            raise _ServerFailure(answer)
        produced.answer = answer
        return answer

    def idempotent_resolver() -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        container = bootstrap.container()
        key = id(container)
        with building:  # the local gateway resolves requests on several threads at once
            if key not in idempotent_resolvers:
                store = PackedDynamoDBPersistenceLayer(
                    table_name=container.settings.idempotency_table_name, boto3_client=container.dynamodb
                )
                config = IdempotencyConfig(
                    event_key_jmespath=IDEMPOTENCY_KEY_PATH,
                    payload_validation_jmespath=COMPARED,
                    expires_after_seconds=container.settings.idempotency_seconds,
                )
                # Configured now, once: Powertools configures a store on each call, marking it done
                # before it is, so a second request at the same time found no key expression.
                store.configure(config, f"{resolve_or_raise.__module__}.{resolve_or_raise.__qualname__}")
                idempotent_resolvers.clear()
                idempotent_resolvers[key] = idempotent(persistence_store=store, config=config)(resolve_or_raise)
            return idempotent_resolvers[key]

    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        deadlines.start(context)  # each search or model call of this request ends in its time
        event = _normalize_event(event)
        refused = _refused_body(event)
        if refused is not None:
            return refused  # before the idempotency store: a refused request is never kept
        key = event["headers"].get(IDEMPOTENCY_HEADER)
        if event.get("httpMethod") not in WRITE_METHODS or not key or not writes(event):
            return app.resolve(event, context)
        if len(key) > 255:
            return error_dict(422, "memory_invalid", "Idempotency-Key is at most 255 characters")
        if len((event.get("multiValueHeaders") or {}).get(IDEMPOTENCY_HEADER) or ()) > 1:
            # Two keys name two requests: which one this is cannot be told, so neither is taken.
            return error_dict(422, "memory_invalid", "send one Idempotency-Key header, not several")
        produced.answer = None
        event[COMPARED] = compared(event)
        try:
            return replayed(event, idempotent_resolver()(event, context))
        except _ServerFailure as failure:
            return failure.answer
        except IdempotencyPersistenceLayerError:
            answer = produced.answer
            if answer is not None:
                # The request ran and wrote; only keeping its answer failed (a DynamoDB item holds
                # 400 KB, and an answer can be larger). The caller gets the answer, and the key stays
                # in progress, so a retry is told so instead of writing twice.
                logger.warning("the idempotency store could not keep an answer")
                return answer
            logger.error("the idempotency store failed")
            return error_dict(500, "internal_error", "the server failed; the request may be retried")
        except IdempotencyValidationError:
            return refuse(event, _key_refusal("idempotency_key_reused", KEY_REUSED))
        except IdempotencyAlreadyInProgressError:
            return refuse(event, _key_refusal("idempotency_in_progress", KEY_IN_PROGRESS))

    # traced, metrics flushed, log lines correlated
    return observability.observed(_within_lambda_limit(lambda_handler))


def _within_lambda_limit(
    handler: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """A handler whose answer never passes Lambda's 6 MB (api/payloads.py): Lambda would refuse to
    return it and API Gateway answer an opaque 502, so it is a 500 that says why and what to ask
    instead. A 5xx: an Idempotency-Key keeps nothing of it (the store could not keep an answer this
    large either), so a retry of a write that committed is told it was written."""

    def within_lambda_limit(event: dict[str, Any], context: Any) -> dict[str, Any]:
        answer = handler(event, context)
        too_large = payloads.too_large_answer(answer)
        if too_large is None:
            return answer
        logger.error("an answer was larger than Lambda returns", extra={"bytes": payloads.payload_bytes(answer)})
        return error_dict(500, "internal_error", too_large)

    return within_lambda_limit


def json_body(answer: dict[str, Any]) -> Any:
    return json.loads(answer["body"]) if answer.get("body") else None
