"""moto copies a state machine without its earlier executions.

moto deep-copies a state machine for each execution, earlier executions (and their threads' locks)
included, so a second execution fails; the copy needs none of them. While installed, a state
machine deep-copies as a shallow copy with no executions.

Adds `moto.stepfunctions.models.StateMachine.__deepcopy__` (moto defines none; uninstall deletes it).
"""

from __future__ import annotations

import copy
from typing import Any

from uhp_memories.local.patches import Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")


def _copy_without_executions(self: Any, memo: dict[int, Any]) -> Any:
    clone = copy.copy(self)
    clone.executions = []
    return clone


def _apply(replace: Replacements) -> None:
    from moto.stepfunctions.models import StateMachine

    replace(StateMachine, "__deepcopy__", _copy_without_executions)


PATCH = Patch(__name__, WRITTEN_FOR, _apply)
install = PATCH.install
uninstall = PATCH.uninstall
