"""Named queries' values and their recall templates (checked once, filled at each run)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from uhp_memories.domain.errors import DomainError, MemoryInvalid
from uhp_memories.domain.filters import parse_filter
from uhp_memories.domain.limits import RECALL_LIMIT_MAX
from uhp_memories.domain.recall.model import RecallInput

LANGUAGE = "uhp-recall"


NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


PLACEHOLDER = re.compile(r"\{\{\s*([a-z][a-z0-9_]*)\s*\}\}")


PARAM_TYPES = ("string", "number", "integer", "boolean")


TEMPLATE_FIELDS = ("query", "text", "filters", "types", "include", "limit", "depth")


MAX_PARAMS = 16


MAX_BODY_BYTES = 16 * 1024


MAX_QUERIES = 100


class QueryNotFound(DomainError):
    code = "memory_query_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"no named query '{name}' on this memory")


@dataclass(frozen=True)
class NamedQuery:
    tenant: str
    memory_id: str
    name: str
    description: str
    params: dict[str, Any]
    requires: str  # read | write
    language: str
    body: dict[str, Any]
    updated_by: str
    updated_at: int


def _template(body: Any) -> Any:
    """The recall template as an object: `body` is opaque to the protocol and a client may send it as a
    string, so a string holding a JSON object is that object (it is stored and answered as the object)."""
    if not isinstance(body, str):
        return body
    try:
        return json.loads(body)
    except ValueError:
        raise MemoryInvalid("body is a recall request: a JSON object, or a string holding one") from None


def check_recall_template(body: Any, params: dict[str, Any]) -> dict[str, Any]:
    """A recall request template whose string values may be `{{param}}` of the declared `params`
    (name -> JSON Schema of one value): it must make a valid recall request once filled in. Used by
    named queries and by the read operations of extension types (domain/types/service.py)."""
    if not isinstance(body, dict):
        raise MemoryInvalid("body is a recall request (an object) whose string values may be {{param}}")
    if len(json.dumps(body)) > MAX_BODY_BYTES:
        raise MemoryInvalid(f"a query body is at most {MAX_BODY_BYTES} bytes")
    unknown = set(body) - set(TEMPLATE_FIELDS)
    if unknown:
        raise MemoryInvalid(f"a recall template holds only {list(TEMPLATE_FIELDS)}; not {sorted(unknown)}")
    declared = set(params)
    used = set(PLACEHOLDER.findall(json.dumps(body)))
    if used - declared:
        raise MemoryInvalid(f"the body uses params it does not declare: {sorted(used - declared)}")
    example = recall_input(substitute(body, {p: _example(params[p]) for p in declared}))
    parse_filter(example.filters)
    if example.include not in ("active", "all") or example.depth < 0:
        raise MemoryInvalid("the query body does not make a valid recall request")
    if not example.asks:  # refused when defined, not each time it runs
        raise MemoryInvalid("the query body asks for nothing: give it a query, text, filters or types")
    if example.limit is not None and not 1 <= example.limit <= RECALL_LIMIT_MAX:
        raise MemoryInvalid(f"limit must be between 1 and {RECALL_LIMIT_MAX}")
    return body


def recall_input(body: dict[str, Any]) -> RecallInput:
    try:
        return RecallInput(
            query=_opt_str(body.get("query"), "query"),
            text=_opt_str(body.get("text"), "text"),
            filters=body.get("filters"),
            types=tuple(body.get("types") or ()),
            include=str(body.get("include", "active")),
            limit=int(body["limit"]) if body.get("limit") is not None else None,
            depth=int(body.get("depth", 0)),
        )
    except (TypeError, ValueError):
        raise MemoryInvalid("the query body does not make a valid recall request") from None


def _opt_str(value: Any, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise MemoryInvalid(f"{field} must be text")


def _check_param_schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise MemoryInvalid('params is a JSON Schema of type object: {"type": "object", "properties": {...}}')
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict) or len(properties) > MAX_PARAMS:
        raise MemoryInvalid(f"params.properties is an object of at most {MAX_PARAMS} params")
    for name, spec in properties.items():
        if not NAME.match(name) or not isinstance(spec, dict) or spec.get("type") not in PARAM_TYPES:
            raise MemoryInvalid(f"param '{name}' must have a type among {list(PARAM_TYPES)}")
        if "enum" in spec and not isinstance(spec["enum"], list):
            raise MemoryInvalid(f"param '{name}': enum is a list")
    required = schema.get("required") or []
    if not isinstance(required, list) or set(required) - set(properties):
        raise MemoryInvalid("params.required names declared params only")
    return {"type": "object", "properties": properties, "required": required}


def _check_params(schema: dict[str, Any], given: Any) -> dict[str, Any]:
    """The params, checked against the query's schema: §12's memory_invalid when they do not match."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise MemoryInvalid("params is an object")
    properties = schema["properties"]
    unknown = set(given) - set(properties)
    missing = [p for p in schema["required"] if p not in given]
    if unknown or missing:
        raise MemoryInvalid(f"params do not match: unknown {sorted(unknown)}, missing {missing}")
    values: dict[str, Any] = {}
    for name, spec in properties.items():
        if name not in given:
            if "default" in spec:
                values[name] = spec["default"]
            continue
        value = given[name]
        if not is_type(value, spec["type"]):
            raise MemoryInvalid(f"params do not match: '{name}' must be a {spec['type']}")
        if "enum" in spec and value not in spec["enum"]:
            raise MemoryInvalid(f"params do not match: '{name}' must be one of {spec['enum']}")
        if spec["type"] == "string" and len(value) > spec.get("maxLength", 2000):
            raise MemoryInvalid(f"params do not match: '{name}' is too long")
        values[name] = value
    return values


def is_type(value: Any, kind: str) -> bool:
    """Whether a JSON value is of a param's type (PARAM_TYPES); a boolean is no number."""
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, (int, float))
    return isinstance(value, str)


def _example(spec: dict[str, Any]) -> Any:
    if spec.get("enum"):
        return spec["enum"][0]
    return {"string": "x", "number": 1, "integer": 1, "boolean": True}.get(spec.get("type", "string"), "x")


def substitute(template: Any, values: dict[str, Any]) -> Any:
    """Fill `{{param}}` placeholders in string values: a value that is only a placeholder takes the
    param as it is (a number stays a number); inside longer text it is written as text. Keys are
    never substituted."""
    if isinstance(template, dict):
        return {key: substitute(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [substitute(item, values) for item in template]
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template.strip())
        if whole:
            return values.get(whole.group(1))
        return PLACEHOLDER.sub(lambda m: "" if values.get(m.group(1)) is None else str(values[m.group(1)]), template)
    return template
