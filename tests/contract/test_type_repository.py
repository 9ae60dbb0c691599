"""The TypeRepository contract (domain/types/service.py): a tenant's registered types, one current version each,
every version written only over the one it replaces. Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.contract.builders import ACME, GLOBEX
from tests.contract.conftest import Repositories
from uhp_memories.domain.types.model import TypeDefinition, TypeVersionTaken
from uhp_memories.domain.types.service import parse_definition

RAW = {
    "description": "A deal.",
    "schema": {"type": "object", "properties": {"stage": {"enum": ["lead", "won"]}}},
    "text": "Deal {stage}",
    "operations": [{"name": "win", "requires": "write", "set": {"stage": "won"}}],
}


def version(n: int, name: str = "x.crm.deal") -> TypeDefinition:
    parsed = parse_definition(name, RAW)
    return replace(parsed, version=n, registered_by="user:root", registered_at=1_790_000_000_000 + n)


def test_a_registered_type_reads_back_whole_for_its_tenant_only(repos: Repositories) -> None:
    assert repos.types.current(ACME, "x.crm.deal") is None
    repos.types.put(ACME, version(1))
    assert repos.types.current(ACME, "x.crm.deal") == version(1)
    assert repos.types.current(GLOBEX, "x.crm.deal") is None
    assert repos.types.list(GLOBEX) == []


def test_a_new_version_replaces_only_the_version_it_was_read_over(repos: Repositories) -> None:
    repos.types.put(ACME, version(1))
    repos.types.put(ACME, version(2))
    with pytest.raises(TypeVersionTaken):
        repos.types.put(ACME, version(2))  # a second registration read version 1 too
    with pytest.raises(TypeVersionTaken):
        repos.types.put(ACME, version(1, "x.crm.deal"))
    assert repos.types.current(ACME, "x.crm.deal") == version(2)


def test_the_listing_holds_each_types_current_version_by_name(repos: Repositories) -> None:
    repos.types.put(ACME, version(1, "x.b.thing"))
    repos.types.put(ACME, version(1, "x.a.thing"))
    repos.types.put(ACME, version(2, "x.a.thing"))
    assert [(d.type, d.version) for d in repos.types.list(ACME)] == [("x.a.thing", 2), ("x.b.thing", 1)]
