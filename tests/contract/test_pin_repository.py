"""The PinRepository contract (domain/prime.py): a memory's pins for prime, replaced whole, kept under the
memory. Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

import pytest

from tests.contract.builders import ACME, GLOBEX, add, mid, rid
from tests.contract.conftest import Repositories
from uhp_memories.domain.errors import TreeChanged
from uhp_memories.domain.prime import Pin


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
