"""Opaque cursors: a resume point wrapped so clients cannot read or build one by hand."""

from __future__ import annotations

import base64
import json
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid


def encode(kind: str, position: Any) -> str:
    raw = json.dumps({"k": kind, "p": position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(kind: str, cursor: str | None) -> Any:
    """The position inside a cursor made by `encode(kind, ...)`; 422 for anything else."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(data, dict) or data.get("k") != kind:
            raise ValueError(kind)
    except (ValueError, TypeError):
        raise MemoryInvalid("cursor is not a next_cursor this listing returned") from None
    return data["p"]


def check_limit(limit: int | None, default: int, maximum: int) -> int:
    if limit is None:
        return default
    if limit < 1 or limit > maximum:
        raise MemoryInvalid(f"limit must be between 1 and {maximum}")
    return limit
