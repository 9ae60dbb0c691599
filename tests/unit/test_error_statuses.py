"""Domain errors carry a code and a message; the API layer's one table (api/errors.HTTP_STATUS) gives
each code its HTTP status (§12). Every error the domain can raise has its status there, and the
answers are the ones the API has always given."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest

import uhp_memories.domain
from uhp_memories.api.errors import HTTP_STATUS, domain_error_response, status_of
from uhp_memories.domain.errors import DomainError, MemoryConflict

# The status each error answered with when the errors carried it themselves.
ANSWERED = {
    "InvalidRequest": 400,
    "Unauthenticated": 401,
    "MemoryForbidden": 403,
    "HiddenDefault": 403,
    "MemoryNotFound": 404,
    "RecordNotFound": 404,
    "GrantNotFound": 404,
    "JobNotFound": 404,
    "QueryNotFound": 404,
    "RunNotFound": 404,
    "ScheduleNotFound": 404,
    "FileNotFound": 404,
    "MemoriesNotAttached": 404,
    "MemoryConflict": 409,
    "PathConflict": 409,  # a file write refused (docs/file-memory.md)
    "MemoryBusy": 409,
    "MemoryInvalid": 422,
    "MemoryUnsupported": 422,
    "MemoryUnavailable": 503,
    "WriteContended": 503,  # writes to one memory's files kept colliding (docs/file-memory.md)
    "QueryNotEmbedded": 503,
    "ProviderNotAnswering": 502,  # §12: the memory's provider did not answer, or answered an error (issue 36)
    "ProviderNotConnected": 503,  # §12: the memory's provider is not connected
    "RequestTooLarge": 413,  # a body past what a Lambda invocation carries (api/json_limits.py)
    "WriteTooLarge": 413,  # a write past DynamoDB's item or transaction sizes (adapters/dynamodb/table.py)
    "WriteKeyTaken": 409,  # a retry whose Idempotency-Key already wrote (adapters/dynamodb/idempotency.py)
}


def every_domain_error() -> list[type[DomainError]]:
    for module in pkgutil.iter_modules(uhp_memories.domain.__path__):
        importlib.import_module(f"uhp_memories.domain.{module.name}")
    found, frontier = [], [DomainError]
    while frontier:
        subclasses = [sub for cls in frontier for sub in cls.__subclasses__()]
        found.extend(subclasses)
        frontier = subclasses
    return found


@pytest.mark.parametrize("error", every_domain_error(), ids=lambda cls: cls.__name__)
def test_each_domain_error_has_a_code_the_api_table_gives_its_old_status(error: type[DomainError]) -> None:
    assert not hasattr(error, "status"), "an HTTP status belongs to the API layer"
    assert status_of(error.code, error.cause) == ANSWERED[error.__name__]
    assert error.code in HTTP_STATUS


def test_a_conflict_answers_409_with_the_current_record_id() -> None:
    answer = domain_error_response(MemoryConflict("record hrec_1 was superseded", current_record_id="hrec_2"))
    assert answer.status_code == 409
    assert json.loads(str(answer.body)) == {
        "error": {"code": "memory_conflict", "message": "record hrec_1 was superseded", "current_record_id": "hrec_2"}
    }


def test_an_unknown_code_is_a_server_failure() -> None:
    class Strange(DomainError):
        code = "strange"

    assert domain_error_response(Strange("odd")).status_code == 500
