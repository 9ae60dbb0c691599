"""Harness tests: a13n-harness's record memory mounted over this server, through a real local server
over real HTTP (the local gateway, the deployed handlers, DynamoDB on moto), as tests/integration
reaches it.

The local stage is the session's, shared with tests/integration (tests/conftest.py): two cannot run at
once in one process. Each test makes its own tenant and removes its items after. The test modules skip when
a13n-harness (the `harness` extra) is not installed; nothing here imports it at module level.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from tests.integration.conftest import TENANT_ADMIN, Client, purge_tenant
from uhp_memories.domain.types.model import TENANT_ADMIN_GROUP
from uhp_memories.local.gateway import LocalGateway
from uhp_memories.local.moto_env import KeyEntry, LocalAws


@dataclass
class Stage:
    aws: LocalAws
    gateway: LocalGateway

    @property
    def url(self) -> str:
        return self.gateway.url


@pytest.fixture
def stage(local_aws: LocalAws, gateway: LocalGateway) -> Stage:
    return Stage(local_aws, gateway)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def tenant(stage: Stage) -> Iterator[str]:
    name = "t-" + secrets.token_hex(6)
    yield name
    purge_tenant(stage.aws, name)


ClientFactory = Callable[[str], Client]


@pytest.fixture
def make_client(stage: Stage, tenant: str) -> ClientFactory:
    """make_client("user:alice") -> a REST client (requests) with a new key of this test's tenant, which
    knows the tenant's administrator (`Client.claim`)."""

    def factory(principal: str, groups: tuple[str, ...] = ()) -> Client:
        key = "k-" + secrets.token_hex(16)
        stage.aws.add_keys([KeyEntry(key, tenant, principal, groups)])
        return Client(stage.url, key, tenant, principal, requests.Session(),
                      admin=lambda: factory(TENANT_ADMIN, (TENANT_ADMIN_GROUP,)))

    return factory


@pytest.fixture
def alice(make_client: ClientFactory) -> Client:
    return make_client("user:alice")


@pytest.fixture
def memory(alice: Client) -> str:
    """A memory Alice created: she holds read, write, create and delete on it."""
    return str(alice.create_memory("Facts", description="What the agent keeps about Alice.")["id"])


OpenRecords = Callable[..., AbstractAsyncContextManager[Any]]


@pytest.fixture
def open_records(stage: Stage) -> OpenRecords:
    """open_records(client, memory_id, transport=None) -> UHP_MEMORIES.open(...) over its own httpx2 client.

    The local server speaks plain HTTP, which a store's own client refuses (it reaches public HTTPS
    endpoints only), so each store gets a client here, as a host running a local server gives it one.
    """
    import httpx2

    from uhp_memories.harness import UHP_MEMORIES

    @asynccontextmanager
    async def opened(client: Client, memory_id: str, transport: Any = None) -> AsyncIterator[Any]:
        configuration, credential = {"base_url": stage.url}, {"api_key": client.key}
        async with (
            httpx2.AsyncClient(timeout=30, transport=transport) as http,
            UHP_MEMORIES.open(configuration, credential, namespace=memory_id, http=http) as store,
        ):
            yield store

    return opened


OpenFiles = Callable[..., AbstractAsyncContextManager[Any]]


@pytest.fixture
def open_files(stage: Stage) -> OpenFiles:
    """open_files(client, memory_id, format=None, transport=None) -> open_file_store(...) over its own httpx2
    client, as open_records does (the local server speaks plain HTTP, which a store's own client refuses)."""
    import httpx2

    from uhp_memories.harness import open_file_store

    @asynccontextmanager
    async def opened(client: Client, memory_id: str, format: Any = None, transport: Any = None) -> AsyncIterator[Any]:
        async with (
            httpx2.AsyncClient(timeout=30, transport=transport) as http,
            open_file_store(base_url=stage.url, api_key=client.key, memory_id=memory_id, http=http, format=format)
            as store,
        ):
            yield store

    return opened
