"""The local stage every suite that talks HTTP shares: one for the whole session.

tests/integration and tests/harness both reach a real local server (the gateway, the deployed
handlers, DynamoDB on moto). Two cannot run at once in one process (they share moto's backends and
the installed container), so both suites take these, in whatever order pytest runs them; each test
makes its own tenant, so tests never see each other."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import opensearch_node
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import LocalAws
from uhp_memories.settings import Settings

# mem0 (the mem0 provider's library) reports usage to PostHog unless told not to when first imported.
os.environ["MEM0_TELEMETRY"] = "False"

# How long a request waits for its workflow (erase, memory delete, consolidation) before answering 202
# with a job. Deployed, 20 s; here long enough that "finished within the request" never depends on how
# fast the machine is: a test that wants the 202 path asks for it (`workflows_answer_at_once`).
WORKFLOW_WAIT_SECONDS = 600.0


@pytest.fixture(scope="session")
def local_aws() -> Iterator[LocalAws]:
    # Connected to mem0 (OSS, in this process) beside the native provider, as a stage may be (§10): the
    # tree mixes both, and mem0 loads only when a test first reaches a memory it keeps.
    local = LocalAws(Settings(workflow_wait_seconds=WORKFLOW_WAIT_SECONDS, mem0="oss")).start()
    yield local
    local.stop()


@pytest.fixture(scope="session")
def gateway(local_aws: LocalAws) -> Iterator[LocalGateway]:
    server = LocalGateway("127.0.0.1", 0).start_background()
    yield server
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def _opensearch_node_stops() -> Iterator[None]:
    """The OpenSearch node a test started (tests/opensearch_node.py, on first use) stops with the session."""
    yield
    opensearch_node.stop()
