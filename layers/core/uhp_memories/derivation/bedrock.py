"""The Deriver port on Amazon Bedrock's Converse API, through an injected `bedrock-runtime` client.

The structured answer comes as the input of one tool the model is made to call (`toolChoice.tool`),
whose input schema is the answer's schema: Converse offers forced tool use on the models that
derive well (Anthropic Claude 3 and later, Amazon Nova), where `outputConfig.textFormat` is offered
on fewer. `strict=True` adds Bedrock's strict tool use (schema-constrained decoding) for the models
that support it; others answer 400, so it is off unless asked for. Either way the parser in
`prompts` checks the answer: nothing the model writes is believed unchecked.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from uhp_memories.derivation import prompts
from uhp_memories.domain.derivation import (
    DerivationError,
    DerivationMalformed,
    DerivationRefused,
    DerivationThrottled,
    DerivationUnavailable,
    DerivationUsage,
    Derived,
    EpisodeText,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 4_096
# Converse stop reasons that mean there is no answer to read, and what each becomes.
_STOPS_WITHOUT_ANSWER: dict[str, type[DerivationError]] = {
    "guardrail_intervened": DerivationRefused,
    "content_filtered": DerivationRefused,
    "max_tokens": DerivationMalformed,  # the tool input was cut short
    "model_context_window_exceeded": DerivationMalformed,  # too many episodes: a smaller batch may pass
    "malformed_model_output": DerivationMalformed,
    "malformed_tool_use": DerivationMalformed,
}
# botocore has already retried these (configure the client's `retries`); what is left is for the caller.
_THROTTLED_CODES = frozenset({"ThrottlingException"})
_UNAVAILABLE_CODES = frozenset(
    {
        "ServiceUnavailableException",
        "ModelTimeoutException",
        "ModelNotReadyException",
        "ModelErrorException",
        "InternalServerException",
    }
)


class ConverseClient(Protocol):
    """The part of a boto3 `bedrock-runtime` client this adapter uses."""

    def converse(self, **request: Any) -> dict[str, Any]: ...


class BedrockDeriver:
    """The Deriver port on Bedrock Converse. `client` is a boto3 `bedrock-runtime` client; `model_id`
    a model or inference profile id (e.g. "us.anthropic.claude-haiku-4-5-20251001-v1:0")."""

    def __init__(
        self,
        client: ConverseClient,
        model_id: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        strict: bool = False,
        token_hex: Callable[[int], str] = secrets.token_hex,
    ) -> None:
        if not model_id:
            raise ValueError("a Bedrock deriver needs a model id")
        self._client = client
        self._model = model_id
        self._max_tokens = max_tokens
        self._strict = strict
        self._token_hex = token_hex  # draws each request's fence nonce

    @property
    def model_id(self) -> str:
        return self._model

    def request(self, episodes: Sequence[EpisodeText]) -> dict[str, Any]:
        """The Converse request for these episodes (keyword arguments of `converse`)."""
        prompt = prompts.render(episodes, self._token_hex)
        tool_spec: dict[str, Any] = {
            "name": prompts.ANSWER_NAME,
            "description": prompts.ANSWER_DESCRIPTION,
            "inputSchema": {"json": prompts.ANSWER_SCHEMA},
        }
        if self._strict:
            tool_spec["strict"] = True
        return {
            "modelId": self._model,
            "system": [{"text": prompt.system}],
            "messages": [{"role": "user", "content": [{"text": prompt.user}]}],
            "inferenceConfig": {"maxTokens": self._max_tokens, "temperature": 0.0},
            "toolConfig": {
                "tools": [{"toolSpec": tool_spec}],
                "toolChoice": {"tool": {"name": prompts.ANSWER_NAME}},
            },
        }

    def derive(self, episodes: Sequence[EpisodeText]) -> Derived:
        request = self.request(episodes)
        response = self._converse(request)
        stop_reason = str(response.get("stopReason", ""))
        usage = _usage(response)
        try:
            facts = prompts.parse_answer(_tool_input(response, stop_reason), episodes)
        except DerivationError as error:
            error.usage = usage
            logger.warning(
                "derivation failed",
                extra={"model": self._model, "reason": error.reason, "stop_reason": stop_reason},
            )
            raise
        logger.info(
            "derivation answered",
            extra={
                "model": self._model,
                "episodes": len(episodes),
                "facts": len(facts),
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "stop_reason": stop_reason,
            },
        )
        return Derived(facts, usage, self._model, prompts.PROMPT_VERSION, stop_reason)

    def _converse(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._client.converse(**request)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code in _THROTTLED_CODES:
                failure: DerivationError = DerivationThrottled("throttled", f"Bedrock throttled: {code}")
            elif code in _UNAVAILABLE_CODES:
                failure = DerivationUnavailable("unavailable", f"Bedrock did not answer: {code}")
            else:
                raise  # access denied, unknown model, invalid request: configuration, not to be retried
            logger.warning("derivation failed", extra={"model": self._model, "error_code": code})
            raise failure from error
        # Endpoint unreachable, connect or read timed out, connection dropped mid-answer.
        except (BotocoreConnectionError, HTTPClientError) as error:
            logger.warning("derivation failed", extra={"model": self._model, "error_code": type(error).__name__})
            raise DerivationUnavailable("unavailable", f"Bedrock unreachable: {type(error).__name__}") from error


def _tool_input(response: dict[str, Any], stop_reason: str) -> object:
    """The input of the one call of the answer tool, or the error that says why there is none."""
    if stop_reason in _STOPS_WITHOUT_ANSWER:
        raise _STOPS_WITHOUT_ANSWER[stop_reason](stop_reason, f"the model stopped without an answer: {stop_reason}")
    blocks = response.get("output", {}).get("message", {}).get("content", [])
    calls = [block["toolUse"] for block in blocks if "toolUse" in block]
    answers = [call.get("input") for call in calls if call.get("name") == prompts.ANSWER_NAME]
    if len(answers) != 1 or len(calls) != 1:
        # A text-only reply (forced tool use ignored, or a refusal in words) is not an answer either.
        raise DerivationMalformed("no_answer", f"the model made {len(answers)} answer call(s) of {len(calls)}")
    return answers[0]


def _usage(response: dict[str, Any]) -> DerivationUsage:
    usage = response.get("usage", {})
    return DerivationUsage(int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0)))
