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
        return self._request(prompts.render(episodes, self._token_hex), prompts.DERIVE)

    def judge_request(self, pairs: Sequence[tuple[Statement, Statement]]) -> dict[str, Any]:
        """The Converse request judging these pairs."""
        return self._request(prompts.render_pairs(pairs, self._token_hex), prompts.JUDGE)

    def _request(self, prompt: prompts.Prompt, task: prompts.Task) -> dict[str, Any]:
        tool_spec: dict[str, Any] = {
            "name": task.name,
            "description": task.description,
            "inputSchema": {"json": task.schema},
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
                "toolChoice": {"tool": {"name": task.name}},
            },
        }

    def derive(self, episodes: Sequence[EpisodeText]) -> Derived:
        facts, usage, stop_reason = self._ask(
            self.request(episodes), prompts.ANSWER_NAME, lambda answer: prompts.parse_answer(answer, episodes)
        )
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

    def judge(self, pairs: Sequence[tuple[Statement, Statement]]) -> Judged:
        relations, usage, _ = self._ask(
            self.judge_request(pairs), prompts.JUDGE.name, lambda answer: prompts.parse_judgement(answer, len(pairs))
        )
        return Judged(relations, usage, self._model, prompts.JUDGE_VERSION)

    def _ask[T](
        self, request: dict[str, Any], tool: str, parse: Callable[[object], T]
    ) -> tuple[T, DerivationUsage, str]:
        """Send a request, and parse the input of its one forced tool call; a failure carries what it cost."""
        response = self._converse(request)
        stop_reason = str(response.get("stopReason", ""))
        usage = _usage(response)
        try:
            return parse(_tool_input(response, stop_reason, tool)), usage, stop_reason
        except DerivationError as error:
            error.usage = usage
            logger.warning(
                "derivation failed",
                extra={"model": self._model, "reason": error.reason, "stop_reason": stop_reason},
            )
            raise

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


def _tool_input(response: dict[str, Any], stop_reason: str, tool: str) -> object:
    """The input of the one call of the answer tool, or the error that says why there is none."""
    if stop_reason in _STOPS_WITHOUT_ANSWER:
        raise _STOPS_WITHOUT_ANSWER[stop_reason](stop_reason, f"the model stopped without an answer: {stop_reason}")
    blocks = response.get("output", {}).get("message", {}).get("content", [])
    calls = [block["toolUse"] for block in blocks if "toolUse" in block]
    answers = [call.get("input") for call in calls if call.get("name") == tool]
    if len(answers) != 1 or len(calls) != 1:
        # A text-only reply (forced tool use ignored, or a refusal in words) is not an answer either.
        raise DerivationMalformed("no_answer", f"the model made {len(answers)} answer call(s) of {len(calls)}")
    return answers[0]


def _usage(response: dict[str, Any]) -> DerivationUsage:
    usage = response.get("usage", {})
    return DerivationUsage(int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0)))
