"""Every DynamoDB key this project builds, and every key it reads back, in one place. Every
partition key starts with the tenant. A sort key's prefix says what an item of a memory's partition
is; adapters query a kind of item by its prefix (`begins_with(SK, ...)`), never by a literal."""

from __future__ import annotations

import re
from typing import NamedTuple


def memory_pk(tenant: str, memory_id: str) -> str:
    return f"T#{tenant}#M#{memory_id}"


META_SK = "META"


def children_pk(tenant: str, parent_id: str | None) -> str:
    return f"T#{tenant}#P#{parent_id or 'ROOT'}"


def children_sk(created_at: int, memory_id: str) -> str:
    return f"{created_at:015d}#{memory_id}"


# A padding item's keys are as long as a memory item's (what a read sends and parses grows with them).
def pad_pk(tenant: str, index: int) -> str:
    """One of a tenant's padding items: read beside memory items to bring an access check's batch to
    its fixed width (memories.get_many_with_grants); never a memory."""
    return f"T#{tenant}#PAD#{index:035d}"


def pad_children_pk(tenant: str, index: int) -> str:
    """Where a padding item sits in the children index: under no memory (children_pk never makes it),
    so no listing reads it, and it carries the index keys a memory item carries."""
    return f"T#{tenant}#PAD#{index:035d}"


# A memory's grants sort just before its META item: one query reads the memory with its grants
# (memories.get_with_grants). No other item of a memory's partition may sort between "G#" and "META".
GRANT_SK_PREFIX = "G#"


def grant_sk(grant_id: str) -> str:
    return f"{GRANT_SK_PREFIX}{grant_id}"


def principal_pk(tenant: str, principal: str) -> str:
    return f"T#{tenant}#PR#{principal}"


def principal_sk(memory_id: str, grant_id: str) -> str:
    return f"M#{memory_id}#G#{grant_id}"


RECORD_SK_PREFIX = "R#"


def record_sk(record_id: str) -> str:
    return f"{RECORD_SK_PREFIX}{record_id}"


def chain_pk(tenant: str, chain_id: str) -> str:
    return f"T#{tenant}#C#{chain_id}"


def chain_sk(version: int) -> str:
    return f"V#{version:08d}"


def timeline_pk(tenant: str, memory_id: str) -> str:
    return f"T#{tenant}#M#{memory_id}#V"


def active_pk(tenant: str, memory_id: str) -> str:
    return f"T#{tenant}#M#{memory_id}#A"


def time_sk(written_at: str, record_id: str) -> str:
    return f"{written_at}#{record_id}"


SNAPSHOT_SK_PREFIX = "S#"


def snapshot_sk(name: str) -> str:
    return f"{SNAPSHOT_SK_PREFIX}{name}"


def harness_pk(tenant: str, harness_id: str) -> str:
    return f"T#{tenant}#H#{harness_id}"


PLACEMENT_SK_PREFIX = "PRIMED#"  # what one prime placed (§9.1), under the harness, kept for days (TTL)


def placement_sk(prime_id: str) -> str:
    return f"{PLACEMENT_SK_PREFIX}{prime_id}"


def types_pk(tenant: str) -> str:
    """A tenant's registered extension types (§8): one current item per type and one per version."""
    return f"T#{tenant}#TYPES"


TYPE_SK_PREFIX = "TYPE#"
TYPE_VERSION_MARK = "#V#"


def type_sk(type_name: str) -> str:
    return f"{TYPE_SK_PREFIX}{type_name}"


def type_version_sk(type_name: str, version: int) -> str:
    return f"{TYPE_SK_PREFIX}{type_name}{TYPE_VERSION_MARK}{version:06d}"


def file_pk(tenant: str, file_id: str) -> str:
    return f"T#{tenant}#F#{file_id}"


def derived_pk(tenant: str, target_record_id: str) -> str:
    """Reverse index of `derived_from` references: what was derived from a record version."""
    return f"T#{tenant}#DERIVED#{target_record_id}"


def derived_sk(source_record_id: str) -> str:
    return f"{RECORD_SK_PREFIX}{source_record_id}"


def job_pk(tenant: str, job_id: str) -> str:
    return f"T#{tenant}#J#{job_id}"


JOB_SK = "JOB"


RUN_SK_PREFIX = "RUN#"


def run_sk(job_id: str) -> str:
    """A marker under the memory while a workflow holds it (memory_busy)."""
    return f"{RUN_SK_PREFIX}{job_id}"


QUERY_SK_PREFIX = "Q#"


def query_sk(name: str) -> str:
    return f"{QUERY_SK_PREFIX}{name}"


# File memory (docs/file-memory.md): one item per current file, named by its path, and the change
# journal, a head and one entry per change in commit order. Both sort outside "G#".."META".
PATH_SK_PREFIX = "PATH#"


def path_sk(path: str) -> str:
    return f"{PATH_SK_PREFIX}{path}"


JOURNAL_HEAD_SK = "CHANGES"
PRIME_SK = "PRIME"  # a memory's pins for prime (§9.1), under the memory: its purge removes them
SCHEDULE_SK = "SCHEDULE#CONSOLIDATION"  # a memory's consolidation schedule, under the memory likewise
JOURNAL_ENTRY_PREFIX = "CHANGE#"


def journal_sk(seq: int) -> str:
    return f"{JOURNAL_ENTRY_PREFIX}{seq:012d}"


CONSOLIDATION_SK_PREFIX = "CON#"


def run_item_sk(run_id: str) -> str:
    """A consolidation run, under its memory."""
    return f"{CONSOLIDATION_SK_PREFIX}{run_id}"


# -- reading keys back -------------------------------------------------------------------------

# memory_pk: a memory id holds no "#" (ids are a prefix and hex), so the tenant is all before "#M#".
_MEMORY_PK = re.compile(r"^T#(?P<tenant>.+)#M#(?P<memory_id>[^#]+)$")


class RecordKey(NamedTuple):
    tenant: str
    memory_id: str
    record_id: str


def parse_record_key(pk: str, sk: str) -> RecordKey | None:
    """The record version a main-table item's keys name (memory_pk, record_sk); None for any other
    item's keys (a memory, a grant, a snapshot, a derived-from reference...)."""
    memory = _MEMORY_PK.match(pk)
    record_id = sk.removeprefix(RECORD_SK_PREFIX)
    if memory is None or record_id == sk or not record_id or "#" in record_id:
        return None
    return RecordKey(memory["tenant"], memory["memory_id"], record_id)
