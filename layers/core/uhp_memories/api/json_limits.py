"""The one rule for JSON a request carries, in its body or in a query parameter (`?filters=`): UTF-8,
at most JSON_MAX_BYTES, nested at most JSON_MAX_DEPTH levels. Checked before anything parses it, so a
hostile request is refused (4xx, nothing written) instead of reaching a recursion or serializer
limit as a 500 after it was saved.

The depth is bounded well below the two limits such JSON used to meet: pydantic's serializer (about
255 levels: a record with attributes nested 254 deep was saved, then every read of it failed) and
Python's recursion (json.loads of 100,000 nested lists). It is well above any shape this API defines
(filters, JSON Schemas of registered types, MCP arguments, a tool's input and output in a turn)."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from uhp_memories.domain.errors import InvalidRequest, MemoryInvalid, RequestTooLarge

JSON_MAX_DEPTH = 64
# A synchronous Lambda invocation carries at most 6 MB (base64 included), so a larger body never
# reaches a deployed handler; the local gateway accepts 10 MiB, and this keeps it to the same.
JSON_MAX_BYTES = 6 * 1024 * 1024

# A JSON string, escapes included: linear, since its two alternatives never match the same text.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


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


def loads(raw: bytes | str, what: str = "the request body") -> Any:
    """Parse JSON under the rule: 400 invalid_request when it is not UTF-8 or not JSON."""
    text = text_of(raw, what)
    check(text, what)
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidRequest(f"{what} is not valid JSON") from None


def loads_query(value: str, name: str) -> Any:
    """A query parameter that holds JSON (`?filters=`), under the same rule as a body. Not JSON is a
    bad field, so 422 memory_invalid, as any other bad query parameter."""
    what = f"the {name} parameter"
    text = text_of(value, what)
    check(text, what)
    try:
        return json.loads(text)
    except ValueError:
        raise MemoryInvalid(f"{name} must be JSON") from None
