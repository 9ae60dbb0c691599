"""What an erase reports as beyond reach (domain.removal.Retention), from the stage's settings."""

from __future__ import annotations

from uhp_memories import bootstrap
from uhp_memories.domain.removal.model import Retention
from uhp_memories.settings import Settings

RECORD, MEMORY = "hrec_" + "1" * 32, "hmem_" + "2" * 32
NOW = 1_790_000_000_000  # 2026-09-21T14:13:20.000Z


def where(retention: Retention) -> dict[str, str]:
    entries = retention.unreachable(RECORD, MEMORY, NOW)
    assert all((e["record_id"], e["memory_id"]) == (RECORD, MEMORY) and e["reason"] for e in entries)
    return {entry["where"]: entry["until"] for entry in entries}


def test_nothing_is_kept_beyond_reach_by_default() -> None:
    assert Retention().unreachable(RECORD, MEMORY, NOW) == []


def test_every_copy_the_stage_keeps_is_named_with_how_long() -> None:
    retention = Retention(
        pitr_enabled=True,
        pitr_retention_days=35,
        stream_enabled=True,
        stream_retention_hours=24,
        search_snapshot_retention_days=14,
        search_segments=True,
    )

    assert where(retention) == {
        "dynamodb_point_in_time_recovery": "2026-10-26T14:13:20.000Z",
        "dynamodb_stream": "2026-09-22T14:13:20.000Z",
        "opensearch_snapshots": "2026-10-05T14:13:20.000Z",
        "opensearch_segments": "the next segment merge",
    }


def test_the_search_segments_are_named_only_when_a_search_endpoint_is_configured() -> None:
    def retention_of(settings: Settings) -> Retention:
        return bootstrap.build(settings, None, None).removal._retention

    aws = retention_of(Settings(search_endpoint="https://search-uhp.eu-west-1.es.amazonaws.com"))
    local = retention_of(Settings())  # local mode: the embedded engine scrubs what it deletes

    assert where(aws) == {"opensearch_segments": "the next segment merge"}
    assert where(local) == {}
