"""DynamoDB's transaction conflicts, which moto never raises: moto runs one call at a time, where DynamoDB
cancels a transaction that meets another on one of its items (`TransactionCanceledException` with the
reason `TransactionConflict`, nothing written). Installed on a boto3 client, `TransactionConflicts` answers
TransactWriteItems calls so before moto sees them, as DynamoDB would for a transaction that lost its race."""

from __future__ import annotations

import json
import threading
from typing import Any

from botocore.awsrequest import AWSResponse

CANCELLED = "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]"


class TransactionConflicts:
    """`times` conflicts for each distinct transaction (by its items) before it may reach moto:
    a writer that sends the same transaction again wins once the others have gone. `times=None`: every
    time (a race that never ends). Counts what it raised in `raised`."""

    EVENT = "before-call.dynamodb.TransactWriteItems"

    def __init__(self, client: Any, times: int | None = 1) -> None:
        self._events = client.meta.events
        self._times = times
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self.raised = 0

    def __enter__(self) -> TransactionConflicts:
        self._events.register(self.EVENT, self._answer)
        return self

    def __exit__(self, *exc: object) -> None:
        self._events.unregister(self.EVENT, self._answer)

    def _answer(self, params: dict[str, Any], **kwargs: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        items = json.loads(params["body"])["TransactItems"]
        # By its items: the SDK gives each call a ClientRequestToken of its own.
        transaction = json.dumps(items, sort_keys=True)
        with self._lock:
            seen = self._seen.get(transaction, 0)
            if self._times is not None and seen >= self._times:
                return None
            self._seen[transaction] = seen + 1
            self.raised += 1
        # The first item met another transaction; DynamoDB says "None" for the others.
        reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}] + [
            {"Code": "None"} for _ in items[1:]]
        parsed = {"Error": {"Code": "TransactionCanceledException", "Message": CANCELLED},
                  "Message": CANCELLED, "CancellationReasons": reasons,
                  "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}}}
        return AWSResponse("https://dynamodb.local/", 400, {}, None), parsed
