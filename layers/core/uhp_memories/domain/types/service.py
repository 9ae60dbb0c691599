"""Extension types (§8): typed records with their own schema, text projection and operations.

A record of an extension type is a record like any other (addressed, versioned, under its memory's
access, referenced, forgotten, erased). What the type adds:
- its `attributes` are validated against the type's JSON Schema on every remember and revise (with
  `jsonschema`, Draft 2020-12; `format: date-time` is checked as the API reads times), and a refusal
  is 422 `memory_invalid` naming the field;
- its text projection (`text`, a template of `{field}` placeholders over the attributes and
  `{content}`) is what is embedded and indexed: computed on every version, kept with it;
- its operations (`POST .../records/{rid}/operations/{name}`), each stating the privilege it needs.

Types come from two places: those built into the server (domain/types/builtin.py: calendar events
and tasks, with operations in code) and those a tenant's administrator registers through the API
(`PUT /v1/memories/types/{type}`), which are declarative only:
- a write operation `set`s attributes of the record it is run on, each to a constant or to a
  `{{param}}` of its input; the new attributes are validated against the schema and appended as a
  version stamped with the caller (a revise, so a stale version conflicts as any revise does);
- a read operation runs a `recall` template (named queries' language, `{{param}}` placeholders) on
  the record's own memory, with the caller's privileges, and answers in §6.3's shape.
An operation reaches only the record it is run on and that record's memory: it cannot name another
memory, walk to children (`depth` is refused), change content, type, time or references, grant,
forget or erase. The caller's privileges are checked on every call as on any other route.

A record whose type the server does not know is carried unchanged and never refused on read (§4.1):
its attributes are free-form, as a core type's are. What a caller may state for a new record is
narrower (`check_stated_type`): a core type, or an extension named `x.<name>` (registered or not);
an unprefixed name that is not a core type (`facts`, `preference`) is a mistake, refused with the
core types, rather than a type no reader will ask for.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from uhp_memories.domain.agents.model import is_tenant_admin
from uhp_memories.domain.errors import MemoryConflict, MemoryForbidden, MemoryInvalid
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records.model import CORE_TYPES
from uhp_memories.domain.timefmt import parse_instant
from uhp_memories.domain.types.model import (
    EXTENSION_PREFIX,
    MAX_DEFINITION_BYTES,
    MAX_DESCRIPTION_CHARS,
    MAX_OPERATIONS,
    MAX_TEXT_CHARS,
    MAX_TYPES_PER_TENANT,
    OPERATION_NAME,
    REQUIRES,
    TENANT_ADMIN_GROUP,
    TEXT_FIELD,
    TYPE_NAME,
    UNSETTABLE,
    Operation,
    TypedAttributes,
    TypeDefinition,
    TypeVersionTaken,
)
from uhp_memories.domain.types.ports import TypeRepository

# jsonschema's import is a cold start's cost (measured: docs/performance.md,
# "Figures behind design choices in the code").
if TYPE_CHECKING:  # imported when first used: only writes of typed records pay for jsonschema
    from jsonschema import Draft202012Validator, FormatChecker
    from jsonschema.exceptions import ValidationError











# -- the type a new record states ---------------------------------------------------------------------




# -- validation ---------------------------------------------------------------------------------------

@functools.cache
def _formats() -> FormatChecker:
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())

    @checker.checks("date-time", raises=(MemoryInvalid,))
    def _is_instant(value: object) -> bool:
        """`date-time` as the API reads every time (RFC 3339 with an offset), not a looser reading."""
        if not isinstance(value, str):
            return True  # a type mismatch is `type`'s to report
        parse_instant(value)
        return True

    return checker


def validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema, format_checker=_formats())


def _where(error: ValidationError, root: str) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{root}{path}"


def check_value(schema: Mapping[str, Any], value: Any, root: str) -> None:
    """memory_invalid naming the field when `value` does not match `schema`."""
    from jsonschema.exceptions import best_match

    error = best_match(validator(schema).iter_errors(value))
    if error is not None:
        raise MemoryInvalid(f"{_where(error, root)}: {error.message}")


def check_schema(schema: Any, what: str) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise MemoryInvalid(f'{what} is a JSON Schema of type object: {{"type": "object", "properties": {{...}}}}')
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise MemoryInvalid(f"{what} is not a valid JSON Schema: {error.message}") from None
    # Only references inside the schema itself: nothing is ever fetched to validate a record.
    for ref in _values_of(schema, "$ref"):
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise MemoryInvalid(f"{what}: $ref may only point inside the schema (#/...)")
    return schema


def _values_of(node: Any, key: str) -> Iterable[Any]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _values_of(v, key)
    elif isinstance(node, list):
        for item in node:
            yield from _values_of(item, key)


# -- the projection --------------------------------------------------------------------------------


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(_as_text(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def project(definition: TypeDefinition, attributes: Mapping[str, Any], content: Any) -> str:
    """The text a record of this type is embedded and searched by: the template filled in (a list is
    joined with commas, a missing field is empty), whitespace collapsed."""
    fields = {**attributes, "content": content if isinstance(content, str) else ""}
    text = TEXT_FIELD.sub(lambda m: _as_text(fields.get(m.group(1))), definition.text)
    return " ".join(text.split())


# -- the catalogue ------------------------------------------------------------------------------------


def canonical_times(schema: Mapping[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """Top-level `date-time` attributes in the one form times sort in as strings (UTC, `Z`), so a
    range filter over them (`attributes.starts_at gte ...`) compares instants on both search engines."""
    properties = schema.get("properties") or {}
    out = dict(attributes)
    for name, spec in properties.items():
        if isinstance(spec, dict) and spec.get("format") == "date-time" and isinstance(out.get(name), str):
            out[name] = parse_instant(out[name], f"attributes.{name}")
    return out


class TypeService:
    """Extension types (§8): registered, read, and checked against a record."""
    def __init__(
        self,
        ports: Ports,
        repository: TypeRepository,
        builtins: Iterable[TypeDefinition],
    ) -> None:
        self._ports = ports
        self._repository = repository
        self._builtins = {d.type: d for d in builtins}

    def definition(self, tenant: str, type_name: str) -> TypeDefinition | None:
        """The type's current definition; None for a core type or one the server does not know."""
        if type_name in CORE_TYPES or not type_name.startswith(EXTENSION_PREFIX):
            return None
        return self._builtins.get(type_name) or self._repository.current(tenant, type_name)

    def list(self, caller: Caller) -> list[TypeDefinition]:
        """The types this caller's records may have beyond the core ones: built in, then the tenant's."""
        registered = sorted(self._repository.list(caller.tenant), key=lambda d: d.type)
        return [*self._builtins.values(), *registered]

    def check(self, tenant: str, type_name: str, attributes: dict[str, Any], content: Any) -> TypedAttributes:
        """Validate a version's attributes against its type, and project it (§8). A core type or an
        unknown one is carried as it is (§4.1)."""
        definition = self.definition(tenant, type_name)
        if definition is None:
            return TypedAttributes(attributes, None)
        check_value(definition.schema, attributes, "attributes")
        attributes = canonical_times(definition.schema, attributes)
        for later, earlier in definition.not_before:
            if later in attributes and earlier in attributes and attributes[later] < attributes[earlier]:
                raise MemoryInvalid(f"attributes.{later}: is before attributes.{earlier}")
        return TypedAttributes(attributes, project(definition, attributes, content))

    # -- registration ---------------------------------------------------------------------------------

    def register(self, caller: Caller, type_name: str, raw: Any) -> TypeDefinition:
        """Define or replace a tenant's type: a new version, validated whole before anything is written.
        Records already written keep their attributes; they are validated against the new version when
        next revised."""
        if not is_tenant_admin(caller):
            raise MemoryForbidden(f"tenant administration (a key in {TENANT_ADMIN_GROUP})")
        if not TYPE_NAME.match(type_name) or len(type_name) > 100:
            raise MemoryInvalid("an extension type is named x.<name>, e.g. x.crm.deal: lowercase words after x.")
        if type_name in self._builtins:
            raise MemoryConflict(f"{type_name} is built into this server and cannot be replaced")
        definition = parse_definition(type_name, raw)
        current = self._repository.current(caller.tenant, type_name)
        if current is None and len(self._repository.list(caller.tenant)) >= MAX_TYPES_PER_TENANT:
            raise MemoryInvalid(f"a tenant registers at most {MAX_TYPES_PER_TENANT} types")
        definition = replace(
            definition,
            version=1 if current is None else current.version + 1,
            registered_by=caller.principal,
            registered_at=self._ports.clock.now_ms(),
        )
        try:
            self._repository.put(caller.tenant, definition)
        except TypeVersionTaken:
            raise MemoryConflict(f"{type_name} was registered again meanwhile; read it and retry") from None
        return definition


def parse_definition(type_name: str, raw: Any) -> TypeDefinition:
    if not isinstance(raw, dict):
        raise MemoryInvalid("a type definition is an object: {description, schema, text, operations}")
    if len(json.dumps(raw)) > MAX_DEFINITION_BYTES:
        raise MemoryInvalid(f"a type definition is at most {MAX_DEFINITION_BYTES} bytes of JSON")
    unknown = set(raw) - {"type", "description", "schema", "text", "operations"}
    if unknown:
        raise MemoryInvalid(f"unknown fields of a type definition: {sorted(unknown)}")
    if raw.get("type") not in (None, type_name):
        raise MemoryInvalid(f"the definition's type '{raw['type']}' is not the type in the path, '{type_name}'")
    description = _string(raw.get("description", ""), "description", MAX_DESCRIPTION_CHARS)
    schema = check_schema(raw.get("schema"), "schema")
    properties = schema.get("properties") or {}
    text = _string(raw.get("text"), "text", MAX_TEXT_CHARS)
    if not text.strip():
        raise MemoryInvalid("text is the projection recall searches: a template such as '{title} on {day}'")
    unknown_fields = set(TEXT_FIELD.findall(text)) - set(properties) - {"content"}
    if unknown_fields:
        raise MemoryInvalid(f"text names fields the schema does not declare: {sorted(unknown_fields)}")
    operations = raw.get("operations", [])
    if not isinstance(operations, list) or len(operations) > MAX_OPERATIONS:
        raise MemoryInvalid(f"operations is a list of at most {MAX_OPERATIONS}")
    parsed = tuple(_operation(o, properties) for o in operations)
    names = [o.name for o in parsed]
    if len(set(names)) != len(names):
        raise MemoryInvalid("operation names are unique within a type")
    return TypeDefinition(type_name, description, schema, text, parsed)


def _string(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise MemoryInvalid(f"{what} is text of at most {limit} characters")
    return value


def _operation(raw: Any, properties: Mapping[str, Any]) -> Operation:
    # Imported here: queries reaches records (through recall), which checks a stated type with this module.
    from uhp_memories.domain.queries.model import PLACEHOLDER, check_recall_template

    if not isinstance(raw, dict):
        raise MemoryInvalid("an operation is an object: {name, description, input, requires, set | recall}")
    unknown = set(raw) - {"name", "description", "input", "requires", "set", "recall"}
    if unknown:
        raise MemoryInvalid(f"unknown fields of an operation: {sorted(unknown)}")
    name = raw.get("name")
    if not isinstance(name, str) or not OPERATION_NAME.match(name):
        raise MemoryInvalid("an operation name is 1 to 64 lowercase letters, digits or '_', starting with a letter")
    where = f"operation {name}"
    description = _string(raw.get("description", ""), f"{where}: description", MAX_DESCRIPTION_CHARS)
    schema = check_schema(raw.get("input", {"type": "object", "properties": {}}), f"{where}: input")
    params = schema.get("properties") or {}
    requires = raw.get("requires")
    if requires not in REQUIRES:
        raise MemoryInvalid(f"{where}: requires is read or write")
    sets, recall = raw.get("set"), raw.get("recall")
    if (sets is None) == (recall is None):
        raise MemoryInvalid(f"{where}: an operation either sets attributes (write) or runs a recall (read)")
    if sets is not None:
        if requires != "write":
            raise MemoryInvalid(f"{where}: an operation that sets attributes requires write")
        if not isinstance(sets, dict) or not sets:
            raise MemoryInvalid(f"{where}: set is an object of attribute -> value or \"{{{{param}}}}\"")
        bad = [k for k in sets if k in UNSETTABLE or k not in properties]
        if bad:
            raise MemoryInvalid(f"{where}: set names only attributes the schema declares, not {sorted(bad)}")
        used = set(PLACEHOLDER.findall(json.dumps(sets)))
        if used - set(params):
            raise MemoryInvalid(f"{where}: set uses params its input does not declare: {sorted(used - set(params))}")
        return Operation(name, description, schema, requires, set=sets)
    if requires != "read":
        raise MemoryInvalid(f"{where}: an operation that runs a recall requires read")
    if isinstance(recall, dict) and "depth" in recall:
        raise MemoryInvalid(f"{where}: an operation reads its record's memory only; depth is not allowed")
    body = check_recall_template(recall, params)
    return Operation(name, description, schema, requires, recall=body)


def definition_json(definition: TypeDefinition) -> dict[str, Any]:
    """The definition as registered (what the repository keeps and the listing shows of it)."""
    return {
        "type": definition.type,
        "description": definition.description,
        "schema": definition.schema,
        "text": definition.text,
        "operations": [operation_json(o) for o in definition.operations],
    }


def operation_json(operation: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": operation.name,
        "description": operation.description,
        "input": operation.input,
        "requires": operation.requires,
    }
    if operation.set is not None:
        out["set"] = operation.set
    if operation.recall is not None:
        out["recall"] = operation.recall
    return out
