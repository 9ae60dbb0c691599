"""The PinRepository contract (domain/agents/prime.py): a memory's pins for prime, replaced whole, kept under the
memory. Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

import pytest

from tests.contract.builders import ACME, GLOBEX, add, mid, rid
from tests.contract.conftest import Repositories
from uhp_memories.domain.agents.model import Pin, PlacedMemory, Placement
from uhp_memories.domain.errors import TreeChanged


def pin(n: int) -> Pin:
    return Pin(chain_id=rid(100 + n), record_id=rid(n), pinned_by="user:alice", pinned_at=1_790_000_000_000 + n)


def test_a_memory_never_pinned_has_no_pins(repos: Repositories) -> None:
    m = add(repos, 1)
    assert repos.pins.get(ACME, m.id) == []


def test_replace_then_get_returns_the_pins_in_their_order_and_replaces_the_whole_list(repos: Repositories) -> None:
    m = add(repos, 1)
    repos.pins.replace(ACME, m.id, [pin(3), pin(1), pin(2)])
    assert repos.pins.get(ACME, m.id) == [pin(3), pin(1), pin(2)]
    repos.pins.replace(ACME, m.id, [pin(2)])
    assert repos.pins.get(ACME, m.id) == [pin(2)]
    repos.pins.replace(ACME, m.id, [])
    assert repos.pins.get(ACME, m.id) == []


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_replace_on_a_memory_going_or_gone_raises_tree_changed_and_writes_nothing(
    repos: Repositories, fate: str
) -> None:
    if fate == "deleting":
        add(repos, 1)
        repos.memories.mark_deleting(ACME, [mid(1)])
    with pytest.raises(TreeChanged):
        repos.pins.replace(ACME, mid(1), [pin(1)])
    assert repos.pins.get(ACME, mid(1)) == []


@pytest.mark.slow
def test_a_memorys_purge_removes_its_pins_and_the_memory_still_reads(repos: Repositories) -> None:
    m, keep = add(repos, 1), add(repos, 2)
    repos.pins.replace(ACME, m.id, [pin(1)])
    repos.pins.replace(ACME, keep.id, [pin(2)])
    assert repos.memories.get_with_grants(ACME, m.id)[0] == m  # the pins item is no grant nor memory
    repos.memories.mark_deleting(ACME, [m.id])
    repos.memories.purge(ACME, m.id)
    assert repos.pins.get(ACME, m.id) == []
    assert repos.pins.get(ACME, keep.id) == [pin(2)]


def test_tenants_are_isolated(repos: Repositories) -> None:
    m = add(repos, 1)
    add(repos, 1, tenant=GLOBEX)
    repos.pins.replace(ACME, m.id, [pin(1)])
    assert repos.pins.get(GLOBEX, m.id) == []


# -- placements: what each prime placed, under the harness ---------------------------------------------


def placement(n: int, harness: str = "h1", by: str = "harness:h1") -> Placement:
    return Placement(
        prime_id=f"hprm_{n:032x}",
        harness_id=harness,
        primed_by=by,
        primed_at=1_790_000_000_000 + n,
        budget=2_000,
        tokens=120 + n,
        expires_at=1_790_604_800 + n,
        memories=(PlacedMemory(mid(1), 100, (rid(1), rid(2))), PlacedMemory(mid(2), 20 + n, ())),
    )


def test_a_placement_reads_back_whole_under_its_tenant_and_harness_only(repos: Repositories) -> None:
    first, second = placement(1), placement(2)
    repos.placements.record(ACME, first)
    repos.placements.record(ACME, second)
    assert repos.placements.get(ACME, "h1", first.prime_id) == first
    assert repos.placements.get(ACME, "h1", second.prime_id) == second
    assert repos.placements.get(GLOBEX, "h1", first.prime_id) is None
    assert repos.placements.get(ACME, "h2", first.prime_id) is None
    assert repos.placements.get(ACME, "h1", placement(3).prime_id) is None
