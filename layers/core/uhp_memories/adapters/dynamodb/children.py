"""A memory item's count of its children (items.py CHILDREN_OPEN and one entry per restricted child), as the
writes that create, restrict, move, grant on and hide memories change it: in the same transaction as the
change, so the count a reader is shown (domain/memories/model.py ChildCount) is never one the tree is not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.items import CHILDREN_EPOCH, CHILDREN_OPEN, restricted_child
from uhp_memories.adapters.dynamodb.table import DynamoTable


@dataclass
class ChildChanges:
    """What one write changes in one parent item's count of its children (items.py CHILDREN_OPEN and the
    restricted children's entries), gathered so that a parent touched twice by one transaction (a child
    restricted in place: one open child less, one restricted entry more) is one operation on it."""

    delta: int = 0
    entries: dict[str, str] = field(default_factory=dict)  # restricted child -> its grantees, space-separated
    gone: set[str] = field(default_factory=set)  # restricted children no longer counted as such
    # A parent from before children were counted keeps no count: each change of its children adds one to
    # its CHILDREN_EPOCH instead, so `uhp-memories migrate` knows a count it made while one came between
    # is stale (adapters/dynamodb/migrate.py).
    uncounted: bool = False

    def count(self, child_id: str, restricted: bool, grantees: Sequence[str], *, counted: bool) -> None:
        if not restricted:
            self.delta += 1 if counted else -1
        elif counted:
            self.gone.discard(child_id)
            self.entries[child_id] = " ".join(sorted(set(grantees)))
        else:
            self.entries.pop(child_id, None)
            self.gone.add(child_id)

    def op(self, table: DynamoTable, tenant: str, parent_id: str, condition: str,
           values: Mapping[str, Any] | None = None) -> dict[str, Any]:
        given: dict[str, Any] = dict(values or {})
        names: dict[str, str] = {}
        if self.uncounted:
            given[":epoch_step"] = 1
            return table.update_op(keys.memory_pk(tenant, parent_id), keys.META_SK, f"ADD {CHILDREN_EPOCH} :epoch_step",
                                   condition=condition, values=given)
        clauses = []
        if self.delta:
            given[":children_delta"] = self.delta
            clauses.append(f"ADD {CHILDREN_OPEN} :children_delta")
        sets = []
        for n, (child_id, grantees) in enumerate(sorted(self.entries.items())):
            names[f"#set{n}"], given[f":grantees{n}"] = restricted_child(child_id), grantees
            sets.append(f"#set{n} = :grantees{n}")
        if sets:
            clauses.append("SET " + ", ".join(sets))
        removes = []
        for n, child_id in enumerate(sorted(self.gone)):
            names[f"#gone{n}"] = restricted_child(child_id)
            removes.append(f"#gone{n}")
        if removes:
            clauses.append("REMOVE " + ", ".join(removes))
        if not clauses:  # nothing to count: the parent is only checked
            return table.check_op(keys.memory_pk(tenant, parent_id), keys.META_SK, condition, given or None)
        return table.update_op(keys.memory_pk(tenant, parent_id), keys.META_SK, " ".join(clauses),
                               condition=condition, values=given or None, names=names or None)
