"""What the DynamoDB patches keep on each moto table to find items the way DynamoDB does: the items of
each global secondary index partition, and each partition's sort keys in order. Kept by
moto_dynamodb_queries (it reads them, and notes puts and updates), noted into by
moto_dynamodb_transactions (a transaction rolled back puts items back). Not a patch: nothing is
noted unless moto_dynamodb_queries built the table's index, and `forget_all` drops it when that
patch is uninstalled (written after that, the index would be stale when installed again)."""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterator
from typing import Any

_PARTITIONS = "uhp_index_partitions"
_SORT_KEYS = "uhp_sort_keys"
_TABLES: weakref.WeakSet[Any] = weakref.WeakSet()  # every table that holds either


def table_items(table: Any) -> Iterator[Any]:
    for stored in table.items.values():
        if table.range_key_attr is None:
            yield stored
        else:
            yield from stored.values()


def note_item(table: Any, item: Any) -> None:
    """Add an item to the index partitions of its table, if they are kept yet (stale entries are
    dropped when read)."""
    partitions = table.__dict__.get(_PARTITIONS)
    if partitions is None or item is None:
        return
    for attribute, by_value in partitions.items():
        value = item.attrs.get(attribute)
        if value is not None:
            by_value.setdefault(value, {})[(item.hash_key, item.range_key)] = None


def index_partitions(table: Any) -> dict[str, dict[Any, dict[tuple[Any, Any], None]]]:
    partitions = table.__dict__.get(_PARTITIONS)
    if partitions is None:
        hash_attributes = [
            key["AttributeName"] for index in table.global_indexes for key in index.schema if key["KeyType"] == "HASH"
        ]
        partitions = {attribute: {} for attribute in hash_attributes}
        table.__dict__[_PARTITIONS] = partitions
        _TABLES.add(table)
        for item in table_items(table):
            note_item(table, item)
    return partitions


def sort_keys(table: Any, hash_key: Any) -> list[str] | None:
    """A partition's sort keys in order (None unless they are all strings): built when the partition
    is first queried by sort key, then kept as items are put (keys of deleted items are dropped when
    a query meets them)."""
    by_partition = table.__dict__.get(_SORT_KEYS)
    if by_partition is None:
        by_partition = table.__dict__[_SORT_KEYS] = {}
        _TABLES.add(table)
    ordered = by_partition.get(hash_key)
    if ordered is None:
        stored = table.items.get(hash_key, {})
        if any(key.type != "S" for key in stored):
            return None
        ordered = by_partition[hash_key] = sorted(key.value for key in stored)
    return ordered


def note_sort_key(table: Any, item: Any) -> None:
    by_partition = table.__dict__.get(_SORT_KEYS)
    if not by_partition or item is None or item.range_key is None or item.hash_key not in by_partition:
        return
    if item.range_key.type != "S":
        del by_partition[item.hash_key]
        return
    ordered, value = by_partition[item.hash_key], item.range_key.value
    at = bisect.bisect_left(ordered, value)
    if at == len(ordered) or ordered[at] != value:
        ordered.insert(at, value)


def forget_all() -> None:
    """Drop what every table keeps: once writes stop being noted, it would go stale."""
    for table in list(_TABLES):
        table.__dict__.pop(_PARTITIONS, None)
        table.__dict__.pop(_SORT_KEYS, None)
    _TABLES.clear()
