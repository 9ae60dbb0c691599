"""Errors of the search engine. The service maps them: a model mismatch is a deployment error (500),
an unavailable index or embedder is `memory_unavailable` (503). A text the embedder refuses never
reaches the service: the engine indexes its record by words alone."""

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
    """The index or the embedding service did not answer, or not in the time the request had left
    (uhp_memories.deadlines); the caller may retry."""


class TextNotEmbeddable(SearchError):
    """The embedding model refused this text (Bedrock's ValidationException: more tokens than it
    takes, say), and will refuse it again: unlike SearchUnavailable, retrying does not help. The
    engine indexes such a record without a vector, found by its words and filters, so one text
    never stalls a stream shard or a reindex. The message carries the model's reason (counts, never
    the text)."""

    def __init__(self, reason: str, code: str = "ValidationException") -> None:
        super().__init__(reason)
        self.code = code
