"""The state machines and their steps, named once: CDK and local mode both read this.

The ASL files sit in this package, beside the code that reads them, so they ship with uhp_memories
(the Lambda layer, a wheel) and nothing here reads outside the package. Each file names its tasks
as ${Substitution}; STEPS maps each substitution to the handler in functions/steps/handler.py
that runs it. The shape of the state each task reads and returns is in `uhp_memories.workflows.state`.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

# workflow name -> ASL file
WORKFLOWS: dict[str, str] = {
    "erase": "erase.asl.json",
    "delete": "delete_memory.asl.json",
    "consolidate": "consolidate.asl.json",
    "derive": "derive.asl.json",
}

# ASL substitution -> step handler (functions.steps.handler.<name>)
STEPS: dict[str, str] = {
    "ResolveEraseTargets": "resolve_erase_targets",
    "EraseFromIndex": "erase_from_index",
    "EraseFiles": "erase_files",
    "EraseCachedResponses": "erase_cached_responses",
    "EraseRecords": "erase_records",
    "FinishErase": "finish_erase",
    "RecordFailure": "record_failure",
    "PurgeSubtree": "purge_subtree",
    "FinishDelete": "finish_delete",
    "Consolidate": "consolidate",
    "RecordConsolidationFailure": "record_consolidation_failure",
    "Derive": "derive",
    "RecordDerivationFailure": "record_derivation_failure",
}


def _read(workflow: str) -> str:
    return resources.files(__name__).joinpath(WORKFLOWS[workflow]).read_text()


def definition(workflow: str, function_arns: dict[str, str]) -> str:
    """The ASL of a workflow with every ${Substitution} replaced by its step's Lambda ARN."""
    text = _read(workflow)
    for substitution, step in STEPS.items():
        text = text.replace("${" + substitution + "}", function_arns[step])
    return text


def substitutions_used(workflow: str) -> list[str]:
    document: Any = json.loads(_read(workflow))
    found = []
    for state in document["States"].values():
        resource = state.get("Resource", "")
        if resource.startswith("${"):
            found.append(resource[2:-1])
    return found
