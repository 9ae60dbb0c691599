"""The Bedrock Titan v2 embedder against botocore's Stubber: the exact requests it sends, the answers
it reads, and what it does when Bedrock says no."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from uhp_memories.adapters.bedrock.embedder import MAX_INPUT_BYTES, TITAN_V2, TitanEmbedder
from uhp_memories.domain.recall.model import SearchUnavailable


@pytest.fixture
def bedrock() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def answer(vector: list[float], tokens: int = 3) -> dict[str, Any]:
    payload = json.dumps({"embedding": vector, "inputTextTokenCount": tokens}).encode()
    return {"body": StreamingBody(io.BytesIO(payload), len(payload)), "contentType": "application/json"}


def expected_request(text: str, dimensions: int) -> dict[str, Any]:
    return {
        "modelId": TITAN_V2,
        "body": json.dumps({"inputText": text, "dimensions": dimensions, "normalize": True}, separators=(",", ":")),
        "contentType": "application/json",
        "accept": "application/json",
    }


def test_each_text_is_one_invoke_model_call_with_normalized_vectors_of_the_chosen_size(
    bedrock: tuple[Any, Stubber],
) -> None:
    client, stubber = bedrock
    first, second = [0.1] * 256, [0.2] * 256
    stubber.add_response("invoke_model", answer(first), expected_request("Acme renews in March", 256))
    stubber.add_response("invoke_model", answer(second), expected_request("When does Acme renew?", 256))
    embedder = TitanEmbedder(client, dimensions=256)
    assert embedder.model_id == "amazon.titan-embed-text-v2:0"
    assert embedder.dimensions == 256
    assert embedder.embed(["Acme renews in March", "When does Acme renew?"]) == [first, second]


def test_a_long_text_is_cut_to_what_titan_accepts(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    text = "word " * 20_000
    stubber.add_response("invoke_model", answer([0.0] * 1024), expected_request(text[:MAX_INPUT_BYTES], 1024))
    assert len(TitanEmbedder(client).embed([text])[0]) == 1024


@pytest.mark.parametrize("code", ["ThrottlingException", "ServiceUnavailableException", "ModelTimeoutException"])
def test_throttling_and_outages_are_unavailable(bedrock: tuple[Any, Stubber], code: str) -> None:
    client, stubber = bedrock
    stubber.add_client_error("invoke_model", service_error_code=code, http_status_code=429)
    with pytest.raises(SearchUnavailable):
        TitanEmbedder(client, dimensions=512).embed(["x"])


def test_a_refused_request_is_not_hidden_as_unavailable(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    stubber.add_client_error("invoke_model", service_error_code="AccessDeniedException", http_status_code=403)
    with pytest.raises(ClientError):
        TitanEmbedder(client).embed(["x"])


def test_an_answer_of_the_wrong_size_is_refused(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    stubber.add_response("invoke_model", answer([0.1] * 1024), expected_request("x", 512))
    with pytest.raises(SearchUnavailable):
        TitanEmbedder(client, dimensions=512).embed(["x"])


def test_sizes_titan_does_not_offer_and_empty_texts_are_refused_before_any_call(
    bedrock: tuple[Any, Stubber],
) -> None:
    client, _ = bedrock
    with pytest.raises(ValueError, match="dimensions"):
        TitanEmbedder(client, dimensions=384)
    with pytest.raises(ValueError, match="non-empty"):
        TitanEmbedder(client).embed(["   "])
    assert TitanEmbedder(client).embed([]) == []
