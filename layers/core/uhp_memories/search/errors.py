"""Errors of the search engine. The service maps them: a model mismatch is a deployment error (500),
an unavailable index or embedder is `memory_unavailable` (503)."""

from __future__ import annotations


class SearchError(Exception):
    """Base of every error raised by the search package."""


class EmbeddingModelMismatch(SearchError):
    """An index built with one embedding model was asked to take or compare vectors of another.

    Vectors of two models live in two unrelated spaces: mixing them returns confident nonsense, so the
    index refuses instead. Rebuild the index (`reindex`) to change models."""

    def __init__(self, expected: str, given: str) -> None:
        super().__init__(f"this index holds vectors of {expected!r}; refusing vectors of {given!r}")
        self.expected = expected
        self.given = given


class SearchUnavailable(SearchError):
    """The index or the embedding service did not answer; the caller may retry."""
