"""One exception per error code the server answers (`{"error": {"code", "message", ...}}`, spec §12 and
the server's own codes), all under `UhpError`."""

from __future__ import annotations

from typing import Any, ClassVar


class ConfigurationError(ValueError):
    """The client cannot be made as asked: no API key given and none in the environment."""


class UhpError(Exception):
    """An answer the server refused with, or no answer at all (`status` None: `UhpConnectionError`).

    `code` is the error body's `error.code` (the class's own code when the body had none, as in a
    gateway's plain answer), `message` its `error.message`, and `body` the answer as parsed (a dict for
    JSON, else the text)."""

    code_name: ClassVar[str | None] = None  # the error code this class stands for

    def __init__(self, status: int | None, code: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}" if status is not None else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body

    def detail(self, name: str) -> Any:
        """A field of the error body beside its code (a conflict's `current_record_id`, say)."""
        error = self.body.get("error") if isinstance(self.body, dict) else None
        return error.get(name) if isinstance(error, dict) else None


class UhpConnectionError(UhpError):
    """No answer: the server could not be reached, or the connection failed, after every retry."""

    code_name = "connection_error"


# 400
class InvalidRequest(UhpError):
    code_name = "invalid_request"


# 401
class Unauthenticated(UhpError):
    code_name = "unauthenticated"


# 403
class MemoryForbidden(UhpError):
    code_name = "memory_forbidden"


# 404: every "not found" shares a base, for a caller that does not care which
class NotFound(UhpError):
    code_name = "not_found"  # no such route


class MemoryNotFound(NotFound):
    code_name = "memory_not_found"


class MemoryRecordNotFound(NotFound):
    code_name = "memory_record_not_found"


class MemoryGrantNotFound(NotFound):
    code_name = "memory_grant_not_found"


class MemoryJobNotFound(NotFound):
    code_name = "memory_job_not_found"


class MemoryQueryNotFound(NotFound):
    code_name = "memory_query_not_found"


class MemoryConsolidationNotFound(NotFound):
    code_name = "memory_consolidation_not_found"


class MemoryScheduleNotFound(NotFound):
    code_name = "memory_schedule_not_found"


class MemoriesNotAttached(NotFound):
    code_name = "memories_not_attached"


class FileNotFound(NotFound):
    code_name = "file_not_found"


# 409
class MemoryConflict(UhpError):
    """A revise of a version that is no longer current; `current_record_id` names the current one."""

    code_name = "memory_conflict"

    @property
    def current_record_id(self) -> str | None:
        value = self.detail("current_record_id")
        return value if isinstance(value, str) else None


class MemoryBusy(UhpError):
    code_name = "memory_busy"


class IdempotencyKeyCommitted(UhpError):
    """A retry whose key already wrote, its answer not kept: `written_ids` says what to read back."""

    code_name = "idempotency_key_committed"

    @property
    def written_ids(self) -> list[str]:
        value = self.detail("written_ids")
        return [str(v) for v in value] if isinstance(value, list) else []


class IdempotencyInProgress(UhpError):
    code_name = "idempotency_in_progress"


# 413
class RequestTooLarge(UhpError):
    code_name = "request_too_large"


# 422
class MemoryInvalid(UhpError):
    code_name = "memory_invalid"


class IdempotencyKeyReused(UhpError):
    code_name = "idempotency_key_reused"


class MemoryUnsupported(UhpError):
    code_name = "memory_unsupported"


# 429
class RateLimited(UhpError):
    code_name = "rate_limited"


# 500
class InternalError(UhpError):
    code_name = "internal_error"


# 502, 503
class MemoryUnavailable(UhpError):
    code_name = "memory_unavailable"


ERRORS: dict[str, type[UhpError]] = {
    cls.code_name: cls
    for cls in (
        InvalidRequest, Unauthenticated, MemoryForbidden, NotFound, MemoryNotFound, MemoryRecordNotFound,
        MemoryGrantNotFound, MemoryJobNotFound, MemoryQueryNotFound, MemoryConsolidationNotFound,
        MemoryScheduleNotFound, MemoriesNotAttached, FileNotFound, MemoryConflict, MemoryBusy,
        IdempotencyKeyCommitted, IdempotencyInProgress, RequestTooLarge, MemoryInvalid, IdempotencyKeyReused,
        MemoryUnsupported, RateLimited, InternalError, MemoryUnavailable,
    )
    if cls.code_name is not None
}

# An answer without a known code (a gateway's own `{"message": ...}`, a proxy's HTML) by its status.
_BY_STATUS: dict[int, type[UhpError]] = {
    400: InvalidRequest, 401: Unauthenticated, 403: MemoryForbidden, 404: NotFound, 413: RequestTooLarge,
    422: MemoryInvalid, 429: RateLimited, 500: InternalError, 502: MemoryUnavailable, 503: MemoryUnavailable,
    504: MemoryUnavailable,
}


def error_for(status: int, body: Any) -> UhpError:
    """The exception for a refusal: chosen by the body's `error.code`, else by the status."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str):
        plain = body.get("message") if isinstance(body, dict) else body
        message = plain if isinstance(plain, str) and plain else f"HTTP {status}"
    if isinstance(code, str) and code in ERRORS:
        return ERRORS[code](status, code, message, body)
    cls = _BY_STATUS.get(status, UhpError)
    if isinstance(code, str):  # a code this client does not know yet: the class its status implies
        return cls(status, code, message, body)
    return cls(status, cls.code_name or f"http_{status}", message, body)
