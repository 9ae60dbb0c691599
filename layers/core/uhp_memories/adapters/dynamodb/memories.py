"""The memory tree and grants on DynamoDB.

A memory item keeps its ancestors and a copy of the grants on it (items.py), so one read gives a memory
with its grants, and one BatchGetItem of a fixed width gives its whole chain (get_many_with_grants),
padded with items of the tenant's that exist and read like memories: padding item i lists as many
ancestors as the memory i levels above the deepest possible one, 49 - i. A memory at depth d and its
d - 1 ancestors list 0 to d - 1 ancestors; the padding that fills its chain's batch lists the rest, d to
49; a missing id's batch, all padding and one item more, lists 0 to 49. Whatever the depth, and whether
the memory exists or not, the access check brings back as many items listing as many ids, so reading
them costs the same (docs/decisions.md, "The 404 of an unseen memory")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from uhp_memories.adapters.dynamodb import holds, keys
from uhp_memories.adapters.dynamodb.children import ChildChanges
from uhp_memories.adapters.dynamodb.items import (
    CHILDREN_OPEN,
    GRANTS_ATTRIBUTE,
    GRANTS_VERSION,
    ancestors_text,
    grant_from,
    grant_item,
    grants_copy,
    grants_from_copy,
    memory_from,
    memory_item,
)
from uhp_memories.adapters.dynamodb.schema import CHILDREN_INDEX, PRINCIPAL_INDEX
from uhp_memories.adapters.dynamodb.table import LIVE_MEMORY, ConditionFailed, Contended, DynamoTable
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.errors import MemoryBusy, TreeChanged
from uhp_memories.domain.limits import MAX_TREE_DEPTH
from uhp_memories.domain.memories.model import ChildCount, Memory
from uhp_memories.domain.model import PRIVILEGES

# Tries of a grant change that lost the race for a memory's copy of its grants to another grant change.
GRANT_WRITE_ATTEMPTS = 5
PAD_ENTITY = "pad"
# The most ancestors a memory can have: what padding item 0 lists.
PAD_CHAIN = MAX_TREE_DEPTH - 1
# How many padding items a tenant has: the widest read, a missing id's (domain/access/model.py CHAIN_READ_WIDTH + 1).
PAD_COUNT = MAX_TREE_DEPTH


class DynamoMemoryRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def get(self, tenant: str, memory_id: str) -> Memory | None:
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.META_SK)
        return memory_from(item) if item and item.get("tenant") == tenant else None

    def get_with_grants(self, tenant: str, memory_id: str) -> tuple[Memory | None, list[Grant]]:
        """One GetItem: the memory item holds a copy of its grants. An item written before it kept
        one has them read from its partition, as they always were."""
        item = self._table.get(keys.memory_pk(tenant, memory_id), keys.META_SK)
        if not item or item.get("tenant") != tenant:
            return None, []  # grants left by a memory purged halfway grant nothing
        return memory_from(item), self.grants_of_item(tenant, item)

    def get_many_with_grants(
        self, tenant: str, memory_ids: Sequence[str], width: int
    ) -> dict[str, tuple[Memory, list[Grant]]]:
        """One BatchGetItem of the memories' items and as many of the tenant's padding items as bring
        it to `width`. Every item read, padding included, is read into a memory with its grants, so
        the work done does not depend on how many of them are memories. A read never writes (the
        functions that only read may not: infra/catalog.py): the padding is laid by memory writes
        (_lay_pads)."""
        wanted = list(dict.fromkeys(memory_ids))
        pads = [keys.pad_pk(tenant, index) for index in range(max(0, width - len(wanted)))]
        items = self._table.get_many(
            [(keys.memory_pk(tenant, memory_id), keys.META_SK) for memory_id in wanted]
            + [(pk, keys.META_SK) for pk in pads]
        )
        found: dict[str, tuple[Memory, list[Grant]]] = {}
        asked = set(wanted)
        for item in items:
            memory, grants = memory_from(item), grants_from_copy(item)
            if item.get("entity") != PAD_ENTITY and item.get("tenant") == tenant and memory.id in asked:
                found[memory.id] = (memory, grants if grants is not None else self.grants_on(tenant, memory.id))
        return found

    def _lay_pads(self, tenant: str) -> None:
        """Write the tenant's padding items unless they are there (each always the same, so concurrent
        writers agree; the last one written last, so it being there says all are). Laid by a memory's
        creation: a tenant has a memory to hide only once one was created, and the functions that only
        read never write. A tenant whose memories predate the padding gets it with its next memory."""
        last = PAD_COUNT - 1
        if self._table.get(keys.pad_pk(tenant, last), keys.META_SK):
            return
        self._table.put_many([_pad_item(tenant, index) for index in range(PAD_COUNT)])

    def grants_of_item(self, tenant: str, item: Mapping[str, Any]) -> list[Grant]:
        copied = grants_from_copy(item)
        return copied if copied is not None else self.grants_on(tenant, str(item["id"]))

    def children(self, tenant: str, parent_id: str) -> list[Memory]:
        items = self._table.query(
            "GSI1PK = :pk", {":pk": keys.children_pk(tenant, parent_id)}, index=CHILDREN_INDEX.name
        )
        return [memory_from(item) for item in items if item.get("tenant") == tenant]

    def create(self, memory: Memory, creator_grant: Grant) -> None:
        """The memory (counting its children from its first: none), its creator's grant and, under a
        parent, the parent's count of it, in one transaction on the condition that the parent lives."""
        counted = memory.evolve(children=ChildCount())
        item = {**memory_item(counted), GRANTS_ATTRIBUTE: grants_copy([creator_grant]), GRANTS_VERSION: 1}
        operations = [
            self._table.put_op(item, "attribute_not_exists(PK)"),
            self._table.put_op(grant_item(creator_grant), "attribute_not_exists(PK)"),
        ]
        if memory.parent_id is not None:
            parent = self.get(memory.tenant, memory.parent_id)
            operations.append(self._count_child_op(
                memory.tenant, memory.parent_id, memory.id, memory.restricted, (creator_grant.principal,),
                counted=True, condition=LIVE_MEMORY, values={":false": False},
                uncounted=parent is None or parent.children is None))
        try:
            self._table.transact(operations)
        except ConditionFailed:
            raise TreeChanged(memory.parent_id) from None
        self._lay_pads(memory.tenant)

    def update(
        self,
        memory: Memory,
        expected_parent_id: str | None,
        parent_chain: Sequence[Memory],
        below: Sequence[Memory] = (),
        was_restricted: bool | None = None,
    ) -> None:
        values: dict[str, object] = {
            ":name": memory.name,
            ":description": memory.description,
            ":restricted": memory.restricted,
            ":updated": memory.updated_at,
            ":gsi1pk": keys.children_pk(memory.tenant, memory.parent_id),
            ":false": False,
        }
        assignments = "SET #name = :name, description = :description, restricted = :restricted, "
        assignments += "updated_at = :updated, GSI1PK = :gsi1pk"
        if memory.described_by is not None:
            assignments += ", described_by = :described_by"
            values[":described_by"] = memory.described_by
        if memory.ancestors is not None and memory.parent_id != expected_parent_id:
            # Written on a move only: a rename must not put back the chain a concurrent move replaced.
            assignments += ", ancestors = :ancestors"
            values[":ancestors"] = ancestors_text(memory.ancestors)
        if memory.parent_id is None:
            assignments += " REMOVE parent_id"
        else:
            assignments = assignments.replace("SET ", "SET parent_id = :parent, ")
            values[":parent"] = memory.parent_id
        condition = LIVE_MEMORY + " AND " + self._parent_is(expected_parent_id, ":expected", values)
        moving = memory.parent_id != expected_parent_id
        if moving:  # a run's memory never moves under it, nor does a memory below it (holds.py)
            condition += " AND " + holds.NOT_HELD
        recounted = moving or was_restricted is None or was_restricted != memory.restricted
        parents, recount = self._recount(memory, expected_parent_id, moving, values) if recounted else ({}, "")
        condition += recount
        operations = [
            self._table.update_op(
                keys.memory_pk(memory.tenant, memory.id),
                keys.META_SK,
                assignments,
                condition=condition,
                values=values,
                names={"#name": "name"},
            )
        ]
        # Every node above the new parent must still sit where it was read: two concurrent moves
        # can then never close a cycle, since one of them fails here.
        for index, node in enumerate(parent_chain):
            node_values: dict[str, object] = {":false": False}
            node_condition = LIVE_MEMORY + " AND " + self._parent_is(node.parent_id, f":p{index}", node_values)
            # The new parent's count of the memory goes in its one operation, with its check.
            operations.append(parents.pop(node.id, ChildChanges()).op(
                self._table, node.tenant, node.id, node_condition, node_values))
        for parent_id, changes in parents.items():  # the parent it leaves, or the one it is restricted under
            operations.append(changes.op(self._table, memory.tenant, parent_id, "attribute_exists(PK)"))
        # A move carries the new ancestors of every memory below it, each still under the parent it was
        # read under: the whole subtree's chains change with the move or not at all.
        for node in below:
            operations.append(
                self._table.update_op(
                    keys.memory_pk(node.tenant, node.id),
                    keys.META_SK,
                    "SET ancestors = :ancestors",
                    condition="attribute_exists(PK) AND parent_id = :parent AND " + holds.NOT_HELD,
                    values={":ancestors": ancestors_text(node.ancestors or ()), ":parent": node.parent_id},
                )
            )
        try:
            self._table.transact(operations)
        except ConditionFailed:
            if moving:
                moved = [memory.id, *(node.id for node in below)]
                items = self._table.get_many([(keys.memory_pk(memory.tenant, m), keys.META_SK) for m in moved])
                if any(holds.is_held(item) for item in items):
                    raise MemoryBusy.under(memory.id) from None
            raise TreeChanged(memory.id) from None

    def _count_child_op(
        self, tenant: str, parent_id: str, child_id: str, restricted: bool, grantees: Sequence[str], *,
        counted: bool, condition: str = "attribute_exists(PK)", values: Mapping[str, Any] | None = None,
        uncounted: bool = False,
    ) -> dict[str, Any]:
        """The parent item's count of one child, added (`counted`) or taken away (ChildChanges); `condition`
        and `values`: what else the parent's one operation in the transaction checks. `uncounted`: a parent
        from before children were counted, whose epoch the change moves instead."""
        changes = ChildChanges(uncounted=uncounted)
        changes.count(child_id, restricted, grantees, counted=counted)
        return changes.op(self._table, tenant, parent_id, condition, values)

    def _recount(
        self, memory: Memory, expected_parent_id: str | None, moving: bool, values: dict[str, object]
    ) -> tuple[dict[str, ChildChanges], str]:
        """How a move or a restrict changes the count its parents keep of the memory (the parent it leaves
        counts it no more; the one it joins, or stays under restricted or open, counts it as it now is),
        and the condition the memory's own update then carries: its `restricted` and its grants as read
        here (a concurrent restrict or grant change would count it twice). Nothing for a rename."""
        meta, grants = grants_in_partition(self._table, memory.tenant, memory.id)
        if meta is None:
            raise TreeChanged(memory.id)
        was_restricted = bool(meta.get("restricted", False))
        if not moving and was_restricted == memory.restricted:
            return {}, ""
        touched = [p for p in dict.fromkeys((expected_parent_id, memory.parent_id)) if p is not None]
        items = self._table.get_many([(keys.memory_pk(memory.tenant, p), keys.META_SK) for p in touched])
        mine = [item for item in items if item.get("tenant") == memory.tenant]
        uncounted = {str(item["id"]): CHILDREN_OPEN not in item for item in mine}
        grantees = [g.principal for g in grants]
        parents: dict[str, ChildChanges] = {}
        if expected_parent_id in uncounted:
            parents.setdefault(expected_parent_id, ChildChanges(uncounted=uncounted[expected_parent_id])).count(
                memory.id, was_restricted, grantees, counted=False)
        if memory.parent_id in uncounted:
            parents.setdefault(memory.parent_id, ChildChanges(uncounted=uncounted[memory.parent_id])).count(
                memory.id, memory.restricted, grantees, counted=True)
        values[":was_restricted"] = was_restricted
        version = meta.get(GRANTS_VERSION)
        if version is None:
            return parents, " AND restricted = :was_restricted AND attribute_not_exists(grants_version)"
        values[":grants_version"] = version
        return parents, " AND restricted = :was_restricted AND grants_version = :grants_version"

    @staticmethod
    def _parent_is(parent_id: str | None, placeholder: str, values: dict[str, object]) -> str:
        if parent_id is None:
            return "attribute_not_exists(parent_id)"
        values[placeholder] = parent_id
        return f"parent_id = {placeholder}"

    def grants_of(self, tenant: str, principal_ids: Sequence[str]) -> list[Grant]:
        found: list[Grant] = []
        for principal in dict.fromkeys(principal_ids):
            items = self._table.query(
                "GSI2PK = :pk", {":pk": keys.principal_pk(tenant, principal)}, index=PRINCIPAL_INDEX.name
            )
            found.extend(grant_from(item) for item in items if item.get("tenant") == tenant)
        return found

    def grants_on(self, tenant: str, memory_id: str) -> list[Grant]:
        items = self._table.query(
            "PK = :pk AND begins_with(SK, :g)", {":pk": keys.memory_pk(tenant, memory_id), ":g": keys.GRANT_SK_PREFIX}
        )
        return _oldest_first(grant_from(item) for item in items)

    def count_records(self, tenant: str, memory_id: str, *, added: int = 0, exactly: int | None = None) -> None:
        update, values = ("SET record_count = :n", {":n": exactly}) if exactly is not None else (
            "ADD record_count :n", {":n": added})
        if exactly is None and added == 0:
            return
        with contextlib.suppress(ConditionFailed):  # deleted meanwhile: its count went with it
            self._table.update(keys.memory_pk(tenant, memory_id), keys.META_SK, update, condition=LIVE_MEMORY,
                               values={**values, ":false": False})

    def put_grant(self, grant: Grant) -> None:
        """The grant item and the memory's copy of its grants, in one transaction on the condition
        that the memory lives and no other grant change came between the read and the write."""
        for _ in range(GRANT_WRITE_ATTEMPTS):
            meta, grants = grants_in_partition(self._table, grant.tenant, grant.memory_id)
            if meta is None or meta.get("deleting"):
                raise TreeChanged(grant.memory_id)
            try:
                self._table.transact(
                    [
                        self._table.put_op(grant_item(grant), "attribute_not_exists(PK)"),
                        grants_copy_op(self._table, meta, [*grants, grant], live=True),
                        *self._grantees_op(grant.tenant, meta, [*grants, grant]),
                    ]
                )
            except ConditionFailed as failed:
                if 0 in failed.failed:
                    raise TreeChanged(grant.memory_id) from None
                continue  # another grant change, or the memory went: read again
            except Contended:
                continue
            return
        raise Contended(f"grants on memory {grant.memory_id} kept changing; try again")

    def delete_grant(self, tenant: str, memory_id: str, grant_id: str) -> bool:
        for _ in range(GRANT_WRITE_ATTEMPTS):
            meta, grants = grants_in_partition(self._table, tenant, memory_id)
            if all(g.id != grant_id for g in grants):
                return False
            pk = keys.memory_pk(tenant, memory_id)
            operations = [self._table.delete_op(pk, keys.grant_sk(grant_id), "attribute_exists(PK)")]
            if meta is not None:  # a memory purged halfway has no item left to keep a copy
                remaining = [g for g in grants if g.id != grant_id]
                operations.append(grants_copy_op(self._table, meta, remaining, live=False))
                operations.extend(self._grantees_op(tenant, meta, remaining))
            try:
                self._table.transact(operations)
            except (ConditionFailed, Contended):
                continue  # deleted meanwhile, or another grant change came between: read again
            return True
        raise Contended(f"grants on memory {memory_id} kept changing; try again")

    def _grantees_op(self, tenant: str, meta: Mapping[str, Any], grants: Sequence[Grant]) -> list[dict[str, Any]]:
        """A restricted memory's grantees as its parent counts it (who sees it there), rewritten with its
        grants (under a parent from before children were counted: its epoch moves); nothing for a memory
        that is not restricted, or a root. Goes in the grant change's transaction, whose copy of the grants
        is conditioned on their version: a restrict or a move of the memory, which conditions on it too,
        cannot interleave."""
        parent_id = meta.get("parent_id")
        if not meta.get("restricted") or not parent_id:
            return []
        parent = self.get(tenant, str(parent_id))
        if parent is None:
            return []
        return [self._count_child_op(tenant, str(parent_id), str(meta["id"]), True, [g.principal for g in grants],
                                     counted=True, uncounted=parent.children is None)]

    def mark_deleting(self, tenant: str, memory_ids: Sequence[str]) -> None:
        """Hide the memories, root first, each on the condition that no run holds it (holds.py): a run
        that started after the service's look at the subtree makes this fail, not the run. A subtree
        past one transaction (100 memories) is hidden in batches; a batch refused as busy shows again
        the batches hidden before it."""
        ids = list(memory_ids)
        if not ids:
            return
        uncount = self._uncount_root(tenant, ids[0])  # the root's parent counts it no more: with its hiding
        hidden: list[str] = []
        # The first batch carries the parent's count too: one item fewer of it, for DynamoDB's 100.
        starts = [0, *range(99 if uncount else 100, len(ids), 100)]
        for first, start in enumerate(starts):
            batch = ids[start : starts[first + 1] if first + 1 < len(starts) else len(ids)]
            extra = uncount if first == 0 else []
            try:
                self._table.transact([*(self._deleting_op(tenant, memory_id, True) for memory_id in batch), *extra])
            except ConditionFailed:
                # Busy, or a node already purged by an earlier attempt: which, each node read says.
                items = self._table.get_many([(keys.memory_pk(tenant, m), keys.META_SK) for m in batch])
                if any(holds.is_held(item) for item in items):
                    for memory_id in hidden:
                        self._table.transact([self._deleting_op(tenant, memory_id, False)])
                    if hidden and uncount:  # the root shows again: its parent counts it again
                        self._table.transact(self._uncount_root(tenant, ids[0], counted=True))
                    raise MemoryBusy.under(ids[0]) from None
                for memory_id in batch:  # mark the rest one by one
                    try:
                        self._table.transact([self._deleting_op(tenant, memory_id, True),
                                              *(extra if memory_id == ids[0] else [])])
                    except ConditionFailed:
                        continue
            hidden.extend(batch)

    def _uncount_root(self, tenant: str, root_id: str, *, counted: bool = False) -> list[dict[str, Any]]:
        """The operation on the parent of a memory being hidden (or shown again) that takes it out of the
        parent's count of its children (or puts it back; under a parent from before children were counted,
        moves its epoch): none when it is a root, or already hidden."""
        meta, grants = grants_in_partition(self._table, tenant, root_id)
        parent_id = meta.get("parent_id") if meta is not None else None
        if meta is None or not parent_id or (bool(meta.get("deleting")) and not counted):
            return []
        parent = self.get(tenant, str(parent_id))
        if parent is None:
            return []
        return [self._count_child_op(tenant, str(parent_id), root_id, bool(meta.get("restricted")),
                                     [g.principal for g in grants], counted=counted,
                                     uncounted=parent.children is None)]

    def _deleting_op(self, tenant: str, memory_id: str, deleting: bool) -> dict[str, Any]:
        # Hidden once: a memory already hidden is not hidden again, so its parent never counts it out twice.
        condition = "attribute_exists(PK)"
        if deleting:
            condition += " AND " + holds.NOT_HELD + " AND (attribute_not_exists(deleting) OR deleting = :shown)"
        return self._table.update_op(
            keys.memory_pk(tenant, memory_id),
            keys.META_SK,
            "SET deleting = :deleting",
            condition=condition,
            values={":deleting": deleting, ":shown": False} if deleting else {":deleting": deleting},
        )

    def purge(self, tenant: str, memory_id: str) -> None:
        pk = keys.memory_pk(tenant, memory_id)
        items = self._table.query("PK = :pk", {":pk": pk})
        # The META item goes last, so a purge cut short leaves a hidden node to finish, not orphans.
        self._table.delete_many([(item["PK"], item["SK"]) for item in items if item["SK"] != keys.META_SK])
        self._table.delete(pk, keys.META_SK)


def _oldest_first(grants: Iterable[Grant]) -> list[Grant]:
    """Grants in the order they were made (the id breaks ties), as MemoryRepository lists them."""
    return sorted(grants, key=lambda g: (g.created_at, g.id))


def grants_in_partition(table: DynamoTable, tenant: str, memory_id: str) -> tuple[dict[str, Any] | None, list[Grant]]:
    """The memory item (None if gone) and every grant item on it, in one consistent query: its grants
    (G#...) sort just before its META item, and no other kind of item sorts between them (keys.py)."""
    items = table.query(
        "PK = :pk AND SK BETWEEN :grants AND :meta",
        {":pk": keys.memory_pk(tenant, memory_id), ":grants": keys.GRANT_SK_PREFIX, ":meta": keys.META_SK},
    )
    meta: dict[str, Any] | None = None
    grants: list[Grant] = []
    for item in items:
        if item.get("tenant") != tenant:
            continue
        if item["SK"] == keys.META_SK:
            meta = item
        elif item["SK"].startswith(keys.GRANT_SK_PREFIX):
            grants.append(grant_from(item))
    return meta, _oldest_first(grants)


def grants_copy_op(table: DynamoTable, meta: Mapping[str, Any], grants: Sequence[Grant], *, live: bool) -> dict:
    """Rewrite a memory item's copy of its grants to `grants`, on the condition that its version is
    still the one read with `meta` (no grant change came between), and that it lives if `live`."""
    version = meta.get(GRANTS_VERSION)
    values: dict[str, Any] = {":copy": grants_copy(grants), ":next": int(version or 0) + 1}
    unchanged = f"attribute_not_exists({GRANTS_VERSION})"
    if version is not None:
        unchanged = f"{GRANTS_VERSION} = :version"
        values[":version"] = version
    condition = "attribute_exists(PK)"
    if live:
        condition = LIVE_MEMORY
        values[":false"] = False
    return table.update_op(
        str(meta["PK"]),
        keys.META_SK,
        f"SET #grants = :copy, {GRANTS_VERSION} = :next",
        condition=f"{condition} AND {unchanged}",
        values=values,
        names={"#grants": GRANTS_ATTRIBUTE},
    )


def _pad_item(tenant: str, index: int) -> dict[str, Any]:
    """Padding item `index`: shaped and sized like a memory item with its creator's grant, listing
    PAD_CHAIN - index ancestors (module doc), so reading one costs what reading that memory does; in
    the children index under a parent no memory has (keys.pad_children_pk), so in no listing; marked as
    what it is."""
    when = 1_000_000_000_000  # as many digits as a memory's times
    pad = Memory(
        tenant=tenant, id=f"hpad_{index:032x}", name="padding", description="", parent_id=f"hmem_{index:032x}",
        restricted=False, provider="native", created_by="user:padding", created_at=when, updated_at=when,
        ancestors=tuple(f"hmem_{n:032x}" for n in range(max(0, PAD_CHAIN - index))),
    )
    grant = Grant(tenant, f"hgrt_{index:032x}", pad.id, "user:padding", PRIVILEGES, when, "user:padding", implicit=True)
    item = memory_item(pad)
    item.update(PK=keys.pad_pk(tenant, index), entity=PAD_ENTITY, GSI1PK=keys.pad_children_pk(tenant, index))
    item.update({GRANTS_ATTRIBUTE: grants_copy([grant]), GRANTS_VERSION: 1})
    return item
