"""The one rule for JSON a request carries, in its body or in a query parameter (`?filters=`): UTF-8,
at most JSON_MAX_BYTES, nested at most JSON_MAX_DEPTH levels. Checked before anything parses it, so a
hostile request is refused (4xx, nothing written) instead of reaching a recursion or serializer
limit as a 500 after it was saved.

The depth is bounded well below the two limits such JSON used to meet: pydantic's serializer (about
255 levels: a record with attributes nested 254 deep was saved, then every read of it failed) and
Python's recursion (json.loads of 100,000 nested lists). It is well above any shape this API defines
(filters, JSON Schemas of registered types, MCP arguments, a tool's input and output in a turn).

Values JSON text can spell that nothing downstream can keep are refused where they are parsed (422
memory_invalid naming the field), never coerced: NaN and Infinity (not JSON; Python reads them, and
they were kept as null), a number that overflows a float (1e400 became inf, then null), an integer of
more than 38 digits (DynamoDB's number precision: accepted locally, refused deployed), a lone
UTF-16 surrogate escape (`"\\ud800"`, which no UTF-8 can hold: a 500 when it reached storage), and an
object that spells one key twice, at any depth (json.loads keeps the last; a parser in front of this
one may have read the first, so the two would act on different requests)."""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

from uhp_memories.api.payloads import LAMBDA_PAYLOAD_BYTES
from uhp_memories.domain.errors import InvalidRequest, MemoryInvalid, RequestTooLarge

JSON_MAX_DEPTH = 64
# A synchronous Lambda invocation carries at most 6 MB (base64 included), so a larger body never
# reaches a deployed handler; the local gateway refuses such an event too (api/payloads.py).
JSON_MAX_BYTES = LAMBDA_PAYLOAD_BYTES

# A JSON string, escapes included: linear, since its two alternatives never match the same text.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# DynamoDB's number type holds 38 significant digits; an integer longer than that cannot be stored
# as the number it is anywhere the stage keeps numbers, so none is taken.
INTEGER_MAX_DIGITS = 38
_SURROGATE = re.compile("[\ud800-\udfff]")


def text_of(raw: bytes | str, what: str = "the request body") -> str:
    """`raw` as text, refused (400 invalid_request) unless it is UTF-8: JSON is UTF-8 (RFC 8259), and
    text decoded leniently would reach storage as something the client never sent."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        text.encode("utf-8")  # a str may hold lone surrogates, which UTF-8 cannot
    except UnicodeError:
        raise InvalidRequest(f"{what} is not valid UTF-8") from None
    return text


def check(text: str, what: str = "the request body") -> None:
    """Refuse JSON text too large (413 request_too_large) or too deeply nested (422 memory_invalid),
    without parsing it: the check itself must not recurse."""
    if len(text) > JSON_MAX_BYTES or len(text.encode("utf-8")) > JSON_MAX_BYTES:
        raise RequestTooLarge(f"{what} is larger than {JSON_MAX_BYTES} bytes")
    if depth(text) > JSON_MAX_DEPTH:
        raise MemoryInvalid(f"{what} nests JSON more than {JSON_MAX_DEPTH} levels deep")


def depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings do not
    count). Malformed text gets a number too; the parser refuses it afterwards."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets.encode("ascii")))))


class _Refused:
    """A value the rule refuses, met while parsing; it is named once its place in the document is known."""

    def __init__(self, why: str) -> None:
        self.why = why


def _constant(name: str) -> _Refused:
    return _Refused(f"is {name}, which JSON does not have; send a number or null")


def _float(text: str) -> float | _Refused:
    value = float(text)
    if math.isinf(value):
        return _Refused("is a number too large to hold (it overflows a 64-bit float)")
    if value == 0.0 and any(c in "123456789" for c in text.lower().split("e")[0]):
        return _Refused("is a number too small to hold (it underflows a 64-bit float to 0)")
    return value


def _int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > INTEGER_MAX_DIGITS:
        return _Refused(f"is an integer of more than {INTEGER_MAX_DIGITS} digits; send it as a string")
    return int(text)


class _Repeated(dict[str, Any]):
    """An object that spells a key twice, kept whole until its place in the document is known. Never
    returned: `_first_refused` refuses it."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object from its pairs, as json.loads would build it, unless a key comes twice: json.loads
    keeps the last, and another parser on the way (a gateway, a log, the client's own) the first."""
    built = dict(pairs)
    if len(built) == len(pairs):
        return built
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return _Repeated(pairs, key)
        seen.add(key)
    return built  # not reached: fewer keys than pairs means one came twice


def _parse(text: str) -> Any:
    """json.loads with the value rule's hooks; ValueError when the text is not JSON."""
    return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int, object_pairs_hook=_object)


def _field(path: str, key: str) -> str:
    shown = key if len(key) <= 64 else key[:64] + "..."
    return f"{path}.{shown}" if path else shown


def _first_refused(value: Any, path: str) -> tuple[str, str] | None:
    """(field, why) of the first value the rule refuses, depth first; None when all may be kept. The
    text was checked for depth first, so the recursion is at most JSON_MAX_DEPTH deep."""
    if isinstance(value, _Refused):
        return path, value.why
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            return path, "holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not Unicode text"
        return None
    if isinstance(value, _Repeated):
        shown = value.key if len(value.key) <= 64 else value.key[:64] + "..."
        return path, f"has the key {json.dumps(shown)} twice; send each key of an object once"
    if isinstance(value, dict):
        for key, item in value.items():
            if not key.isascii() and _SURROGATE.search(key):
                return (f"{path} (one of its keys)" if path else "a key"), "holds a lone UTF-16 surrogate"
            found = _first_refused(item, _field(path, key))
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_refused(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _checked(value: Any, what: str, top: str = "") -> Any:
    found = _first_refused(value, top)
    if found is not None:
        field, why = found
        raise MemoryInvalid(f"{field or what} {why}")
    return value


def loads(raw: bytes | str, what: str = "the request body") -> Any:
    """Parse JSON under the rule: 400 invalid_request when it is not UTF-8 or not JSON, 422
    memory_invalid naming the field that holds a value the rule refuses."""
    text = text_of(raw, what)
    check(text, what)
    try:
        value = _parse(text)
    except ValueError:
        raise InvalidRequest(f"{what} is not valid JSON") from None
    return _checked(value, what)


def check_values(text: str, what: str = "the request body") -> None:
    """Refuse (422 memory_invalid, naming the field) JSON text that holds a value the rule refuses.
    Text that is not JSON passes: whoever reads it refuses it in its own terms (the API with 400
    invalid_request, MCP's SDK with JSON-RPC's parse error). `text` has passed `check`."""
    try:
        value = _parse(text)
    except ValueError:
        return
    _checked(value, what)


def loads_query(value: str, name: str) -> Any:
    """A query parameter that holds JSON (`?filters=`), under the same rule as a body. Not JSON is a
    bad field, so 422 memory_invalid, as any other bad query parameter."""
    what = f"the {name} parameter"
    text = text_of(value, what)
    check(text, what)
    try:
        parsed = _parse(text)
    except ValueError:
        raise MemoryInvalid(f"{name} must be JSON") from None
    return _checked(parsed, what, name)

