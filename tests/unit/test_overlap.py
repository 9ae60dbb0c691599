"""The overlap policy (domain/overlap.py): work a request starts beside its own, on another thread as deployed
(adapters/system.ThreadOverlap), or at once on the request's thread (InOrder). Recall's tests drive the
thread one (tests/unit/test_recall_service.py: the children are read while the search runs)."""

from __future__ import annotations

import threading

import pytest

from uhp_memories.adapters.system import ThreadOverlap
from uhp_memories.domain.overlap import IN_ORDER


def test_thread_overlap_runs_the_work_while_the_request_goes_on() -> None:
    request_went_on = threading.Event()

    def work(x: int) -> tuple[int, str]:
        assert request_went_on.wait(timeout=10), "the work held the request until it ended"
        return x * 2, threading.current_thread().name

    pending = ThreadOverlap(name="test-overlap").start(work, 21)
    request_went_on.set()  # reached only because start() did not wait for the work
    value, thread = pending.result()
    assert value == 42
    assert thread.startswith("test-overlap")


def test_in_order_runs_the_work_at_once_on_the_request_thread() -> None:
    ran_on: list[str] = []
    pending = IN_ORDER.start(lambda: ran_on.append(threading.current_thread().name) or "done")
    assert ran_on == [threading.current_thread().name]  # already ran, before result() is asked
    assert pending.result() == "done"


@pytest.mark.parametrize("overlap", [IN_ORDER, ThreadOverlap(name="test-overlap-error")])
def test_what_the_work_raised_is_raised_by_result(overlap: object) -> None:
    def fails() -> None:
        raise LookupError("gone")

    pending = overlap.start(fails)  # type: ignore[attr-defined]
    with pytest.raises(LookupError, match="gone"):
        pending.result()
