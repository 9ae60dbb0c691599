"""moto's BatchGetItem sizes each item once.

moto's BatchGetItem sizes every item it returns twice (against the 16 MB answer limit), walking each
attribute: a share of recall's read-back of ten records (measured: docs/architecture.md,
"Local patches"). While installed, the items one call reads come sized once; the answer, and the
limit, are moto's.

Replaces `moto.dynamodb.responses.DynamoHandler.batch_get_item` (moto's own stays reachable as the
replacement's `__wrapped__`). Relies on calls being serialized
(uhp_memories.local.moto_env.SerializedClient): a call swaps its backend's `get_item` while it runs.
"""

from __future__ import annotations

from typing import Any

from uhp_memories.local.patches import Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")


class _SizedOnce:
    """A stored item as BatchGetItem sees it: its size computed once (the item does not change
    while a call runs: calls are serialized)."""

    def __init__(self, item: Any) -> None:
        self._item = item
        self._size: int | None = None

    def size(self) -> int:
        if self._size is None:
            self._size = self._item.size()
        return self._size

    def __getattr__(self, name: str) -> Any:
        return getattr(self._item, name)


def _apply(replace: Replacements) -> None:
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.batch_get_item

    def batch_get_item(self: Any) -> Any:
        backend = self.dynamodb_backend
        read = backend.get_item

        def get_item(*args: Any, **kwargs: Any) -> Any:
            item = read(*args, **kwargs)
            return None if item is None else _SizedOnce(item)

        backend.get_item = get_item  # this backend object only, for this call (calls are serialized)
        try:
            return original(self)
        finally:
            del backend.get_item

    batch_get_item.__wrapped__ = original  # type: ignore[attr-defined]
    replace(DynamoHandler, "batch_get_item", batch_get_item)


PATCH = Patch(__name__, WRITTEN_FOR, _apply)
install = PATCH.install
uninstall = PATCH.uninstall
