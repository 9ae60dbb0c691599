"""moto's DynamoDB transactions back up the items they touch, not whole tables.

moto backs up a whole table (copy.deepcopy) for every item of every transaction, to roll a failed
one back: an observe of 50 episodes copied the table a hundred times, so writing grew quadratically
with the table (measured: docs/benchmarks.md, "Local mode and moto"). While installed, a transaction
backs up only the items it touches, and puts them back if it fails: the same all-or-nothing outcome.

Replaces `moto.dynamodb.models.DynamoDBBackend.transact_write_items` and the `copy` module as
`moto.dynamodb.models` sees it (a table copies as itself).
"""

from __future__ import annotations

import copy
from typing import Any

from uhp_memories.local.patches import Patch, Replacements, WrittenFor
from uhp_memories.local.patches._moto_item_index import note_item, note_sort_key

WRITTEN_FOR = WrittenFor("moto", "5.2.1")


def _item_key(table: Any, op: dict[str, Any]) -> tuple[Any, Any] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    key = op.get("Item") or op.get("Key") or {}
    if table.hash_key_attr not in key:
        return None
    range_value = None
    if table.range_key_attr is not None:
        if table.range_key_attr not in key:
            return None
        range_value = DynamoType(key[table.range_key_attr])
    return DynamoType(key[table.hash_key_attr]), range_value


def _restore_item(table: Any, hash_value: Any, range_value: Any, item: Any) -> None:
    if range_value is None:
        if item is None:
            table.items.pop(hash_value, None)
        else:
            table.items[hash_value] = item
    elif item is None:
        table.items.get(hash_value, {}).pop(range_value, None)
    else:
        table.items[hash_value][range_value] = item
        note_sort_key(table, item)


def _apply(replace: Replacements) -> None:
    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.models.table import Table

    backend = dynamodb_models.DynamoDBBackend
    original = backend.transact_write_items

    class TablesAreNotCopied:
        """The `copy` module as moto's DynamoDB backend sees it: a table copies as itself."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = []
        for entry in transact_items:
            op = next(iter(entry.values()))
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            key = _item_key(table, op)
            if key is not None:
                saved.append((table, *key, copy.deepcopy(table.get_item(*key))))
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, item in reversed(saved):
                _restore_item(table, hash_value, range_value, item)
                note_item(table, item)
            raise

    replace(dynamodb_models, "copy", TablesAreNotCopied)
    replace(backend, "transact_write_items", transact_write_items)


PATCH = Patch(__name__, WRITTEN_FOR, _apply)
install = PATCH.install
uninstall = PATCH.uninstall
