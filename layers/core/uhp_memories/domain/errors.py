"""Domain errors. Each carries the protocol's error code and a message, never an HTTP status: the API layer
maps each code to its status, in one table (uhp_memories.api.errors.HTTP_STATUS)."""

from __future__ import annotations


class DomainError(Exception):
    code = "internal_error"
    # Where §12 gives one code more than one status (memory_unavailable: 502 when the provider did not
    # answer, 503 when it is not connected), the cause that tells them apart: the API's one table keys
    # on "code:cause" before the code alone. None: the code says it all.
    cause: str | None = None

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRequest(DomainError):
    """The request could not be read at all (malformed JSON, wrong content)."""

    code = "invalid_request"


class RequestTooLarge(DomainError):
    """A request larger than the server reads (as API Gateway answers past its own limit)."""

    code = "request_too_large"


class Unauthenticated(DomainError):
    code = "unauthenticated"


class MemoryNotFound(DomainError):
    """No such memory, or one the caller may not see: the two are never told apart."""

    code = "memory_not_found"

    def __init__(self, memory_id: str | None = None) -> None:
        super().__init__(f"memory {memory_id} not found" if memory_id else "memory not found")


class MemoryForbidden(DomainError):
    code = "memory_forbidden"

    def __init__(self, privilege: str, message: str | None = None) -> None:
        super().__init__(message or f"this operation needs the '{privilege}' privilege on the memory")


class MemoriesNotAttached(DomainError):
    """A harness with nothing attached: it has no memory to start from, and none to write to."""

    code = "memories_not_attached"

    def __init__(self, harness_id: str, message: str | None = None) -> None:
        super().__init__(message or f"harness {harness_id} has no memories attached")


class RecordNotFound(DomainError):
    code = "memory_record_not_found"

    def __init__(self, record_id: str) -> None:
        super().__init__(f"record {record_id} not found in this memory")


class GrantNotFound(DomainError):
    code = "memory_grant_not_found"

    def __init__(self, grant_id: str) -> None:
        super().__init__(f"grant {grant_id} not found on this memory")


class MemoryInvalid(DomainError):
    code = "memory_invalid"


class MemoryUnsupported(DomainError):
    code = "memory_unsupported"


class MemoryConflict(DomainError):
    """A write based on a stale version, or a name already taken."""

    code = "memory_conflict"


class MemoryBusy(DomainError):
    """§12: a move or a delete while a run (a consolidation, an erase) holds the memory or one below it:
    purging or moving a child under a running pass would pull its records away mid-run."""

    code = "memory_busy"

    @classmethod
    def under(cls, memory_id: str) -> MemoryBusy:
        """Naming only the memory the caller acted on, never the one below it that a run holds."""
        return cls(f"a run holds memory {memory_id} or a memory below it; try again when it has finished")


class WriteContended(DomainError):
    """Writes to one memory's files kept colliding on its change journal; sending again is safe."""

    code = "memory_unavailable"


class StaleVersion(Exception):
    """Raised by a repository when a conditional write finds the record no longer current."""


class AlreadyExists(Exception):
    """Raised by a repository when a conditional put finds the item already there."""


class SourceGone(Exception):
    """Raised by a repository when a derived record's source (an episode it was derived from) is no
    longer there: erased while the derivation ran, so what was derived from it must not be written."""


class TreeChanged(Exception):
    """Raised by a repository when a node or an ancestor moved under a concurrent write."""
