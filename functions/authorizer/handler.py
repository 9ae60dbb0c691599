"""The API Gateway REQUEST authorizer: an API key (header x-api-key) to a tenant, a principal and
groups. Keys are looked up by their SHA-256; the key itself is stored nowhere.

API Gateway calls this before every route; the local gateway calls it the same way. Raising
"Unauthorized" is API Gateway's contract for a 401.
"""

from typing import Any

from aws_lambda_powertools import Logger

from uhp_memories import bootstrap
from uhp_memories.adapters.dynamodb.apikeys import hash_key

logger = Logger(service="uhp-memories-authorizer")


class Unauthorized(Exception):
    pass


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    api_key = the_one_api_key(event)
    if not api_key or len(api_key) > 512:
        raise Unauthorized("Unauthorized")
    found = bootstrap.container().keys.find(hash_key(api_key))
    if found is None:
        raise Unauthorized("Unauthorized")
    logger.info("authorized", extra={"tenant": found.tenant, "key_id": found.key_id})
    return {
        "principalId": found.principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": _any_route(event)}],
        },
        # API Gateway passes this context to every function as requestContext.authorizer;
        # values must be strings, numbers or booleans.
        "context": {
            "tenant": found.tenant,
            "principal": found.principal,
            "groups": ",".join(found.groups),
            "key_id": found.key_id,
        },
        # The usage plan of the tenant's API Gateway key applies to this request.
        "usageIdentifierKey": api_key,
    }


def the_one_api_key(event: dict[str, Any]) -> str | None:
    """The request's x-api-key, or None unless it sent exactly one. API Gateway hands a repeated
    header's last value in `headers` and every value in `multiValueHeaders`, and keys its authorizer
    cache by the identity source: a request with two keys could be cached under one it was not
    authorized by, so it is refused whatever the gateway does with them."""
    values = [v for k, vs in (event.get("multiValueHeaders") or {}).items() if k.lower() == "x-api-key"
              for v in (vs or [])]
    named = [v for k, v in (event.get("headers") or {}).items() if k.lower() == "x-api-key"]
    if len(values) > 1 or len(named) > 1 or (values and named and named[-1] != values[-1]):
        return None
    return named[0] if named else (values[0] if values else None)


def _any_route(event: dict[str, Any]) -> str:
    """The policy covers every route of the stage, so API Gateway may cache it per key."""
    arn = str(event.get("methodArn", "arn:aws:execute-api:local:000000000000:local/local/GET/"))
    parts = arn.split("/")
    return "/".join(parts[:2]) + "/*" if len(parts) >= 2 else arn
