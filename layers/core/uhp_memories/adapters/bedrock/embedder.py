"""Amazon Bedrock Titan Text Embeddings v2: the embedder in AWS, through an injected
`bedrock-runtime` client (`invoke_model`). No numpy: deployed handlers import this module.

Titan v2 embeds one text per call, normalized on request, in 256, 512 or 1024 dimensions; the
dimensions are part of the vector space, so the index records them with the model id.

Input limits. Titan v2 takes at most 8,192 tokens and 50,000 characters, and answers a longer text
with a ValidationException. A record is one document with one vector in the index, so a longer text
is cut to its start (docs/decisions.md, "Long texts and slow calls"): the text signal still
searches every word of it. Titan's tokenizer is not published and nothing here may download it, so
the cut is by a bound that holds without it: UTF-8 bytes. Every tokenizer a model like Titan uses
(byte-level BPE, SentencePiece with byte fallback, WordPiece) makes each token of at least one
byte of its input, so a text of at most `MAX_INPUT_BYTES` bytes is at most that many tokens, plus
the few a tokenizer adds (start and end): 192 are left for them. A text within the bound is also
within 50,000 characters in any count (code points or UTF-16 units: each is at least one byte).
English averages 4.7 characters a token on Titan (AWS's figure), so an English text's vector is of
its first 8,000 characters where Titan could take about 38,000: the price of a bound that holds for
every script, emoji and digit string, where a character count or our WordPiece count does not
(BERT's WordPiece drops whitespace and keeps digits in pieces of several; a byte-fallback tokenizer
spends up to four tokens on one emoji). all-MiniLM-L6-v2 locally embeds the first 256 of its
tokens, a tenth of that. What the bound cannot see (a compatibility character that Unicode
normalization expands to many, say) Titan refuses: TextNotEmbeddable, and the record is indexed by
its words.

Time. Each call is bounded by the time the request has left (uhp_memories.deadlines): with a
deadline the call runs on a worker thread and the caller waits at most that long; the client's own
timeouts (`client_config`: at most two attempts) end the call itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

from uhp_memories import deadlines
from uhp_memories.domain.recall.model import SearchUnavailable, TextNotEmbeddable

logger = logging.getLogger(__name__)

TITAN_V2 = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
MAX_TOKENS = 8_192
MAX_CHARACTERS = 50_000
MAX_INPUT_BYTES = MAX_TOKENS - 192  # the bound above: at most one token a byte, 192 to spare
# Per attempt. Titan answers a text within the bound in well under a second; a connection that takes
# 2 s, or an answer that takes 10, is a model in trouble, and the second attempt (botocore's standard
# retry: throttling, 5xx, timeouts) is the only one: a request has 26 s in all (deadlines.py), and a
# reindex retries a batch itself (admin/reindex.py).
CONNECT_TIMEOUT_SECONDS = 2.0
READ_TIMEOUT_SECONDS = 10.0
ATTEMPTS = 2
_RETRYABLE = {
    "ThrottlingException",
    "ServiceUnavailableException",
    "ModelNotReadyException",
    "ModelTimeoutException",
    "InternalServerException",
}
_REFUSED = "ValidationException"
# Calls made while a request has a deadline: the request waits for its call at most the time it has
# left, and a call it gave up on ends on its thread at the client's timeouts. Eight: a request embeds
# on at most three threads at once (domain/recall/engine.py), so a few calls given up on do not queue the next.
_CALLS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="bedrock")


def client_config() -> Any:
    """The botocore configuration of the stage's `bedrock-runtime` client (bootstrap.build_recall_engine)."""
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        retries={"total_max_attempts": ATTEMPTS, "mode": "standard"},
    )


def within_input_limit(text: str) -> str:
    """The text, or its start of at most MAX_INPUT_BYTES bytes of UTF-8 (never half a character)."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= MAX_INPUT_BYTES:
        return text
    return raw[:MAX_INPUT_BYTES].decode("utf-8", "ignore")


class TitanEmbedder:
    """The Embedder port on Bedrock Titan Text Embeddings v2. `client` is a boto3 `bedrock-runtime`
    client (configured with `client_config()` by bootstrap)."""

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
        """One vector per text. Raises SearchUnavailable when Bedrock does not answer (in the time
        the request has left), TextNotEmbeddable when it refuses a text."""
        return [self._one(text) for text in texts]

    def request_body(self, text: str) -> str:
        return json.dumps(
            {"inputText": within_input_limit(text), "dimensions": self._dimensions, "normalize": True},
            separators=(",", ":"),
        )

    def _one(self, text: str) -> list[float]:
        if not text.strip():
            raise ValueError("Titan embeds non-empty text only")
        body = self.request_body(text)
        try:
            payload = self._within_deadline(body)
        except (SearchUnavailable, TextNotEmbeddable):
            raise
        except Exception as error:
            code = getattr(error, "response", {}).get("Error", {}).get("Code")
            if code == _REFUSED:
                logger.warning("bedrock refused a text", extra={"error_code": code})
                raise TextNotEmbeddable(f"Titan refused the text: {_message(error)}", code) from error
            if code in _RETRYABLE or isinstance(error, (BotoConnectionError, HTTPClientError)):
                logger.warning("bedrock unavailable", extra={"error_code": code or type(error).__name__})
                raise SearchUnavailable(f"Bedrock did not embed: {code or type(error).__name__}") from error
            raise
        vector = json.loads(payload).get("embedding")
        if not isinstance(vector, list) or len(vector) != self._dimensions:
            raise SearchUnavailable("Bedrock answered without an embedding of the expected size")
        return [float(x) for x in vector]

    def _within_deadline(self, body: str) -> bytes:
        left = deadlines.remaining()
        if left is None:
            return self._invoke(body)
        if left <= 0:
            raise SearchUnavailable("Bedrock was not asked: the request's time is spent")
        call = _CALLS.submit(self._invoke, body)
        try:
            return call.result(timeout=left)
        except TimeoutError:
            if not call.done():
                logger.warning("bedrock did not answer in the request's time", extra={"seconds": round(left, 3)})
                raise SearchUnavailable("Bedrock did not answer in the time the request had left") from None
            raise  # the call's own timeout (a builtin TimeoutError), raised on its thread

    def _invoke(self, body: str) -> bytes:
        answer = self._client.invoke_model(
            modelId=self._model, body=body, contentType="application/json", accept="application/json"
        )
        return bytes(answer["body"].read())


def _message(error: Exception) -> str:
    """Bedrock's reason for a refusal (Titan's name counts and limits, never the text), kept short."""
    message = getattr(error, "response", {}).get("Error", {}).get("Message") or ""
    return str(message)[:200]
