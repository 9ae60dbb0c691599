"""Work a request starts beside its own, to overlap the two (recall reads where a reader can go from a
memory while its search runs): the one way a domain service hands work to another thread. Which threads,
if any, is the composition's choice (bootstrap.py), so the rules never hold a thread pool of their own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Pending[T](Protocol):
    """Work started beside the request; `result` waits for it and raises what it raised."""

    def result(self) -> T: ...


class Overlap(Protocol):
    """Starts work beside the request's own."""

    def start[T](self, work: Callable[..., T], *args: Any) -> Pending[T]:
        """Start `work(*args)`; its answer is read with `result()`."""
        ...


class _Done[T]:
    def __init__(self, work: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        try:
            self._value = work(*args)
        except BaseException as error:  # re-raised by result(), as a thread's future would
            self._error = error

    def result(self) -> T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class InOrder:
    """No overlap: the work runs at once, on the request's thread (the fakes, tools)."""

    def start[T](self, work: Callable[..., T], *args: Any) -> Pending[T]:
        """Run `work(*args)` now; `result()` answers (or raises) what it did."""
        return _Done(work, args)


IN_ORDER = InOrder()
