"""The composition root: builds the services once per process from settings and injected clients.

A deployed Lambda builds its container on first use from the environment; local mode and tests
install their own (over moto) with `install`, so no state hides in import-time singletons.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from uhp_memories.adapters.dynamodb.apikeys import DynamoKeyRepository
from uhp_memories.adapters.dynamodb.files import DynamoFileRepository
from uhp_memories.adapters.dynamodb.harnesses import DynamoAttachmentRepository
from uhp_memories.adapters.dynamodb.idempotency import DynamoCachedResponses, pending_tag
from uhp_memories.adapters.dynamodb.jobs import DynamoJobRepository
from uhp_memories.adapters.dynamodb.paths import DynamoPathRepository
from uhp_memories.adapters.dynamodb.prime import DynamoPinRepository, DynamoPlacementRepository
from uhp_memories.adapters.dynamodb.queries import DynamoQueryRepository
from uhp_memories.adapters.dynamodb.records import DynamoRecordRepository
from uhp_memories.adapters.dynamodb.runs import DynamoRunRepository
from uhp_memories.adapters.dynamodb.schedules import DynamoScheduleRepository
from uhp_memories.adapters.dynamodb.table import DynamoTable
from uhp_memories.adapters.dynamodb.types import DynamoTypeRepository
from uhp_memories.adapters.s3 import S3ObjectStore
from uhp_memories.adapters.scheduler import EventBridgeTimer
from uhp_memories.adapters.stepfunctions import StepFunctionsRunner
from uhp_memories.adapters.system import MeasuredCheckTiming, RandomIds, SystemClock, ThreadOverlap
from uhp_memories.domain.access.grants import GrantService
from uhp_memories.domain.agents.harnesses import HarnessService
from uhp_memories.domain.agents.prime import PrimeService
from uhp_memories.domain.agents.turns import TurnService
from uhp_memories.domain.consolidation.schedules import ScheduleService
from uhp_memories.domain.consolidation.service import ConsolidationService
from uhp_memories.domain.files.service import FileService
from uhp_memories.domain.files.tree import TreeService
from uhp_memories.domain.memories.service import MemoryService
from uhp_memories.domain.observing.ports import Deriver
from uhp_memories.domain.observing.service import ObserveService
from uhp_memories.domain.ports import Ports
from uhp_memories.domain.providers.ports import ProviderNotConnected, Providers, RecordProvider
from uhp_memories.domain.queries.service import QueryService
from uhp_memories.domain.recall.abstain import AbstainPolicy
from uhp_memories.domain.recall.engine import RecallEngine, text_of
from uhp_memories.domain.recall.neighbours import IndexNeighbours
from uhp_memories.domain.recall.service import RecallService
from uhp_memories.domain.records.service import RecordService
from uhp_memories.domain.removal.model import Retention
from uhp_memories.domain.removal.service import RemovalService
from uhp_memories.domain.types.builtin import BUILTIN_TYPES
from uhp_memories.domain.types.operations import OperationService
from uhp_memories.domain.types.service import TypeService
from uhp_memories.phases import (
    AccessTimedLists,
    AccessTimedMemories,
    EmbedTimedEmbedder,
    ReadBackTimedRecords,
    search_timed,
)
from uhp_memories.settings import Settings
from uhp_memories.tokens import count_tokens

if TYPE_CHECKING:
    from uhp_memories.domain.recall.ports import Embedder

logger = logging.getLogger(__name__)


@dataclass
class Container:
    settings: Settings
    dynamodb: Any
    ports: Ports
    memories: MemoryService
    grants: GrantService
    records: RecordService
    harnesses: HarnessService
    files: FileService
    tree: TreeService
    removal: RemovalService
    recall: RecallService
    queries: QueryService
    consolidation: ConsolidationService
    schedules: ScheduleService
    observing: ObserveService
    recall_engine: Callable[[], RecallEngine | None]
    keys: DynamoKeyRepository
    prime: PrimeService
    turns: TurnService
    types: TypeService
    operations: OperationService


def lazy[T](factory: Callable[[], T]) -> Callable[[], T]:
    """Build on first use, once, even under concurrent requests: a function that never recalls never
    pays for the search client or the embedding model."""
    lock = threading.Lock()
    built: list[T] = []

    def get() -> T:
        if not built:
            with lock:
                if not built:
                    built.append(factory())
        return built[0]

    return get


# The model's thread (recall embeds its query while the request thread checks access) needs the GIL
# back after each native call; at CPython's default 5 ms interval it waits that long for the request
# thread to hand it over, and the overlap gains nothing (measured: docs/benchmarks.md,
# "What changed in the product, and why it generalises", 4). 1 ms makes the handover prompt. A
# process-wide setting, made here, where a process (a Lambda function that recalls, the local server,
# a reindex) builds its engine: the process is ours.
GIL_SWITCH_INTERVAL_S = 0.001


def _hand_the_gil_over_promptly() -> None:
    if sys.getswitchinterval() > GIL_SWITCH_INTERVAL_S:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def build_recall_engine(
    settings: Settings,
    *,
    local: bool = False,
    session: Any | None = None,
    search_client: Any | None = None,
    embedder: Embedder | None = None,
    bulk_load: bool = False,
    index_path: str = ":memory:",
) -> RecallEngine | None:
    """The recall engine of a stage: its search index and the embedder that fills it, put together
    here only, for the Lambda functions (`container`), local mode (uhp_memories.local.moto_env) and
    `uhp-memories reindex` (uhp_memories.admin.reindex) alike.

    In AWS: the stage's OpenSearch index (`settings.search_*`) with Bedrock Titan
    (`settings.embedding_*`); None when the stage has no search domain. `session` is the boto3
    session whose credentials reach them (None: the default chain, as a function has);
    `search_client` and `embedder` are used as given instead (tests, stand-ins). `bulk_load` leaves
    each write to the index's refresh interval instead of waiting for it (a rebuild: nothing reads
    its own write). With `local`: the embedded engine (sqlite3 FTS5 + numpy, in memory) with
    all-MiniLM-L6-v2 on onnxruntime: real search and a real embedding model, nothing to download;
    `index_path` is its file (a persistent local server's data dir) or ":memory:"; or, with
    `settings.search_endpoint` (`uhp-memories serve --search-url`), the OpenSearch index there, as a
    deployed stage has it, filled by the same local model.
    Every adapter module is imported here, when a process first needs the engine: a function that
    never recalls never loads them."""
    if local:
        # Local mode's own parts live in uhp_memories.local, which the core layer ships without: this
        # branch is never taken in Lambda.
        from uhp_memories.local.embedded import EmbeddedSearchIndex
        from uhp_memories.local.minilm import MiniLmEmbedder

        embedder = embedder or EmbedTimedEmbedder(MiniLmEmbedder())
        if not settings.search_endpoint:
            index: Any = EmbeddedSearchIndex(index_path, model_id=embedder.model_id, dimensions=embedder.dimensions)
            _hand_the_gil_over_promptly()
            return RecallEngine(index, embedder)
    if search_client is None and not settings.search_endpoint:
        return None
    from uhp_memories.adapters.opensearch import OpenSearchIndex, connect

    if local and search_client is None:  # `uhp-memories serve --search-url`: a cluster reached unsigned
        search_client = connect(settings.search_endpoint)

    if embedder is None:
        import boto3

        from uhp_memories.adapters.bedrock.embedder import TitanEmbedder, client_config

        embedder = EmbedTimedEmbedder(TitanEmbedder(
            # Bounded: two attempts of at most 2 + 10 s; inside a request, the time it has left too.
            (session or boto3).client("bedrock-runtime", region_name=settings.region, config=client_config()),
            dimensions=settings.embedding_dimensions,
            model_id=settings.embedding_model_id,
        ))
    if search_client is None:
        credentials = session.get_credentials() if session is not None else None
        search_client = connect(settings.search_endpoint, region=settings.region, credentials=credentials)
    index = OpenSearchIndex(
        search_client,
        settings.search_index,
        model_id=embedder.model_id,
        dimensions=embedder.dimensions,
        shards=settings.search_shards,
        replicas=settings.search_replicas,
        refresh=False if bulk_load else "wait_for",
    )
    _hand_the_gil_over_promptly()
    return RecallEngine(index, embedder)


FREE_QUERY_LANGUAGES = ("opensearch-dsl",)


def free_query_guide(language: str) -> str:
    """The language and the schema a free-query language of this deployment queries, as the memory_query
    tool describes them to an agent (§6.5), from the adapter that checks its statements."""
    from uhp_memories.adapters.opensearch import free_query

    return free_query.guide() if language == free_query.LANGUAGE else f"Language {language}."


def free_query_index(engine: RecallEngine | None) -> Any:
    """Free queries on the engine's index when it can confine a caller's statement (OpenSearch)."""
    from uhp_memories.adapters.opensearch import OpenSearchIndex
    from uhp_memories.adapters.opensearch.free_query import FreeQueries

    index = engine.index if engine is not None else None
    return FreeQueries(index.client, index.index_name) if isinstance(index, OpenSearchIndex) else None


def build_deriver(settings: Settings, *, session: Any | None = None, client: Any | None = None) -> Deriver | None:
    """The stage's deriver (settings.derivation), None when it derives nothing. Built here only, on
    first use: the adapter modules, and a Bedrock or Secrets Manager client, load only in a process that
    derives. `client` is the Bedrock runtime client to use as given (tests, stand-ins)."""
    if settings.derivation == "none":
        return None
    if settings.derivation == "bedrock":
        from uhp_memories.adapters.bedrock.deriver import BedrockDeriver

        if client is None:
            import boto3

            client = (session or boto3).client("bedrock-runtime", region_name=settings.region)
        return BedrockDeriver(client, settings.derivation_model, max_tokens=settings.derivation_max_tokens)
    from uhp_memories.adapters.openai_compat import OpenAICompatDeriver

    api_key = settings.derivation_api_key
    if not api_key and settings.derivation_api_key_secret:
        import boto3

        secrets = (session or boto3).client("secretsmanager", region_name=settings.region)
        api_key = secrets.get_secret_value(SecretId=settings.derivation_api_key_secret)["SecretString"]
    return OpenAICompatDeriver(
        settings.derivation_base_url,
        settings.derivation_model,
        api_key=api_key or None,
        max_tokens=settings.derivation_max_tokens,
    )


class LazyProvider:
    """A connected provider, built on first use: its library (mem0 and its stores, slow to import: measured in
    docs/performance.md, "Figures behind design choices in the code") loads, and its credential is read, only in a
    process that reaches a memory bound to it. What it is (its capability document, whether it runs outside the
    server) is answered by `described`, the same provider as configured but never connected: listing the providers
    or attaching a memory to a harness needs neither the library nor the credential (a deployed function that only
    does that is given neither: infra/catalog.py)."""

    def __init__(self, provider_id: str, connect: Callable[[], RecordProvider], described: RecordProvider) -> None:
        self.id = provider_id
        self._provider = lazy(connect)
        self._described = described

    def capabilities(self) -> dict[str, Any]:
        return self._described.capabilities()

    def is_outside(self) -> bool:
        return self._described.is_outside()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider(), name)


def build_providers(settings: Settings, engine: Callable[[], RecallEngine | None],
                    session: Any | None = None) -> Providers:
    """The providers this stage is connected to beside the native one (settings.mem0). mem0 is given the
    stage's own embedder (MiniLM locally, Titan in AWS), so a memory's records are embedded alike
    whichever provider keeps them, and, with `mem0_infer`, the stage's derivation endpoint."""
    if settings.mem0 == "none":
        return Providers()
    from uhp_memories.adapters.mem0 import Mem0Provider, Mem0Settings, connect
    from uhp_memories.adapters.system import SystemClock
    from uhp_memories.domain.timefmt import format_ms

    clock = SystemClock()
    infers = settings.mem0_infer and settings.derivation == "openai"
    configured = Mem0Settings(
        mode=settings.mem0,
        folder=settings.mem0_folder or None,
        derive_url=settings.derivation_base_url if infers else None,
        derive_model=settings.derivation_model if infers else None,
        derive_api_key=settings.derivation_api_key or None,
        host=settings.mem0_host or None,
        timeout_seconds=settings.mem0_timeout_seconds,
    )

    def connect_mem0() -> RecordProvider:
        api_key = settings.mem0_api_key
        if settings.mem0 == "platform" and not api_key and settings.mem0_api_key_secret:
            import boto3

            # By name or ARN (the stage's mem0.api_key_secret): the secret's plain SecretString.
            secrets = (session or boto3).client("secretsmanager", region_name=settings.region)
            api_key = secrets.get_secret_value(SecretId=settings.mem0_api_key_secret)["SecretString"]
        recall = engine()
        if recall is None and settings.mem0 == "oss":
            raise RuntimeError("mem0 OSS embeds with the stage's embedder, and this stage has no recall engine")
        return connect(
            replace(configured, api_key=api_key or None),
            embedder=recall.embedder if recall is not None else None,
            dimensions=recall.embedder.dimensions if recall is not None else 0,
            now=lambda: format_ms(clock.now_ms()),
            write_tag=pending_tag,
        )

    def connect_mem0_or_say_so() -> RecordProvider:
        # §12: a provider the server could not connect to (its library, its stores, its credential) is
        # memory_unavailable (503), tried again on the next request (`lazy` keeps only a connection made).
        try:
            return connect_mem0()
        except Exception as error:
            logger.warning("mem0 could not be connected", extra={"error_type": type(error).__name__})
            raise ProviderNotConnected("the memory's provider 'mem0' could not be connected; retry later") from error

    # What it is depends on the settings alone (Mem0Provider.capabilities, is_outside): no client, no key.
    described = Mem0Provider(None, configured, now=lambda: format_ms(clock.now_ms()))
    return Providers({"mem0": LazyProvider("mem0", connect_mem0_or_say_so, described)})


def timer_of(settings: Settings, client: Any | None = None) -> EventBridgeTimer | None:
    """The stage's timer for consolidation schedules (None where it has none); its client built on first use."""
    if not settings.schedule_group:
        return None
    if client is None:
        def make() -> Any:
            import boto3

            return boto3.client("scheduler", region_name=settings.region)

        return EventBridgeTimer(lazy(make), settings.schedule_group, settings.schedule_target_arn,
                                settings.schedule_role_arn)
    return EventBridgeTimer(lambda: client, settings.schedule_group, settings.schedule_target_arn,
                            settings.schedule_role_arn)


def neighbours_of(engine: RecallEngine | None) -> IndexNeighbours | None:
    """A consolidation pass's view of the index (None where there is none: the pass then only reads)."""
    return IndexNeighbours(engine) if engine is not None else None


def build(
    settings: Settings,
    dynamodb_client: Any,
    s3_client: Any,
    s3_presign_client: Any | None = None,
    stepfunctions_client: Any | None = None,
    recall_engine: Callable[[], RecallEngine | None] | None = None,
    scheduler_client: Any | None = None,
) -> Container:
    table = DynamoTable(dynamodb_client, settings.table_name)
    objects = S3ObjectStore(s3_client, settings.files_bucket, s3_presign_client)
    jobs = DynamoJobRepository(table)
    attachments = DynamoAttachmentRepository(table)
    engine = recall_engine or lazy(lambda: build_recall_engine(settings))
    providers = build_providers(settings, engine)
    ports = Ports(
        memories=AccessTimedMemories(table),
        records=DynamoRecordRepository(table),
        clock=SystemClock(),
        ids=RandomIds(),
        attachments=AccessTimedLists(attachments),
        providers=providers,
        check_timing=MeasuredCheckTiming(),
    )
    file_repository = DynamoFileRepository(table)
    files = FileService(ports, objects, file_repository, MeasuredCheckTiming())
    paths = DynamoPathRepository(table)
    memories = MemoryService(ports, objects, engine, files=file_repository)
    types = TypeService(ports, DynamoTypeRepository(table), BUILTIN_TYPES)
    records = RecordService(ports, memories, files, engine, paths, types)
    recall = RecallService(
        replace(ports, records=ReadBackTimedRecords(table)), memories, records, search_timed(engine),
        AbstainPolicy(settings.abstain_similarity), overlap=ThreadOverlap(),
    )
    workflows = StepFunctionsRunner(
        stepfunctions_client,
        {
            "erase": settings.erase_state_machine_arn,
            "delete": settings.delete_state_machine_arn,
            "consolidate": settings.consolidate_state_machine_arn,
            "derive": settings.derive_state_machine_arn,
        },
    )
    removal = RemovalService(
        ports,
        memories,
        jobs,
        workflows,
        objects,
        DynamoCachedResponses(dynamodb_client, settings.idempotency_table_name),
        Retention(
            pitr_enabled=settings.pitr_enabled,
            pitr_retention_days=settings.pitr_retention_days,
            stream_enabled=settings.stream_enabled,
            stream_retention_hours=settings.stream_retention_hours,
            search_snapshot_retention_days=settings.search_snapshot_retention_days,
            search_segments=bool(settings.search_endpoint),
        ),
        settings.workflow_wait_seconds,
        engine,
        files=file_repository,
    )
    deriver = lazy(lambda: build_deriver(settings)) if settings.derivation != "none" else None
    consolidation = ConsolidationService(
        ports,
        DynamoRunRepository(table),
        workflows,
        settings.workflow_wait_seconds,
        engine,
        neighbours=lambda: neighbours_of(engine()),
        count_tokens=count_tokens,
        text_of=text_of,
        deriver=deriver,
    )
    observing = ObserveService(ports, records, removal, jobs, workflows, deriver, engine)
    harnesses = HarnessService(ports, attachments, providers)
    prime = PrimeService(
        ports, memories, harnesses, DynamoPinRepository(table), DynamoPlacementRepository(table), count_tokens
    )
    return Container(
        settings=settings,
        dynamodb=dynamodb_client,
        ports=ports,
        memories=memories,
        removal=removal,
        grants=GrantService(ports),
        records=records,
        recall=recall,
        consolidation=consolidation,
        schedules=ScheduleService(ports, DynamoScheduleRepository(table), timer_of(settings, scheduler_client),
                                  consolidation),
        queries=QueryService(
            ports,
            DynamoQueryRepository(table),
            recall,
            memories,
            records,
            lambda: free_query_index(engine()),
            FREE_QUERY_LANGUAGES if settings.search_endpoint else (),
        ),
        recall_engine=engine,
        harnesses=harnesses,
        files=files,
        tree=TreeService(ports, paths),
        keys=DynamoKeyRepository(dynamodb_client, settings.keys_table_name),
        prime=prime,
        observing=observing,
        turns=TurnService(ports, harnesses, observing, prime),
        types=types,
        operations=OperationService(ports, types, records, recall, memories),
    )


_container: Container | None = None


def install(container: Container | None) -> Container | None:
    """Use this container for every handler in the process (local mode, tests); None resets. Answers the
    one it replaces, for a test to put back (the session's local stage, which later tests serve from)."""
    global _container
    replaced, _container = _container, container
    return replaced


def warm_at_init() -> None:
    """In a Lambda function, build the container (its AWS clients, and the recall engine's where the
    function searches) while the function initializes, not on its first request: INIT runs on a full
    vCPU before any caller waits (issue 35). A container that cannot be built now is built by the first
    request, which then reports why, as before. Nothing outside Lambda (local mode installs its own)."""
    if not os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or _container is not None:
        return
    try:
        built = container()
        if built.settings.search_endpoint:
            built.recall_engine()
    except Exception as error:
        logger.warning("the container was not built at init; the first request builds it",
                       extra={"error_type": type(error).__name__})


def container() -> Container:
    global _container
    if _container is None:
        import boto3  # deferred: a cold start pays for the clients only when a request needs them
        from botocore.config import Config

        settings = Settings.from_env()
        _container = build(
            settings,
            boto3.client("dynamodb", region_name=settings.region),
            boto3.client("s3", region_name=settings.region, config=Config(signature_version="s3v4")),
            stepfunctions_client=boto3.client("stepfunctions", region_name=settings.region),
        )
    return _container
