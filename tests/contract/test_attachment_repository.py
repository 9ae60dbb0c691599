"""The AttachmentRepository contract (domain/agents/harnesses.py): a harness's list of memories, replaced
whole with the grants it needs in one transaction. Run on the in-memory fake and on DynamoDB (moto)."""

from __future__ import annotations

import pytest

from tests.contract.builders import ACME, GLOBEX, add, creator_grant, grant, mid
from tests.contract.conftest import Repositories
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.agents.model import Attachment, AttachmentsChanged, HarnessList
from uhp_memories.domain.errors import TreeChanged

HARNESS = "chrn_1"


def replace_as_read(repos: Repositories, tenant: str, harness_id: str, attachments: list[Attachment],
                    grants: list[Grant]) -> None:
    """A replace of the list as it stands now (the service's compare-and-swap, uncontended)."""
    repos.attachments.replace(tenant, harness_id, attachments, grants, owners=("user:ann",),
                              as_read=repos.attachments.get_list(tenant, harness_id))


@pytest.mark.slow
@pytest.mark.parametrize("stale", ["another list", "no list"])
def test_replace_of_a_list_changed_since_it_was_read_raises_and_writes_nothing(
    repos: Repositories, stale: str
) -> None:
    a, b = add(repos, 1), add(repos, 2)
    first = [Attachment(a.id, "read")]
    repos.attachments.replace(ACME, HARNESS, first, [], owners=("user:ann",), as_read=None)
    as_read = HarnessList([Attachment(b.id, "read")], ("user:ann",)) if stale == "another list" else None
    on_b = grant(1, b.id, "harness:chrn_1")
    with pytest.raises(AttachmentsChanged):
        repos.attachments.replace(ACME, HARNESS, [Attachment(b.id, "write")], [on_b], owners=("user:ann",),
                                  as_read=as_read)
    assert repos.attachments.get(ACME, HARNESS) == first
    assert repos.memories.grants_of(ACME, ["harness:chrn_1"]) == []


def test_a_harness_never_attached_has_no_list(repos: Repositories) -> None:
    assert repos.attachments.get(ACME, HARNESS) is None


def test_replace_then_get_returns_the_list_as_written_in_its_order(repos: Repositories) -> None:
    a, b, c = add(repos, 1), add(repos, 2), add(repos, 3)
    entries = [Attachment(c.id, "read"), Attachment(a.id, "write", default=True), Attachment(b.id, "write")]
    replace_as_read(repos, ACME, HARNESS, entries, [])
    assert repos.attachments.get(ACME, HARNESS) == entries


def test_replace_replaces_the_whole_list_and_an_emptied_list_stays_a_list(repos: Repositories) -> None:
    a, b = add(repos, 1), add(repos, 2)
    replace_as_read(repos, ACME, HARNESS, [Attachment(a.id, "read"), Attachment(b.id, "read")], [])
    replace_as_read(repos, ACME, HARNESS, [Attachment(b.id, "write", default=True)], [])
    assert repos.attachments.get(ACME, HARNESS) == [Attachment(b.id, "write", default=True)]
    replace_as_read(repos, ACME, HARNESS, [], [])
    assert repos.attachments.get(ACME, HARNESS) == []


def test_replace_writes_the_grants_the_list_needs_with_it(repos: Repositories) -> None:
    a, b = add(repos, 1), add(repos, 2)
    on_a = grant(1, a.id, "harness:chrn_1", privileges=("read", "write"), created_at=50)
    on_b = grant(2, b.id, "harness:chrn_1", created_at=60)
    replace_as_read(repos, ACME, HARNESS, [Attachment(a.id, "write", default=True), Attachment(b.id, "read")],
                              [on_a, on_b])
    assert repos.memories.grants_on(ACME, a.id) == [creator_grant(a), on_a]
    assert sorted(repos.memories.grants_of(ACME, ["harness:chrn_1"]), key=lambda g: g.id) == [on_a, on_b]


@pytest.mark.parametrize("fate", ["deleting", "missing"])
def test_replace_granting_on_a_memory_going_or_gone_raises_tree_changed_and_writes_nothing(
    repos: Repositories, fate: str
) -> None:
    live = add(repos, 1)
    before = [Attachment(live.id, "read")]
    replace_as_read(repos, ACME, HARNESS, before, [])
    if fate == "deleting":
        add(repos, 2)
        repos.memories.mark_deleting(ACME, [mid(2)])
    on_live = grant(1, live.id, "harness:chrn_1")
    on_going = grant(2, mid(2), "harness:chrn_1")
    with pytest.raises(TreeChanged):
        replace_as_read(repos, ACME, HARNESS, [Attachment(live.id, "read"), Attachment(mid(2), "read")],
                                  [on_live, on_going])
    assert repos.attachments.get(ACME, HARNESS) == before
    assert repos.memories.grants_of(ACME, ["harness:chrn_1"]) == []  # not even the grant on the live memory


def test_entries_without_grants_need_no_live_memory(repos: Repositories) -> None:
    """The service keeps entries the caller cannot see as they are, even on a memory deleted since."""
    gone = add(repos, 1)
    repos.memories.mark_deleting(ACME, [gone.id])
    repos.memories.purge(ACME, gone.id)
    replace_as_read(repos, ACME, HARNESS, [Attachment(gone.id, "read")], [])
    assert repos.attachments.get(ACME, HARNESS) == [Attachment(gone.id, "read")]


@pytest.mark.slow
def test_lists_are_kept_per_harness_and_per_tenant(repos: Repositories) -> None:
    ours, theirs = add(repos, 1), add(repos, 1, tenant=GLOBEX)
    replace_as_read(repos, ACME, HARNESS, [Attachment(ours.id, "read")], [])
    replace_as_read(repos, ACME, "chrn_2", [Attachment(ours.id, "write", default=True)], [])
    assert repos.attachments.get(GLOBEX, HARNESS) is None
    with pytest.raises(TreeChanged):  # a grant in the other tenant cannot sit on our memory
        replace_as_read(repos, GLOBEX, HARNESS, [Attachment(mid(2), "read")],
                                  [grant(9, mid(2), "harness:chrn_1", tenant=GLOBEX)])
    replace_as_read(repos, GLOBEX, HARNESS, [Attachment(theirs.id, "write")], [])
    assert repos.attachments.get(ACME, HARNESS) == [Attachment(ours.id, "read")]
    assert repos.attachments.get(ACME, "chrn_2") == [Attachment(ours.id, "write", default=True)]
    assert repos.attachments.get(GLOBEX, HARNESS) == [Attachment(theirs.id, "write")]


def test_a_list_keeps_its_owners_and_a_replace_over_other_owners_raises(repos: Repositories) -> None:
    a = add(repos, 1)
    repos.attachments.replace(ACME, HARNESS, [Attachment(a.id, "read")], [], owners=("user:ann", "group:ops"),
                              as_read=None)
    stored = repos.attachments.get_list(ACME, HARNESS)
    assert stored == HarnessList([Attachment(a.id, "read")], ("user:ann", "group:ops"))
    with pytest.raises(AttachmentsChanged):  # the same entries, read with other owners: the list changed
        repos.attachments.replace(ACME, HARNESS, [], [], owners=("user:ben",),
                                  as_read=HarnessList(stored.entries, ("user:ben",)))
    assert repos.attachments.get_list(ACME, HARNESS) == stored
    repos.attachments.replace(ACME, HARNESS, [], [], owners=("user:ben",), as_read=stored)
    assert repos.attachments.get_list(ACME, HARNESS) == HarnessList([], ("user:ben",))
