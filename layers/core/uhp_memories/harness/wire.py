"""Reading the server's JSON answers for the harness stores: a field that is missing or of another
type means the server answered something this client does not understand, which the stores report
as `unavailable` (nothing they can act on, and nothing they changed)."""

from __future__ import annotations

from collections.abc import Mapping

from a13n_harness.providers.memory import MemoryStoreError

UNAVAILABLE = "uhp-memories is unavailable or answered unexpectedly; nothing changed."


def unavailable() -> MemoryStoreError:
    return MemoryStoreError("unavailable", UNAVAILABLE)


def mapping(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise unavailable()
    return value


def field[T](body: object, name: str, kind: type[T]) -> T:
    value = mapping(body).get(name)
    if not isinstance(value, kind):
        raise unavailable()
    return value


def items(body: object, name: str) -> list[object]:
    return field(body, name, list)


def text(item: Mapping[str, object], name: str) -> str:
    """A non-empty string field."""
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise unavailable()
    return value


def optional_text(item: Mapping[str, object], name: str) -> str | None:
    value = item.get(name)
    if value is not None and not isinstance(value, str):
        raise unavailable()
    return value


def integer(item: Mapping[str, object], name: str) -> int:
    value = item.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise unavailable()
    return value
