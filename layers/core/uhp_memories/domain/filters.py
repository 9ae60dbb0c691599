"""The field filter language of recall and list: equality, range and membership over `type`,
`attributes.*` and `time.*`, combined with and / or / not.

    {"and": [{"field": "attributes.account", "op": "eq", "value": "acme"},
             {"field": "time.valid_from", "op": "gte", "value": "2026-01-01T00:00:00Z"}]}

Parsed once into an immutable tree (invalid filters are a 422 before any read), then evaluated
against record versions. The search adapters translate the same tree into their own queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.domain.timefmt import parse_instant

COMPARISONS = ("eq", "ne", "lt", "lte", "gt", "gte")
MEMBERSHIP = ("in", "nin")
OPERATORS = (*COMPARISONS, *MEMBERSHIP, "exists")
TIME_FIELDS = ("valid_from", "valid_to", "written_at", "invalidated_at")
MAX_FILTER_NODES = 64
MAX_IN_VALUES = 100


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class Combination:
    kind: str  # and | or | not
    parts: tuple[Filter, ...]


Filter = Condition | Combination


def parse_filter(raw: Any) -> Filter | None:
    if raw is None:
        return None
    counter = [0]
    return _parse(raw, counter)


def _parse(raw: Any, counter: list[int]) -> Filter:
    counter[0] += 1
    if counter[0] > MAX_FILTER_NODES:
        raise MemoryInvalid(f"filters may hold at most {MAX_FILTER_NODES} conditions")
    if not isinstance(raw, dict):
        raise MemoryInvalid("a filter is an object: {field, op, value} or {and|or: [...]} or {not: {...}}")
    combinators = [k for k in ("and", "or", "not") if k in raw]
    if combinators:
        if len(raw) != 1:
            raise MemoryInvalid("a combining filter has exactly one key: and, or or not")
        kind = combinators[0]
        body = raw[kind]
        if kind == "not":
            return Combination("not", (_parse(body, counter),))
        if not isinstance(body, list) or not body:
            raise MemoryInvalid(f"'{kind}' takes a non-empty list of filters")
        return Combination(kind, tuple(_parse(part, counter) for part in body))
    return _parse_condition(raw)


def _parse_condition(raw: dict[str, Any]) -> Condition:
    unknown = set(raw) - {"field", "op", "value"}
    if unknown:
        raise MemoryInvalid(f"unknown filter keys: {sorted(unknown)}")
    field, op = raw.get("field"), raw.get("op", "eq")
    if not isinstance(field, str) or not _field_allowed(field):
        allowed = "|".join(TIME_FIELDS)
        raise MemoryInvalid(f"filter field must be 'type', 'attributes.<name>' or 'time.<{allowed}>'")
    if op not in OPERATORS:
        raise MemoryInvalid(f"filter op must be one of {list(OPERATORS)}")
    value = raw.get("value")
    if op in MEMBERSHIP:
        if not isinstance(value, list) or len(value) > MAX_IN_VALUES:
            raise MemoryInvalid(f"'{op}' takes a list of at most {MAX_IN_VALUES} values")
        value = tuple(_normalize(field, v) for v in value)
    elif op == "exists":
        if not isinstance(value, bool):
            raise MemoryInvalid("'exists' takes true or false")
    else:
        if "value" not in raw:
            raise MemoryInvalid(f"'{op}' needs a value")
        value = _normalize(field, value)
    return Condition(field, op, value)


def _field_allowed(field: str) -> bool:
    if field == "type":
        return True
    if field.startswith("attributes."):
        return all(part for part in field.split(".")[1:])
    return field.startswith("time.") and field[5:] in TIME_FIELDS


def _normalize(field: str, value: Any) -> Any:
    if field.startswith("time.") and value is not None:
        if not isinstance(value, str):
            raise MemoryInvalid(f"{field} compares with an RFC 3339 time")
        return parse_instant(value, field)
    if isinstance(value, (dict, list)):
        raise MemoryInvalid("filter values are strings, numbers, booleans or null")
    return value


def field_value(record: RecordVersion, field: str) -> tuple[bool, Any]:
    """(present, value) of a filter field on a record. `exists` on a time field means not null."""
    if field == "type":
        return True, record.type
    if field.startswith("time."):
        value = getattr(record, field[5:])
        return value is not None, value
    current: Any = record.attributes
    for part in field.split(".")[1:]:
        if not isinstance(current, dict) or part not in current:
            return False, None
        current = current[part]
    return True, current


def matches(flt: Filter | None, record: RecordVersion) -> bool:
    if flt is None:
        return True
    if isinstance(flt, Combination):
        if flt.kind == "and":
            return all(matches(part, record) for part in flt.parts)
        if flt.kind == "or":
            return any(matches(part, record) for part in flt.parts)
        return not matches(flt.parts[0], record)
    present, value = field_value(record, flt.field)
    if flt.op == "exists":
        return present == flt.value
    if flt.field.startswith("time."):
        # A time field is always there, null when unknown: `time.valid_to eq null` matches an open
        # validity, as `attributes.x eq null` matches an explicit null.
        present = True
    if flt.op == "eq":
        return present and _same_kind(value, flt.value) and value == flt.value
    if flt.op == "ne":
        return not (present and _same_kind(value, flt.value) and value == flt.value)
    if flt.op == "in":
        return present and any(_same_kind(value, v) and value == v for v in flt.value)
    if flt.op == "nin":
        return not (present and any(_same_kind(value, v) and value == v for v in flt.value))
    if not present or value is None or flt.value is None or not _same_kind(value, flt.value):
        return False
    if isinstance(value, bool):
        return False
    return {
        "lt": value < flt.value,
        "lte": value <= flt.value,
        "gt": value > flt.value,
        "gte": value >= flt.value,
    }[flt.op]


def _same_kind(a: Any, b: Any) -> bool:
    """Numbers compare with numbers, strings with strings; a bool is never a number here."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return True
    return type(a) is type(b)
