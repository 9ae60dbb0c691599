"""moto's DynamoDB queries read only the items that can match.

moto answers every query by sorting every item of the table, and a query on a global secondary index
by then testing each of them: a recall (the caller's grants, the memory's children) spent most of its
time in moto at 10,000 records (measured: docs/architecture.md, "Local patches"). While installed, a
query is given only the items that can match: for a table query, those of its partition within its
sort key condition (from the partition's sort keys, kept in order); for an index query, the items
whose index hash key has the value asked, from a map kept as items are written and checked again
when read (uhp_memories.local.patches._moto_item_index).
The rest of moto's query (key conditions, order, pages, filters, projections) runs unchanged on them.

Replaces `moto.dynamodb.models.table.Table.query` and `.put_item`, and
`moto.dynamodb.models.DynamoDBBackend.update_item`. Relies on calls being serialized
(uhp_memories.local.moto_env.SerializedClient): a query sets the table's `all_items` while it runs.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from uhp_memories.local.patches import Patch, Replacements, WrittenFor
from uhp_memories.local.patches._moto_item_index import (
    forget_all,
    index_partitions,
    note_item,
    note_sort_key,
    sort_keys,
)

WRITTEN_FOR = WrittenFor("moto", "5.2.1")


def _sort_key_span(comparison: str, values: Sequence[Any]) -> tuple[str | None, str | None, str | None] | None:
    """Where the sort keys a key condition can match lie: (lowest, highest, prefix), None for open;
    None when the condition is not on strings."""
    if not values or any(value.type != "S" for value in values):
        return None
    first, operator = values[0].value, comparison.upper()
    if operator in ("=", "EQ"):
        return first, first, None
    if operator == "BETWEEN" and len(values) == 2:
        return first, values[1].value, None
    if operator in ("<", "<=", "LT", "LE"):
        return None, first, None
    if operator in (">", ">=", "GT", "GE"):
        return first, None, None
    if operator == "BEGINS_WITH":
        return first, None, first
    return None


def _partition_candidates(table: Any, hash_key: Any, arguments: dict[str, Any]) -> list[Any]:
    """The items of one partition whose sort key lies where the query's key condition can match
    (a superset: moto still applies the condition itself). A memory's partition holds its records:
    reading a memory with its grants must not walk 10,000 records, as DynamoDB does not."""
    stored = table.items.get(hash_key)
    if stored is None:
        return []
    if table.range_key_attr is None:
        return [stored]
    comparison = arguments.get("range_comparison")
    span = _sort_key_span(comparison, arguments.get("range_objs") or []) if comparison else None
    ordered = sort_keys(table, hash_key) if span is not None else None
    if span is None or ordered is None:
        return list(stored.values())
    from moto.dynamodb.models.dynamo_type import DynamoType

    lowest, highest, prefix = span
    found, gone = [], []
    for at in range(bisect.bisect_left(ordered, lowest) if lowest is not None else 0, len(ordered)):
        value = ordered[at]
        if (highest is not None and value > highest) or (prefix is not None and not value.startswith(prefix)):
            break
        item = stored.get(DynamoType({"S": value}))
        if item is None:
            gone.append(value)
        else:
            found.append(item)
    for value in gone:
        ordered.remove(value)
    return found


def _query_candidates(table: Any, arguments: dict[str, Any]) -> list[Any] | None:
    """The items a query can match (None: let moto look at every item)."""
    if not arguments.get("index_name"):
        hash_key = arguments.get("hash_key")
        if hash_key is None:
            return None
        return _partition_candidates(table, hash_key, arguments)
    conditions = arguments.get("hash_key_conditions") or []
    if len(conditions) != 1:
        return None
    attribute, value = conditions[0]
    partitions = index_partitions(table)
    if attribute not in partitions:
        return None
    keys = partitions[attribute].get(value, {})
    found = []
    for key in list(keys):
        stored = table.items.get(key[0])
        item = stored if table.range_key_attr is None or stored is None else stored.get(key[1])
        current = None if item is None else item.attrs.get(attribute)
        if current is None or current != value:
            del keys[key]  # deleted, or its index key changed since
        else:
            found.append(item)
    return found


def _apply(replace: Replacements) -> None:
    import inspect

    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.models.table import Table

    original_query, original_put = Table.query, Table.put_item
    original_update = dynamodb_models.DynamoDBBackend.update_item
    signature = inspect.signature(original_query)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        candidates = _query_candidates(self, signature.bind(self, *args, **kwargs).arguments)
        if candidates is None:
            return original_query(self, *args, **kwargs)
        self.all_items = lambda: candidates  # calls are serialized (SerializedClient)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            del self.all_items

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = original_put(self, *args, **kwargs)
        note_item(self, item)
        note_sort_key(self, item)
        return item

    def update_item(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
        item = original_update(self, table_name, *args, **kwargs)
        note_item(self.get_table(table_name), item)  # updated in place: its index keys may have changed
        return item

    replace(Table, "query", query)
    replace(Table, "put_item", put_item)
    replace(dynamodb_models.DynamoDBBackend, "update_item", update_item)


PATCH = Patch(__name__, WRITTEN_FOR, _apply, cleanup=forget_all)
install = PATCH.install
uninstall = PATCH.uninstall
