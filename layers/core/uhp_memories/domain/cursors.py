"""Opaque cursors: a resume point wrapped so clients cannot read or build one by hand, naming what it
pages (the listing's kind and the memory, record or parent it lists), so a cursor given by one
listing is refused by every other (422 memory_invalid, the spec's code for a bad field) instead of
resuming it at a position that means nothing there."""

from __future__ import annotations

import base64
import json
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid


def encode(kind: str, position: Any, *, over: str) -> str:
    """A cursor resuming listing `kind` of `over` (a memory id, a record chain, a parent) after
    `position`."""
    raw = json.dumps({"k": kind, "o": over, "p": position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(kind: str, cursor: str | None, shape: Any = None, *, over: str) -> Any:
    """The position inside a cursor made by `encode(kind, ..., over=over)`; 422 for anything else.

    `shape` is the position's type, or a tuple of types for a list position: a cursor that decodes
    but holds something else was not made here, and must not reach a comparison as a 500."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(data, dict) or data.get("k") != kind or data.get("o") != over or "p" not in data:
            raise ValueError(kind)
        if shape is not None and not _fits(data["p"], shape):
            raise ValueError(kind)
    except (ValueError, TypeError):
        raise MemoryInvalid("cursor is not a next_cursor this listing returned") from None
    return data["p"]


def _fits(position: Any, shape: Any) -> bool:
    if isinstance(shape, tuple):
        return (
            isinstance(position, list)
            and len(position) == len(shape)
            and all(_fits(part, part_shape) for part, part_shape in zip(position, shape, strict=True))
        )
    # JSON true/false decode as bool, a subclass of int: never a valid numeric position.
    return isinstance(position, shape) and (shape is bool or not isinstance(position, bool))


def check_limit(limit: int | None, default: int, maximum: int) -> int:
    if limit is None:
        return default
    if limit < 1 or limit > maximum:
        raise MemoryInvalid(f"limit must be between 1 and {maximum}")
    return limit
