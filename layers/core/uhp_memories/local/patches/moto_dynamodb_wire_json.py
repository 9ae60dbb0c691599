"""moto's DynamoDB item reads answer in wire JSON as it is.

moto builds each DynamoDB answer with a generic serializer driven by the service model, which costs
more than the read itself (most of a BatchGetItem of ten records; measured: docs/architecture.md,
"Local patches"). The answer of an item read is DynamoDB's wire JSON already (items as attribute
values, binaries in base64): while installed, it is sent as it is. Anything json cannot write goes
through moto's serializer, as before.

Replaces `moto.dynamodb.responses.DynamoResult.execute_result` (moto's own stays reachable as the
replacement's `original`).
"""

from __future__ import annotations

import json
from typing import Any

from uhp_memories.local.patches import Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")
FAST_ANSWERS = frozenset({"GetItem", "BatchGetItem", "Query"})


def _apply(replace: Replacements) -> None:
    from moto.dynamodb.responses import DynamoResult

    original = DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        if context.operation_model.name in FAST_ANSWERS:
            try:
                body = json.dumps(self.result, separators=(",", ":"))
            except (TypeError, ValueError):
                return original(self, context)
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return original(self, context)

    execute_result.original = original  # type: ignore[attr-defined]
    replace(DynamoResult, "execute_result", execute_result)


PATCH = Patch(__name__, WRITTEN_FOR, _apply)
install = PATCH.install
uninstall = PATCH.uninstall
