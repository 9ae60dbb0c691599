"""Time formats. Record times are RFC 3339 in UTC with milliseconds, so they sort as strings."""

from __future__ import annotations

from datetime import UTC, datetime

from uhp_memories.domain.errors import MemoryInvalid


def format_ms(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    # The year is padded by hand: strftime's %Y gives "999" for year 999, which would not sort.
    return f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def parse_instant(value: str, field: str = "time") -> str:
    """An RFC 3339 time in the canonical sortable form; a clear 422 otherwise."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise MemoryInvalid(f"{field} must be an RFC 3339 time, such as 2026-10-01T17:02:11Z") from None
    if moment.tzinfo is None or "T" not in value.upper():
        raise MemoryInvalid(f"{field} must be an RFC 3339 time with a time zone, such as 2026-10-01T17:02:11Z")
    try:
        return format_ms(round(moment.timestamp() * 1000))
    except (ValueError, OverflowError, OSError):
        # In range as written but not once moved to UTC (0001-01-01T00:00:00+01:00).
        raise MemoryInvalid(f"{field} is outside the years 0001 to 9999 in UTC") from None
