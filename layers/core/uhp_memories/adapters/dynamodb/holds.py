"""The hold a running workflow (a consolidation run, an erase) keeps on its memory, for memory_busy (§12):
the run's id in the memory item's `held_by` string set. It sits on the memory's own item so that the two
sides of the race are writes of one item, which DynamoDB puts in one order: a run adds itself on the
condition that the memory is not being deleted, and a delete or a move writes the memory on the condition
that nothing holds it. A run started between a move's checks and its write fails the write instead of
having its memory pulled away under it (docs/decisions.md, "A run's hold is on the memory's item")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, DynamoTable

HELD_BY = "held_by"
# What a delete or a move adds to its condition on each memory it changes.
NOT_HELD = f"attribute_not_exists({HELD_BY})"


def hold_op(table: DynamoTable, tenant: str, memory_id: str, run_id: str) -> dict[str, Any]:
    """Add the run to its memory's holders, on the condition that the memory lives (not being deleted)."""
    return table.update_op(
        keys.memory_pk(tenant, memory_id), keys.META_SK, f"ADD {HELD_BY} :run",
        condition=LIVE_MEMORY, values={":run": {run_id}, ":false": False},
    )


def release_ops(table: DynamoTable, tenant: str, memory_id: str, run_id: str) -> list[dict[str, Any]]:
    """Take the run out of its memory's holders (DynamoDB drops the set with its last member); idempotent.
    Only for a run that holds its memory, which therefore still exists (a delete refuses while it holds).
    With it goes the RUN# marker item that earlier versions wrote instead (legacy_marker_op)."""
    return [
        table.update_op(
            keys.memory_pk(tenant, memory_id), keys.META_SK, f"DELETE {HELD_BY} :run",
            condition="attribute_exists(PK)", values={":run": {run_id}},
        ),
        legacy_marker_op(table, tenant, memory_id, run_id),
    ]


def legacy_marker_op(table: DynamoTable, tenant: str, memory_id: str, run_id: str) -> dict[str, Any]:
    """Delete the RUN# marker item earlier versions wrote under the memory for a run that held it:
    a run started before an upgrade and finishing after it leaves none behind (a no-op otherwise)."""
    return table.delete_op(keys.memory_pk(tenant, memory_id), keys.run_sk(run_id))


def is_held(memory_item: Mapping[str, Any] | None) -> bool:
    return bool(memory_item and memory_item.get(HELD_BY))
