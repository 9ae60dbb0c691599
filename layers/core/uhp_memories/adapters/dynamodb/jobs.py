"""Jobs on DynamoDB: the job item, and the hold on its memory while it runs (adapters/dynamodb/holds.py)."""

from __future__ import annotations

import json
from typing import Any

from uhp_memories.adapters.dynamodb import holds, keys
from uhp_memories.adapters.dynamodb.table import ConditionFailed, DynamoTable
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.jobs import Job


class DynamoJobRepository:
    def __init__(self, table: DynamoTable) -> None:
        self._table = table

    def start(self, job: Job, hold_memory: bool) -> None:
        operations = [
            self._table.put_op(
                {
                    "PK": keys.job_pk(job.tenant, job.id),
                    "SK": keys.JOB_SK,
                    "entity": "job",
                    "tenant": job.tenant,
                    "id": job.id,
                    "kind": job.kind,
                    "memory_id": job.memory_id,
                    "status": job.status,
                    "requested_by": job.requested_by,
                    "created_at": job.created_at,
                    "result": json.dumps(job.result),
                    "holds_memory": hold_memory,  # what finish releases
                },
                "attribute_not_exists(PK)",
            )
        ]
        if hold_memory:
            operations.append(holds.hold_op(self._table, job.tenant, job.memory_id, job.id))
        try:
            self._table.transact(operations)
        except ConditionFailed:
            raise TreeChanged(job.memory_id) from None  # being deleted (job ids are fresh)

    def finish(self, tenant: str, job_id: str, status: str, result: dict[str, Any], finished_at: int) -> Job:
        item = self._table.get(keys.job_pk(tenant, job_id), keys.JOB_SK)
        if item is None or item.get("tenant") != tenant:
            raise LookupError(job_id)
        memory_id = str(item["memory_id"])
        # A job that held its memory releases it; one that did not (a delete, whose memory is gone by
        # now) touches no memory item, or an update would write one back.
        release = (
            holds.release_ops(self._table, tenant, memory_id, job_id)
            if item.get("holds_memory")
            else [holds.legacy_marker_op(self._table, tenant, memory_id, job_id)]
        )
        self._table.transact(
            [
                self._table.update_op(
                    keys.job_pk(tenant, job_id),
                    keys.JOB_SK,
                    "SET #s = :s, #r = :r, finished_at = :f",
                    values={":s": status, ":r": json.dumps(result), ":f": finished_at},
                    names={"#s": "status", "#r": "result"},
                ),
                *release,
            ]
        )
        return self.get(tenant, job_id)  # type: ignore[return-value]

    def progress(self, tenant: str, job_id: str, result: dict[str, Any]) -> bool:
        try:
            self._table.client.update_item(
                TableName=self._table.name,
                Key={"PK": {"S": keys.job_pk(tenant, job_id)}, "SK": {"S": keys.JOB_SK}},
                UpdateExpression="SET #r = :r",
                ConditionExpression="attribute_exists(PK) AND attribute_not_exists(finished_at) AND tenant = :t",
                ExpressionAttributeNames={"#r": "result"},
                ExpressionAttributeValues={":r": {"S": json.dumps(result)}, ":t": {"S": tenant}},
            )
        except self._table.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def get(self, tenant: str, job_id: str) -> Job | None:
        item = self._table.get(keys.job_pk(tenant, job_id), keys.JOB_SK)
        if item is None or item.get("tenant") != tenant:
            return None
        return Job(
            tenant=str(item["tenant"]),
            id=str(item["id"]),
            kind=str(item["kind"]),
            memory_id=str(item["memory_id"]),
            status=str(item["status"]),
            requested_by=str(item["requested_by"]),
            created_at=int(item["created_at"]),
            finished_at=int(item["finished_at"]) if item.get("finished_at") is not None else None,
            result=json.loads(item.get("result") or "{}"),
        )

    def holds(self, tenant: str, memory_id: str) -> bool:
        return holds.is_held(self._table.get(keys.memory_pk(tenant, memory_id), keys.META_SK))
