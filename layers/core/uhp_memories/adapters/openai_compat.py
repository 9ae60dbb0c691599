"""The Deriver port on any OpenAI-compatible chat endpoint (llama.cpp's server, vLLM, Ollama, OpenAI).

One POST to {base}/v1/chat/completions with `response_format` `json_schema` in strict mode, so a
server that constrains decoding to the schema does; the parser in `prompts` checks the answer either
way. Only the standard library: a deployed Lambda gains no dependency for a deriver it may not use.

The API key, when there is one, goes in the Authorization header and nowhere else (never a log, an
error or a URL).
"""

from __future__ import annotations

import http.client
import json
import logging
import secrets
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from uhp_memories.adapters import prompts
from uhp_memories.domain.observing.model import (
    DerivationError,
    DerivationMalformed,
    DerivationRefused,
    DerivationThrottled,
    DerivationUnavailable,
    DerivationUsage,
    Derived,
    EpisodeText,
    Judged,
    Statement,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 4_096
DEFAULT_TIMEOUT_S = 120.0  # a local model on a CPU can take a minute over a batch of episodes
# An answer of at most MAX_FACTS records fits well within this; more is an endpoint gone wrong.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
CHAT_COMPLETIONS = "/v1/chat/completions"


def chat_completions_url(base_url: str) -> str:
    """{base}/v1/chat/completions, for a base given with or without its /v1 (both are common)."""
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError("an OpenAI-compatible endpoint is an http:// or https:// base URL")
    if parsed.username or parsed.password:
        raise ValueError("give the API key as api_key, not in the base URL")
    root = base_url.rstrip("/").removesuffix("/v1")
    return root + CHAT_COMPLETIONS


def endpoint_answers(base_url: str, timeout_s: float = 2.0) -> str | None:
    """None when something answers HTTP at the endpoint (any status: a wrong path or key is still an
    endpoint that is there), else why not, in a few words (refused, timed out...). A start-up check: one
    GET of {base}/v1/models, which OpenAI-compatible servers serve, sending no key and no content."""
    url = chat_completions_url(base_url).removesuffix(CHAT_COMPLETIONS) + "/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):  # noqa: S310 (http or https, checked above)
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        return str(reason) or type(error).__name__


class OpenAICompatDeriver:
    """The Deriver port on an OpenAI-compatible chat endpoint at `base_url` (e.g. http://127.0.0.1:8080
    for llama.cpp, http://localhost:11434 for Ollama), serving `model`.

    `opener` is the urllib opener requests go through: the default honours the proxy environment
    variables, as urllib does."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        opener: urllib.request.OpenerDirector | None = None,
        token_hex: Callable[[int], str] = secrets.token_hex,
    ) -> None:
        if not model:
            raise ValueError("an OpenAI-compatible deriver needs a model name")
        self._url = chat_completions_url(base_url)
        self._model = model
        self._api_key = api_key
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._opener = opener or urllib.request.build_opener()
        self._token_hex = token_hex  # draws each request's fence nonce

    @property
    def model_id(self) -> str:
        return self._model

    def request_body(self, episodes: Sequence[EpisodeText]) -> dict[str, Any]:
        """The chat completion request for these episodes."""
        return self._body(prompts.render(episodes, self._token_hex), prompts.DERIVE)

    def judge_body(self, pairs: Sequence[tuple[Statement, Statement]]) -> dict[str, Any]:
        """The chat completion request judging these pairs."""
        return self._body(prompts.render_pairs(pairs, self._token_hex), prompts.JUDGE)

    def _body(self, prompt: prompts.Prompt, task: prompts.Task) -> dict[str, Any]:
        return {
            "model": self._model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": task.name,
                    "description": task.description,
                    "schema": task.schema,
                    "strict": True,
                },
            },
            "temperature": 0,
            # max_tokens, not max_completion_tokens: llama.cpp, vLLM and Ollama all read this one.
            "max_tokens": self._max_tokens,
            "stream": False,
        }

    def derive(self, episodes: Sequence[EpisodeText]) -> Derived:
        facts, usage, finish_reason = self._ask(
            self.request_body(episodes), lambda text: prompts.parse_answer_text(text, episodes)
        )
        logger.info(
            "derivation answered",
            extra={
                "model": self._model,
                "episodes": len(episodes),
                "facts": len(facts),
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "stop_reason": finish_reason,
            },
        )
        return Derived(facts, usage, self._model, prompts.PROMPT_VERSION, finish_reason)

    def judge(self, pairs: Sequence[tuple[Statement, Statement]]) -> Judged:
        relations, usage, _ = self._ask(
            self.judge_body(pairs), lambda text: prompts.parse_judgement_text(text, len(pairs))
        )
        return Judged(relations, usage, self._model, prompts.JUDGE_VERSION)

    def _ask[T](self, body: dict[str, Any], parse: Callable[[str], T]) -> tuple[T, DerivationUsage, str]:
        """Post a request and parse the JSON answer of its first choice; a failure carries what it cost."""
        completion = self._post(body)
        usage, finish_reason = _usage(completion), ""
        try:
            choice = _choice(completion)
            finish_reason = str(choice.get("finish_reason") or "")
            return parse(_answer_text(choice, finish_reason)), usage, finish_reason
        except DerivationError as error:
            error.usage = usage
            logger.warning(
                "derivation failed",
                extra={"model": self._model, "reason": error.reason, "stop_reason": finish_reason},
            )
            raise

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(  # noqa: S310 (the scheme is checked to be http or https)
            self._url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                raw = response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as error:
            failure = self._http_failure(error)
            if failure is None:
                raise  # 400, 401, 404...: a wrong key, model or request, which sending again will not mend
            raise failure from error
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            # Refused, reset, timed out, or a reply that was not HTTP: the endpoint is not there now.
            logger.warning("derivation failed: the endpoint did not answer",
                           extra={"model": self._model, "reason": "unavailable", "error_code": type(error).__name__})
            raise DerivationUnavailable(
                "unavailable", f"the endpoint did not answer: {type(error).__name__}"
            ) from error
        if len(raw) > MAX_RESPONSE_BYTES:
            raise DerivationMalformed("bad_response", f"the endpoint answered over {MAX_RESPONSE_BYTES} bytes")
        try:
            completion = json.loads(raw)
        except ValueError:
            raise DerivationMalformed("bad_response", "the endpoint answered with something other than JSON") from None
        if not isinstance(completion, dict):
            raise DerivationMalformed("bad_response", "the endpoint answered with something other than a completion")
        return completion

    def _http_failure(self, error: urllib.error.HTTPError) -> DerivationError | None:
        """What an HTTP error status becomes, None for one that is not the endpoint's passing state.
        The response body is not read: it may echo the request, and so the episodes."""
        logger.warning("derivation failed", extra={"model": self._model, "error_code": f"http_{error.code}"})
        if error.code == 429:
            return DerivationThrottled(
                "throttled", "the endpoint is rate limiting (429)", retry_after_s=_seconds(error.headers)
            )
        if error.code >= 500:
            return DerivationUnavailable("unavailable", f"the endpoint failed ({error.code})")
        return None


def _choice(completion: dict[str, Any]) -> dict[str, Any]:
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise DerivationMalformed("bad_response", "the completion holds no choice")
    return choices[0]


def _answer_text(choice: dict[str, Any], finish_reason: str) -> str:
    """The model's JSON answer, or the error that says why there is none."""
    message = choice.get("message")
    if not isinstance(message, dict):
        raise DerivationMalformed("bad_response", "the choice holds no message")
    if message.get("refusal"):
        raise DerivationRefused("refused", "the model declined to answer")
    if finish_reason == "content_filter":
        raise DerivationRefused("content_filtered", "a content filter stopped the answer")
    if finish_reason == "length":
        raise DerivationMalformed("max_tokens", "the answer was cut short at max_tokens")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise DerivationMalformed("no_answer", "the message holds no answer")
    return content


def _usage(completion: dict[str, Any]) -> DerivationUsage:
    usage = completion.get("usage")
    if not isinstance(usage, dict):
        return DerivationUsage(0, 0)  # some servers leave it out; nothing was counted, none is made up
    return DerivationUsage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _seconds(headers: Any) -> float | None:
    """Retry-After in seconds, when the endpoint gave it as a number (an HTTP date is not worth parsing)."""
    value = headers.get("Retry-After") if headers is not None else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < float("inf") else None
