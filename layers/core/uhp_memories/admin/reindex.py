"""`uhp-memories reindex`: rebuild the recall index of a deployed stage from DynamoDB.

DynamoDB is the source of truth and the index is derived from it: this scans every record item of the
main table, page by page, and indexes each version as the functions do (RecordService after each
commit, the stream indexer as its backstop). Indexing is an idempotent upsert and a version closes
only once, so a reindex may run while the stage serves traffic.

After each batch it reads the batch's keys again (consistently): a version erased while the batch
was on its way is removed from the index at once, so a reindex racing an erase never puts erased
content back (an erase that deletes the items later has its stream REMOVE undo the write).

A record whose text the model refuses (more than Titan takes, say) is indexed by its words alone
(domain/recall/engine.py), so no record stops a rebuild; an index or a model that does not answer is waited
out (`ATTEMPTS`), then the command stops and says to run it again.

A plain reindex adds and updates documents; it never removes one otherwise. `--from-scratch` drops the index
first, so documents DynamoDB no longer holds go too, and the index is created again with the stage's
mapping and embedding model (needed after a change of model or dimensions). While it runs, recall
misses what is not indexed yet; to rebuild without that gap, reindex into a new `--index-name`, then
point the stage at it (`search.index_name` in cdk.json) and deploy.

Runs on an operator's machine with AWS credentials; never deployed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from uhp_memories import stage_outputs as outputs
from uhp_memories.adapters.dynamodb import keys
from uhp_memories.adapters.dynamodb.items import RECORD_ENTITY, from_dynamo, record_from
from uhp_memories.adapters.dynamodb.table import DynamoTable
from uhp_memories.admin.progress import reindex_progress
from uhp_memories.admin.target import TargetError, aws_refusal, aws_session, stack_outputs
from uhp_memories.bootstrap import build_recall_engine
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import EmbeddingModelMismatch, SearchUnavailable
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.settings import Settings

if TYPE_CHECKING:
    from uhp_memories.adapters.opensearch import OpenSearchIndex

PAGE_SIZE = 200  # items a Scan page evaluates (record items and others)
BATCH_SIZE = 50  # versions per index call (one OpenSearch _bulk)
ATTEMPTS = 5  # per batch, while the domain or the model answers "unavailable"
BACKOFF_SECONDS = 2.0
# The stage's outputs (uhp_memories.stage_outputs) -> what they name.
STACK_OUTPUTS = {
    outputs.MAIN_TABLE_NAME: "table",
    outputs.SEARCH_ENDPOINT: "search_endpoint",
    outputs.SEARCH_INDEX_NAME: "index_name",
    outputs.SEARCH_INDEX_REPLICAS: "replicas",
    outputs.SEARCH_INDEX_SHARDS: "shards",
    outputs.EMBEDDING_MODEL_ID: "embedding_model_id",
    outputs.EMBEDDING_DIMENSIONS: "embedding_dimensions",
}


class ReindexError(Exception):
    pass


# -- reading DynamoDB --------------------------------------------------------------------------


@dataclass
class Page:
    scanned: int  # items the page evaluated
    versions: list[RecordVersion]
    unreadable: list[dict[str, str]]  # keys of record items that do not read (never their content)


def record_pages(dynamodb: Any, table: str, *, page_size: int = PAGE_SIZE) -> Iterator[Page]:
    """Every record item of the main table, one Scan page at a time."""
    request: dict[str, Any] = {
        "TableName": table,
        "Limit": page_size,
        "FilterExpression": "#entity = :record",
        "ExpressionAttributeNames": {"#entity": "entity"},
        "ExpressionAttributeValues": {":record": {"S": RECORD_ENTITY}},
    }
    while True:
        answer = dynamodb.scan(**request)
        versions, unreadable = [], []
        for raw in answer.get("Items", []):
            item = from_dynamo(raw)
            try:
                versions.append(record_from(item))
            except (KeyError, TypeError, ValueError):
                unreadable.append({"PK": str(item.get("PK")), "SK": str(item.get("SK"))})
        yield Page(int(answer.get("ScannedCount", 0)), versions, unreadable)
        if not answer.get("LastEvaluatedKey"):
            return
        request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


# -- the index ---------------------------------------------------------------------------------


class IndexTarget(Protocol):
    """The index to rebuild: a way to drop it, and the engine that writes it."""

    @property
    def description(self) -> str: ...

    def drop(self) -> None: ...

    def engine(self) -> RecallEngine: ...


class OpenSearchTarget:
    """The stage's OpenSearch index, opened as the functions open it (bootstrap.build_recall_engine),
    for a bulk load: writes are left to the index's refresh interval. `session` signs the calls
    (None: the default credentials); `search_client` and `embedder` stand in for the stage's."""

    def __init__(
        self,
        settings: Settings,
        session: Any | None = None,
        *,
        search_client: Any | None = None,
        embedder: Any | None = None,
    ) -> None:
        self._settings = settings
        self._engine = self._open(session=session, search_client=search_client, embedder=embedder)
        self._ensured = False

    def _open(self, **how: Any) -> RecallEngine:
        engine = build_recall_engine(self._settings, bulk_load=True, **how)
        if engine is None:
            raise ReindexError("the stage has no search domain to reindex (no search endpoint)")
        return engine

    @property
    def _index(self) -> OpenSearchIndex:
        return cast("OpenSearchIndex", self._engine.index)

    @property
    def description(self) -> str:
        embedder = self._engine.embedder
        return f"OpenSearch index {self._index.index_name} ({embedder.model_id}, {embedder.dimensions} dimensions)"

    def drop(self) -> None:
        index = self._index
        index.client.indices.delete(index=index.index_name, ignore=[404])
        # Opened again: an index object remembers having created (or checked) its index.
        self._engine = self._open(search_client=index.client, embedder=self._engine.embedder)
        self._ensured = False

    def engine(self) -> RecallEngine:
        if not self._ensured:
            # Created now (or its model checked), before the first batch: after a drop, the index
            # exists again at once with the project's mapping.
            self._index.ensure_index()
            self._ensured = True
        return self._engine


def aws_target(settings: Settings, session: Any) -> OpenSearchTarget:
    """The stage's index, signed with this session's credentials."""
    return OpenSearchTarget(settings, session)


# -- the rebuild -------------------------------------------------------------------------------


@dataclass
class ReindexReport:
    table: str
    index: str
    dropped: bool = False
    pages: int = 0
    scanned_items: int = 0
    indexed_versions: int = 0
    vanished_versions: int = 0  # erased while they were being indexed, and removed again
    retries: int = 0
    unreadable: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reindex(
    dynamodb: Any,
    table: str,
    target: IndexTarget,
    *,
    from_scratch: bool = False,
    page_size: int = PAGE_SIZE,
    batch_size: int = BATCH_SIZE,
    attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[ReindexReport], None] = lambda report: None,
    reuse_vectors: bool = False,
) -> ReindexReport:
    """Index every record version of `table` into `target` (re-embedding open versions; a closed
    version keeps the vector the index holds for it; with `reuse_vectors`, every version whose text
    the index holds already keeps its vector: a catch-up). With `from_scratch`, drop the index first."""
    started = time.monotonic()
    report = ReindexReport(table=table, index=target.description)
    if from_scratch:
        target.drop()
        report.dropped = True
    engine = target.engine()
    main_table = DynamoTable(dynamodb, table)
    for page in record_pages(dynamodb, table, page_size=page_size):
        report.pages += 1
        report.scanned_items += page.scanned
        report.unreadable += page.unreadable
        for start in range(0, len(page.versions), batch_size):
            batch = page.versions[start : start + batch_size]
            report.retries += _index_with_retries(engine, batch, attempts, sleep, reuse_vectors)
            vanished = _vanished(main_table, batch)
            for (tenant, memory_id), ids in vanished.items():
                engine.erase(tenant, memory_id, ids)
            report.vanished_versions += sum(len(ids) for ids in vanished.values())
            report.indexed_versions += len(batch) - sum(len(ids) for ids in vanished.values())
        progress(report)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _vanished(table: DynamoTable, batch: Sequence[RecordVersion]) -> dict[tuple[str, str], list[str]]:
    """The versions of `batch` the table no longer holds (an erase deleted them meanwhile)."""
    wanted = {(keys.memory_pk(v.tenant, v.memory_id), keys.record_sk(v.id)): v for v in batch}
    try:
        present = {(str(item["PK"]), str(item["SK"])) for item in table.get_many(list(wanted), consistent=True)}
    except RuntimeError as error:  # DynamoTable.get_many: keys still unprocessed after its retries
        raise ReindexError(f"{error}: run reindex again") from error
    vanished: dict[tuple[str, str], list[str]] = {}
    for key, version in wanted.items():
        if key not in present:
            vanished.setdefault((version.tenant, version.memory_id), []).append(version.id)
    return vanished


def _index_with_retries(
    engine: RecallEngine,
    batch: Sequence[RecordVersion],
    attempts: int,
    sleep: Callable[[float], None],
    reuse_vectors: bool = False,
) -> int:
    """Index one batch, waiting out an unavailable domain or model; answers the retries it took."""
    for attempt in range(attempts):
        try:
            engine.index_versions(batch, reuse_all=reuse_vectors)
            return attempt
        except SearchUnavailable:
            if attempt + 1 == attempts:
                raise
            sleep(BACKOFF_SECONDS * 2**attempt)
    raise AssertionError("unreachable")


# -- the command -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReindexSettings:
    """Where to read and what to write, from the stack's outputs and the command's options."""

    table: str
    search_endpoint: str
    index_name: str
    replicas: int
    embedding_model_id: str
    embedding_dimensions: int
    shards: int = 1

    def settings(self, region: str) -> Settings:
        return Settings(
            table_name=self.table,
            region=region,
            search_endpoint=self.search_endpoint,
            search_index=self.index_name,
            search_replicas=self.replicas,
            search_shards=self.shards,
            embedding_model_id=self.embedding_model_id,
            embedding_dimensions=self.embedding_dimensions,
        )


def resolve(found: Mapping[str, str], options: Mapping[str, Any]) -> ReindexSettings:
    """Options override the stack's outputs (say, `--index-name` to rebuild into a new index)."""
    defaults = Settings()
    values: dict[str, Any] = {
        "index_name": defaults.search_index,
        "replicas": defaults.search_replicas,
        "shards": defaults.search_shards,
        "embedding_model_id": defaults.embedding_model_id,
        "embedding_dimensions": defaults.embedding_dimensions,
    }
    values.update({name: found[output] for output, name in STACK_OUTPUTS.items() if output in found})
    values.update({name: value for name, value in options.items() if value is not None})
    missing = [option for option, name in (("--table", "table"), ("--search-endpoint", "search_endpoint"))
               if not values.get(name)]
    if missing:
        raise TargetError(
            f"name the stage: --stack NAME (a stack with a search domain), or {' and '.join(missing)}"
        )
    endpoint = str(values["search_endpoint"])
    if "://" not in endpoint:
        endpoint = f"https://{endpoint}"  # a domain's endpoint is its host name
    try:
        return ReindexSettings(
            table=str(values["table"]),
            search_endpoint=endpoint.rstrip("/"),
            index_name=str(values["index_name"]),
            replicas=int(values["replicas"]),
            shards=int(values["shards"]),
            embedding_model_id=str(values["embedding_model_id"]),
            embedding_dimensions=int(values["embedding_dimensions"]),
        )
    except ValueError as error:
        raise TargetError(f"unreadable stage settings: {error}") from error


def add_command(commands: Any) -> None:
    """Add `reindex` to the `uhp-memories` parser's subcommands."""
    command = commands.add_parser(
        "reindex",
        help="rebuild a deployed stage's recall index from DynamoDB",
        description="Scan every record of the main table and index it into the stage's OpenSearch index. "
        "Documents are added or updated, never removed, unless --from-scratch drops the index first.",
    )
    where = command.add_argument_group("deployed stage (a stack name, or the table and the search endpoint)")
    where.add_argument("--stack", help="CloudFormation stack of the stage, e.g. uhp-memories-prod")
    where.add_argument("--table", help="the main DynamoDB table (instead of, or over, --stack)")
    where.add_argument("--search-endpoint", help="the OpenSearch domain endpoint, https://... (instead of --stack)")
    where.add_argument("--index-name", help="the index to write (default: the stage's, else uhp-recall-v1)")
    where.add_argument("--replicas", type=int, help="replicas of the index when it is created (default: the stage's)")
    where.add_argument("--shards", type=int, help="primary shards of the index when created (default: the stage's)")
    where.add_argument("--embedding-model-id", help="the Bedrock model (default: the stage's)")
    where.add_argument("--embedding-dimensions", type=int, help="its dimensions (default: the stage's)")
    where.add_argument("--region", help="AWS region (default: the AWS configuration's)")
    where.add_argument("--profile", help="AWS profile (default: the AWS configuration's)")
    command.add_argument(
        "--from-scratch",
        action="store_true",
        help="drop the index and create it again first (documents DynamoDB no longer holds go; recall "
        "misses what is not indexed yet while this runs)",
    )
    command.add_argument("--page-size", type=int, default=PAGE_SIZE, help="items per DynamoDB Scan page")
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    command.set_defaults(run=run)


def _session(args: argparse.Namespace) -> Any:
    return aws_session(args.profile, args.region)


def run(args: argparse.Namespace) -> int:
    """Run the command; an operator's error is one line on stderr and exit status 2. Exit status 1
    when some record items could not be read (named by their keys in the report)."""
    try:
        session = _session(args)
        found = stack_outputs(session.client("cloudformation"), args.stack) if args.stack else {}
        options = {
            "table": args.table,
            "search_endpoint": args.search_endpoint,
            "index_name": args.index_name,
            "replicas": args.replicas,
            "shards": args.shards,
            "embedding_model_id": args.embedding_model_id,
            "embedding_dimensions": args.embedding_dimensions,
        }
        where = resolve(found, options)
        region = session.region_name or Settings().region
        target = aws_target(where.settings(region), session)
        if args.from_scratch:
            print(f"dropping {target.description}", file=sys.stderr, flush=True)
        dynamodb = session.client("dynamodb", region_name=region)
        with reindex_progress("reindex", _item_count(dynamodb, where.table)) as progress:
            report = reindex(
                dynamodb, where.table, target, from_scratch=args.from_scratch, page_size=args.page_size,
                progress=progress,
            )
    except (TargetError, ReindexError) as error:
        print(f"uhp-memories: {error}", file=sys.stderr)
        return 2
    except EmbeddingModelMismatch as error:
        print(
            f"uhp-memories: {error}. Rebuild the index with --from-scratch, or into a new --index-name.",
            file=sys.stderr,
        )
        return 2
    except SearchUnavailable as error:
        print(f"uhp-memories: {error}; run reindex again when it answers (indexing is idempotent)", file=sys.stderr)
        return 2
    except Exception as error:  # an AWS client error (no region, no credentials, a refusal): one line
        refusal = aws_refusal(error)
        if refusal is None:
            raise
        print(f"uhp-memories: {refusal}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict(), indent=2), flush=True)
    else:
        print(
            f"indexed {report.indexed_versions} record versions of {report.table} into {report.index} "
            f"({report.scanned_items} items scanned in {report.pages} pages, {report.seconds:.1f} s"
            + (", index dropped first" if report.dropped else "")
            + ")",
            flush=True,
        )
        for keys in report.unreadable:
            print(f"unreadable record item: PK={keys['PK']} SK={keys['SK']}", file=sys.stderr)
    return 1 if report.unreadable else 0


def _item_count(dynamodb: Any, table: str) -> int | None:
    """The table's item count as DynamoDB last counted it (every six hours): a bar's rough total."""
    try:
        return int(dynamodb.describe_table(TableName=table)["Table"]["ItemCount"]) or None
    except Exception:  # no permission to describe: progress without a total
        return None
