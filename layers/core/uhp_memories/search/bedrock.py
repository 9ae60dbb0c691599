"""Amazon Bedrock Titan Text Embeddings v2: the embedder in AWS, through an injected
`bedrock-runtime` client (`invoke_model`). No numpy: deployed handlers import this module.

Titan v2 embeds one text per call, normalized on request, in 256, 512 or 1024 dimensions; the
dimensions are part of the vector space, so the index records them with the model id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from uhp_memories.search.errors import SearchUnavailable

logger = logging.getLogger(__name__)

TITAN_V2 = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
# Titan v2 takes at most 8,192 tokens or 50,000 characters; a longer text is cut to its start.
MAX_CHARACTERS = 50_000
_RETRYABLE = {
    "ThrottlingException",
    "ServiceUnavailableException",
    "ModelNotReadyException",
    "ModelTimeoutException",
    "InternalServerException",
}


class TitanEmbedder:
    """The Embedder port on Bedrock Titan Text Embeddings v2. `client` is a boto3 `bedrock-runtime`
    client (configure its retries there, e.g. `Config(retries={"mode": "adaptive"})`)."""

    def __init__(self, client: Any, *, dimensions: int = 1024, model_id: str = TITAN_V2) -> None:
        if dimensions not in TITAN_V2_DIMENSIONS:
            raise ValueError(f"Titan v2 embeds in {TITAN_V2_DIMENSIONS} dimensions, not {dimensions}")
        self._client = client
        self._dimensions = dimensions
        self._model = model_id

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def request_body(self, text: str) -> str:
        return json.dumps(
            {"inputText": text[:MAX_CHARACTERS], "dimensions": self._dimensions, "normalize": True},
            separators=(",", ":"),
        )

    def _one(self, text: str) -> list[float]:
        if not text.strip():
            raise ValueError("Titan embeds non-empty text only")
        try:
            answer = self._client.invoke_model(
                modelId=self._model,
                body=self.request_body(text),
                contentType="application/json",
                accept="application/json",
            )
        except Exception as error:
            code = getattr(error, "response", {}).get("Error", {}).get("Code")
            if code in _RETRYABLE or type(error).__name__ in ("EndpointConnectionError", "ReadTimeoutError"):
                logger.warning("bedrock unavailable", extra={"error_code": code or type(error).__name__})
                raise SearchUnavailable(f"Bedrock did not embed: {code or type(error).__name__}") from error
            raise
        payload = json.loads(answer["body"].read())
        vector = payload.get("embedding")
        if not isinstance(vector, list) or len(vector) != self._dimensions:
            raise SearchUnavailable("Bedrock answered without an embedding of the expected size")
        return [float(x) for x in vector]
