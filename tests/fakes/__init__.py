"""In-memory fakes of every port, for unit and property tests (never deployed: the Lambda layer holds
none). Each repository fake honours its DynamoDB adapter's contract, failures included; the suites in
tests/contract run both against the same tests.

The fakes over one tree share its lock and its partitions: build them on one InMemoryMemoryRepository,
as the DynamoDB adapters share one table."""

from tests.fakes.consolidation import InMemoryRunRepository, ScanningNeighbours
from tests.fakes.files import InMemoryFileRepository, InMemoryObjectStore
from tests.fakes.harnesses import InMemoryAttachmentRepository
from tests.fakes.jobs import ExecutionAlreadyExists, InMemoryJobRepository, InMemoryWorkflowRunner
from tests.fakes.keys import InMemoryKeyRepository
from tests.fakes.paths import InMemoryPathRepository
from tests.fakes.prime import InMemoryPinRepository, InMemoryPlacementRepository
from tests.fakes.queries import InMemoryFreeQueryIndex, InMemoryQueryRepository
from tests.fakes.removal import InMemoryCachedResponses
from tests.fakes.schedules import InMemoryScheduleRepository, InMemoryTimer
from tests.fakes.tree import InMemoryMemoryRepository, InMemoryRecordRepository
from tests.fakes.types import InMemoryTypeRepository

__all__ = [
    "ExecutionAlreadyExists",
    "InMemoryAttachmentRepository",
    "InMemoryCachedResponses",
    "InMemoryFileRepository",
    "InMemoryFreeQueryIndex",
    "InMemoryJobRepository",
    "InMemoryKeyRepository",
    "InMemoryMemoryRepository",
    "InMemoryObjectStore",
    "InMemoryPathRepository",
    "InMemoryPinRepository",
    "InMemoryPlacementRepository",
    "InMemoryQueryRepository",
    "InMemoryRecordRepository",
    "InMemoryRunRepository",
    "InMemoryScheduleRepository",
    "InMemoryTimer",
    "InMemoryTypeRepository",
    "InMemoryWorkflowRunner",
    "ScanningNeighbours",
]
