"""Table definitions, written once: local mode creates tables from them (moto) and CDK builds the
same tables from them (infra/constructs/data.py).

One main table with keys prefixed by tenant, so isolation holds by construction; a keys table read
only by the authorizer; the Powertools idempotency table.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Index:
    name: str
    partition_key: str
    sort_key: str
    purpose: str


@dataclass(frozen=True)
class TableSpec:
    logical_name: str
    partition_key: str
    sort_key: str | None = None
    indexes: tuple[Index, ...] = ()
    ttl_attribute: str | None = None
    stream: bool = False
    attribute_types: dict[str, str] = field(default_factory=dict)

    def attribute_names(self) -> list[str]:
        names = [self.partition_key] + ([self.sort_key] if self.sort_key else [])
        for index in self.indexes:
            names += [index.partition_key, index.sort_key]
        return list(dict.fromkeys(names))

    def create_table_kwargs(self, table_name: str, with_stream: bool = True) -> dict:
        """Arguments for DynamoDB CreateTable (used by local mode and tests)."""
        key_schema = [{"AttributeName": self.partition_key, "KeyType": "HASH"}]
        if self.sort_key:
            key_schema.append({"AttributeName": self.sort_key, "KeyType": "RANGE"})
        kwargs: dict = {
            "TableName": table_name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": key_schema,
            "AttributeDefinitions": [
                {"AttributeName": name, "AttributeType": self.attribute_types.get(name, "S")}
                for name in self.attribute_names()
            ],
        }
        if self.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": [
                        {"AttributeName": index.partition_key, "KeyType": "HASH"},
                        {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
                for index in self.indexes
            ]
        if self.stream and with_stream:
            kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        return kwargs


CHILDREN_INDEX = Index("children", "GSI1PK", "GSI1SK", "a memory's direct children, oldest first")
PRINCIPAL_INDEX = Index("principal_grants", "GSI2PK", "GSI2SK", "every grant one principal holds")
CHAIN_INDEX = Index("record_chain", "GSI3PK", "GSI3SK", "one record's versions, oldest first")
TIMELINE_INDEX = Index("memory_timeline", "GSI4PK", "GSI4SK", "every version in a memory by write time")
ACTIVE_INDEX = Index("memory_active", "GSI5PK", "GSI5SK", "sparse: only current active versions")

MAIN_TABLE = TableSpec(
    logical_name="Main",
    partition_key="PK",
    sort_key="SK",
    indexes=(CHILDREN_INDEX, PRINCIPAL_INDEX, CHAIN_INDEX, TIMELINE_INDEX, ACTIVE_INDEX),
    # Only a file memory's change-journal entries carry it (docs/file-memory.md): they expire.
    ttl_attribute="expires_at",
    stream=True,
)
KEYS_TABLE = TableSpec(logical_name="Keys", partition_key="key_hash")
# Sparse: only the pointer items a kept answer or a write marker leaves per erasable id it names
# (adapters/dynamodb/idempotency.py), so erase finds them by the erased id, tenant first, never by a Scan.
MENTIONS_INDEX = Index("mentions", "mentioned", "points_to", "the kept answers and write markers naming one id")
# The schema Powertools' DynamoDBPersistenceLayer expects, with its TTL attribute, and the mentions index.
IDEMPOTENCY_TABLE = TableSpec(
    logical_name="Idempotency", partition_key="id", ttl_attribute="expiration", indexes=(MENTIONS_INDEX,)
)

ALL_TABLES = (MAIN_TABLE, KEYS_TABLE, IDEMPOTENCY_TABLE)
