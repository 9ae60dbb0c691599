"""The QueryRepository contract (domain/queries/service.py): named queries kept under their memory. Run on the
in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.contract.builders import ACME, GLOBEX, T0, add, first, grant, mid, snapshot
from tests.contract.conftest import Repositories
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.queries.model import NamedQuery


def named(memory_id: str, name: str, *, tenant: str = ACME, description: str = "Open deals — für Ünïcode",
          updated_at: int = 0) -> NamedQuery:
    return NamedQuery(
        tenant=tenant,
        memory_id=memory_id,
        name=name,
        description=description,
        params={"type": "object", "properties": {"account": {"type": "string", "maxLength": 40},
                                                  "limit": {"type": "integer", "default": 5}},
                "required": ["account"]},
        requires="read",
        language="uhp-recall",
        body={"text": "deal", "limit": "{{limit}}", "filters": {"and": [
            {"field": "attributes.account", "op": "eq", "value": "{{account}}"},
            {"field": "attributes.ratio", "op": "gt", "value": 0.25},
            {"field": "attributes.open", "op": "eq", "value": True}]}},
        updated_by="user:alice",
        updated_at=T0 + updated_at,
    )


def test_put_then_get_returns_the_query_as_written(repos: Repositories) -> None:
    m = add(repos, 1)
    query = named(m.id, "open_deals_for")
    repos.queries.put(query)
    assert repos.queries.get(ACME, m.id, "open_deals_for") == query
    assert repos.queries.get(ACME, m.id, "other") is None
    assert repos.queries.get(ACME, mid(99), "open_deals_for") is None


def test_put_of_a_name_taken_replaces_the_definition(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.queries.put(named(m.id, "q"))
    changed = replace(named(m.id, "q", description="", updated_at=10), requires="write", body={"text": "x"},
                      params={"type": "object", "properties": {}, "required": []}, updated_by="user:bob")
    repos.queries.put(changed)
    assert repos.queries.get(ACME, m.id, "q") == changed
    assert repos.queries.list(ACME, m.id) == [changed]


def test_list_is_the_memorys_queries_by_name(repos: Repositories) -> None:
    m, other = add(repos, 1), add(repos, 2)
    for name in ("zeta", "alpha", "mid_2", "mid_10"):
        repos.queries.put(named(m.id, name))
    repos.queries.put(named(other.id, "beta"))
    assert [q.name for q in repos.queries.list(ACME, m.id)] == ["alpha", "mid_10", "mid_2", "zeta"]
    assert [q.name for q in repos.queries.list(ACME, other.id)] == ["beta"]
    assert repos.queries.list(ACME, mid(99)) == []


def test_list_holds_nothing_but_queries(repos: Repositories) -> None:
    """Grants, records and snapshots share the memory's partition in DynamoDB."""
    m = add(repos, 1)
    repos.memories.put_grant(grant(1, m.id))
    repos.records.append_first(first(1, m.id, 10))
    repos.records.put_snapshot(snapshot(1, m.id, "s", time=20))
    assert repos.queries.list(ACME, m.id) == []


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_put_on_a_memory_going_or_gone_raises_tree_changed_and_writes_nothing(
    repos: Repositories, fate: str
) -> None:
    if fate == "deleting":
        add(repos, 1)
        repos.memories.mark_deleting(ACME, [mid(1)])
    with pytest.raises(TreeChanged):
        repos.queries.put(named(mid(1), "late"))
    assert repos.queries.get(ACME, mid(1), "late") is None
    assert repos.queries.list(ACME, mid(1)) == []


@pytest.mark.slow
def test_a_memorys_purge_removes_its_queries(repos: Repositories) -> None:
    m, keep = add(repos, 1), add(repos, 2)
    repos.queries.put(named(m.id, "q"))
    kept = named(keep.id, "q")
    repos.queries.put(kept)
    repos.memories.mark_deleting(ACME, [m.id])
    repos.memories.purge(ACME, m.id)
    assert repos.queries.get(ACME, m.id, "q") is None
    assert repos.queries.list(ACME, m.id) == []
    assert repos.queries.list(ACME, keep.id) == [kept]


@pytest.mark.slow
def test_tenants_are_isolated_even_with_the_same_ids(repos: Repositories) -> None:
    add(repos, 1)
    ours = named(mid(1), "q", description="ours")
    repos.queries.put(ours)
    assert repos.queries.get(GLOBEX, mid(1), "q") is None
    assert repos.queries.list(GLOBEX, mid(1)) == []
    with pytest.raises(TreeChanged):  # their write cannot land under our memory
        repos.queries.put(named(mid(1), "q", tenant=GLOBEX))
    add(repos, 1, tenant=GLOBEX)
    theirs = named(mid(1), "q", tenant=GLOBEX, description="theirs")
    repos.queries.put(theirs)
    assert repos.queries.get(ACME, mid(1), "q") == ours
    assert repos.queries.list(GLOBEX, mid(1)) == [theirs]
