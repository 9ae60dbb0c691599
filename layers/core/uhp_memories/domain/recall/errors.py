"""Errors of the search engine. The service maps them: a model mismatch is a deployment error (500),
an unavailable index or embedder is `memory_unavailable` (503). A text the embedder refuses never
reaches the service: the engine indexes its record by words alone."""

from __future__ import annotations








