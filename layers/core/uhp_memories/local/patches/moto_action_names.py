"""moto lists each response class's methods once.

moto finds the handler of every call by listing its response class's methods anew
(inspect.getmembers over a few hundred attributes), a share of every GetItem (measured:
docs/architecture.md, "Local patches"). The classes do not change while moto runs, so while installed
each is listed once.

Replaces `moto.core.responses.method_names_from_class` with the same function behind an unbounded
lru_cache (moto's own stays reachable as its `__wrapped__`).
"""

from __future__ import annotations

import functools

from uhp_memories.local.patches import Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")


def _apply(replace: Replacements) -> None:
    import moto.core.responses as responses

    replace(responses, "method_names_from_class", functools.lru_cache(maxsize=None)(responses.method_names_from_class))


PATCH = Patch(__name__, WRITTEN_FOR, _apply)
install = PATCH.install
uninstall = PATCH.uninstall
