"""A request's phases, timed at the ports that run them (api/observability.py, `phase`): wrapped where the
ports are built (bootstrap.py), so the domain stays unaware and each phase has one place: access at the
reads the access view makes (domain/ports.py is their only caller), embed at the embedder bootstrap makes
(one given is used as given: tests, stand-ins), search and read-back at the recall service's index and
record reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from uhp_memories.adapters.dynamodb.memories import DynamoMemoryRepository
from uhp_memories.adapters.dynamodb.records import DynamoRecordRepository
from uhp_memories.api import observability
from uhp_memories.domain.access.ports import AttachedLists
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.ports import RecallIndex, SearchHit

if TYPE_CHECKING:
    from uhp_memories.domain.agents.model import Attachment
    from uhp_memories.domain.recall.ports import Embedder


class AccessTimedMemories(DynamoMemoryRepository):
    """The memory repository, its three reads for the access check timed as the access phase."""

    def get_with_grants(self, *args: Any, **kwargs: Any) -> Any:
        with observability.phase(observability.ACCESS):
            return super().get_with_grants(*args, **kwargs)

    def get_many_with_grants(self, *args: Any, **kwargs: Any) -> Any:
        with observability.phase(observability.ACCESS):
            return super().get_many_with_grants(*args, **kwargs)

    def grants_of(self, *args: Any, **kwargs: Any) -> Any:
        with observability.phase(observability.ACCESS):
            return super().grants_of(*args, **kwargs)


class AccessTimedLists:
    """Harnesses' lists as the access check reads them (a harness's reach), timed as the access phase."""

    def __init__(self, lists: AttachedLists) -> None:
        self._lists = lists

    def get(self, tenant: str, harness_id: str) -> Sequence[Attachment] | None:
        with observability.phase(observability.ACCESS):
            return self._lists.get(tenant, harness_id)


class ReadBackTimedRecords(DynamoRecordRepository):
    """The record repository recall reads its hits back with (one batch per memory searched)."""

    def get_many(self, *args: Any, **kwargs: Any) -> Any:
        with observability.phase(observability.READ_BACK):
            return super().get_many(*args, **kwargs)


class SearchTimedIndex:
    """The recall engine as the recall service searches it: each search (and the words it asks about
    for abstain) timed as the search phase; the query's embedding is the embedder's to time."""

    def __init__(self, engine: RecallIndex) -> None:
        self._engine = engine

    @property
    def model_id(self) -> str:
        return self._engine.model_id

    def search(self, *args: Any, **kwargs: Any) -> Sequence[SearchHit]:
        with observability.phase(observability.SEARCH):
            return self._engine.search(*args, **kwargs)

    def unmatched(self, *args: Any, **kwargs: Any) -> list[str]:
        with observability.phase(observability.SEARCH):
            return self._engine.unmatched(*args, **kwargs)

    def embedding(self, query: str) -> Future[Any]:
        return self._engine.embedding(query)


def search_timed(engine: Callable[[], RecallEngine | None]) -> Callable[[], RecallIndex | None]:
    def index() -> RecallIndex | None:
        built = engine()
        return SearchTimedIndex(built) if built is not None else None

    return index


class EmbedTimedEmbedder:
    """An embedder whose every call is timed as the embed phase (a query's, a write's, the indexer's);
    anything else asked of it is the embedder's own (local mode warms MiniLM through `load`)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    @property
    def model_id(self) -> str:
        return self._embedder.model_id

    @property
    def dimensions(self) -> int:
        return self._embedder.dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with observability.phase(observability.EMBED):
            return self._embedder.embed(texts)

    def __getattr__(self, name: str) -> Any:
        wrapped = self.__dict__.get("_embedder")  # not yet set while a copy is made: no recursion
        if wrapped is None:
            raise AttributeError(name)
        return getattr(wrapped, name)
