"""The Python client (clients/python, uhp_memories_client) against the real local server over HTTP: the
session's local stage and gateway (tests/conftest.py), and the keys and per-test tenants of
tests/integration (each test's items removed after it); the offline tests (test_client_retries.py) need
none of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from uhp_memories_client import AsyncClient, Client

from tests.integration import conftest as integration
from tests.integration.conftest import ClientFactory
from uhp_memories.local.moto_env import LocalAws

Keyed = tuple[str, str]  # (base URL, API key)

# tests/integration's fixtures, found by pytest here: a tenant per test and keys in it. Only a test that
# reaches the server starts the local stage (`purged`, not autouse: the offline tests need none).
tenant = integration.tenant
make_client = integration.make_client


@pytest.fixture
def purged(local_aws: LocalAws, tenant: str) -> Iterator[None]:
    """The test's tenant, its items removed after it (integration.purge_tenant)."""
    yield
    integration.purge_tenant(local_aws, tenant)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def key_of(make_client: ClientFactory, purged: None) -> Callable[..., Keyed]:
    """key_of("user:alice", tenant_name=None) -> (the gateway's URL, a new key of that principal)."""

    def make(principal: str, tenant_name: str | None = None) -> Keyed:
        made = make_client(principal, (), tenant_name)
        return made.base_url, made.key

    return make


@pytest.fixture
def alice(key_of: Callable[..., Keyed]) -> Iterator[Client]:
    url, key = key_of("user:alice")
    with Client(url, key) as client:
        yield client


@pytest.fixture
def bob(key_of: Callable[..., Keyed]) -> Iterator[Client]:
    url, key = key_of("user:bob")
    with Client(url, key) as client:
        yield client


@pytest.fixture
def async_alice(key_of: Callable[..., Keyed]) -> AsyncClient:
    url, key = key_of("user:alice")
    return AsyncClient(url, key)
