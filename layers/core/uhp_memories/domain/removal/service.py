"""Erase (§5.2) and memory delete as workflows. The API call checks and starts; each step of the
state machine (uhp_memories/workflows/*.asl.json) is one idempotent method here, taking and returning
domain values (functions/steps/handler.py reads and writes the workflow's state); a job records the
outcome for the client to poll when the workflow outlasts the request.

Erase removes content for good from every place this service keeps it: DynamoDB versions, the
search index, every S3 object version, kept idempotent responses, and the records derived from it
(`derived_from` references, across memories). What it cannot reach (backups, streams, snapshots
the deployment keeps for a retention period) it reports, with where, why and until when: an empty
`unreachable` is a guarantee.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from uhp_memories.domain.agents.model import require_person
from uhp_memories.domain.errors import MemoryInvalid, RecordNotFound
from uhp_memories.domain.files.model import chain_key, check_directory, held_file, upload_key
from uhp_memories.domain.files.ports import FileRepository, ObjectStore
from uhp_memories.domain.filters import matches, parse_filter
from uhp_memories.domain.jobs import Job, JobRepository, WorkflowRunner, start_job
from uhp_memories.domain.limits import ERASE_NAMED_MAX
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import Caller
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.providers.ports import RecordProvider
from uhp_memories.domain.records.model import ID_PATTERN, RecordVersion
from uhp_memories.domain.removal.model import (
    MAX_CHAINS,
    ChainTarget,
    EraseTargets,
    JobNotFound,
    Retention,
    VersionTarget,
)
from uhp_memories.domain.removal.ports import CachedResponses, MemoryRemoval, SearchEraser


class RemovalService:
    """Erase (§5.2) and memory delete, as workflows, each step idempotent."""
    def __init__(
        self,
        ports: Ports,
        memories: MemoryRemoval,
        jobs: JobRepository,
        workflows: WorkflowRunner,
        objects: ObjectStore,
        cached: CachedResponses,
        retention: Retention,
        wait_seconds: float,
        search: Callable[[], SearchEraser | None] = lambda: None,
        files: FileRepository | None = None,
    ) -> None:
        self._ports = ports
        self._memories = memories
        self._jobs = jobs
        self._workflows = workflows
        self._objects = objects
        self._cached = cached
        self._retention = retention
        self.wait_seconds = wait_seconds
        self._search = search
        self._files = files

    # -- API ---------------------------------------------------------------------------------

    def erase(
        self, caller: Caller, memory_id: str, record_ids: list[str] | None, filters: Any, under: str | None = None
    ) -> Job:
        """Start an erase of named records (whole version chains), of the records a filter matches,
        or of the files under a directory, and wait for it as long as a request may. Needs delete, and
        a person's key (§13: never an agent's tool, nor a harness key's act)."""
        access = self._ports.access(caller)
        memory = access.require(memory_id, "delete")
        require_person(caller, "erase")
        if [record_ids is not None, filters is not None, under is not None].count(True) != 1:
            raise MemoryInvalid("erase takes one of record_ids, filters or under")
        if under is not None:
            check_directory(under)
        provider = self._ports.providers.of(memory)
        if provider is not None:
            return self._erase_in(provider, caller, memory, record_ids, filters, under)
        if record_ids is not None:
            if not 1 <= len(record_ids) <= ERASE_NAMED_MAX:
                raise MemoryInvalid(f"record_ids holds 1 to {ERASE_NAMED_MAX} ids")
            for record_id in record_ids:
                found = self._ports.records.get(caller.tenant, memory_id, record_id) if ID_PATTERN.match(
                    record_id) else None
                if found is None:
                    raise RecordNotFound(record_id)
        else:
            parse_filter(filters)
        job = self._start(caller, "erase", memory_id, hold=True,
                          payload={"record_ids": record_ids, "filters": filters, "under": under})
        return self._settle(caller, job)

    def _erase_in(
        self, provider: RecordProvider, caller: Caller, memory: Memory, record_ids: list[str] | None, filters: Any,
        under: str | None,
    ) -> Job:
        """Erase in another provider's memory, within the request: the named records, or those a filter
        matches among every record the provider keeps (however many: `every`, never a listing's bound), and,
        transitively, the records of that memory derived from them. The provider removes what it keeps and
        says what it could not reach; the answers this server kept that name an erased record go too. A
        record this server keeps that was derived from an erased one is reported unreachable, not erased:
        this request runs no workflow, and that record is erased in its own memory."""
        if under is not None:
            self._ports.providers.require_native(memory, "files (erase under a directory)")
        flt = None
        targets: list[RecordVersion] = []
        if record_ids is not None:
            if not 1 <= len(record_ids) <= ERASE_NAMED_MAX:
                raise MemoryInvalid(f"record_ids holds 1 to {ERASE_NAMED_MAX} ids")
            named = [provider.get(memory, rid) if ID_PATTERN.match(rid) else None for rid in record_ids]
            missing = next((rid for rid, found in zip(record_ids, named, strict=True) if found is None), None)
            if missing is not None:
                raise RecordNotFound(missing)
            targets = [found for found in named if found is not None]
        else:
            flt = parse_filter(filters)
        everything = provider.every(memory)
        if flt is not None:
            targets = [v for v in everything if matches(flt, v)]
        targets = _with_derived_within(memory.id, targets, everything)
        job = Job(tenant=caller.tenant, id=self._ports.ids.new("hjob_"), kind="erase", memory_id=memory.id,
                  status="running", requested_by=caller.principal, created_at=self._ports.clock.now_ms())
        self._jobs.start(job, hold_memory=False)
        done = provider.erase(memory, targets)
        self._ports.memories.count_records(caller.tenant, memory.id, added=-sum(
            1 for t in targets if t.id in set(done.erased) and t.status == "active"))
        self._cached.purge_mentioning(caller.tenant, done.erased)
        result = {
            "erased": [{"id": rid, "memory_id": memory.id} for rid in done.erased],
            "erased_files": [],
            "unreachable": [{"memory_id": memory.id, **u} for u in done.unreachable]
                           + self._derived_here(caller.tenant, done.erased),
        }
        finished = self._jobs.finish(caller.tenant, job.id, "completed", result, self._ports.clock.now_ms())
        return self.visible(caller, finished)

    def _derived_here(self, tenant: str, erased: Sequence[str]) -> list[dict[str, Any]]:
        """The versions of this server's own records derived from records another provider erased (the
        reverse index every native write keeps), each a copy this erase could not remove."""
        records = self._ports.records
        found: list[dict[str, Any]] = []
        for memory_id, chain_id in dict.fromkeys(records.derived_from(tenant, erased)):
            found += [
                {"record_id": version.id, "memory_id": memory_id, "where": "uhp_memories",
                 "reason": "a record this server keeps was derived from an erased record of a memory another "
                           "provider keeps; an erase there does not reach this server's records",
                 "until": "it is erased in its own memory"}
                for version in records.chain(tenant, chain_id) if version.memory_id == memory_id
            ]
        return found

    def delete_memory(self, caller: Caller, memory_id: str) -> Job:
        """Hide the subtree at once, then remove it in the delete workflow."""
        self._memories.hide(caller, memory_id)
        job = self._start(caller, "delete", memory_id, hold=False, payload={})
        return self._settle(caller, job)

    def job(self, caller: Caller, memory_id: str, job_id: str) -> Job:
        """A job of this memory. A delete job stays readable by whoever asked for it, since the
        memory itself is already hidden."""
        job = self._jobs.get(caller.tenant, job_id) if ID_PATTERN.match(job_id) else None
        if job is not None and job.memory_id == memory_id:
            if job.kind == "delete" and job.requested_by == caller.principal:
                return job
            access = self._ports.access(caller)
            access.require(memory_id, "read")
            return self.visible(caller, job)
        self._ports.access(caller).visible(memory_id)
        raise JobNotFound(job_id)

    def visible(self, caller: Caller, job: Job) -> Job:
        """The job as this caller may see it: erased ids in memories it cannot see are counted, not named,
        and so are the copies of them the erase could not reach: one entry per place, with how many
        (§5.2: an empty `unreachable` is a guarantee, so a copy the caller may not be shown is still
        counted). A place is the stage's or the provider's, never the memory's: it names nothing hidden."""
        if job.kind != "erase" or "unreachable" not in job.result:
            return job
        access = self._ports.access(caller)
        shown, hidden = [], 0
        for entry in job.result["erased"]:
            if access.can_see(entry["memory_id"]):
                shown.append(entry)
            else:
                hidden += 1
        unreachable: list[dict[str, Any]] = []
        counted: dict[tuple[str, str, str], int] = {}
        for u in job.result.get("unreachable", []):
            if u.get("memory_id") is None or access.can_see(u["memory_id"]):
                unreachable.append(u)
            else:
                place = (u["where"], u["reason"], u["until"])
                counted[place] = counted.get(place, 0) + int(u.get("count", 1))
        unreachable += [{"record_id": None, "count": n, "where": where, "reason": reason, "until": until}
                        for (where, reason, until), n in counted.items()]
        result = {**job.result, "erased": shown, "erased_elsewhere": hidden, "unreachable": unreachable}
        return Job(**{**job.__dict__, "result": result})

    def _start(self, caller: Caller, kind: str, memory_id: str, hold: bool, payload: dict[str, Any]) -> Job:
        return start_job(self._ports, self._jobs, self._workflows, caller, kind, memory_id, hold=hold, payload=payload)

    def _settle(self, caller: Caller, job: Job) -> Job:
        self._workflows.wait(job.id, job.kind, self.wait_seconds)
        latest = self._jobs.get(caller.tenant, job.id) or job
        return self.visible(caller, latest)

    # -- erase steps -------------------------------------------------------------------------

    def resolve_erase_targets(
        self, tenant: str, memory_id: str, record_ids: Sequence[str] | None, filters: Any, under: str | None = None
    ) -> EraseTargets:
        """Every version chain to erase: the named records, those a filter matches, or every file
        that was ever under a directory (any version's path), and then, transitively, every record
        derived from one of them, in any memory of the tenant."""
        chosen = self._chosen_chains(tenant, memory_id, record_ids, filters, under)
        return self._with_derived(tenant, [(memory_id, chain_id) for chain_id in dict.fromkeys(chosen)], set())

    def _with_derived(
        self, tenant: str, seeds: Sequence[tuple[str, str]], known: set[tuple[str, str]]
    ) -> EraseTargets:
        """The chains `seeds` names (memory_id, chain_id) and, transitively, every record derived from
        one of their versions, leaving out the chains in `known`."""
        records = self._ports.records
        chains = dict.fromkeys(seed for seed in seeds if seed not in known)
        frontier = list(chains)
        versions: dict[str, str] = {}
        files: set[str] = set()
        while frontier:
            next_frontier = []
            for chain_memory, chain_id in frontier:
                for version in records.chain(tenant, chain_id):
                    if version.memory_id != chain_memory:
                        continue
                    versions[version.id] = chain_memory
                    file_id = held_file(version.content)
                    if file_id is not None:
                        files.add(file_id)
                for derived in records.derived_from(tenant, [v for v, m in versions.items() if m == chain_memory]):
                    if derived not in chains and derived not in known:
                        chains[derived] = None
                        next_frontier.append(derived)
            if len(chains) > MAX_CHAINS:
                raise MemoryInvalid(f"one erase reaches at most {MAX_CHAINS} records; erase in smaller parts")
            frontier = next_frontier
        return EraseTargets(
            chains=tuple(ChainTarget(m, c) for m, c in chains),
            versions=tuple(VersionTarget(v, m) for v, m in versions.items()),
            files=tuple(sorted(files)),
        )

    def _chosen_chains(
        self, tenant: str, memory_id: str, record_ids: Sequence[str] | None, filters: Any, under: str | None
    ) -> list[str]:
        """The chains an erase names in its own memory, before what was derived from them."""
        records = self._ports.records
        if record_ids is not None:
            found = (records.get(tenant, memory_id, record_id) for record_id in record_ids)
            return list(dict.fromkeys(f.chain_id for f in found if f is not None))
        versions = (v for _, v in records.scan_versions(tenant, memory_id, None, None))
        if under is not None:
            return list(dict.fromkeys(v.chain_id for v in versions if v.path is not None and v.path.startswith(under)))
        flt = parse_filter(filters)
        return list(dict.fromkeys(v.chain_id for v in versions if matches(flt, v)))

    def erase_from_index(self, tenant: str, versions: Sequence[VersionTarget]) -> bool:
        """Drop the versions' documents from the recall index. False when the deployment keeps none."""
        search = self._search()
        if search is None:
            return False
        by_memory: dict[str, list[str]] = {}
        for version in versions:
            by_memory.setdefault(version.memory_id, []).append(version.id)
        for memory_id, ids in by_memory.items():
            search.erase(tenant, memory_id, ids)
        return True

    def erase_files(self, tenant: str, targets: EraseTargets) -> int:
        """Every S3 object version of the chains' files and of the uploads they name, and those
        files' metadata (a name is user content); how many object versions went."""
        removed = 0
        for chain in targets.chains:
            removed += self._objects.delete_all_versions(chain_key(tenant, chain.memory_id, chain.chain_id))
        for file_id in targets.files:
            removed += self._objects.delete_all_versions(upload_key(tenant, file_id))
            if self._files is not None:
                self._files.delete(tenant, file_id)
        return removed

    def erase_cached_responses(self, tenant: str, targets: EraseTargets) -> int:
        """The tenant's kept idempotent responses that mention a target; how many went."""
        return self._cached.purge_mentioning(tenant, [v.id for v in targets.versions] + list(targets.files))

    def erase_records(self, tenant: str, targets: EraseTargets) -> EraseTargets:
        """Remove the targets' version chains for good, then what was derived from them after they were
        resolved (a derivation that wrote while this erase ran), and answer the latter.

        A derived record is written only while its sources exist (RecordRepository.append_derived), and
        the targets are gone by the time of this last look, so none can be written after it: an erase
        leaves nothing derived behind, however the two interleave."""
        self._erase_chains(tenant, targets.chains)
        known = {(c.memory_id, c.chain_id) for c in targets.chains}
        seeds = self._ports.records.derived_from(tenant, [v.id for v in targets.versions])
        late = self._with_derived(tenant, seeds, known)
        if late.chains:
            self.erase_from_index(tenant, late.versions)
            self.erase_files(tenant, late)
            self._erase_chains(tenant, late.chains)
        return late

    def _erase_chains(self, tenant: str, chains: Sequence[ChainTarget]) -> None:
        for chain in chains:
            self._ports.records.erase_chain(tenant, chain.memory_id, chain.chain_id)

    def finish_erase(
        self, tenant: str, job_id: str, versions: Sequence[VersionTarget], files: Sequence[str] = ()
    ) -> Job:
        """Complete the job with its report: what was erased (versions, and the files they held),
        and what still holds a copy."""
        now = self._ports.clock.now_ms()
        result = {
            "erased": [{"id": v.id, "memory_id": v.memory_id} for v in versions],
            "erased_files": list(files),
            "unreachable": [u for v in versions for u in self._retention.unreachable(v.id, v.memory_id, now)],
        }
        return self._jobs.finish(tenant, job_id, "completed", result, now)

    def record_failure(self, tenant: str, job_id: str, versions: Sequence[VersionTarget], error: str) -> Job:
        """The workflow gave up after its retries: say so, with every target still unreachable.
        `versions` is empty when it failed before it knew its targets (and for a delete)."""
        now = self._ports.clock.now_ms()
        result = {
            "erased": [],
            "error": error,
            "unreachable": [
                {
                    "record_id": v.id,
                    "memory_id": v.memory_id,
                    "where": "uhp_memories",
                    "reason": "the workflow failed before it finished; the record may be partly erased",
                    "until": "a new erase of the same records succeeds",
                }
                for v in versions
            ],
        }
        return self._jobs.finish(tenant, job_id, "failed", result, now)

    # -- delete steps ------------------------------------------------------------------------

    def purge_subtree(self, tenant: str, memory_id: str) -> list[str]:
        """Remove the hidden subtree for good; the ids removed."""
        return self._memories.purge_hidden(tenant, memory_id)

    def finish_delete(self, tenant: str, job_id: str) -> Job:
        """Mark a memory delete's job completed."""
        return self._jobs.finish(tenant, job_id, "completed", {"deleted": True}, self._ports.clock.now_ms())


def _with_derived_within(
    memory_id: str, targets: Sequence[RecordVersion], everything: Sequence[RecordVersion]
) -> list[RecordVersion]:
    """The targets and, transitively, every record of `everything` (one memory's) with a `derived_from`
    reference to one of them in that memory: what an erase there removes (§5.2, "and from what was
    derived from it")."""
    chosen = {v.id: v for v in targets}
    grew = True
    while grew:
        grew = False
        for version in everything:
            if version.id not in chosen and any(
                ref.get("rel") == "derived_from" and ref.get("memory_id") == memory_id
                and ref.get("record_id") in chosen
                for ref in version.references
            ):
                chosen[version.id] = version
                grew = True
    return list(chosen.values())
