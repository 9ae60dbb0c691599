"""A deterministic bag-of-words embedder: each word hashed to a signed dimension, then L2-normalized.

No model and no numpy: texts that share words are close, texts that share none are orthogonal (up to
hash collisions). For tests and for local runs that need the pipeline, not the meaning."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 2:
            raise ValueError("dimensions must be >= 2")
        self._dimensions = dimensions

    @property
    def model_id(self) -> str:
        return f"uhp.hashing-bow-v1-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self._dimensions
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "big") % self._dimensions
            vector[slot] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vector))
        return [v / norm for v in vector] if norm else vector
