"""Providers (§10): who keeps a memory's records, beneath everything the server keeps for itself.

The server keeps the tree, the grants and the cutoff, references across memories, fencing, idempotency
and the harness seam, the same for every provider (§10.1). A provider keeps the records of the memories
bound to it and implements the operations of §5 and §6 for them. The native provider is this server's
own storage (DynamoDB and the recall index): the record, recall, observe and erase services run it in
their own bodies. Any other provider is a `RecordProvider`, reached from those same services through
this registry, after the server has checked the caller's access and the request's shape: a provider
never sees a caller's credential, only the memory the server checked (§13: the provider's credential is
the server's).

What a provider cannot do is refused as §12 says (`memory_unsupported`, `require`) or, for part of a
request, reported in `degraded`; its capability document (§10.2) says which, and nothing emulated is
declared native.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from uhp_memories.domain.errors import MemoryUnsupported
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.model import NATIVE_PROVIDER, Caller
from uhp_memories.domain.recall.model import MemoryUnavailable
from uhp_memories.domain.records.model import RecordVersion

# A provider's recall is asked for this many candidates per result wanted, up to the most it is asked
# for: the fields and types an adapter applies over what the provider answers need candidates to
# choose from (domain/recall/service.py); past the bound, a filtered answer may miss matches, and says so.
RECALL_CANDIDATES_PER_RESULT = 4
RECALL_CANDIDATES_MAX = 400


class ProviderNotAnswering(MemoryUnavailable):
    """§12 memory_unavailable, 502: the memory's provider was asked and did not answer within its
    deadline, or answered with an error. Nothing the request asked of it is known to be done; sending
    it again is how to find out (with the same Idempotency-Key where it writes)."""

    cause = "provider_failed"


class ProviderNotConnected(MemoryUnavailable):
    """§12 memory_unavailable, 503: the memory is bound to a provider this server is not connected to
    now (never configured in this stage, or its connection could not be made)."""


@dataclass(frozen=True)
class ProviderRecall:
    """A provider's answer to one recall of one memory: its hits, best first, each with its score
    (0..1, comparable across requests where the provider says so) and the signals that found it, and
    what it did not do of the request (§6.3 `degraded`)."""

    hits: list[tuple[RecordVersion, float, tuple[str, ...]]]
    degraded: list[str] = field(default_factory=list)
    best_similarity: float | None = None  # the best query similarity, for abstain
    # The provider answered as many candidates as it was asked for: there may be more beyond them, so
    # what is applied over these (fields, types, status) may have missed a match past the bound.
    truncated: bool = False


@dataclass(frozen=True)
class ProviderErase:
    """What an erase removed for good, and every copy it could not reach (§5.2: an empty list is a
    guarantee): each {"record_id", "where", "reason", "until"}, every one a string (`until` a time, or
    what ends the copy, when no time can be named)."""

    erased: list[str]
    unreachable: list[dict[str, Any]]


class RecordProvider(Protocol):
    """One provider's store, for the memories bound to it (§10.1). Every method is called after the
    server checked the caller's privileges on `memory` and the input's shape and limits; the provider
    confines every read and write to `memory` (its own container, or a condition it adds to every call)
    and re-checks every record it fetches by id against it (§10.3, isolation `enforced_filter`)."""

    id: str

    def capabilities(self) -> dict[str, Any]:
        """The provider's capability document (§10.2), honest about what it emulates and lacks."""
        ...

    def is_outside(self) -> bool:
        """Whether what is written to it leaves this server (§9: the person attaching is told)."""
        ...

    def remember(self, caller: Caller, memory: Memory, record: RecordVersion) -> RecordVersion:
        """Keep one record as stated; answers it as kept (its id is the provider's)."""
        ...

    def observe(self, caller: Caller, memory: Memory, episodes: Sequence[RecordVersion]) -> list[RecordVersion]:
        """Hand over raw episodes; answers the records it kept or derived (§5.1)."""
        ...

    def get(self, memory: Memory, record_id: str) -> RecordVersion | None:
        """The record of `memory` this id names, or None (another memory's record is None too)."""
        ...

    def scan(self, memory: Memory, include: str, after: str | None) -> Iterator[tuple[str, RecordVersion]]:
        """The memory's records newest first, as (position, record), from after `after`; forgotten ones
        only with include="all"."""
        ...

    def every(self, memory: Memory) -> list[RecordVersion]:
        """Every record of the memory, forgotten ones included, however many: what an erase must reach.
        A listing (`scan`) may stop at the provider's own bound; this may not."""
        ...

    def count(self, memory: Memory) -> int:
        """How many active records the memory holds (§2 `records.count`), as the provider counts them."""
        ...

    def revise(self, caller: Caller, memory: Memory, current: RecordVersion, revised: RecordVersion) -> RecordVersion:
        """Replace what `current` holds with what `revised` holds; answers the record as it is now."""
        ...

    def forget(self, caller: Caller, memory: Memory, current: RecordVersion) -> RecordVersion:
        """Close the record, keeping its trace; answers it, forgotten."""
        ...

    def history(self, memory: Memory, record: RecordVersion) -> list[RecordVersion]:
        """The record's versions, oldest first, as far as the provider keeps them."""
        ...

    def recall(self, memory: Memory, query: str | None, text: str | None, limit: int, include: str) -> ProviderRecall:
        """The memory's records closest to the query (meaning) and/or the text (words)."""
        ...

    def erase(self, memory: Memory, records: Sequence[RecordVersion]) -> ProviderErase:
        """Remove these records' content for good; report every copy it could not reach."""
        ...

    def drop_memory(self, memory: Memory) -> None:
        """Remove everything the provider keeps of a memory (the memory is being deleted)."""
        ...


class Providers:
    """The providers this server is connected to (§10.1: a deployment has memories once it is connected
    to a provider): the native one always, and those an operator connected (settings: `UHP_MEM0_*`, the
    local `--mem0` flag)."""

    def __init__(self, others: Mapping[str, RecordProvider] | None = None) -> None:
        self._others = dict(others or {})

    @property
    def ids(self) -> tuple[str, ...]:
        return (NATIVE_PROVIDER, *self._others)

    def of(self, memory: Memory) -> RecordProvider | None:
        """The provider that keeps this memory's records; None for the native provider (the services'
        own bodies)."""
        if memory.provider == NATIVE_PROVIDER:
            return None
        found = self._others.get(memory.provider)
        if found is None:  # §12: not connected is memory_unavailable (503), not an operation it lacks
            raise ProviderNotConnected(
                f"memory {memory.id} is kept by provider {memory.provider!r}, which this server is not connected to"
            )
        return found

    def connected(self) -> list[RecordProvider]:
        return list(self._others.values())

    def is_outside(self, provider: str) -> bool:
        """§9: whether the provider runs outside this server (its turns leave it)."""
        found = self._others.get(provider)
        return found is not None and found.is_outside()

    def require_native(self, memory: Memory, what: str) -> None:
        """§12: an operation the memory's provider does not implement at all is memory_unsupported."""
        if memory.provider != NATIVE_PROVIDER:
            raise MemoryUnsupported(
                f"memory {memory.id} is kept by provider {memory.provider!r}, which does not support {what} "
                f"(its capability document: GET /v1/memories/providers)"
            )


NATIVE_ONLY = Providers()  # a composition without other providers (tests, tools)
