"""Lambda's payload limit, the one rule for the size of what a function takes and answers: a
synchronous invocation carries at most 6 MB each way, measured on the JSON of the proxy event and of
the proxy answer (base64 bodies included). Past it, deployed, Lambda refuses the invocation and API
Gateway answers an opaque 502; the functions (api/app.py) and the local gateway (local/gateway.py)
refuse it themselves, with this API's error body, so a local test sees what production would."""

from __future__ import annotations

import json
from typing import Any

# 6 MB as Lambda counts it: 6 MiB (its refusals name 6,291,556 bytes, a little more).
LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024
# A body's character in the answer's JSON takes at most 6 bytes (a control character as \u00XX); the
# status and headers well under 64 KiB. A body shorter than that bound is not measured.
_WORST_EXPANSION = 6
_ENVELOPE_BYTES = 64 * 1024


def payload_bytes(payload: dict[str, Any]) -> int:
    """The size of an event or an answer as Lambda carries it: JSON in UTF-8, non-ASCII unescaped (as
    the Python 3.12+ runtimes send it)."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def too_large_answer(answer: dict[str, Any]) -> str | None:
    """Why an answer cannot leave a Lambda function (its size), or None when it can."""
    body = answer.get("body")
    if not isinstance(body, str) or len(body) * _WORST_EXPANSION + _ENVELOPE_BYTES <= LAMBDA_PAYLOAD_BYTES:
        return None  # most answers: not measured, they cannot be near the limit
    size = payload_bytes(answer)
    if size <= LAMBDA_PAYLOAD_BYTES:
        return None
    return (f"the answer would be {size} bytes, more than the {LAMBDA_PAYLOAD_BYTES} a Lambda function "
            "may answer; ask for less (a smaller limit, fewer records)")
