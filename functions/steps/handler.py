"""The tasks of the state machines in functions/workflows/. Each handler is its own Lambda (CDK
points each at `functions.steps.handler.<name>`); each is idempotent, so a retry does no harm.
The state carries ids and filters only, never record content."""

from typing import Any

from uhp_memories import bootstrap
from uhp_memories.workflows import STEPS


def _run(step: str, event: dict[str, Any]) -> Any:
    return getattr(bootstrap.container().removal, step)(event)


def consolidate(event: dict[str, Any], context: Any) -> Any:
    return bootstrap.container().consolidation.consolidate(event)


def record_consolidation_failure(event: dict[str, Any], context: Any) -> Any:
    return bootstrap.container().consolidation.record_failure(event)


def resolve_erase_targets(event: dict[str, Any], context: Any) -> Any:
    return _run("resolve_erase_targets", event)


def erase_from_index(event: dict[str, Any], context: Any) -> Any:
    return _run("erase_from_index", event)


def erase_files(event: dict[str, Any], context: Any) -> Any:
    return _run("erase_files", event)


def erase_cached_responses(event: dict[str, Any], context: Any) -> Any:
    return _run("erase_cached_responses", event)


def erase_records(event: dict[str, Any], context: Any) -> Any:
    return _run("erase_records", event)


def finish_erase(event: dict[str, Any], context: Any) -> Any:
    return _run("finish_erase", event)


def record_failure(event: dict[str, Any], context: Any) -> Any:
    return _run("fail", event)


def purge_subtree(event: dict[str, Any], context: Any) -> Any:
    return _run("purge_subtree", event)


def finish_delete(event: dict[str, Any], context: Any) -> Any:
    return _run("finish_delete", event)


assert set(STEPS.values()) <= set(globals()), "every step named in workflows.STEPS has a handler"
