"""Open time among calendar events (the `free_slots` operation of x.calendar.event), as pure functions.

Working windows are built in the caller's IANA time zone (day by day, so a daylight-saving change in
the range moves the hours with the clock, as a person reads them) and compared as UTC instants. A
slot is what is left of a window once every busy interval is taken out, kept when at least
`min_minutes` long. Intervals are half-open: an event ending at 10:00 and a slot starting at 10:00
touch, they do not overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from uhp_memories.domain.errors import MemoryInvalid

Interval = tuple[datetime, datetime]  # aware datetimes, start < end


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise MemoryInvalid(f"time_zone '{name}' is not an IANA time zone, such as Europe/Paris or UTC") from None


def clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def working_windows(first_day: date, days: int, tz: ZoneInfo, starts: time, ends: time) -> list[Interval]:
    """Each day's working hours, from `first_day` on, as UTC instants."""
    if ends <= starts:
        raise MemoryInvalid("day_ends is after day_starts")
    windows = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        opens = datetime.combine(day, starts, tzinfo=tz).astimezone(UTC)
        closes = datetime.combine(day, ends, tzinfo=tz).astimezone(UTC)
        if opens < closes:
            windows.append((opens, closes))
    return windows


def merged(busy: Iterable[Interval]) -> list[Interval]:
    """Busy intervals sorted and joined where they overlap or touch."""
    out: list[Interval] = []
    for start, end in sorted(b for b in busy if b[0] < b[1]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def free_slots(windows: Sequence[Interval], busy: Iterable[Interval], min_minutes: int) -> list[Interval]:
    """What is open in the windows once the busy intervals are taken out, each at least min_minutes."""
    taken = merged(busy)
    shortest = timedelta(minutes=min_minutes)
    slots: list[Interval] = []
    for opens, closes in windows:
        cursor = opens
        for start, end in taken:
            if end <= cursor or start >= closes:
                continue
            if start > cursor:
                slots.append((cursor, start))
            cursor = max(cursor, end)
        if cursor < closes:
            slots.append((cursor, closes))
    return [(s, e) for s, e in slots if e - s >= shortest]
