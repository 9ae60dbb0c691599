"""Which Lambdas the stack deploys, and what each may touch.

One Lambda per API function package (uhp_memories.api.routes.FUNCTIONS), one for the authorizer,
and one per workflow step (functions/steps/handler.py, named by uhp_memories.workflows.STEPS); any
other package under functions/ is a worker (a stream consumer, say). Each gets one role, built from
its Access entry here and nothing else, so a function gets exactly the access written here.

A Lambda without an entry fails the synth: its access is a decision, never a default. When a
function starts to use a new store, its entry here changes in the same commit.

Least privilege, by what each function really does (tests/infra/test_least_privilege.py serves every
route on the local stage, records every call and holds each role to it, both ways):
- A store is `read` when nothing the function does writes it: no PutItem, UpdateItem, DeleteItem,
  BatchWriteItem or ConditionCheckItem on a table; on the recall index, HEAD and GET on the index and
  searches (POST _msearch, POST <index>/_search), never ESHttpPut (creating the index), _bulk or
  _delete_by_query. No function deletes by ESHttpDelete (only the operator's `reindex --from-scratch`).
- The idempotency table belongs to the functions that write: a request that may write and carries
  an Idempotency-Key keeps its answer there, and its first transaction puts the key's marker there
  (uhp_memories.api.app make_handler). A read by POST (recall, grep, a query's run, MCP's reads) is
  never kept, so the functions that only read, by GET or by POST, get no idempotency table.
- A workflow that only a deriving stage runs (derive) is started only where the stage derives.
- mem0 (`mem0`), on a stage that connects it: `connect` where the function reaches the records of a memory
  mem0 keeps, `declare` where it only names the providers the stage offers; tests/infra/test_mem0_reach.py
  serves every memory route on mem0 memories and holds each entry to who asked the provider what.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from infra.layout import AUTHORIZER, Layout
from uhp_memories.api.routes import FUNCTIONS
from uhp_memories.workflows import STEPS

STEPS_PACKAGE = "steps"


Level = Literal["", "read", "write"]


@dataclass(frozen=True)
class Access:
    """The stores and services one Lambda uses. Each flag maps to a fixed list of actions on named
    resources (infra/constructs/compute.py)."""

    main_table: Level = ""  # items and GSI queries of the main table: read, or read and write
    main_table_stream: bool = False  # consumes the main table's stream (the search indexer)
    keys_table: bool = False  # reads API keys by hash (the authorizer only)
    idempotency_table: bool = False  # Powertools idempotency records (writes with an Idempotency-Key)
    idempotency_purge: bool = False  # finds kept responses by the ids erased (mentions index) and deletes them
    files: bool = False  # reads and writes file bytes (objects and their versions) in the files bucket
    files_purge: bool = False  # lists and deletes every version of objects (erase, memory delete)
    search: Level = ""  # IAM-signed requests to the recall index, when the stage has a domain: read, or read and write
    embeddings: bool = False  # bedrock:InvokeModel on the configured embedding model, when the stage has a domain
    erase_report: bool = False  # writes the erase report: told whether a search domain keeps deleted documents
    start_workflows: tuple[str, ...] = ()  # workflows it starts and waits on (uhp_memories.workflows.WORKFLOWS)
    # The stage's derivation model (infra/config.py DerivationConfig), when it has one: "declare" reads
    # only whether it derives (observe starts the job, the capability document says so); "call" calls it
    # (bedrock:InvokeModel on that model only, or its endpoint's key secret).
    derivation: Literal["", "declare", "call"] = ""
    schedules: bool = False  # sets and clears memories' consolidation schedules (EventBridge Scheduler, its group)
    # The stage's mem0 provider (infra/config.py Mem0Config), when it connects one: "declare" only says which
    # providers the stage offers (creating a memory in one, the capability documents, the outside-provider
    # notice), from the settings alone; "connect" reaches the records of memories mem0 keeps (mem0's library,
    # its Platform key's secret). A function that reaches a memory only to refuse it because of its provider
    # (require_native: files, snapshots, named and free queries, operations, consolidation, prime pins) needs
    # neither: the memory's `provider` field says it.
    mem0: Literal["", "declare", "connect"] = ""


@dataclass(frozen=True)
class LambdaEntry:
    """One deployed Lambda: a function package and the handler in its handler.py."""

    name: str  # catalog key: the package, or "steps.<handler>" for a workflow step
    package: str
    handler: str = "lambda_handler"

    @property
    def kind(self) -> str:
        if self.name == AUTHORIZER:
            return "authorizer"
        if self.name in FUNCTIONS:
            return "api"
        return "step" if self.package == STEPS_PACKAGE else "worker"


# API functions that write: the main table, and the answers of writes sent with an Idempotency-Key.
API = Access(main_table="write", idempotency_table=True)

# The recall engine (uhp_memories.bootstrap.build_recall_engine) is built lazily, on the first call that
# needs it: only functions that index, search or remove documents use the domain, and only those that
# embed (new record text, a recall query) invoke the model.
FUNCTION_ACCESS: Mapping[str, Access] = {
    AUTHORIZER: Access(keys_table=True),
    "discovery": Access(derivation="declare", mem0="declare"),  # answers from code and the stage's settings alone
    # Delete hides the subtree and starts the delete workflow, whose purge step drops the documents. A memory
    # is created in a provider the stage is connected to.
    "memories": Access(main_table="write", idempotency_table=True, start_workflows=("delete",), mem0="declare"),
    "grants": API,
    # Remember, revise and forget index after the commit. A record naming a file copies the upload
    # under the record, then deletes every version of the upload.
    "records": Access(
        main_table="write", idempotency_table=True, files=True, files_purge=True, search="write", embeddings=True,
        mem0="connect",
    ),
    "snapshots": API,
    # File memory's reads: the path items, the journal, grep (a read by POST: never kept).
    "tree": Access(main_table="read"),
    # Embeds the query, searches the memory and its descendants, reads the hits back: writes nothing.
    "recall": Access(main_table="read", search="read", embeddings=True, mem0="connect"),
    # Defines named queries (PUT writes the main table); a run is a recall; a free query searches the index.
    "queries": Access(main_table="write", idempotency_table=True, search="read", embeddings=True),
    # Indexes the episodes after the commit; starts the derivation that follows, when the stage derives.
    "observe": Access(
        main_table="write", idempotency_table=True, search="write", embeddings=True, start_workflows=("derive",),
        derivation="declare", mem0="connect",
    ),
    "jobs": Access(main_table="read"),  # GET only: no idempotency
    # An erase in a memory another provider keeps runs within the request (the provider removes what it keeps).
    # idempotency_purge: erase in another provider's memory purges kept answers within the request.
    "erase": Access(main_table="write", idempotency_table=True, idempotency_purge=True, start_workflows=("erase",),
                    mem0="connect"),
    "files": Access(main_table="write", idempotency_table=True, files=True),
    # A write operation revises (and indexes); a read one may run a recall template.
    "operations": Access(main_table="write", idempotency_table=True, search="write", embeddings=True),
    "types": API,  # a tenant's registered types live in the main table
    # Starts a consolidation pass and waits on it; revert appends versions itself (no index after the
    # commit: the stream indexer brings the index in step).
    "consolidations": Access(
        main_table="write", idempotency_table=True, start_workflows=("consolidate",), schedules=True
    ),
    # A turn observes: its episodes are indexed after the commit (embedded first), and start a derivation
    # where the stage derives; a turn into a memory mem0 keeps goes to mem0. Attaching a memory tells whether
    # its provider runs outside the server.
    "harnesses": Access(
        main_table="write", idempotency_table=True, search="write", embeddings=True, start_workflows=("derive",),
        derivation="declare", mem0="connect",
    ),
    # MCP (§9.1): its tools run the services records, recall and queries run (remember indexes after the
    # commit), never with a file (the tools take no file fields), and start no workflow: erase and
    # memory delete are never tools.
    "mcp": Access(main_table="write", idempotency_table=True, search="write", embeddings=True, mem0="connect"),
    # Workflow steps (functions/steps/handler.py): each its own Lambda and role.
    "steps.resolve_erase_targets": Access(main_table="read"),  # reads the chains and what was derived from them
    "steps.erase_from_index": Access(search="write"),  # deletes documents by id: no embedding
    "steps.erase_files": Access(files_purge=True),
    "steps.erase_cached_responses": Access(idempotency_purge=True),
    # Removes the chains, then sweeps what a derivation wrote meanwhile: its documents and files too.
    "steps.erase_records": Access(main_table="write", search="write", files_purge=True),
    "steps.finish_erase": Access(main_table="write", erase_report=True),  # builds the report (Retention)
    "steps.record_failure": Access(main_table="write"),  # reports every target as not yet erased
    # Drops each memory's documents and files, and what mem0 keeps of a memory it keeps.
    "steps.purge_subtree": Access(main_table="write", files_purge=True, search="write", mem0="connect"),
    "steps.finish_delete": Access(main_table="write"),
    # Reads what changed and asks the index for each record's neighbours (embedding a record the index
    # does not hold yet); closes and appends versions in DynamoDB and indexes them after the commit; where
    # the stage has a derivation model, asks it to judge pairs and summarise episodes.
    "steps.consolidate": Access(main_table="write", search="write", embeddings=True, derivation="call"),
    "steps.record_consolidation_failure": Access(main_table="write"),
    # Asks the stage's derivation model (Bedrock, or an OpenAI-compatible endpoint), writes what it kept
    # and indexes it after the commit.
    "steps.derive": Access(main_table="write", search="write", embeddings=True, derivation="call"),
    "steps.record_derivation_failure": Access(main_table="write"),
    # Workers (functions/<name>/handler.py).
    # What a memory's schedule invokes: starts a scheduled run; clears a schedule whose memory is gone.
    "consolidation_timer": Access(main_table="write", start_workflows=("consolidate",), schedules=True),
    # The stream backstop of the index: images come with the stream, so no table access; it embeds
    # text the index does not hold yet.
    "indexer": Access(main_table_stream=True, search="write", embeddings=True),
}

# Workflows only a stage with a derivation model runs: their starters get the right to start them there only.
DERIVATION_WORKFLOWS = ("derive",)


class UndeclaredFunction(LookupError):
    pass


def lambda_entries(layout: Layout) -> list[LambdaEntry]:
    """Every Lambda the functions/ folder asks for, in a stable order."""
    entries = []
    for package in layout.function_packages():
        if package == STEPS_PACKAGE:
            entries += [
                LambdaEntry(f"{package}.{handler}", package, handler) for handler in sorted(set(STEPS.values()))
            ]
        else:
            entries.append(LambdaEntry(package, package))
    return entries


def access_of(name: str, catalog: Mapping[str, Access] = FUNCTION_ACCESS) -> Access:
    try:
        return catalog[name]
    except KeyError:
        raise UndeclaredFunction(
            f"the Lambda {name!r} has no entry in infra/catalog.py FUNCTION_ACCESS: declare what it may touch"
        ) from None
