"""The RecordRepository contract (ports.py): one suite run against every adapter.

Each test runs once on the in-memory fakes and once on the DynamoDB adapters over moto; where the two
differ, ports.py says which one is right."""

from __future__ import annotations

import pytest

from tests.contract.builders import (
    ACME,
    GLOBEX,
    add,
    at,
    creator_grant,
    first,
    forgotten,
    gid,
    grant,
    ids,
    memory,
    mid,
    revise,
    revision,
    rid,
    snapshot,
)
from tests.contract.conftest import Repositories
from uhp_memories.domain.errors import AlreadyExists, SourceGone, StaleVersion, TreeChanged
from uhp_memories.domain.records.model import RecordVersion

# -- RecordRepository: append, revise, close -----------------------------------------------------


def test_append_first_writes_the_version_and_counts_it(repos: Repositories) -> None:
    m = add(repos, 1)
    record = first(1, m.id, 10, content="Acme renews in März — 🎉")
    repos.records.append_first(record)
    assert repos.records.get(ACME, m.id, record.id) == record
    assert repos.memories.get(ACME, m.id).record_count == 1
    repos.records.append_first(first(2, m.id, 11))
    assert repos.memories.get(ACME, m.id).record_count == 2


def test_a_record_is_found_only_through_its_memory(repos: Repositories) -> None:
    m = add(repos, 1)
    other = add(repos, 2)
    repos.records.append_first(first(1, m.id, 10))
    assert repos.records.get(ACME, other.id, rid(1)) is None
    assert repos.records.get(ACME, m.id, rid(2)) is None
    assert repos.records.get(ACME, m.id, mid(1)) is None  # a memory id is not a record id


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_append_first_to_a_memory_going_or_gone_raises_tree_changed(repos: Repositories, fate: str) -> None:
    if fate == "deleting":
        add(repos, 1)
        repos.memories.mark_deleting(ACME, [mid(1)])
    with pytest.raises(TreeChanged):
        repos.records.append_first(first(1, mid(1), 10))
    assert repos.records.get(ACME, mid(1), rid(1)) is None
    assert repos.records.chain(ACME, rid(1)) == []
    if fate == "deleting":
        assert repos.memories.get(ACME, mid(1)).record_count == 0


@pytest.mark.slow
def test_append_revision_closes_the_previous_and_writes_the_revision(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    closed, v2 = revision(v1, 2, 20, "second")
    repos.records.append_revision(closed, v2)

    stored_v1 = repos.records.get(ACME, m.id, v1.id)
    assert stored_v1 == closed
    assert (stored_v1.status, stored_v1.superseded_by, stored_v1.invalidated_at) == ("superseded", v2.id, at(20))
    assert stored_v1.content == v1.content
    assert repos.records.get(ACME, m.id, v2.id) == v2
    assert repos.records.chain(ACME, v1.chain_id) == [closed, v2]
    assert repos.memories.get(ACME, m.id).record_count == 1


def test_append_revision_of_a_version_no_longer_current_writes_nothing(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    v2 = revise(repos, v1, 2, 20, "second")

    late_closed, late = revision(v1, 3, 30, "a lost update")
    with pytest.raises(StaleVersion):
        repos.records.append_revision(late_closed, late)
    assert repos.records.get(ACME, m.id, late.id) is None
    assert repos.records.chain(ACME, v1.chain_id) == [revision(v1, 2, 20, "second")[0], v2]
    assert ids(v for _, v in repos.records.scan_active(ACME, m.id, None)) == [v2.id]


def test_append_revision_of_a_forgotten_or_missing_version_raises_stale(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    gone = forgotten(v1, 20)
    repos.records.close(v1, gone)
    with pytest.raises(StaleVersion):
        repos.records.append_revision(*revision(v1, 2, 30, "back"))
    with pytest.raises(StaleVersion):
        repos.records.append_revision(*revision(first(5, m.id, 10), 6, 30, "never was"))
    assert repos.records.get(ACME, m.id, rid(2)) is None
    assert repos.records.get(ACME, m.id, rid(6)) is None
    assert repos.records.chain(ACME, v1.chain_id) == [gone]


def test_revise_or_close_in_a_memory_being_deleted_raises_stale(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    repos.memories.mark_deleting(ACME, [m.id])
    with pytest.raises(StaleVersion):
        repos.records.append_revision(*revision(v1, 2, 20, "late"))
    with pytest.raises(StaleVersion):
        repos.records.close(v1, forgotten(v1, 20))
    assert repos.records.get(ACME, m.id, v1.id) == v1
    assert repos.records.get(ACME, m.id, rid(2)) is None
    assert repos.memories.get(ACME, m.id).record_count == 1


def test_close_forgets_the_current_version_and_uncounts_it(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    repos.records.append_first(first(2, m.id, 11))
    gone = forgotten(v1, 20)
    repos.records.close(v1, gone)
    assert repos.records.get(ACME, m.id, v1.id) == gone
    assert repos.memories.get(ACME, m.id).record_count == 1
    assert ids(v for _, v in repos.records.scan_active(ACME, m.id, None)) == [rid(2)]

    with pytest.raises(StaleVersion):
        repos.records.close(v1, forgotten(v1, 30))
    assert repos.records.get(ACME, m.id, v1.id) == gone
    assert repos.memories.get(ACME, m.id).record_count == 1


def test_close_of_a_superseded_version_raises_stale_and_writes_nothing(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    v2 = revise(repos, v1, 2, 20, "second")
    closed_v1 = repos.records.get(ACME, m.id, v1.id)
    with pytest.raises(StaleVersion):
        repos.records.close(v1, forgotten(v1, 30))
    assert repos.records.get(ACME, m.id, v1.id) == closed_v1
    assert repos.records.get(ACME, m.id, v2.id) == v2
    assert repos.memories.get(ACME, m.id).record_count == 1


@pytest.mark.slow
def test_chain_is_every_version_oldest_first(repos: Repositories) -> None:
    m = add(repos, 1)
    current = first(1, m.id, 10)
    repos.records.append_first(current)
    repos.records.append_first(first(100, m.id, 11))  # another record: another chain
    for i in range(2, 13):  # past version 9, so versions must sort as numbers
        current = revise(repos, current, i, 10 * i, f"v{i}")
    chain = repos.records.chain(ACME, rid(1))
    assert [v.version for v in chain] == list(range(1, 13))
    assert ids(chain) == [rid(i) for i in range(1, 13)]
    assert all(v.chain_id == rid(1) for v in chain)
    assert ids(repos.records.chain(ACME, rid(100))) == [rid(100)]
    assert repos.records.chain(ACME, rid(55)) == []


@pytest.mark.slow
def test_get_many_reads_the_versions_of_one_memory_found_among_the_ids(repos: Repositories) -> None:
    m, other = add(repos, 1), add(repos, 2)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    v2 = revise(repos, v1, 2, 20, "second")
    many = [first(n, m.id, n) for n in range(10, 115)]  # past one BatchGetItem call (100 keys)
    for record in many:
        repos.records.append_first(record)
    repos.records.append_first(first(200, other.id, 30))

    asked = [v2.id, v1.id, rid(200), rid(999), mid(1), v2.id] + [r.id for r in many]
    found = repos.records.get_many(ACME, m.id, asked)
    assert set(found) == {v1.id, v2.id} | {r.id for r in many}  # another memory's and unknown ids left out
    assert found[v1.id] == repos.records.get(ACME, m.id, v1.id)
    assert found[v2.id] == v2
    assert found[many[-1].id] == many[-1]
    assert repos.records.get_many(ACME, m.id, []) == {}
    assert repos.records.get_many(GLOBEX, m.id, [v2.id]) == {}


# -- RecordRepository: reopen --------------------------------------------------------------------


def reopening(gone: RecordVersion, n: int, written: int) -> tuple[RecordVersion, RecordVersion]:
    """(the forgotten version pointing at its revision, the new active revision), as revert builds them."""
    new = gone.evolve(id=rid(n), version=gone.version + 1, status="active", supersedes=gone.id,
                      superseded_by=None, invalidated_at=None, written_at=at(written))
    return gone.evolve(superseded_by=new.id), new


def test_reopen_makes_a_forgotten_record_current_again_and_counts_it(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    gone = forgotten(v1, 20)
    repos.records.close(v1, gone)
    assert repos.memories.get(ACME, m.id).record_count == 0

    pointed, back = reopening(gone, 2, 30)
    repos.records.reopen(pointed, back)
    assert repos.records.get(ACME, m.id, v1.id) == pointed
    assert (pointed.status, pointed.superseded_by) == ("forgotten", back.id)
    assert repos.records.get(ACME, m.id, back.id) == back
    assert repos.records.chain(ACME, v1.chain_id) == [pointed, back]
    assert ids(v for _, v in repos.records.scan_active(ACME, m.id, None)) == [back.id]
    assert repos.memories.get(ACME, m.id).record_count == 1


@pytest.mark.slow
def test_reopen_of_a_record_not_forgotten_or_reopened_already_raises_stale(repos: Repositories) -> None:
    m = add(repos, 1)
    active = first(1, m.id, 10)
    repos.records.append_first(active)
    with pytest.raises(StaleVersion):
        repos.records.reopen(*reopening(active.evolve(status="forgotten"), 2, 20))

    gone = forgotten(active, 30)
    repos.records.close(active, gone)
    first_reopen = reopening(gone, 3, 40)
    repos.records.reopen(*first_reopen)
    with pytest.raises(StaleVersion):
        repos.records.reopen(*reopening(gone, 4, 50))  # a second revert of the same run, racing
    with pytest.raises(StaleVersion):
        repos.records.reopen(*reopening(forgotten(first(9, m.id, 10), 20), 10, 60))  # never written
    assert repos.records.get(ACME, m.id, rid(2)) is None
    assert repos.records.get(ACME, m.id, rid(4)) is None
    assert repos.records.chain(ACME, active.chain_id) == list(first_reopen)
    assert repos.memories.get(ACME, m.id).record_count == 1


def test_reopen_in_a_memory_being_deleted_raises_stale(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    gone = forgotten(v1, 20)
    repos.records.close(v1, gone)
    repos.memories.mark_deleting(ACME, [m.id])
    with pytest.raises(StaleVersion):
        repos.records.reopen(*reopening(gone, 2, 30))
    assert repos.records.get(ACME, m.id, v1.id) == gone
    assert repos.records.get(ACME, m.id, rid(2)) is None


# -- RecordRepository: scans ---------------------------------------------------------------------


def drain(pairs) -> tuple[list[str], list[str]]:
    positions, found = [], []
    for position, version in pairs:
        positions.append(position)
        found.append(version.id)
    return positions, found


@pytest.mark.slow
def test_scan_active_is_current_active_versions_newest_first_and_resumable(repos: Repositories) -> None:
    m = add(repos, 1)
    records = [first(i, m.id, 10 * i) for i in range(1, 8)]
    for r in records:
        repos.records.append_first(r)
    v3b = revise(repos, records[2], 30, 100, "revised")  # the newest write
    repos.records.close(records[4], forgotten(records[4], 110))

    positions, found = drain(repos.records.scan_active(ACME, m.id, None))
    assert found == [v3b.id, rid(7), rid(6), rid(4), rid(2), rid(1)]
    assert len(set(positions)) == len(positions)
    for k, position in enumerate(positions):
        _, rest = drain(repos.records.scan_active(ACME, m.id, position))
        assert rest == found[k + 1:]
    assert repos.memories.get(ACME, m.id).record_count == 6


@pytest.mark.slow
def test_active_after_is_current_active_versions_oldest_first_from_a_position(repos: Repositories) -> None:
    m = add(repos, 1)
    records = [first(i, m.id, 10 * i) for i in range(1, 8)]
    for r in records:
        repos.records.append_first(r)
    v3b = revise(repos, records[2], 30, 100, "revised")
    repos.records.close(records[4], forgotten(records[4], 110))

    positions, found = drain(repos.records.active_after(ACME, m.id, None))
    assert found == [rid(1), rid(2), rid(4), rid(6), rid(7), v3b.id]
    for k, position in enumerate(positions):
        _, rest = drain(repos.records.active_after(ACME, m.id, position))
        assert rest == found[k + 1:]


@pytest.mark.slow
def test_scan_versions_is_every_version_newest_first_and_resumable(repos: Repositories) -> None:
    m = add(repos, 1)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    repos.records.append_first(first(2, m.id, 20))
    v1b = revise(repos, v1, 3, 30, "second")
    repos.records.close(v1b, forgotten(v1b, 40))
    repos.records.append_first(first(4, m.id, 50))

    positions, found = drain(repos.records.scan_versions(ACME, m.id, None, None))
    assert found == [rid(4), rid(3), rid(2), rid(1)]
    statuses = {v.id: v.status for _, v in repos.records.scan_versions(ACME, m.id, None, None)}
    assert statuses == {rid(4): "active", rid(3): "forgotten", rid(2): "active", rid(1): "superseded"}
    for k, position in enumerate(positions):
        _, rest = drain(repos.records.scan_versions(ACME, m.id, position, None))
        assert rest == found[k + 1:]


def test_scan_versions_written_up_to_an_instant_includes_that_instant(repos: Repositories) -> None:
    m = add(repos, 1)
    for i in range(1, 7):
        repos.records.append_first(first(i, m.id, 10 * i))

    def up_to(instant: str, after: str | None = None) -> list[str]:
        return drain(repos.records.scan_versions(ACME, m.id, after, instant))[1]

    assert up_to(at(30)) == [rid(3), rid(2), rid(1)]
    assert up_to(at(29)) == [rid(2), rid(1)]
    assert up_to(at(9)) == []
    assert up_to(at(1000)) == [rid(i) for i in range(6, 0, -1)]
    positions, _ = drain(repos.records.scan_versions(ACME, m.id, None, at(50)))
    assert up_to(at(50), positions[1]) == [rid(3), rid(2), rid(1)]


def test_versions_written_at_the_same_instant_keep_a_stable_order(repos: Repositories) -> None:
    m = add(repos, 1)
    for i in (3, 1, 2):
        repos.records.append_first(first(i, m.id, 10))
    positions, found = drain(repos.records.scan_active(ACME, m.id, None))
    assert found == [rid(3), rid(2), rid(1)]
    assert drain(repos.records.scan_active(ACME, m.id, positions[0]))[1] == [rid(2), rid(1)]
    assert drain(repos.records.scan_versions(ACME, m.id, None, at(10)))[1] == [rid(3), rid(2), rid(1)]


def test_scans_of_an_empty_or_unknown_memory_find_nothing(repos: Repositories) -> None:
    m = add(repos, 1)
    assert list(repos.records.scan_active(ACME, m.id, None)) == []
    assert list(repos.records.scan_versions(ACME, mid(99), None, None)) == []


# -- RecordRepository: snapshots and purge -------------------------------------------------------


def test_snapshots_put_get_and_list(repos: Repositories) -> None:
    m = add(repos, 1)
    other = add(repos, 2)
    s1 = snapshot(1, m.id, "before-cleanup", time=10)
    s2 = snapshot(2, m.id, "after cleanup", time=20)
    s3 = snapshot(3, other.id, "before-cleanup", time=30)
    for s in (s1, s2, s3):
        repos.records.put_snapshot(s)
    assert repos.records.get_snapshot(ACME, m.id, "before-cleanup") == s1
    assert repos.records.get_snapshot(ACME, other.id, "before-cleanup") == s3
    assert repos.records.get_snapshot(ACME, m.id, "nope") is None
    assert sorted(repos.records.list_snapshots(ACME, m.id), key=lambda s: s.id) == [s1, s2]
    assert repos.records.list_snapshots(ACME, mid(99)) == []


def test_a_snapshot_name_is_taken_once_per_memory(repos: Repositories) -> None:
    m = add(repos, 1)
    s1 = snapshot(1, m.id, "v1", time=10)
    repos.records.put_snapshot(s1)
    with pytest.raises(AlreadyExists):
        repos.records.put_snapshot(snapshot(2, m.id, "v1", time=20))
    assert repos.records.get_snapshot(ACME, m.id, "v1") == s1
    assert repos.records.list_snapshots(ACME, m.id) == [s1]


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_a_snapshot_of_a_memory_going_or_gone_raises_tree_changed(repos: Repositories, fate: str) -> None:
    if fate == "deleting":
        add(repos, 1)
        repos.memories.mark_deleting(ACME, [mid(1)])
    with pytest.raises(TreeChanged):
        repos.records.put_snapshot(snapshot(1, mid(1), "late", time=10))
    assert repos.records.get_snapshot(ACME, mid(1), "late") is None
    assert repos.records.list_snapshots(ACME, mid(1)) == []


@pytest.mark.slow
def test_purge_memory_removes_every_version_and_snapshot_of_that_memory_only(repos: Repositories) -> None:
    m = add(repos, 1)
    keep = add(repos, 2)
    v1 = first(1, m.id, 10)
    repos.records.append_first(v1)
    revise(repos, v1, 2, 20, "second")
    for i in range(3, 8):
        repos.records.append_first(first(i, m.id, 10 * i))
    kept = first(50, keep.id, 15)
    repos.records.append_first(kept)
    repos.records.put_snapshot(snapshot(1, m.id, "s", time=25))
    kept_snapshot = snapshot(2, keep.id, "s", time=25)
    repos.records.put_snapshot(kept_snapshot)

    repos.records.purge_memory(ACME, m.id)
    assert list(repos.records.scan_versions(ACME, m.id, None, None)) == []
    assert list(repos.records.scan_active(ACME, m.id, None)) == []
    assert repos.records.chain(ACME, v1.chain_id) == []
    assert repos.records.get(ACME, m.id, rid(3)) is None
    assert repos.records.list_snapshots(ACME, m.id) == []
    assert repos.records.get_snapshot(ACME, m.id, "s") is None

    assert repos.records.get(ACME, keep.id, kept.id) == kept
    assert repos.records.list_snapshots(ACME, keep.id) == [kept_snapshot]
    assert repos.memories.get(ACME, keep.id).record_count == 1


# -- tenants -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tenants_are_isolated_even_with_the_same_ids(repos: Repositories) -> None:
    ours_root = add(repos, 1, name="ours")
    ours_child = add(repos, 2, parent=1, name="ours child")
    our_grant = grant(1, ours_root.id)
    repos.memories.put_grant(our_grant)
    our_record = first(1, ours_root.id, 10, content="ours")
    repos.records.append_first(our_record)
    our_snapshot = snapshot(1, ours_root.id, "s", time=20)
    repos.records.put_snapshot(our_snapshot)

    # Nothing of ours is visible from the other tenant, and writes there cannot attach to ours.
    assert repos.memories.get(GLOBEX, ours_root.id) is None
    assert repos.memories.children(GLOBEX, ours_root.id) == []
    assert repos.memories.grants_on(GLOBEX, ours_root.id) == []
    assert repos.memories.grants_of(GLOBEX, ["user:bob", "user:alice"]) == []
    assert repos.records.get(GLOBEX, ours_root.id, our_record.id) is None
    assert repos.records.chain(GLOBEX, our_record.chain_id) == []
    assert list(repos.records.scan_active(GLOBEX, ours_root.id, None)) == []
    assert list(repos.records.scan_versions(GLOBEX, ours_root.id, None, None)) == []
    assert repos.records.get_snapshot(GLOBEX, ours_root.id, "s") is None
    assert repos.records.list_snapshots(GLOBEX, ours_root.id) == []
    theirs_under_ours = memory(3, parent=1, tenant=GLOBEX)
    with pytest.raises(TreeChanged):
        repos.memories.create(theirs_under_ours, creator_grant(theirs_under_ours))
    with pytest.raises(TreeChanged):
        repos.memories.put_grant(grant(9, ours_root.id, tenant=GLOBEX))
    with pytest.raises(TreeChanged):
        repos.records.append_first(first(9, ours_root.id, 10, tenant=GLOBEX))
    assert repos.memories.delete_grant(GLOBEX, ours_root.id, our_grant.id) is False

    # The other tenant builds the same ids; each tenant reads only its own.
    theirs_root = add(repos, 1, tenant=GLOBEX, name="theirs")
    theirs_child = add(repos, 2, parent=1, tenant=GLOBEX, name="theirs child")
    their_grant = grant(1, theirs_root.id, tenant=GLOBEX, privileges=("write",))
    repos.memories.put_grant(their_grant)
    their_record = first(1, theirs_root.id, 10, tenant=GLOBEX, content="theirs")
    repos.records.append_first(their_record)
    their_snapshot = snapshot(1, theirs_root.id, "s", tenant=GLOBEX, time=30)
    repos.records.put_snapshot(their_snapshot)

    assert repos.memories.get(ACME, mid(1)) == ours_root.evolve(record_count=1)
    assert repos.memories.get(GLOBEX, mid(1)) == theirs_root.evolve(record_count=1)
    assert repos.memories.children(ACME, mid(1)) == [ours_child]
    assert repos.memories.children(GLOBEX, mid(1)) == [theirs_child]
    assert repos.memories.grants_of(ACME, ["user:bob"]) == [our_grant]
    assert repos.memories.grants_of(GLOBEX, ["user:bob"]) == [their_grant]
    assert repos.records.get(ACME, mid(1), rid(1)).content == "ours"
    assert repos.records.get(GLOBEX, mid(1), rid(1)).content == "theirs"
    assert repos.records.chain(GLOBEX, rid(1)) == [their_record]
    assert [v for _, v in repos.records.scan_active(GLOBEX, mid(1), None)] == [their_record]
    assert repos.records.list_snapshots(GLOBEX, mid(1)) == [their_snapshot]

    # Changes in the other tenant leave ours alone.
    their_revision = revise(repos, their_record, 2, 40, "theirs, revised")
    assert repos.records.get(ACME, mid(1), rid(1)) == our_record
    assert repos.records.get(ACME, mid(1), their_revision.id) is None
    assert repos.memories.delete_grant(GLOBEX, mid(1), gid(1)) is True
    assert repos.memories.grants_of(ACME, ["user:bob"]) == [our_grant]
    repos.memories.mark_deleting(GLOBEX, [mid(1), mid(2)])
    repos.records.purge_memory(GLOBEX, mid(1))
    repos.memories.purge(GLOBEX, mid(2))
    repos.memories.purge(GLOBEX, mid(1))
    assert repos.memories.get(GLOBEX, mid(1)) is None
    assert repos.memories.get(ACME, mid(1)) == ours_root.evolve(record_count=1)
    assert repos.memories.get(ACME, mid(2)) == ours_child
    assert repos.records.get(ACME, mid(1), rid(1)) == our_record
    assert repos.records.list_snapshots(ACME, mid(1)) == [our_snapshot]
    assert repos.memories.grants_on(ACME, mid(1)) == [our_grant, creator_grant(ours_root)]


# -- RecordRepository: derived records and erase ------------------------------------------------


def derived(n: int, memory_id: str, written: int, source: RecordVersion) -> RecordVersion:
    record = first(n, memory_id, written)
    return record.evolve(references=({"rel": "derived_from", "memory_id": source.memory_id, "record_id": source.id},))


@pytest.mark.slow
def test_derived_from_finds_records_derived_from_any_version_across_memories(repos: Repositories) -> None:
    m, other = add(repos, 1), add(repos, 2)
    source = first(1, m.id, 10)
    repos.records.append_first(source)
    v2 = revise(repos, source, 2, 20, "second")
    copy_of_v1 = derived(3, other.id, 30, source)
    copy_of_v2 = derived(4, m.id, 40, v2)
    related_only = first(5, other.id, 50)  # a plain "related" reference is no derivation
    for record in (copy_of_v1, copy_of_v2, related_only):
        repos.records.append_first(record)
    assert sorted(repos.records.derived_from(ACME, [source.id, v2.id])) == sorted(
        [(other.id, copy_of_v1.chain_id), (m.id, copy_of_v2.chain_id)]
    )
    assert repos.records.derived_from(ACME, [copy_of_v1.id]) == []
    assert repos.records.derived_from(GLOBEX, [source.id]) == []


def test_append_derived_writes_while_its_sources_are_there_and_once(repos: Repositories) -> None:
    m = add(repos, 1)
    episode = first(1, m.id, 10, type_="episode")
    repos.records.append_first(episode)
    fact = derived(2, m.id, 20, episode)
    repos.records.append_derived(fact, [episode.id])
    assert repos.records.get(ACME, m.id, fact.id) == fact
    assert repos.records.derived_from(ACME, [episode.id]) == [(m.id, fact.chain_id)]
    assert repos.memories.get(ACME, m.id).record_count == 2
    with pytest.raises(AlreadyExists):  # a retried step: nothing written twice, nothing counted twice
        repos.records.append_derived(fact, [episode.id])
    assert repos.memories.get(ACME, m.id).record_count == 2


def test_append_derived_refuses_once_a_source_is_erased(repos: Repositories) -> None:
    m = add(repos, 1)
    kept, erased = first(1, m.id, 10, type_="episode"), first(2, m.id, 11, type_="episode")
    for episode in (kept, erased):
        repos.records.append_first(episode)
    repos.records.erase_chain(ACME, m.id, erased.chain_id)
    fact = derived(3, m.id, 20, erased)
    with pytest.raises(SourceGone):
        repos.records.append_derived(fact, [kept.id, erased.id])
    assert repos.records.get(ACME, m.id, fact.id) is None
    assert repos.records.derived_from(ACME, [erased.id]) == []
    assert repos.memories.get(ACME, m.id).record_count == 1


def test_append_derived_to_a_memory_being_deleted_raises_tree_changed(repos: Repositories) -> None:
    m = add(repos, 1)
    episode = first(1, m.id, 10, type_="episode")
    repos.records.append_first(episode)
    repos.memories.mark_deleting(ACME, [m.id])
    with pytest.raises(TreeChanged):
        repos.records.append_derived(derived(2, m.id, 20, episode), [episode.id])
    assert repos.records.get(ACME, m.id, rid(2)) is None


@pytest.mark.slow
def test_erase_chain_removes_every_version_uncounts_once_and_is_idempotent(repos: Repositories) -> None:
    m, other = add(repos, 1), add(repos, 2)
    source = first(1, m.id, 10)
    repos.records.append_first(source)
    v2 = revise(repos, source, 2, 20, "second")
    kept = first(3, m.id, 30)
    repos.records.append_first(kept)
    copy = derived(4, other.id, 40, v2)
    repos.records.append_first(copy)
    assert repos.memories.get(ACME, m.id).record_count == 2

    assert sorted(repos.records.erase_chain(ACME, m.id, source.chain_id)) == sorted([source.id, v2.id])
    assert repos.records.get(ACME, m.id, source.id) is None
    assert repos.records.get(ACME, m.id, v2.id) is None
    assert repos.records.chain(ACME, source.chain_id) == []
    assert repos.memories.get(ACME, m.id).record_count == 1
    assert repos.records.get(ACME, m.id, kept.id) == kept

    assert repos.records.erase_chain(ACME, m.id, source.chain_id) == []
    assert repos.memories.get(ACME, m.id).record_count == 1

    # Erasing the derived copy removes its reverse-index entry too.
    repos.records.erase_chain(ACME, other.id, copy.chain_id)
    assert repos.records.derived_from(ACME, [v2.id]) == []
    assert repos.memories.get(ACME, other.id).record_count == 0


def test_erase_chain_of_a_forgotten_record_does_not_uncount(repos: Repositories) -> None:
    m = add(repos, 1)
    record = first(1, m.id, 10)
    repos.records.append_first(record)
    repos.records.close(record, forgotten(record, 20))
    assert repos.memories.get(ACME, m.id).record_count == 0
    assert repos.records.erase_chain(ACME, m.id, record.chain_id) == [record.id]
    assert repos.memories.get(ACME, m.id).record_count == 0
