"""free_slots (x.calendar.event) against a simple reference: a minute-by-minute grid of what is open."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uhp_memories.domain.types.calendar import Interval, free_slots, working_windows, zone

DAY = datetime(2026, 12, 4, tzinfo=UTC)


def minutes(start: int, end: int) -> Interval:
    return DAY + timedelta(minutes=start), DAY + timedelta(minutes=end)


def reference(windows: list[tuple[int, int]], busy: list[tuple[int, int]], min_minutes: int) -> list[tuple[int, int]]:
    """Mark every minute of every window open, strike every busy minute, read off the runs."""
    open_minutes = set()
    for start, end in windows:
        open_minutes.update(range(start, end))
    for start, end in busy:
        open_minutes.difference_update(range(start, end))
    runs: list[tuple[int, int]] = []
    window_of = {m: i for i, (s, e) in enumerate(windows) for m in range(s, e)}
    for m in sorted(open_minutes):
        if runs and runs[-1][1] == m and window_of[m] == window_of[m - 1]:
            runs[-1] = (runs[-1][0], m + 1)
        else:
            runs.append((m, m + 1))
    return [(s, e) for s, e in runs if e - s >= min_minutes]


@st.composite
def calendars(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
    # Windows one per day, as working_windows builds them: disjoint and in order.
    windows = []
    for day in range(draw(st.integers(1, 3))):
        opens = draw(st.integers(0, 600))
        windows.append((day * 1440 + opens, day * 1440 + opens + draw(st.integers(1, 800))))
    span = windows[-1][1] + 60
    events = draw(st.lists(st.tuples(st.integers(-60, span), st.integers(1, 300)), max_size=25))
    busy = [(start, start + length) for start, length in events]
    return windows, busy, draw(st.integers(1, 120))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True)
@given(calendars())
def test_free_slots_agree_with_a_minute_grid(case: tuple[list[tuple[int, int]], list[tuple[int, int]], int]) -> None:
    windows, busy, min_minutes = case
    got = free_slots([minutes(*w) for w in windows], [minutes(*b) for b in busy], min_minutes)
    assert got == [minutes(*r) for r in reference(windows, busy, min_minutes)]


def test_working_hours_follow_the_clock_across_a_daylight_saving_change() -> None:
    paris = zone("Europe/Paris")
    # Summer time ends on 25 October 2026: 09:00 in Paris is 07:00 UTC before and 08:00 UTC after.
    windows = working_windows(date(2026, 10, 24), 2, paris, time(9), time(17))
    assert [(s.isoformat(), e.isoformat()) for s, e in windows] == [
        ("2026-10-24T07:00:00+00:00", "2026-10-24T15:00:00+00:00"),
        ("2026-10-25T08:00:00+00:00", "2026-10-25T16:00:00+00:00"),
    ]


def test_touching_events_leave_no_gap_and_a_slot_may_touch_an_event() -> None:
    got = free_slots([minutes(0, 100)], [minutes(10, 20), minutes(20, 30)], 1)
    assert got == [minutes(0, 10), minutes(30, 100)]
