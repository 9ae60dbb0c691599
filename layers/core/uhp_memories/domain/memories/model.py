"""The memory tree's values: a memory, and how a reader is shown one."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Memory:
    tenant: str
    id: str
    name: str
    description: str
    parent_id: str | None
    restricted: bool
    provider: str
    created_by: str
    created_at: int  # epoch ms
    updated_at: int  # epoch ms
    record_count: int = 0
    deleting: bool = False
    # Who last set the name or description (None: its creator). Both reach agents (§2: the description is
    # content), so an agent is shown them fenced, with this writer (§13).
    described_by: str | None = None
    # The memory's ancestors, root first, down to its parent (() on a root), kept on the item so the
    # access check reads the whole chain in one batch whatever its depth (domain/access/model.py). None: an
    # item written before they were kept; the check then walks the parents one read each. Never
    # trusted over the parent links: the walk decides, these only say what to read ahead.
    ancestors: tuple[str, ...] | None = None
    # Its live children as its item counts them, so that a summary names how many a reader sees without
    # reading them (one query per child it names was the N+1 of every list, get and recall). None: an
    # item from before the count was kept, whose children are counted by reading them. Not part of what the
    # memory is (compare=False): two reads of one memory are the same memory whatever came below it.
    children: ChildCount | None = field(default=None, compare=False)

    @property
    def describer(self) -> str:
        return self.described_by or self.created_by

    def evolve(self, **changes: Any) -> Memory:
        return replace(self, **changes)


@dataclass(frozen=True)
class ChildCount:
    """A memory's live children, kept on its item as they come and go: `open`, how many are not
    restricted (whoever sees the memory sees them: they inherit its grants), and each restricted child
    with the principals granted on it (a restricted child inherits nothing: only they see it)."""

    open: int = 0
    restricted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def seen_by(self, principals: Collection[str]) -> int:
        """How many of the children a caller who sees the memory sees, its principal and groups being
        `principals`."""
        mine = set(principals)
        return self.open + sum(1 for grantees in self.restricted.values() if mine.intersection(grantees))


@dataclass(frozen=True)
class MemoryView:
    """A memory as one caller sees it: placement only as far up as it may see, its own privileges."""

    memory: Memory
    parent_id: str | None
    ancestors: list[str]
    privileges: list[str]
    children_count: int


@dataclass(frozen=True)
class MemorySummary:
    """The short form a recall or list response names for the parent and children."""

    id: str
    name: str
    description: str
    records_count: int
    children_count: int
    described_by: str = ""  # who wrote the name and description (Memory.describer)
