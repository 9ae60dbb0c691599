"""The CachedResponses contract (domain/removal/service.py): erase purges every kept idempotent response of
its tenant that names an erased id. Run on the in-memory fake and on the Powertools idempotency table
(DynamoDB, moto), where erase finds them through the mentions index, never by a Scan."""

from __future__ import annotations

import json

from tests.contract.conftest import KeptResponses
from uhp_memories.adapters.dynamodb.idempotency import pack

ERASED = "hrec_" + "1" * 32
KEPT = "hrec_" + "2" * 32
FILE = "file_" + "3" * 32
TENANT, OTHER = "acme", "globex"


def answer(*record_ids: str, content: str = "Acme renews in März") -> str:
    return json.dumps({"statusCode": 201, "body": json.dumps({"records": [
        {"id": rid, "content": content} for rid in record_ids]})})


def test_purge_removes_every_response_naming_an_id_and_counts_them(kept: KeptResponses) -> None:
    kept.keep(TENANT, "remember#1", answer(ERASED))
    kept.keep(TENANT, "observe#2", answer(KEPT, ERASED))
    kept.keep(TENANT, "remember#3", answer(KEPT))
    kept.keep(TENANT, "upload#4", json.dumps({"statusCode": 201, "body": json.dumps({"id": FILE})}))
    assert kept.responses.purge_mentioning(TENANT, [ERASED, FILE]) == 3
    assert kept.count() == 1
    assert kept.responses.purge_mentioning(TENANT, [ERASED, FILE]) == 0  # a retried step finds nothing left


def test_purge_finds_the_ids_a_packed_answer_names(kept: KeptResponses) -> None:
    kept.keep(TENANT, "observe#1", pack(answer(ERASED, content="x" * 10_000)))
    kept.keep(TENANT, "observe#2", pack(answer(KEPT)))
    assert kept.responses.purge_mentioning(TENANT, [ERASED]) == 1
    assert kept.count() == 1


def test_an_id_named_twice_purges_a_response_once(kept: KeptResponses) -> None:
    kept.keep(TENANT, "remember#1", answer(ERASED))
    assert kept.responses.purge_mentioning(TENANT, [ERASED, ERASED]) == 1


def test_no_ids_or_blank_ids_purge_nothing(kept: KeptResponses) -> None:
    kept.keep(TENANT, "remember#1", answer(ERASED))
    assert kept.responses.purge_mentioning(TENANT, []) == 0
    assert kept.responses.purge_mentioning(TENANT, ["", ""]) == 0
    assert kept.count() == 1


def test_an_erase_never_reaches_another_tenants_answers(kept: KeptResponses) -> None:
    kept.keep(TENANT, "remember#1", answer(ERASED))
    kept.keep(OTHER, "remember#2", answer(ERASED))
    assert kept.responses.purge_mentioning(OTHER, [ERASED]) == 1
    assert kept.count() == 1
    assert kept.responses.purge_mentioning(TENANT, [ERASED]) == 1
    assert kept.count() == 0
