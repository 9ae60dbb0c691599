"""The Bedrock deriver (adapters/bedrock/deriver.py) on a real botocore `bedrock-runtime` client with
botocore's Stubber: the Converse request it sends is checked against the service's own model, and
the answers are Converse's response shapes (a forced tool call, guardrails, stop reasons, errors)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber

from uhp_memories.adapters import prompts
from uhp_memories.adapters.bedrock.deriver import BedrockDeriver
from uhp_memories.domain.observing.model import (
    DerivationMalformed,
    DerivationRefused,
    DerivationThrottled,
    DerivationUnavailable,
    EpisodeText,
    Statement,
)

MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
EPISODES = [
    EpisodeText("hrec_" + "1" * 32, "hmem_" + "a" * 32, "Alice: Acme renews in March.", "2026-10-01T09:00:00.000Z"),
    EpisodeText("hrec_" + "2" * 32, "hmem_" + "a" * 32, "Bob: they pay by card.", "2026-10-01T09:01:00.000Z"),
]


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def response(content: list[dict[str, Any]], stop: str = "tool_use", inputs: int = 530, outputs: int = 88) -> dict:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": inputs, "outputTokens": outputs, "totalTokens": inputs + outputs},
        "metrics": {"latencyMs": 1840},
    }


def tool_call(answer: dict[str, Any], name: str = prompts.ANSWER_NAME) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": name, "input": answer}}


def fact(content: str, *sources: str) -> dict[str, Any]:
    return {"content": content, "type": "fact", "attributes": [], "sources": list(sources), "valid_from": None}


def test_the_request_forces_the_answer_tool_with_the_answer_schema(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    deriver = BedrockDeriver(client, MODEL, max_tokens=2048, token_hex=lambda n: "e" * (2 * n))
    expected = deriver.request(EPISODES)
    assert expected["modelId"] == MODEL
    assert expected["system"] == [{"text": prompts.SYSTEM_PROMPT}]
    assert expected["inferenceConfig"] == {"maxTokens": 2048, "temperature": 0.0}
    assert expected["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "record_derived_facts", "description": prompts.ANSWER_DESCRIPTION,
                                "inputSchema": {"json": prompts.ANSWER_SCHEMA}}}],
        "toolChoice": {"tool": {"name": "record_derived_facts"}},
    }
    (message,) = expected["messages"]
    assert message["role"] == "user"
    text = message["content"][0]["text"]
    assert "Fence: eeeeeeeeeeeeeeee." in text
    for episode in EPISODES:
        assert f"record_id={episode.record_id}" in text
        assert f"[[record-content eeeeeeeeeeeeeeee]]\n{episode.content}\n[[/record-content eeeeeeeeeeeeeeee]]" in text
    # The Stubber checks the parameters against bedrock-runtime's service model, then that they are these.
    stubber.add_response("converse", response([tool_call({"facts": []})]), expected)
    derived = deriver.derive(EPISODES)
    assert derived.facts == []
    assert derived.stop_reason == "tool_use"


def test_strict_tool_use_is_asked_for_only_when_configured(stubbed: tuple[Any, Stubber]) -> None:
    client, _ = stubbed
    assert "strict" not in BedrockDeriver(client, MODEL).request(EPISODES)["toolConfig"]["tools"][0]["toolSpec"]
    assert BedrockDeriver(client, MODEL, strict=True).request(EPISODES)["toolConfig"]["tools"][0]["toolSpec"]["strict"]


def test_a_tool_call_becomes_facts_with_usage(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    one, two = (e.record_id for e in EPISODES)
    thinking = {"text": "I'll record the renewal and the payment."}
    answer = {"facts": [fact("Acme renews in March.", one), fact("Acme pays by card.", two)]}
    stubber.add_response(
        "converse",
        response([thinking, tool_call(answer)]),
        {"modelId": MODEL, "system": ANY, "messages": ANY, "inferenceConfig": ANY, "toolConfig": ANY},
    )
    derived = BedrockDeriver(client, MODEL).derive(EPISODES)
    assert [(f.content, f.sources) for f in derived.facts] == [("Acme renews in March.", (one,)),
                                                               ("Acme pays by card.", (two,))]
    assert (derived.usage.input_tokens, derived.usage.output_tokens, derived.model) == (530, 88, MODEL)


@pytest.mark.parametrize(
    ("content", "stop", "error", "reason"),
    [
        ([{"text": "I can't help with that."}], "guardrail_intervened", DerivationRefused, "guardrail_intervened"),
        ([], "content_filtered", DerivationRefused, "content_filtered"),
        ([tool_call({"facts": [fact("Acme", "hrec_" + "1" * 32)]})], "max_tokens", DerivationMalformed, "max_tokens"),
        ([{"text": "Here are the facts: Acme renews in March."}], "end_turn", DerivationMalformed, "no_answer"),
        ([tool_call({"facts": []}, name="other_tool")], "tool_use", DerivationMalformed, "no_answer"),
        ([tool_call({"facts": [{"content": "x"}]})], "tool_use", DerivationMalformed, "schema"),
        ([tool_call({"facts": [fact("Made up.", "hrec_" + "9" * 32)]})], "tool_use", DerivationMalformed,
         "unknown_source"),
    ],
)
def test_no_usable_answer_fails_with_the_reason_and_keeps_the_cost(
    stubbed: tuple[Any, Stubber], content: list, stop: str, error: type, reason: str
) -> None:
    client, stubber = stubbed
    stubber.add_response("converse", response(content, stop))
    with pytest.raises(error) as failed:
        BedrockDeriver(client, MODEL).derive(EPISODES)
    assert failed.value.reason == reason
    assert failed.value.usage is not None
    assert failed.value.usage.input_tokens == 530


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ThrottlingException", 429, DerivationThrottled),
        ("ServiceUnavailableException", 503, DerivationUnavailable),
        ("ModelTimeoutException", 408, DerivationUnavailable),
        ("ModelNotReadyException", 429, DerivationUnavailable),
        ("InternalServerException", 500, DerivationUnavailable),
    ],
)
def test_throttling_and_outages_are_worth_retrying(
    stubbed: tuple[Any, Stubber], code: str, status: int, error: type
) -> None:
    client, stubber = stubbed
    stubber.add_client_error("converse", service_error_code=code, http_status_code=status)
    with pytest.raises(error) as failed:
        BedrockDeriver(client, MODEL).derive(EPISODES)
    assert failed.value.retryable


@pytest.mark.parametrize("code", ["AccessDeniedException", "ValidationException", "ResourceNotFoundException"])
def test_configuration_errors_are_not_disguised_as_retryable(stubbed: tuple[Any, Stubber], code: str) -> None:
    client, stubber = stubbed
    stubber.add_client_error("converse", service_error_code=code, http_status_code=400)
    with pytest.raises(ClientError):
        BedrockDeriver(client, MODEL).derive(EPISODES)


def test_a_deriver_needs_a_model_id(stubbed: tuple[Any, Stubber]) -> None:
    with pytest.raises(ValueError, match="model id"):
        BedrockDeriver(stubbed[0], "")


def test_a_judgement_forces_the_judgement_tool_and_reads_its_verdicts(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    pairs = [(Statement("hrec_" + "1" * 32, "Acme renews in March.", "2026-09-01T00:00:00.000Z"),
              Statement("hrec_" + "2" * 32, "Acme renews in April.", "2026-10-01T00:00:00.000Z"))]
    deriver = BedrockDeriver(client, MODEL, token_hex=lambda n: "e" * (2 * n))  # the same fence each request
    request = deriver.judge_request(pairs)
    assert request["toolConfig"]["toolChoice"] == {"tool": {"name": "record_judgements"}}
    assert request["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": prompts.JUDGE_SCHEMA}
    assert request["system"] == [{"text": prompts.JUDGE_SYSTEM_PROMPT}]
    verdicts = {"verdicts": [{"pair": 1, "relation": "updates"}]}
    stubber.add_response("converse", response([tool_call(verdicts, name="record_judgements")]), request)
    judged = deriver.judge(pairs)
    assert (judged.relations, judged.prompt_version, judged.usage.output_tokens) == (["updates"], "judge-v1", 88)
