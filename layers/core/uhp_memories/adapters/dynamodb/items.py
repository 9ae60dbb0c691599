"""Persistence items: domain entities to DynamoDB items and back, validated on read.

Text content is kept as a plain string attribute, byte for byte; the rest of a record's payload
(attributes, references, writer, a file reference) as one JSON string in UTF-8: DynamoDB's number
type cannot hold every JSON number, and nothing queries inside them (filters run after the key
conditions, and recall uses the search index)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from uhp_memories.adapters.dynamodb import keys
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.memories.model import ChildCount, Memory
from uhp_memories.domain.records.model import RecordVersion, Snapshot

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()
# The `entity` of a record version's item: what the stream filter (infra/constructs/compute.py), the
# stream indexer and `uhp-memories reindex` pick record items by.
RECORD_ENTITY = "record"


def to_dynamo(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in item.items() if v is not None}


def from_dynamo(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# The version of the shape of the items this release writes: every put says it (DynamoTable stamps it),
# and `uhp-memories migrate` brings older items to it (adapters/dynamodb/migrate.py). 1: an item without
# it. 2: memory items count their children.
SCHEMA = "schema"
SCHEMA_VERSION = 2


def memory_item(memory: Memory) -> dict[str, Any]:
    item: dict[str, Any] = {
        "PK": keys.memory_pk(memory.tenant, memory.id),
        "SK": keys.META_SK,
        "entity": "memory",
        "tenant": memory.tenant,
        "id": memory.id,
        "name": memory.name,
        "description": memory.description,
        "parent_id": memory.parent_id,
        "restricted": memory.restricted,
        "provider": memory.provider,
        "created_by": memory.created_by,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "record_count": memory.record_count,
        "deleting": memory.deleting,
        "GSI1PK": keys.children_pk(memory.tenant, memory.parent_id),
        "GSI1SK": keys.children_sk(memory.created_at, memory.id),
    }
    if memory.described_by is not None:  # absent: the creator named and described it
        item["described_by"] = memory.described_by
    if memory.ancestors is not None:  # absent on items written before ancestors were kept
        item["ancestors"] = ancestors_text(memory.ancestors)
    if memory.children is not None:  # absent on items written before children were counted
        item[CHILDREN_OPEN] = memory.children.open
        for child_id, grantees in memory.children.restricted.items():
            item[restricted_child(child_id)] = " ".join(grantees)
    return item


# A memory item counts its live children (domain/memories/model.py ChildCount): CHILDREN_OPEN, those not
# restricted; one attribute per restricted child, `rc_<child id>`, holding the principals granted on it
# (space-separated: principals hold no space). Attributes, not a map: a child is added or removed with
# one SET or REMOVE of its own name, whether or not another is there.
CHILDREN_OPEN = "children_open"
CHILDREN_EPOCH = "children_epoch"  # on an item that keeps no count: how many times its children changed
RESTRICTED_CHILD = "rc_"


def restricted_child(child_id: str) -> str:
    return RESTRICTED_CHILD + child_id


def children_from(item: Mapping[str, Any]) -> ChildCount | None:
    if CHILDREN_OPEN not in item:
        return None
    restricted = {name[len(RESTRICTED_CHILD):]: tuple(str(value).split())
                  for name, value in item.items() if name.startswith(RESTRICTED_CHILD)}
    return ChildCount(int(item[CHILDREN_OPEN]), restricted)


def memory_from(item: Mapping[str, Any]) -> Memory:
    return Memory(
        tenant=str(item["tenant"]),
        id=str(item["id"]),
        name=str(item["name"]),
        description=str(item.get("description", "")),
        parent_id=item.get("parent_id"),
        restricted=bool(item.get("restricted", False)),
        provider=str(item["provider"]),
        created_by=str(item["created_by"]),
        created_at=int(item["created_at"]),
        updated_at=int(item["updated_at"]),
        record_count=int(item.get("record_count", 0)),
        deleting=bool(item.get("deleting", False)),
        described_by=str(item["described_by"]) if item.get("described_by") else None,
        ancestors=tuple(map(sys.intern, str(item["ancestors"]).split())) if "ancestors" in item else None,
        children=children_from(item),
    )


def ancestors_text(ancestors: Iterable[str]) -> str:
    """A memory's ancestors as its item keeps them: one string, the ids root first, space-separated
    (ids hold no space). One value, not a list of them: what a read of a deep memory's chain costs to
    send and to parse grows with its bytes only, not with a value per ancestor."""
    return " ".join(ancestors)


# A memory item keeps a copy of every grant on it (GRANTS_ATTRIBUTE), rewritten whole in the
# transaction of every grant change and counted by GRANTS_VERSION, so that a batch read of memory items
# reads their grants too (the access check: domain/access/model.py). One JSON string, like a record's
# payload: read and parsed as one value, however many grants. The grant items stay what grants are
# listed and found by; an item without the copy (written before it was kept) has its grants read from
# its partition, as they always were.
GRANTS_ATTRIBUTE = "grants"
GRANTS_VERSION = "grants_version"


def grants_copy(grants: Iterable[Grant]) -> str:
    return json.dumps(
        [[g.id, g.principal, list(g.privileges), g.created_at, g.created_by, g.implicit] for g in grants],
        separators=(",", ":"),
    )


def grants_from_copy(item: Mapping[str, Any]) -> list[Grant] | None:
    """The grants a memory item keeps a copy of (oldest first); None when it keeps none."""
    copy = item.get(GRANTS_ATTRIBUTE)
    if not isinstance(copy, str):
        return None
    tenant, memory_id = str(item["tenant"]), str(item["id"])
    grants = [
        Grant(tenant, str(grant_id), memory_id, str(principal), tuple(privileges), int(created_at),
              str(created_by), bool(implicit))
        for grant_id, principal, privileges, created_at, created_by, implicit in json.loads(copy)
    ]
    return sorted(grants, key=lambda g: (g.created_at, g.id))


def grant_item(grant: Grant) -> dict[str, Any]:
    return {
        "PK": keys.memory_pk(grant.tenant, grant.memory_id),
        "SK": keys.grant_sk(grant.id),
        "entity": "grant",
        "tenant": grant.tenant,
        "id": grant.id,
        "memory_id": grant.memory_id,
        "principal": grant.principal,
        "privileges": list(grant.privileges),
        "created_at": grant.created_at,
        "created_by": grant.created_by,
        "implicit": grant.implicit,
        "GSI2PK": keys.principal_pk(grant.tenant, grant.principal),
        "GSI2SK": keys.principal_sk(grant.memory_id, grant.id),
    }


def grant_from(item: Mapping[str, Any]) -> Grant:
    return Grant(
        tenant=str(item["tenant"]),
        id=str(item["id"]),
        memory_id=str(item["memory_id"]),
        principal=str(item["principal"]),
        privileges=tuple(item["privileges"]),
        created_at=int(item["created_at"]),
        created_by=str(item["created_by"]),
        implicit=bool(item.get("implicit", False)),
    )


def record_item(record: RecordVersion) -> dict[str, Any]:
    item: dict[str, Any] = {
        "PK": keys.memory_pk(record.tenant, record.memory_id),
        "SK": keys.record_sk(record.id),
        "entity": RECORD_ENTITY,
        "tenant": record.tenant,
        "id": record.id,
        "memory_id": record.memory_id,
        "chain_id": record.chain_id,
        "version": record.version,
        "type": record.type,
        "status": record.status,
        "supersedes": record.supersedes,
        "superseded_by": record.superseded_by,
        "valid_from": record.valid_from,
        "valid_to": record.valid_to,
        "written_at": record.written_at,
        "invalidated_at": record.invalidated_at,
        # Text as itself: escaped inside JSON, control characters would take six bytes each.
        "content_text": record.content if isinstance(record.content, str) else None,
        "body": json.dumps(
            {
                "content": None if isinstance(record.content, str) else record.content,
                "attributes": record.attributes,
                "references": list(record.references),
                "written_by": record.written_by,
                "origin": record.origin,
                "projection": record.projection,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        ),
        "path": record.path,
        # Its own attribute, not in `body`: a forget sets it on the version it closes (an UpdateItem).
        "forgotten_by": forgotten_by_json(record),
        "GSI3PK": keys.chain_pk(record.tenant, record.chain_id),
        "GSI3SK": keys.chain_sk(record.version),
        "GSI4PK": keys.timeline_pk(record.tenant, record.memory_id),
        "GSI4SK": keys.time_sk(record.written_at, record.id),
    }
    if record.is_current and record.status == "active":
        item["GSI5PK"] = keys.active_pk(record.tenant, record.memory_id)
        item["GSI5SK"] = keys.time_sk(record.written_at, record.id)
    return item


def record_from(item: Mapping[str, Any]) -> RecordVersion:
    body = json.loads(item["body"])
    return RecordVersion(
        tenant=str(item["tenant"]),
        memory_id=str(item["memory_id"]),
        id=str(item["id"]),
        chain_id=str(item["chain_id"]),
        version=int(item["version"]),
        type=str(item["type"]),
        content=item["content_text"] if "content_text" in item else body["content"],
        attributes=body["attributes"],
        status=str(item["status"]),
        supersedes=item.get("supersedes"),
        superseded_by=item.get("superseded_by"),
        valid_from=item.get("valid_from"),
        valid_to=item.get("valid_to"),
        written_at=str(item["written_at"]),
        invalidated_at=item.get("invalidated_at"),
        written_by=body["written_by"],
        references=tuple(body.get("references", [])),
        path=item.get("path"),
        origin=body.get("origin"),
        forgotten_by=json.loads(item["forgotten_by"]) if item.get("forgotten_by") else None,
        projection=body.get("projection"),
    )


def forgotten_by_json(record: RecordVersion) -> str | None:
    """Who forgot a version, and with what origin, as kept on its item."""
    if record.forgotten_by is None:
        return None
    return json.dumps(record.forgotten_by, separators=(",", ":"), ensure_ascii=False)


def derived_items(record: RecordVersion) -> list[dict[str, Any]]:
    """One reverse-index item per `derived_from` reference, so erase finds derived copies."""
    return [
        {
            "PK": keys.derived_pk(record.tenant, ref["record_id"]),
            "SK": keys.derived_sk(record.id),
            "entity": "derived",
            "tenant": record.tenant,
            "memory_id": record.memory_id,
            "record_id": record.id,
            "chain_id": record.chain_id,
            "target_memory_id": ref["memory_id"],
        }
        for ref in record.references
        if ref.get("rel") == "derived_from"
    ]


def snapshot_item(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "PK": keys.memory_pk(snapshot.tenant, snapshot.memory_id),
        "SK": keys.snapshot_sk(snapshot.name),
        "entity": "snapshot",
        "tenant": snapshot.tenant,
        "memory_id": snapshot.memory_id,
        "id": snapshot.id,
        "name": snapshot.name,
        "message": snapshot.message,
        "time": snapshot.time,
        "created_by": snapshot.created_by,
    }


def snapshot_from(item: Mapping[str, Any]) -> Snapshot:
    return Snapshot(
        tenant=str(item["tenant"]),
        memory_id=str(item["memory_id"]),
        id=str(item["id"]),
        name=str(item["name"]),
        message=str(item.get("message", "")),
        time=str(item["time"]),
        created_by=str(item["created_by"]),
    )
