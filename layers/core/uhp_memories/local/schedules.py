"""The local server's ticker: it runs the consolidation schedules a local stage's API sets, as
EventBridge Scheduler runs them in AWS.

The API sets schedules through the same adapter as in AWS (adapters/scheduler.py), into moto's
EventBridge Scheduler, which keeps them but fires nothing. The ticker reads them back (every schedule
of the stage's group, its `rate(N minutes)` and its target's input) and, at each tick, invokes the
timer function's own handler (functions/consolidation_timer) for each schedule whose interval has
passed since it last fired, or since it was set. The first firing comes one interval after the
schedule is set, as Scheduler's does."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

logger = logging.getLogger(__name__)
RATE = re.compile(r"^rate\((\d+) minutes?\)$")


class LocalTicker:
    def __init__(self, client: Any, group: str, fire: Callable[[dict[str, Any]], Any],
                 now: Callable[[], float] = time.time) -> None:
        self._client = client
        self._group = group
        self._fire = fire
        self._now = now
        self._fired: dict[str, float] = {}  # schedule name -> when it last fired (epoch seconds)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self, now: float | None = None) -> int:
        """Fire every schedule that is due at `now` (default: the clock's now); how many fired. A firing
        that fails is logged (as Scheduler would retry it, the next tick fires it again) and never stops
        the others."""
        now = self._now() if now is None else now
        fired = 0
        for name in self._names():
            schedule = self._client.get_schedule(Name=name, GroupName=self._group)
            match = RATE.match(schedule["ScheduleExpression"])
            if schedule.get("State") != "ENABLED" or match is None:
                continue
            since = self._fired.get(name, _epoch(schedule["LastModificationDate"]))
            if now - since < int(match.group(1)) * 60:
                continue
            try:
                self._fire(json.loads(schedule["Target"]["Input"]))
            except Exception as error:  # a schedule's failure is its own: the others still fire
                logger.warning("scheduled consolidation failed", extra={"error_type": type(error).__name__})
                continue
            self._fired[name] = now
            fired += 1
        return fired

    def _names(self) -> list[str]:
        names, token = [], None
        while True:
            page = self._client.list_schedules(GroupName=self._group, **({"NextToken": token} if token else {}))
            names += [s["Name"] for s in page["Schedules"]]
            token = page.get("NextToken")
            if not token:
                return names

    def start(self, every_seconds: float = 30.0) -> LocalTicker:
        def run() -> None:
            while not self._stop.wait(every_seconds):
                self.tick()

        self._thread = threading.Thread(target=run, name="uhp-schedules", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _epoch(value: datetime | str) -> float:
    return value.timestamp() if isinstance(value, datetime) else datetime.fromisoformat(value).timestamp()
