"""Every DynamoDB key this project builds, in one place. Every key starts with the tenant."""

from __future__ import annotations


def memory_pk(tenant: str, memory_id: str) -> str:
    return f"T#{tenant}#M#{memory_id}"


META_SK = "META"


def children_pk(tenant: str, parent_id: str | None) -> str:
    return f"T#{tenant}#P#{parent_id or 'ROOT'}"


def children_sk(created_at: int, memory_id: str) -> str:
    return f"{created_at:015d}#{memory_id}"


# A memory's grants sort just before its META item: one query reads the memory with its grants
# (memories.get_with_grants). No other item of a memory's partition may sort between "G#" and "META".
GRANT_SK_PREFIX = "G#"


def grant_sk(grant_id: str) -> str:
    return f"{GRANT_SK_PREFIX}{grant_id}"


def principal_pk(tenant: str, principal: str) -> str:
    return f"T#{tenant}#PR#{principal}"


def principal_sk(memory_id: str, grant_id: str) -> str:
    return f"M#{memory_id}#G#{grant_id}"


def record_sk(record_id: str) -> str:
    return f"R#{record_id}"


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


def snapshot_sk(name: str) -> str:
    return f"S#{name}"


def harness_pk(tenant: str, harness_id: str) -> str:
    return f"T#{tenant}#H#{harness_id}"


def file_pk(tenant: str, file_id: str) -> str:
    return f"T#{tenant}#F#{file_id}"


def derived_pk(tenant: str, target_record_id: str) -> str:
    """Reverse index of `derived_from` references: what was derived from a record version."""
    return f"T#{tenant}#DERIVED#{target_record_id}"


def derived_sk(source_record_id: str) -> str:
    return f"R#{source_record_id}"


def job_pk(tenant: str, job_id: str) -> str:
    return f"T#{tenant}#J#{job_id}"


JOB_SK = "JOB"


def run_sk(job_id: str) -> str:
    """A marker under the memory while a workflow holds it (memory_busy)."""
    return f"RUN#{job_id}"


def query_sk(name: str) -> str:
    return f"Q#{name}"


def run_item_sk(run_id: str) -> str:
    return f"CON#{run_id}"
