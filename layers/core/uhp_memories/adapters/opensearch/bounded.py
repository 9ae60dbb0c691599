"""The OpenSearch connection `connect` gives its client: each attempt of each request bounded by the
time the request has left (uhp_memories.deadlines).

opensearch-py takes one timeout per client, or per call (`request_timeout`); here it is per attempt,
read from the deadline as the attempt starts, so every call the adapter makes (index.py, and free
queries: adapters/opensearch/free_query.py) is bounded without passing anything, and the one retry the client
makes (`connect`: max_retries=1) gets only what the first attempt left. A request whose time is spent
sends nothing: ConnectionTimeout at once, which the adapter answers as SearchUnavailable (503).
Without a deadline (a reindex, the stream indexer outside a context), the client's timeout applies.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from opensearchpy import ConnectionTimeout, Urllib3HttpConnection
from urllib3 import Timeout

from uhp_memories import deadlines


class DeadlineConnection(Urllib3HttpConnection):
    """Urllib3HttpConnection whose every attempt ends by the request's deadline: connecting and
    reading share the time left (urllib3's `total`), each at most the client's timeout."""

    def perform_request(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        timeout: float | None = None,
        ignore: Collection[int] = (),
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        cap = float(timeout or self.timeout)
        left = deadlines.remaining()
        if left is None:
            return super().perform_request(method, url, params, body, timeout, ignore, headers)
        if left <= 0:
            raise ConnectionTimeout("TIMEOUT", "the request's time is spent; nothing was sent", None)
        bounded = Timeout(connect=min(cap, left), read=min(cap, left), total=left)
        return super().perform_request(method, url, params, body, bounded, ignore, headers)  # type: ignore[arg-type]
