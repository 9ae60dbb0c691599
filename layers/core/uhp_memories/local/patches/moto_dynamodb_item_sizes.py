"""moto sizes a new item once against the 400 KB item limit, not once per attribute.

moto builds every item it stores (PutItem, a transaction's Put) into a `LimitedSizeDict`, whose
`__setitem__` sizes every attribute already in the item before it adds the next one: an item of n
attributes is walked n times (a record item has about twenty), a large share of an observe's
transaction on moto (measured: docs/benchmarks.md, "Issue 18: beside mem0 OSS, at half its cost, with
better answers"). While installed, a new item's attributes go in unchecked and the whole item is
sized once, refused with the same ItemSizeTooLarge past the same 405,000 bytes: sizes only grow as
attributes go in, so the last insert's check, which moto's would make, is the only one that can fail.

Replaces `moto.dynamodb.models.dynamo_type.Item.__init__` (moto's own stays reachable as the
replacement's `__wrapped__`). Updates of stored items keep moto's per-attribute check.
"""

from __future__ import annotations

from typing import Any

from uhp_memories.local.patches import Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")
# moto's limit (moto.dynamodb.models.dynamo_type.LimitedSizeDict): AWS's 400 KB measured at 409-410 KB.
MOTO_ITEM_LIMIT = 405000


def _apply(replace: Replacements) -> None:
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    original = Item.__init__

    def __init__(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        self.hash_key = hash_key
        self.range_key = range_key
        built = LimitedSizeDict()
        size = 0
        for key, value in attrs.items():
            typed = DynamoType(value)
            size += bytesize(key) + typed.size()
            dict.__setitem__(built, key, typed)  # moto's own check, made once below
        if size > MOTO_ITEM_LIMIT:
            raise ItemSizeTooLarge
        self.attrs = built

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    replace(Item, "__init__", __init__)


PATCH = Patch(__name__, WRITTEN_FOR, _apply)
install = PATCH.install
uninstall = PATCH.uninstall
