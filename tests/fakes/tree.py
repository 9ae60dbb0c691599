"""In-memory fakes of the memory tree and the record versions: the same contract as
DynamoMemoryRepository and DynamoRecordRepository (tests/contract holds both to it). Conditional writes
behave as DynamoDB's do: a failed condition raises the adapter's domain error and writes nothing. A
record with a path keeps its file through tests/fakes/paths.py, in the same all-or-nothing write."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tests.fakes.paths import InMemoryPathRepository
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.errors import AlreadyExists, MemoryBusy, SourceGone, StaleVersion, TreeChanged
from uhp_memories.domain.files.model import PathCondition
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.records.model import RecordVersion, Snapshot

# The marker under a memory while a workflow holds it: jobs and consolidation runs share it, as they
# share the memory item's `held_by` set in DynamoDB, so `holds` sees both and a move or a delete refuses.
HOLD = "hold"

class InMemoryMemoryRepository:
    def __init__(self) -> None:
        self.memories: dict[tuple[str, str], Memory] = {}
        self.grants: dict[tuple[str, str], Grant] = {}
        # What other repositories keep under a memory (named queries, consolidation runs, the markers of
        # the runs holding it), by (kind, id): in DynamoDB these are items of the memory's partition,
        # so its purge removes them with it.
        self.kept: dict[tuple[str, str], dict[tuple[str, str], Any]] = {}
        # One lock for every fake built over this tree: a DynamoDB transaction spans them all.
        self.lock = threading.RLock()

    def get(self, tenant: str, memory_id: str) -> Memory | None:
        return self.memories.get((tenant, memory_id))

    def get_with_grants(self, tenant: str, memory_id: str) -> tuple[Memory | None, list[Grant]]:
        memory = self.memories.get((tenant, memory_id))
        return memory, self.grants_on(tenant, memory_id) if memory is not None else []

    def get_many_with_grants(
        self, tenant: str, memory_ids: Sequence[str], width: int
    ) -> dict[str, tuple[Memory, list[Grant]]]:
        """What DynamoDB's padded batch finds (padding is its own business: it reads alike, finds nothing)."""
        found = {}
        for memory_id in dict.fromkeys(memory_ids):
            memory = self.memories.get((tenant, memory_id))
            if memory is not None:
                found[memory_id] = (memory, self.grants_on(tenant, memory_id))
        return found

    def children(self, tenant: str, parent_id: str) -> list[Memory]:
        found = [m for (t, _), m in self.memories.items() if t == tenant and m.parent_id == parent_id]
        return sorted(found, key=lambda m: (m.created_at, m.id))

    def _live(self, tenant: str, memory_id: str | None) -> bool:
        if memory_id is None:
            return True
        memory = self.memories.get((tenant, memory_id))
        return memory is not None and not memory.deleting

    def create(self, memory: Memory, creator_grant: Grant) -> None:
        with self.lock:
            if not self._live(memory.tenant, memory.parent_id):
                raise TreeChanged(memory.parent_id)
            self.memories[(memory.tenant, memory.id)] = memory
            self.grants[(memory.tenant, creator_grant.id)] = creator_grant

    def update(
        self,
        memory: Memory,
        expected_parent_id: str | None,
        parent_chain: Sequence[Memory],
        below: Sequence[Memory] = (),
        was_restricted: bool | None = None,
    ) -> None:
        with self.lock:
            stored = self.memories.get((memory.tenant, memory.id))
            if stored is None or stored.deleting or stored.parent_id != expected_parent_id:
                raise TreeChanged(memory.id)
            for node in parent_chain:
                now = self.memories.get((node.tenant, node.id))
                if now is None or now.deleting or now.parent_id != node.parent_id:
                    raise TreeChanged(node.id)
            for node in below:
                now = self.memories.get((node.tenant, node.id))
                if now is None or now.parent_id != node.parent_id:
                    raise TreeChanged(node.id)
            if memory.parent_id != expected_parent_id and any(
                self._held(memory.tenant, m) for m in (memory.id, *(node.id for node in below))
            ):
                raise MemoryBusy.under(memory.id)
            moved = memory.parent_id != expected_parent_id and memory.ancestors is not None
            ancestors = memory.ancestors if moved else stored.ancestors
            self.memories[(memory.tenant, memory.id)] = memory.evolve(
                record_count=stored.record_count, ancestors=ancestors
            )
            for node in below:
                now = self.memories[(node.tenant, node.id)]
                self.memories[(node.tenant, node.id)] = now.evolve(ancestors=node.ancestors)

    def grants_of(self, tenant: str, principal_ids: Sequence[str]) -> list[Grant]:
        wanted = set(principal_ids)
        return [g for (t, _), g in self.grants.items() if t == tenant and g.principal in wanted]

    def grants_on(self, tenant: str, memory_id: str) -> list[Grant]:
        found = [g for (t, _), g in self.grants.items() if t == tenant and g.memory_id == memory_id]
        return sorted(found, key=lambda g: (g.created_at, g.id))

    def count_records(self, tenant: str, memory_id: str, *, added: int = 0, exactly: int | None = None) -> None:
        with self.lock:
            memory = self.memories.get((tenant, memory_id))
            if memory is not None and not memory.deleting:
                count = exactly if exactly is not None else memory.record_count + added
                self.memories[(tenant, memory_id)] = memory.evolve(record_count=count)

    def put_grant(self, grant: Grant) -> None:
        with self.lock:
            if not self._live(grant.tenant, grant.memory_id):
                raise TreeChanged(grant.memory_id)
            self.grants[(grant.tenant, grant.id)] = grant

    def delete_grant(self, tenant: str, memory_id: str, grant_id: str) -> bool:
        with self.lock:
            grant = self.grants.get((tenant, grant_id))
            if grant is None or grant.memory_id != memory_id:
                return False
            del self.grants[(tenant, grant_id)]
            return True

    def mark_deleting(self, tenant: str, memory_ids: Sequence[str]) -> None:
        with self.lock:
            if any(self._held(tenant, memory_id) for memory_id in memory_ids):
                raise MemoryBusy.under(memory_ids[0])
            for memory_id in memory_ids:
                memory = self.memories.get((tenant, memory_id))
                if memory is not None:
                    self.memories[(tenant, memory_id)] = memory.evolve(deleting=True)

    def purge(self, tenant: str, memory_id: str) -> None:
        with self.lock:
            self.memories.pop((tenant, memory_id), None)
            self.kept.pop((tenant, memory_id), None)
            for key in [k for k, g in self.grants.items() if k[0] == tenant and g.memory_id == memory_id]:
                del self.grants[key]

    def _held(self, tenant: str, memory_id: str) -> bool:
        """Whether a run holds the memory (HOLD entries: DynamoDB's `held_by` on the memory's item)."""
        return any(kind == HOLD for kind, _ in self.kept.get((tenant, memory_id), {}))

    def live(self, tenant: str, memory_id: str | None) -> bool:
        """Whether a write under this memory may go ahead (DynamoDB's LIVE_MEMORY condition)."""
        return self._live(tenant, memory_id)

    def keep(self, tenant: str, memory_id: str, kind: str, key: str, value: Any) -> None:
        self.kept.setdefault((tenant, memory_id), {})[(kind, key)] = value

    def drop(self, tenant: str, memory_id: str, kind: str, key: str) -> None:
        self.kept.get((tenant, memory_id), {}).pop((kind, key), None)

    def kept_under(self, tenant: str, memory_id: str, kind: str) -> dict[str, Any]:
        """What is kept under the memory of one kind, by key, in key order (a partition's sort order)."""
        found = self.kept.get((tenant, memory_id), {})
        return {key: found[(k, key)] for k, key in sorted(found) if k == kind}

    def adjust_count(self, tenant: str, memory_id: str, delta: int) -> None:
        memory = self.memories[(tenant, memory_id)]
        self.memories[(tenant, memory_id)] = memory.evolve(record_count=memory.record_count + delta)


@dataclass
class InMemoryRecordRepository:
    memories: InMemoryMemoryRepository

    def __post_init__(self) -> None:
        self.versions: dict[tuple[str, str, str], RecordVersion] = {}
        self.snapshots: dict[tuple[str, str, str], Snapshot] = {}
        # The memory's files, kept under the tree as DynamoRecordRepository keeps them in the
        # memory's partition: another InMemoryPathRepository over the same tree reads the same.
        self.paths = InMemoryPathRepository(self.memories)

    def get(self, tenant: str, memory_id: str, record_id: str) -> RecordVersion | None:
        return self.versions.get((tenant, memory_id, record_id))

    def get_many(self, tenant: str, memory_id: str, record_ids: Sequence[str]) -> dict[str, RecordVersion]:
        found = (self.versions.get((tenant, memory_id, rid)) for rid in record_ids)
        return {record.id: record for record in found if record is not None}

    def append_first(self, record: RecordVersion, conditions: Sequence[PathCondition] = ()) -> None:
        with self.memories.lock:
            if not self.memories._live(record.tenant, record.memory_id):
                raise TreeChanged(record.memory_id)
            self.paths.commit(None, record, conditions)
            self.versions[(record.tenant, record.memory_id, record.id)] = record
            self.memories.adjust_count(record.tenant, record.memory_id, 1)

    def append_many(self, records: Sequence[RecordVersion]) -> None:
        with self.memories.lock:
            first = records[0]
            if not self.memories._live(first.tenant, first.memory_id):
                raise TreeChanged(first.memory_id)
            for record in records:
                self.versions[(record.tenant, record.memory_id, record.id)] = record
            self.memories.adjust_count(first.tenant, first.memory_id, len(records))

    def append_derived(self, record: RecordVersion, sources: Sequence[str]) -> None:
        with self.memories.lock:
            if (record.tenant, record.memory_id, record.id) in self.versions:
                raise AlreadyExists(record.id)
            if not self.memories._live(record.tenant, record.memory_id):
                raise TreeChanged(record.memory_id)
            if any((record.tenant, record.memory_id, source) not in self.versions for source in sources):
                raise SourceGone(record.id)
            self.versions[(record.tenant, record.memory_id, record.id)] = record
            self.memories.adjust_count(record.tenant, record.memory_id, 1)

    def _check_current(self, version: RecordVersion) -> None:
        stored = self.versions.get((version.tenant, version.memory_id, version.id))
        if stored is None or stored.superseded_by is not None or stored.status != "active":
            raise StaleVersion(version.id)
        if not self.memories._live(version.tenant, version.memory_id):
            raise StaleVersion(version.id)

    def append_revision(
        self, previous: RecordVersion, revision: RecordVersion, conditions: Sequence[PathCondition] = ()
    ) -> None:
        with self.memories.lock:
            self._check_current(previous)
            self.paths.commit(previous, revision, conditions)
            self.versions[(previous.tenant, previous.memory_id, previous.id)] = previous
            self.versions[(revision.tenant, revision.memory_id, revision.id)] = revision

    def reopen(self, forgotten: RecordVersion, revision: RecordVersion) -> None:
        with self.memories.lock:
            stored = self.versions.get((forgotten.tenant, forgotten.memory_id, forgotten.id))
            if stored is None or stored.superseded_by is not None or stored.status != "forgotten":
                raise StaleVersion(forgotten.id)
            if not self.memories._live(revision.tenant, revision.memory_id):
                raise StaleVersion(forgotten.id)
            self.paths.commit(None, revision)
            self.versions[(forgotten.tenant, forgotten.memory_id, forgotten.id)] = forgotten
            self.versions[(revision.tenant, revision.memory_id, revision.id)] = revision
            self.memories.adjust_count(revision.tenant, revision.memory_id, +1)

    def close(self, current: RecordVersion, closed: RecordVersion, conditions: Sequence[PathCondition] = ()) -> None:
        with self.memories.lock:
            self._check_current(current)
            self.paths.commit(current, None, conditions)
            self.versions[(closed.tenant, closed.memory_id, closed.id)] = closed
            self.memories.adjust_count(closed.tenant, closed.memory_id, -1)

    def chain(self, tenant: str, chain_id: str) -> list[RecordVersion]:
        found = [v for (t, _, _), v in self.versions.items() if t == tenant and v.chain_id == chain_id]
        return sorted(found, key=lambda v: v.version)

    def _newest_first(self, tenant: str, memory_id: str) -> list[tuple[str, RecordVersion]]:
        found = [v for (t, m, _), v in self.versions.items() if t == tenant and m == memory_id]
        return sorted(((f"{v.written_at}#{v.id}", v) for v in found), key=lambda p: p[0], reverse=True)

    def scan_active(self, tenant: str, memory_id: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        for position, version in self._newest_first(tenant, memory_id):
            if after is not None and position >= after:
                continue
            if version.is_current and version.status == "active":
                yield position, version

    def active_after(self, tenant: str, memory_id: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        for position, version in reversed(self._newest_first(tenant, memory_id)):
            if (after is None or position > after) and version.is_current and version.status == "active":
                yield position, version

    def scan_versions(
        self, tenant: str, memory_id: str, after: str | None, written_up_to: str | None
    ) -> Iterator[tuple[str, RecordVersion]]:
        for position, version in self._newest_first(tenant, memory_id):
            if after is not None and position >= after:
                continue
            if written_up_to is not None and version.written_at > written_up_to:
                continue
            yield position, version

    def put_snapshot(self, snapshot: Snapshot) -> None:
        key = (snapshot.tenant, snapshot.memory_id, snapshot.name)
        with self.memories.lock:
            if key in self.snapshots:
                raise AlreadyExists(snapshot.name)
            if not self.memories._live(snapshot.tenant, snapshot.memory_id):
                raise TreeChanged(snapshot.memory_id)
            self.snapshots[key] = snapshot

    def get_snapshot(self, tenant: str, memory_id: str, name: str) -> Snapshot | None:
        return self.snapshots.get((tenant, memory_id, name))

    def list_snapshots(self, tenant: str, memory_id: str) -> list[Snapshot]:
        return [s for (t, m, _), s in self.snapshots.items() if t == tenant and m == memory_id]

    def derived_from(self, tenant: str, record_ids: Sequence[str]) -> list[tuple[str, str]]:
        wanted = set(record_ids)
        return [
            (v.memory_id, v.chain_id)
            for (t, _, _), v in list(self.versions.items())
            if t == tenant and any(r.get("rel") == "derived_from" and r["record_id"] in wanted for r in v.references)
        ]

    def erase_chain(self, tenant: str, memory_id: str, chain_id: str) -> list[str]:
        with self.memories.lock:
            doomed = [v for v in self.chain(tenant, chain_id) if v.memory_id == memory_id]
            paths = [v.path for v in doomed if v.path is not None]
            if paths:
                self.paths.clear_journal(tenant, memory_id)
                self.paths.release(tenant, memory_id, chain_id, paths)
            for version in doomed:
                del self.versions[(tenant, memory_id, version.id)]
                if version.is_current and version.status == "active" and (tenant, memory_id) in self.memories.memories:
                    self.memories.adjust_count(tenant, memory_id, -1)
            return [v.id for v in doomed]

    def purge_memory(self, tenant: str, memory_id: str) -> None:
        with self.memories.lock:
            for key in [k for k in self.versions if k[:2] == (tenant, memory_id)]:
                del self.versions[key]
            for key in [k for k in self.snapshots if k[:2] == (tenant, memory_id)]:
                del self.snapshots[key]
            self.paths.purge(tenant, memory_id)
