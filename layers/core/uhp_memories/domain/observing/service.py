"""Observe (§5.1) and the derivation that follows it.

observe hands the provider raw episodes. They are written first, always, as records (one
transaction: all or none), so nothing a derivation does afterwards can lose one. Where a deriver is
configured (domain/observing/model.py; `derivation: background` in the capability document), observe then
starts a job and answers 202: the derive workflow (workflows/derive.asl.json) asks the model what is
worth keeping and writes it as `fact` and `note` records, each with a `derived_from` reference to the
episodes it came from (so erase follows them), stamped `written_by: {"kind": "deriver", "id":
"native"}` with `origin` naming the job, the model and the prompt version. The job, read at
GET .../jobs/{job}, is `pending`, then `completed` with the records it produced (the episodes and
what was derived from them) or `failed` with the reason; the episodes stay either way.

The derive step is idempotent. It asks the model once and writes the answer ahead into the job
(`plan`, with the record ids drawn for it) before writing any record, so a retried step writes the
same records, never a second model's different ones; each write is refused when its record already
exists. A record is written only while every episode it came from is still there, in the same
transaction (RecordRepository.append_derived): once an erase removed an episode, nothing derived from
it can appear afterwards, and the erase's last look for derived records finds all of them. The plan
holds derived text only while the step runs: the finished job keeps record ids, never content.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid, TreeChanged
from uhp_memories.domain.jobs import Job, JobRepository, WorkflowRunner, start_job
from uhp_memories.domain.limits import OBSERVE_BYTES
from uhp_memories.domain.model import Caller
from uhp_memories.domain.observing.model import (
    DERIVE,
    DERIVE_RETRIES,
    DERIVER,
    DerivationError,
    DerivationUsage,
    EpisodeText,
    JobView,
    Observed,
    references_for,
)
from uhp_memories.domain.observing.ports import Deriver, EpisodeRecords, MemoryJobs
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.records import lifecycle
from uhp_memories.domain.records.model import RecordInput, RecordVersion
from uhp_memories.domain.records.ports import VersionIndex
from uhp_memories.domain.records.writer import Derived, RecordWriter
from uhp_memories.domain.timefmt import format_ms

logger = logging.getLogger(__name__)







class ObserveService:
    """Observe (§5.1): episodes written, and the derive job that follows them."""
    def __init__(
        self,
        ports: Ports,
        records: EpisodeRecords,
        removal: MemoryJobs,
        jobs: JobRepository,
        workflows: WorkflowRunner,
        deriver: Callable[[], Deriver | None] | None = None,
        index: Callable[[], VersionIndex | None] | None = None,
    ) -> None:
        """`deriver` builds the configured deriver on first use (None: observe derives nothing). Whether
        observe derives is known without building it: a Lambda that only writes episodes never pays
        for a model client."""
        self._ports = ports
        self._records = records
        self._removal = removal
        self._jobs = jobs
        self._workflows = workflows
        self._deriver = deriver or (lambda: None)
        self._writer = RecordWriter(ports.records, index)
        self.derives = deriver is not None

    # -- API ---------------------------------------------------------------------------------

    def observe(self, caller: Caller, memory_id: str, episodes: list[RecordInput]) -> Observed:
        """Write the episodes; where a deriver is configured, start the job that derives from them.
        Episodes over OBSERVE_BYTES together are refused whole (422 memory_invalid), before anything
        is read or written: they would not fit one transaction, and observe is all or nothing."""
        sent = sum(_episode_bytes(e) for e in episodes)
        if sent > OBSERVE_BYTES:
            raise MemoryInvalid(
                f"one observe carries at most {OBSERVE_BYTES} bytes of episode content and attributes "
                f"together (these are {sent}); nothing was written: send the episodes in several observes"
            )
        views = self._records.observe(caller, memory_id, episodes)
        if not self.derives:
            return Observed(views, None)
        memory = self._ports.memories.get(caller.tenant, memory_id)
        if memory is not None and self._ports.providers.of(memory) is not None:
            return Observed(views, None)  # another provider derives as it declares (§5.1), or not at all
        job = start_job(self._ports, self._jobs, self._workflows, caller, DERIVE, memory_id, status="pending",
                        result={"episodes": [v.record.id for v in views]})
        return Observed(views, job)

    def job(self, caller: Caller, memory_id: str, job_id: str) -> JobView:
        """A job of this memory (404 for another memory's, as for an unknown one). A derive job needs
        read on its memory and shows the records it produced that the caller may read, as a read that
        does not ask for history shows them: a forgotten record is left out, its id too (§5.2)."""
        job = self._removal.job(caller, memory_id, job_id)
        if job.kind != DERIVE:
            return JobView(job, [])
        produced = job.result.get("episodes", []) + job.result.get("records", [])
        found = self._ports.records.get_many(caller.tenant, memory_id, produced)
        return JobView(job, self._records.views(caller, memory_id, [found[i] for i in produced if i in found]))

    # -- the workflow's steps ----------------------------------------------------------------

    def derive(self, tenant: str, memory_id: str, job_id: str) -> Job | None:
        """Derive from a job's episodes and write what the model kept. A finished job is answered as it
        is. A refused or malformed answer fails the job; throttling and an unreachable model raise,
        for the workflow to retry (then RecordDerivationFailure fails the job)."""
        job = self._jobs.get(tenant, job_id)
        if job is None or job.kind != DERIVE or job.status != "pending" or job.memory_id != memory_id:
            return job
        plan = job.result.get("plan")
        if plan is None:
            deriver = self._deriver()
            if deriver is None:
                return self._finish(job, "failed", error="derivation_not_configured")
            episodes = self._episodes(job)
            if not episodes:
                return self._finish(job, "completed")
            try:
                derived = deriver.derive([EpisodeText.of(e) for e in episodes])
            except DerivationError as error:
                if error.retryable:
                    self._note_retry(job, error)
                    raise
                return self._finish(job, "failed", error=error.reason, usage=error.usage)
            plan = [
                {
                    "id": self._ports.ids.new("hrec_"),
                    "type": fact.type,
                    "content": fact.content,
                    "attributes": fact.attributes,
                    "valid_from": fact.valid_from,
                    "references": list(references_for(fact, [EpisodeText.of(e) for e in episodes])),
                }
                for fact in derived.facts
            ]
            ahead = {
                **job.result,
                "plan": plan,
                "usage": _usage(derived.usage),
                "model": derived.model,
                "prompt_version": derived.prompt_version,
            }
            if not self._jobs.progress(tenant, job_id, ahead):
                return self._jobs.get(tenant, job_id)  # finished meanwhile (a concurrent retry)
            job = Job(**{**job.__dict__, "result": ahead})
        return self._write_plan(job)

    def record_failure(self, tenant: str, job_id: str, error: str) -> Job | None:
        """The derive step kept failing after its retries: the job fails with `error` (its plan, and
        the derived text in it, dropped); the episodes stay."""
        job = self._jobs.get(tenant, job_id)
        if job is None or job.status != "pending":
            return job
        return self._finish(job, "failed", error=error)

    # -- helpers -----------------------------------------------------------------------------

    def _note_retry(self, job: Job, error: DerivationError) -> None:
        """While the workflow sends the step again, the job says so (GET .../jobs/{id}): how many times
        it failed, the last error's reason, and when the next attempt is due (none after the last: the job
        then fails with that error). It sat `pending`, `error: null`, through minutes of retries."""
        failures = int(job.result.get("retrying", {}).get("failures", 0)) + 1
        pause = DERIVE_RETRIES.pause_after(failures)
        due = None if pause is None else format_ms(self._ports.clock.now_ms() + int(pause * 1000))
        logger.warning("derivation failed, to be retried",
                       extra={"job_id": job.id, "reason": error.reason, "failures": failures, "next_attempt_at": due})
        retrying = {"failures": failures, "last_error": error.reason, "next_attempt_at": due}
        self._jobs.progress(job.tenant, job.id, {**job.result, "retrying": retrying})

    def _episodes(self, job: Job) -> list[RecordVersion]:
        """The job's episodes still there, in the order observed (an erased one is left out)."""
        ids = job.result.get("episodes", [])
        found = self._ports.records.get_many(job.tenant, job.memory_id, ids)
        return [found[i] for i in ids if i in found and found[i].type == "episode"]

    def _write_plan(self, job: Job) -> Job:
        result = job.result
        written_at = format_ms(self._ports.clock.now_ms())
        origin = {"job_id": job.id, "model": str(result.get("model", "")),
                  "prompt_version": str(result.get("prompt_version", ""))}
        written: list[str] = []
        batch = self._writer.batch()
        for planned in result["plan"]:
            record = lifecycle.first(
                tenant=job.tenant,
                memory_id=job.memory_id,
                record_id=planned["id"],
                type=planned["type"],
                content=planned["content"],
                attributes=planned["attributes"],
                written_at=written_at,
                written_by=DERIVER,
                valid_from=planned["valid_from"],
                references=tuple(planned["references"]),
                origin=origin,
            )
            sources = [r["record_id"] for r in planned["references"]]
            try:
                outcome = batch.derived(record, sources)
            except TreeChanged:
                return self._finish(job, "failed", error="memory_deleted")
            if outcome is not Derived.SOURCE_GONE:  # an episode it came from was erased: what came from it goes too
                written.append(record.id)
        batch.index()
        return self._finish(job, "completed", records=written)

    def _finish(
        self, job: Job, status: str, *, records: Sequence[str] = (), error: str | None = None,
        usage: DerivationUsage | dict[str, int] | None = None,
    ) -> Job:
        kept = {k: v for k, v in job.result.items() if k in ("episodes", "usage", "model", "prompt_version")}
        result: dict[str, Any] = {**kept, "records": list(records)}
        if usage is not None:
            result["usage"] = _usage(usage) if isinstance(usage, DerivationUsage) else usage
        if error is not None:
            result["error"] = error
        if status == "failed":
            logger.warning("derivation job failed", extra={"job_id": job.id, "reason": error})
        return self._jobs.finish(job.tenant, job.id, status, result, self._ports.clock.now_ms())


def _episode_bytes(episode: RecordInput) -> int:
    """What an episode carries toward OBSERVE_BYTES: its content (text as UTF-8, anything else as
    compact JSON) and its attributes (compact JSON), measured as they are stored."""
    content = episode.content if isinstance(episode.content, str) else _compact(episode.content)
    attributes = _compact(episode.attributes)
    return len(content.encode("utf-8", "surrogatepass")) + len(attributes.encode("utf-8", "surrogatepass"))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _usage(usage: DerivationUsage) -> dict[str, int]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
