"""DynamoDB's size arithmetic, so a write DynamoDB would refuse is refused here first (moto enforces
none of these limits, so without this a local test passes what production refuses).

An item's size is the sum, over its attributes, of the name's UTF-8 bytes and the value's size, as
AWS's "DynamoDB item sizes and formats" gives it: a string its UTF-8 bytes; a number 1 byte per two
significant digits (leading and trailing zeros trimmed) plus 1; a binary its raw bytes (not its
base64); null and a boolean 1; a list or a map 3 bytes plus 1 per element plus its elements (a map's
element counts its name too); a set its elements. Values are taken in DynamoDB's wire form
({"S": ...}, {"N": ...}), as DynamoTable sends them."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

# DynamoDB's KB and MB are binary: an item holds at most 400 KB, a transaction's items 4 MB together.
ITEM_MAX_BYTES = 400 * 1024
TRANSACTION_MAX_BYTES = 4 * 1024 * 1024
TRANSACTION_MAX_ITEMS = 100

_LIST_OR_MAP_OVERHEAD = 3
_ELEMENT_OVERHEAD = 1


def item_size(item: Mapping[str, Any]) -> int:
    """The size of an item in wire form: each attribute's name and value."""
    return sum(_text(name) + value_size(value) for name, value in item.items())


def value_size(value: Mapping[str, Any]) -> int:
    """The size of one wire-form value, without its attribute's name."""
    (kind, inner), = value.items()
    if kind == "S":
        return _text(inner)
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return _binary(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(_text(v) for v in inner)
    if kind == "NS":
        return sum(number_size(v) for v in inner)
    if kind == "BS":
        return sum(_binary(v) for v in inner)
    if kind == "L":
        return _LIST_OR_MAP_OVERHEAD + sum(_ELEMENT_OVERHEAD + value_size(v) for v in inner)
    if kind == "M":
        return _LIST_OR_MAP_OVERHEAD + sum(_ELEMENT_OVERHEAD + _text(k) + value_size(v) for k, v in inner.items())
    raise ValueError(f"not a DynamoDB value type: {kind}")


def number_size(text: str) -> int:
    """1 byte per two significant digits, plus 1 (AWS: "approximately"; an upper bound here)."""
    digits = text.lstrip("+-").lower().split("e")[0].replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1


def operation_size(operation: Mapping[str, Any]) -> int:
    """What one operation of a transaction adds to its size, as far as the request tells: a put its
    whole item; an update, a delete or a condition check its key and the values it sends (the item
    already stored is not known without reading it, so the check is a lower bound for them)."""
    (kind, body), = operation.items()
    if kind == "Put":
        return item_size(body["Item"])
    key = item_size(body.get("Key", {}))
    values = sum(value_size(v) for v in (body.get("ExpressionAttributeValues") or {}).values())
    return key + values


def transaction_size(operations: Sequence[Mapping[str, Any]]) -> int:
    return sum(operation_size(op) for op in operations)


def _text(text: str) -> int:
    return len(text.encode("utf-8"))


def _binary(value: bytes | str | Any) -> int:
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, str):  # a low-level client's caller may send base64 text itself
        return len(base64.b64decode(value))
    return len(bytes(value))  # boto3's Binary wrapper
