"""moto's DynamoDB writes reported item by item, before their answer leaves moto (persistent local mode).

While installed with a listener (the journal of `serve --data-dir`), every write call (PutItem,
UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems) is followed, inside the same call, by
the image of each item it named as the table now holds it (None: gone), handed to the listener. A
failed write (a condition not met, a cancelled transaction) reports the items unchanged, which
writes nothing new. Writes run one at a time while installed, so two writes of one item reach the
listener in the order moto applied them.

`restore` puts items back into a table as they were reported, at start.

Replaces the write actions of `moto.dynamodb.responses.DynamoHandler`; reads
`moto.dynamodb.models.table.Table` (`get_item`, `put_item`, key attributes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from uhp_memories.local.journal import ItemChange
from uhp_memories.local.patches import Listened, Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")
WRITE_ACTIONS = ("put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items")

ItemListener = Callable[[Sequence[ItemChange]], None]
_writing = threading.RLock()


def named_items(action: str, body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(table name, key or whole item) of every item a write call names."""
    if action in ("put_item",):
        yield body["TableName"], body["Item"]
    elif action in ("update_item", "delete_item"):
        yield body["TableName"], body["Key"]
    elif action == "batch_write_item":
        for table, requests in body.get("RequestItems", {}).items():
            for request in requests:
                if "PutRequest" in request:
                    yield table, request["PutRequest"]["Item"]
                elif "DeleteRequest" in request:
                    yield table, request["DeleteRequest"]["Key"]
    elif action == "transact_write_items":
        for entry in body.get("TransactItems", []):
            for kind in ("Put", "Update", "Delete"):
                if kind in entry:
                    op = entry[kind]
                    yield op["TableName"], op.get("Item") or op["Key"]


def _images(backend: Any, named: Iterable[tuple[str, dict[str, Any]]]) -> list[ItemChange]:
    from moto.dynamodb.models.dynamo_type import DynamoType

    changes = []
    for table_name, attributes in named:
        table = backend.tables.get(table_name)
        if table is None or table.hash_key_attr not in attributes:
            continue
        key = {table.hash_key_attr: attributes[table.hash_key_attr]}
        range_value = None
        if table.range_key_attr is not None:
            if table.range_key_attr not in attributes:
                continue
            key[table.range_key_attr] = attributes[table.range_key_attr]
            range_value = DynamoType(attributes[table.range_key_attr])
        item = table.get_item(DynamoType(key[table.hash_key_attr]), range_value)
        changes.append(ItemChange(table_name, key, None if item is None else item.to_json()["Attributes"]))
    return changes


def _reporting(action: str, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def write(self: Any) -> Any:
        listener = HOOK.listener()
        if listener is None:
            return original(self)
        with _writing:
            try:
                return original(self)
            finally:
                body = self.body if isinstance(self.body, dict) else {}
                try:
                    named = list(named_items(action, body))
                except (KeyError, TypeError, AttributeError):
                    named = []  # a malformed request moto refused: it changed nothing
                listener(_images(self.dynamodb_backend, named))

    return write


def _apply(replace: Replacements) -> None:
    from moto.dynamodb.responses import DynamoHandler

    for action in WRITE_ACTIONS:
        replace(DynamoHandler, action, _reporting(action, getattr(DynamoHandler, action)))


def restore(region: str, table_name: str, items: Iterable[dict[str, Any]]) -> int:
    """Put these items (wire JSON) into a table of moto's DynamoDB (default account, this region)
    as a write would leave them, without reporting them. Answers how many."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    WRITTEN_FOR.check(__name__)
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].get_table(table_name)
    count = 0
    for item in items:
        table.put_item(item)
        count += 1
    return count


HOOK: Listened[ItemListener] = Listened(Patch(__name__, WRITTEN_FOR, _apply))
install = HOOK.install
uninstall = HOOK.uninstall
PATCH = HOOK.patch
