"""The filter tree of domain/filters.py lowered to a few typed primitives, once, for every adapter.

`matches()` in domain/filters.py is the reference: a number equals only a number, a string only a
string, a bool only a bool, null only null (a time field is always there, null when unknown, so
`time.valid_to eq null` matches an open validity); a range never matches a bool, a null or a missing
field; `ne` and `nin` match a missing field; a list or an object equals nothing but is present. Lowering
settles all of that here, so an adapter only translates five primitives and cannot get the typing
rules subtly wrong on its own.

Attribute values are flattened the same way for every engine (`attribute_leaves`): one entry per
path reachable by a filter field, with the kind of the value found there.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from uhp_memories.domain.filters import Combination, Condition, Filter

# Kinds of a value at a path. Only scalars can be compared; lists and objects are only present.
STRING, NUMBER, BOOLEAN, NULL, ARRAY, OBJECT = "s", "n", "b", "z", "a", "o"
OPAQUE = "x"  # a number no comparison can match (NaN, infinities, beyond a double): present only
RANGE_OPS = ("lt", "lte", "gt", "gte")


@dataclass(frozen=True)
class FieldRef:
    """A filterable field: `type`, a time field, or an attribute path (its parts)."""

    kind: str  # type | time | attr
    name: str = ""  # the time field's name
    parts: tuple[str, ...] = ()

    @property
    def path_key(self) -> str:
        """The attribute path as one unambiguous string (a JSON array of its parts)."""
        return path_key(self.parts)


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Present:
    field: FieldRef


@dataclass(frozen=True)
class Equals:
    field: FieldRef
    kind: str  # s | n | b | z
    value: Any


@dataclass(frozen=True)
class Compare:
    field: FieldRef
    op: str  # lt | lte | gt | gte
    kind: str  # s | n
    value: Any


@dataclass(frozen=True)
class Not:
    part: Predicate


@dataclass(frozen=True)
class All:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class Any_:
    parts: tuple[Predicate, ...]


Predicate = Const | Present | Equals | Compare | Not | All | Any_
TRUE, FALSE = Const(True), Const(False)


def lower(flt: Filter | None) -> Predicate:
    """The filter as primitives, with constants folded (no filter is TRUE)."""
    if flt is None:
        return TRUE
    if isinstance(flt, Combination):
        parts = tuple(lower(p) for p in flt.parts)
        if flt.kind == "not":
            return negate(parts[0])
        return conjoin(parts) if flt.kind == "and" else disjoin(parts)
    return _lower_condition(flt)


def conjoin(parts: tuple[Predicate, ...]) -> Predicate:
    if any(p == FALSE for p in parts):
        return FALSE
    kept = tuple(p for p in parts if p != TRUE)
    return TRUE if not kept else kept[0] if len(kept) == 1 else All(kept)


def disjoin(parts: tuple[Predicate, ...]) -> Predicate:
    if any(p == TRUE for p in parts):
        return TRUE
    kept = tuple(p for p in parts if p != FALSE)
    return FALSE if not kept else kept[0] if len(kept) == 1 else Any_(kept)


def negate(part: Predicate) -> Predicate:
    if isinstance(part, Const):
        return Const(not part.value)
    if isinstance(part, Not):
        return part.part
    return Not(part)


def field_ref(name: str) -> FieldRef:
    if name == "type":
        return FieldRef("type")
    if name.startswith("time."):
        return FieldRef("time", name=name[5:])
    return FieldRef("attr", parts=tuple(name.split(".")[1:]))


def kind_of(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, (int, float)):
        return NUMBER
    if isinstance(value, str):
        return STRING
    return ARRAY if isinstance(value, (list, tuple)) else OBJECT


def _lower_condition(cond: Condition) -> Predicate:
    ref = field_ref(cond.field)
    op, value = cond.op, cond.value
    if op == "exists":
        present = _present(ref)
        return present if value else negate(present)
    if op in ("eq", "ne"):
        equal = _equals(ref, value)
        return equal if op == "eq" else negate(equal)
    if op in ("in", "nin"):
        member = disjoin(tuple(_equals(ref, v) for v in value))
        return member if op == "in" else negate(member)
    return _compare(ref, op, value)


def _present(ref: FieldRef) -> Predicate:
    return TRUE if ref.kind == "type" else Present(ref)


def _equals(ref: FieldRef, value: Any) -> Predicate:
    kind = kind_of(value)
    if ref.kind == "time" and value is None:
        return negate(Present(ref))  # a time field is always there, null when unknown
    if ref.kind != "attr" and kind != STRING:
        return FALSE  # type and time values are always strings when present
    if kind == NUMBER and not finite_number(value):
        return FALSE
    return Equals(ref, kind, value)


def _compare(ref: FieldRef, op: str, value: Any) -> Predicate:
    kind = kind_of(value)
    if kind not in (STRING, NUMBER) or (ref.kind != "attr" and kind != STRING):
        return FALSE
    if kind == NUMBER and not finite_number(value):
        return FALSE
    return Compare(ref, op, kind, value)


def finite_number(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


# -- attributes, flattened ---------------------------------------------------------------------


def path_key(parts: tuple[str, ...] | list[str]) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def attribute_leaves(attributes: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """(path parts, kind, value) for every path a filter field can reach.

    A filter field splits on dots, so a key that holds a dot (or is empty) can never be reached and
    is skipped, as is everything under it. Lists are leaves: a filter does not look inside them."""
    stack: list[tuple[tuple[str, ...], Mapping[str, Any]]] = [((), attributes)]
    while stack:
        prefix, node = stack.pop()
        for key, value in node.items():
            if not isinstance(key, str) or not key or "." in key:
                continue
            parts = (*prefix, key)
            kind = kind_of(value)
            if kind == NUMBER and not finite_number(value):
                kind = OPAQUE
            yield parts, kind, value if kind in (STRING, NUMBER, BOOLEAN) else None
            if kind == OBJECT:
                stack.append((parts, value))


def sortable_number(value: float | int) -> str:
    """A number as 16 hex digits whose string order is the numbers' order (IEEE 754, sign-flipped).

    -0.0 and 0.0 encode alike, as they compare equal."""
    number = float(value) + 0.0
    bits = struct.unpack(">Q", struct.pack(">d", number))[0]
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits & (1 << 63) else bits | (1 << 63)
    return f"{bits:016x}"
