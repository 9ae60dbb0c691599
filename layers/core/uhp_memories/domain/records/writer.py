"""The one record writer: each transition of a chain (records/lifecycle.py) committed to the version
store, then indexed. Every writer goes through here: remember, observe, revise and forget
(records/writes.py), derivation (observing/service.py), consolidation and its revert.

DynamoDB is the source of truth: once a commit has answered, the write has happened, and an indexing
failure is logged, never the write's failure (the stream indexer, or `uhp-memories reindex`, catches the
index up). A write's texts may be embedded before its commit (`embed_ahead`), so that the two overlap;
nothing is indexed before the commit.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from typing import Any

from uhp_memories.domain.errors import AlreadyExists, SourceGone
from uhp_memories.domain.files.model import PathCondition
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.domain.records.ports import RecordRepository, VersionIndex

logger = logging.getLogger(__name__)

IndexSource = Callable[[], VersionIndex | None] | None


class Derived(enum.Enum):
    """What became of a derived record's write (RecordRepository.append_derived)."""

    WRITTEN = "written"
    WRITTEN_BEFORE = "written_before"  # a retried step: the attempt before wrote it (and indexed it then)
    SOURCE_GONE = "source_gone"  # a record it came from was erased meanwhile: nothing derived from it is kept


class RecordWriter:
    """Commits a chain's transitions, then indexes what was committed."""

    def __init__(self, records: RecordRepository, index: IndexSource = None) -> None:
        self._records = records
        self._index = index

    def embed_ahead(self, versions: Sequence[RecordVersion]) -> Any:
        """Start embedding these new versions' texts before their commit, so the two overlap (None
        without an index). A failure here is the indexing's, never the write's: it is logged, and the
        indexing after the commit embeds again."""
        engine = self._index() if self._index is not None else None
        if engine is None or not versions:
            return None
        try:
            return engine.embed_ahead(versions)
        except Exception as error:  # the write goes on; indexing after the commit embeds again
            logger.warning("embedding ahead of commit failed", extra={"error_type": type(error).__name__})
            return None

    def first(self, record: RecordVersion, conditions: Sequence[PathCondition] = (), *, ahead: Any = None) -> None:
        """Commit a new record's first version (RecordRepository.append_first), then index it."""
        self._records.append_first(record, conditions)
        self.index([record], ahead)

    def many(self, records: Sequence[RecordVersion], *, ahead: Any = None) -> None:
        """Commit the first versions of several new records of one memory in one transaction, then
        index them."""
        self._records.append_many(records)
        self.index(records, ahead)

    def revision(
        self, closed: RecordVersion, revision: RecordVersion, conditions: Sequence[PathCondition] = (), *,
        ahead: Any = None,
    ) -> None:
        """Commit a revision and the version it closes (RecordRepository.append_revision), then index both."""
        self._records.append_revision(closed, revision, conditions)
        self.index([closed, revision], ahead)

    def reopen(self, closed: RecordVersion, revision: RecordVersion) -> None:
        """Commit a forgotten record made current again (RecordRepository.reopen), then index both."""
        self._records.reopen(closed, revision)
        self.index([closed, revision])

    def close(self, current: RecordVersion, closed: RecordVersion, conditions: Sequence[PathCondition] = ()) -> None:
        """Commit a forget (RecordRepository.close), then index the closed version."""
        self._records.close(current, closed, conditions)
        self.index([closed])

    def batch(self) -> WriteBatch:
        """Several transitions committed one by one and indexed together (`WriteBatch.index`)."""
        return WriteBatch(self)

    def index(self, versions: Sequence[RecordVersion], ahead: Any = None) -> None:
        """Index what a write committed, so recall reads its own writes in the common case; a failure
        is logged, never raised (the write has happened). `ahead`: embed_ahead's handle."""
        engine = self._index() if self._index is not None else None
        if engine is None or not versions:
            return
        try:
            engine.index_versions(versions, ahead=ahead)
        except Exception as error:  # any failure here must not fail a committed write
            logger.warning("indexing after commit failed", extra={"error_type": type(error).__name__})


class WriteBatch:
    """Transitions committed one at a time, each in its own transaction, and indexed in one call at
    the end (`index`): a workflow step's many changes. Each commit raises what the repository raises
    (StaleVersion, TreeChanged, ...); what committed before it stays, and is indexed by `index`."""

    def __init__(self, writer: RecordWriter) -> None:
        self._writer = writer
        self._records = writer._records
        self.committed: list[RecordVersion] = []

    def revision(self, closed: RecordVersion, revision: RecordVersion) -> None:
        """Commit a revision and the version it closes."""
        self._records.append_revision(closed, revision)
        self.committed += [closed, revision]

    def close(self, current: RecordVersion, closed: RecordVersion) -> None:
        """Commit a forget."""
        self._records.close(current, closed)
        self.committed.append(closed)

    def derived(self, record: RecordVersion, sources: Sequence[str]) -> Derived:
        """Commit a record derived from `sources` (record ids of its memory), unless a source is gone
        or the record was written already; TreeChanged when its memory is missing or being deleted."""
        try:
            self._records.append_derived(record, sources)
        except AlreadyExists:
            return Derived.WRITTEN_BEFORE
        except SourceGone:
            return Derived.SOURCE_GONE
        self.committed.append(record)
        return Derived.WRITTEN

    def index(self) -> None:
        """Index every version this batch committed."""
        self._writer.index(self.committed)
