"""§10 through the local gateway: memories kept by mem0 (real mem0 OSS, `mem0ai` from PyPI, in this
process, with our MiniLM embedder), beside native ones in one tree. The tree, the grants, the cutoff and
unseen-is-404 stay the server's and hold exactly as for native memories; records, recall and erase go to
mem0; what mem0 cannot do is memory_unsupported or `degraded`, as its capability document says.

The session's local stage is connected to mem0 (tests/conftest.py `mem0="oss"`)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.adapters.mem0 import Mem0Provider, mem0_id_of


def providers(client: Client) -> dict[str, dict[str, Any]]:
    answer = client.get("/v1/memories/providers")
    assert answer.status_code == 200, answer.text
    return {p["id"]: p for p in answer.json()["data"]}


def mem0_memory(client: Client, name: str = "Kept by mem0", **fields: Any) -> dict[str, Any]:
    return client.create_memory(name, provider="mem0", **fields)


def test_the_capability_document_lists_mem0_beside_native_honestly(alice: Client) -> None:
    found = providers(alice)
    assert set(found) == {"native", "mem0"}
    mem0 = found["mem0"]
    assert mem0["isolation"] == "enforced_filter"
    assert mem0["recall"]["signals"] == ["query", "filters"]  # no word index: text is degraded, never ignored
    assert mem0["recall"]["emulated"] == ["filters"]
    assert (mem0["revise"], mem0["forget"]) == ("native", "emulated")  # nothing emulated declared native
    assert mem0["history"] == {"content": "versions", "attributes": "versions", "structure": "none", "as_of": False}
    assert mem0["erase"]["unreachable"] == "reported"
    assert mem0["derivation"] == "none"  # infer=False without a model
    assert (mem0["types"], mem0["files"], mem0["consolidate"], mem0["queries"]["named"]) == (False, False, False, False)


@pytest.mark.slow
def test_provider_is_set_at_creation_inherited_and_never_changed(alice: Client) -> None:
    root = mem0_memory(alice)
    assert root["provider"] == "mem0"
    child = alice.create_memory("Child", parent_id=root["id"])
    assert child["provider"] == "mem0"  # §2: inherited from the parent when omitted
    native_child = alice.create_memory("Native child", parent_id=root["id"], provider="native")
    assert native_child["provider"] == "native"  # a tree mixes providers
    changed = alice.put(f"/v1/memories/{root['id']}", {"provider": "native"})
    assert (changed.status_code, error_code(changed)) == (422, "memory_invalid")
    unknown = alice.post("/v1/memories", {"name": "x", "provider": "zep"})
    assert (unknown.status_code, error_code(unknown)) == (422, "memory_invalid")
    assert "mem0" in unknown.json()["error"]["message"]


@pytest.mark.slow
def test_records_in_mem0_remember_get_list_revise_forget_history(alice: Client) -> None:
    memory = mem0_memory(alice)["id"]
    fact = alice.remember(memory, "Acme renews in March.", attributes={"account": "acme"},
                          time={"valid_from": "2026-03-01T00:00:00Z"})
    assert fact["id"].startswith("hrec_")
    assert (fact["type"], fact["content"], fact["attributes"]) == ("fact", "Acme renews in March.", {"account": "acme"})
    assert fact["written_by"] == {"kind": "user", "id": "alice"}
    assert fact["time"]["valid_from"] == "2026-03-01T00:00:00.000Z"
    other = alice.remember(memory, "The buyer drinks green tea.", type="note")

    got = alice.get(f"/v1/memories/{memory}/records/{fact['id']}")
    assert got.status_code == 200, got.text
    assert {k: v for k, v in got.json().items() if k not in ("parent", "children")} == fact
    assert "parent" not in got.json()  # a root (§6.1)
    listed = alice.get(f"/v1/memories/{memory}/records").json()
    assert [r["id"] for r in listed["data"]] == [other["id"], fact["id"]]  # newest first
    only_notes = alice.get(f"/v1/memories/{memory}/records", types="note").json()["data"]
    assert [r["id"] for r in only_notes] == [other["id"]]
    filtered = alice.get(f"/v1/memories/{memory}/records", filters=json.dumps(
        {"field": "attributes.account", "op": "eq", "value": "acme"})).json()["data"]
    assert [r["id"] for r in filtered] == [fact["id"]]
    page = alice.get(f"/v1/memories/{memory}/records", limit=1).json()
    assert [r["id"] for r in page["data"]] == [other["id"]]
    rest = alice.get(f"/v1/memories/{memory}/records", limit=1, cursor=page["next_cursor"]).json()
    assert [r["id"] for r in rest["data"]] == [fact["id"]]

    revised = alice.patch(f"/v1/memories/{memory}/records/{fact['id']}", {"content": "Acme renews in April."})
    assert revised.status_code == 200, revised.text
    # mem0 updates in place (revise: native): the record keeps its id, its version counts on.
    assert (revised.json()["id"], revised.json()["version"], revised.json()["content"]) == (
        fact["id"], 2, "Acme renews in April.")
    history = alice.get(f"/v1/memories/{memory}/records/{fact['id']}/history").json()["data"]
    assert [(v["version"], v["content"], v["status"]) for v in history] == [
        (1, "Acme renews in March.", "superseded"), (2, "Acme renews in April.", "active")]

    forgotten = alice.delete(f"/v1/memories/{memory}/records/{fact['id']}")
    assert (forgotten.status_code, forgotten.json()["status"]) == (200, "forgotten")
    assert error_code(alice.get(f"/v1/memories/{memory}/records/{fact['id']}")) == "memory_record_not_found"
    assert alice.get(f"/v1/memories/{memory}/records/{fact['id']}", include="all").json()["status"] == "forgotten"
    assert [r["id"] for r in alice.get(f"/v1/memories/{memory}/records").json()["data"]] == [other["id"]]
    again = alice.patch(f"/v1/memories/{memory}/records/{fact['id']}", {"content": "x"})
    assert (again.status_code, error_code(again)) == (409, "memory_conflict")


@pytest.mark.slow
def test_a_record_of_another_memory_is_not_found_through_this_one(alice: Client) -> None:
    """§10.3: every record fetched by id is checked against its memory (mem0 keeps them all in one store)."""
    first, second = mem0_memory(alice, "First")["id"], mem0_memory(alice, "Second")["id"]
    record = alice.remember(first, "Only in the first.")
    native = alice.create_memory("Native")["id"]
    for memory in (second, native):
        answer = alice.get(f"/v1/memories/{memory}/records/{record['id']}")
        assert (answer.status_code, error_code(answer)) == (404, "memory_record_not_found")
    assert alice.get(f"/v1/memories/{second}/records").json()["data"] == []


@pytest.mark.slow
def test_grants_cutoff_and_unseen_is_404_hold_for_mem0_memories(alice: Client, make_client: ClientFactory) -> None:
    root = mem0_memory(alice, "Team")
    private = alice.create_memory("Private", parent_id=root["id"], restricted=True)
    record = alice.remember(root["id"], "The team meets on Mondays.")
    bob, mallory = make_client("user:bob"), make_client("user:alice", tenant_name="t-elsewhere")
    for client in (bob, mallory):
        for answer in (client.get(f"/v1/memories/{root['id']}/records"),
                       client.get(f"/v1/memories/{root['id']}/records/{record['id']}"),
                       client.post(f"/v1/memories/{root['id']}/records", {"type": "fact", "content": "x"})):
            assert (answer.status_code, error_code(answer)) == (404, "memory_not_found")
    alice.grant(root["id"], "user:bob", "read")
    assert bob.get(f"/v1/memories/{root['id']}/records/{record['id']}").json()["content"] == record["content"]
    refused = bob.post(f"/v1/memories/{root['id']}/records", {"type": "fact", "content": "x"})
    assert (refused.status_code, error_code(refused)) == (403, "memory_forbidden")
    assert error_code(bob.get(f"/v1/memories/{private['id']}/records")) == "memory_not_found"  # the cutoff


@pytest.mark.slow
def test_a_write_only_caller_is_answered_only_what_it_sent(alice: Client, make_client: ClientFactory) -> None:
    memory = mem0_memory(alice)["id"]
    record = alice.remember(memory, "Secret plan.", attributes={"code": "x1"})
    writer = make_client("user:wendy")
    alice.grant(memory, "user:wendy", "write")
    revised = writer.patch(f"/v1/memories/{memory}/records/{record['id']}", {"attributes": {"code": "x2"}})
    assert revised.status_code == 200, revised.text
    assert "content" not in revised.json()
    assert revised.json()["attributes"] == {"code": "x2"}
    gone = writer.delete(f"/v1/memories/{memory}/records/{record['id']}")
    assert "content" not in gone.json()
    assert "attributes" not in gone.json()


@pytest.mark.slow
def test_observe_keeps_each_episode_as_mem0_keeps_it(alice: Client) -> None:
    memory = mem0_memory(alice)["id"]
    answer = alice.post(f"/v1/memories/{memory}/observe", {"episodes": [
        {"content": "user: I moved to Lisbon."}, {"content": "assistant: Noted, Lisbon."}]})
    assert answer.status_code == 200, answer.text
    records = answer.json()["records"]
    assert [(r["type"], r["content"]) for r in records] == [
        ("episode", "user: I moved to Lisbon."), ("episode", "assistant: Noted, Lisbon.")]


@pytest.mark.slow
@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("POST", "/snapshots", {"name": "before"}),
    ("PUT", "/queries/open_deals", {"params": {"type": "object", "properties": {}}, "body": {"query": "x"}}),
    ("POST", "/consolidations", {}),
    ("PUT", "/prime", {"record_ids": []}),
    ("GET", "/paths", None),
    ("GET", "/records/hrec_00000000000000000000000000000000/content", None),  # files: native only
])
def test_what_mem0_does_not_implement_is_memory_unsupported(
    alice: Client, method: str, suffix: str, body: Any
) -> None:
    memory = mem0_memory(alice)["id"]
    answer = alice.request(method, f"/v1/memories/{memory}{suffix}", body)
    assert (answer.status_code, error_code(answer)) == (422, "memory_unsupported"), answer.text
    assert "mem0" in answer.json()["error"]["message"]
    as_of = alice.get(f"/v1/memories/{memory}/records", as_of="2026-01-01T00:00:00Z")
    assert (as_of.status_code, error_code(as_of)) == (422, "memory_unsupported")


@pytest.mark.slow
def test_erase_removes_from_mem0_and_its_history_and_says_what_it_could_not_reach(alice: Client) -> None:
    memory = mem0_memory(alice)["id"]
    record = alice.remember(memory, "Erase me for good.")
    alice.patch(f"/v1/memories/{memory}/records/{record['id']}", {"content": "Erase me, revised."})
    kept = alice.remember(memory, "Keep me.")
    answer = alice.post(f"/v1/memories/{memory}/erase", {"record_ids": [record["id"]]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["erased"] == [record["id"]]
    assert answer.json()["unreachable"] == []  # mem0 OSS's history table is the adapter's to clean
    for read in (alice.get(f"/v1/memories/{memory}/records/{record['id']}", include="all"),
                 alice.get(f"/v1/memories/{memory}/records/{record['id']}/history")):
        assert error_code(read) == "memory_record_not_found"
    assert [r["id"] for r in alice.get(f"/v1/memories/{memory}/records", include="all").json()["data"]] == [kept["id"]]
    assert "Erase me" not in alice.post(f"/v1/memories/{memory}/recall", {"query": "erase me"}).text


def test_a_copy_mem0_keeps_beyond_reach_is_reported_with_until_and_the_erase_answers_200(
    alice: Client, local_aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the adapter cannot clean mem0's history (the Platform's), each erased id is unreachable at
    "mem0 history" with a reason and an `until`, a string as the schema says: the report was refused
    (422, after the records were erased) when `until` was null (issue 36)."""
    provider = local_aws.container.ports.providers.connected()[0]._provider()  # bootstrap.LazyProvider's
    assert isinstance(provider, Mem0Provider)
    monkeypatch.setattr(provider, "_history_db", None)  # as with the Platform: no history table to clean
    memory = mem0_memory(alice)["id"]
    record = alice.remember(memory, "Erase me, history stays.")
    answer = alice.post(f"/v1/memories/{memory}/erase", {"record_ids": [record["id"]]})
    assert answer.status_code == 200, answer.text
    [entry] = answer.json()["unreachable"]
    assert (entry["record_id"], entry["where"], entry["count"]) == (record["id"], "mem0 history", 1)
    assert isinstance(entry["until"], str)
    assert entry["until"]
    assert entry["reason"]
    job = alice.get(f"/v1/memories/{memory}/jobs/{answer.json()['job_id']}")
    assert job.status_code == 200, job.text
    assert job.json()["unreachable"] == answer.json()["unreachable"]


def test_erase_by_filter_reaches_past_the_listing_bound(
    alice: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing pages over at most SCAN_MAX of a memory's records; an erase must reach them all: it
    stopped at the bound in silence (issue 36). The bound is made small here, to pass it with a few."""
    from uhp_memories.adapters import mem0 as adapter

    monkeypatch.setattr(adapter, "SCAN_MAX", 2)
    memory = mem0_memory(alice)["id"]
    written = [alice.remember(memory, f"Fact number {n}.")["id"] for n in range(5)]
    kept = alice.remember(memory, "A note to keep.", type="note")
    answer = alice.post(f"/v1/memories/{memory}/erase", {"filters": {"field": "type", "op": "eq", "value": "fact"}})
    assert answer.status_code == 200, answer.text
    assert sorted(answer.json()["erased"]) == sorted(written)
    monkeypatch.setattr(adapter, "SCAN_MAX", 10_000)
    listed = alice.get(f"/v1/memories/{memory}/records", include="all").json()["data"]
    assert [r["id"] for r in listed] == [kept["id"]]


def test_erase_follows_what_was_derived_within_the_memory_and_reports_what_it_cannot(alice: Client) -> None:
    """§5.2: erase removes content "from the record and from what was derived from it". In a mem0
    memory, a record derived_from another of that memory is erased with it; a native record derived from
    it is reported unreachable (an erase there runs no workflow); a mem0 record derived_from a record of
    another memory is refused, since that record's erase could not reach it (issue 36)."""
    memory = mem0_memory(alice)["id"]
    source = alice.remember(memory, "The source statement.")
    derived = alice.remember(memory, "Derived from the source.", references=[
        {"rel": "derived_from", "memory_id": memory, "record_id": source["id"]}])
    further = alice.remember(memory, "Derived from the derived one.", references=[
        {"rel": "derived_from", "memory_id": memory, "record_id": derived["id"]}])
    related = alice.remember(memory, "Only related to the source.", references=[
        {"rel": "related", "memory_id": memory, "record_id": source["id"]}])
    native = alice.create_memory("Native summaries")["id"]
    copy = alice.remember(native, "A native copy of the source.", references=[
        {"rel": "derived_from", "memory_id": memory, "record_id": source["id"]}])

    answer = alice.post(f"/v1/memories/{memory}/erase", {"record_ids": [source["id"]]})
    assert answer.status_code == 200, answer.text
    assert sorted(answer.json()["erased"]) == sorted([source["id"], derived["id"], further["id"]])
    assert [(u["record_id"], u["where"]) for u in answer.json()["unreachable"]] == [(copy["id"], "uhp_memories")]
    assert [r["id"] for r in alice.get(f"/v1/memories/{memory}/records", include="all").json()["data"]] == [
        related["id"]]
    assert alice.get(f"/v1/memories/{native}/records/{copy['id']}").status_code == 200  # erased in its memory

    native_source = alice.remember(native, "A native statement.")
    refused = alice.post(f"/v1/memories/{memory}/records", {"type": "fact", "content": "From native.", "references": [
        {"rel": "derived_from", "memory_id": native, "record_id": native_source["id"]}]})
    assert (refused.status_code, error_code(refused)) == (422, "memory_unsupported")
    assert "derived_from" in refused.json()["error"]["message"]
    assert "From native." not in alice.get(f"/v1/memories/{memory}/records", include="all").text


@pytest.mark.slow
def test_deleting_a_mem0_memory_removes_its_records_from_mem0(alice: Client, local_aws: Any) -> None:
    memory = mem0_memory(alice)["id"]
    record = alice.remember(memory, "Gone with its memory.")
    deleted = alice.delete(f"/v1/memories/{memory}")
    assert deleted.status_code in (200, 202), deleted.text
    provider = local_aws.container.ports.providers.connected()[0]
    assert provider._client.get(mem0_id_of(record["id"])) is None  # mem0's own store, read directly


# -- held to the contract (issue 36) -------------------------------------------------------------------


def connected_mem0(local_aws: Any) -> Mem0Provider:
    provider = local_aws.container.ports.providers.connected()[0]._provider()  # bootstrap.LazyProvider's
    assert isinstance(provider, Mem0Provider)
    return provider


class Failing:
    """mem0's client when its library or its host fails: every call raises."""

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("mem0 is down")

        return call


class Silent:
    """mem0's client when its host does not answer: every call outlasts the adapter's deadline."""

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            time.sleep(1.0)
            raise ConnectionError("never answered")

        return call


@pytest.mark.parametrize("outage", [Failing, Silent], ids=["answers_an_error", "does_not_answer"])
def test_a_mem0_outage_is_memory_unavailable_502_within_its_deadline(
    alice: Client, local_aws: Any, monkeypatch: pytest.MonkeyPatch, outage: type
) -> None:
    """§12: the provider did not answer, or answered with an error: memory_unavailable (502), never a 500,
    and never later than the adapter's deadline (it was a 500, and a call without a deadline: issue 36)."""
    memory = mem0_memory(alice)["id"]
    record = alice.remember(memory, "Kept before the outage.")
    provider = connected_mem0(local_aws)
    monkeypatch.setattr(provider._client, "inner", outage())
    monkeypatch.setattr(provider._client, "_timeout", 0.3)
    for method, path, body in [
        ("POST", f"/v1/memories/{memory}/records", {"type": "fact", "content": "During the outage."}),
        ("GET", f"/v1/memories/{memory}/records/{record['id']}", None),
        ("GET", f"/v1/memories/{memory}/records", None),
        ("POST", f"/v1/memories/{memory}/recall", {"query": "outage"}),
    ]:
        started = time.monotonic()
        answer = alice.request(method, path, body)
        assert (answer.status_code, error_code(answer)) == (502, "memory_unavailable"), answer.text
        assert "mem0" in answer.json()["error"]["message"]
        assert "mem0 is down" not in answer.text  # the library's own words stay in the log
        assert time.monotonic() - started < 0.9  # the deadline, not mem0's silence, ends the wait


def test_a_memory_whose_provider_is_not_connected_is_memory_unavailable_503(
    alice: Client, local_aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§12: a provider the server is not connected to is memory_unavailable (503); it was 422 memory_unsupported,
    which says the provider lacks the operation (issue 36)."""
    memory = mem0_memory(alice)["id"]
    monkeypatch.setattr(local_aws.container.ports.providers, "_others", {})
    for answer in (alice.get(f"/v1/memories/{memory}/records"),
                   alice.post(f"/v1/memories/{memory}/records", {"type": "fact", "content": "x"}),
                   alice.post(f"/v1/memories/{memory}/recall", {"query": "x"})):
        assert (answer.status_code, error_code(answer)) == (503, "memory_unavailable"), answer.text


def test_an_extension_type_is_carried_unchanged_by_a_mem0_memory(alice: Client) -> None:
    """§4.1: a server MUST carry a record of a type it does not understand unchanged. A mem0 memory refused
    every x. type with memory_unsupported (issue 36); it keeps the type in mem0's metadata and answers it."""
    memory = mem0_memory(alice)["id"]
    written = alice.post(f"/v1/memories/{memory}/records",
                         {"type": "x.acme.reminder", "content": "Call Acme back.", "attributes": {"due": "friday"}})
    assert written.status_code == 201, written.text
    task = written.json()
    assert (task["type"], task["content"], task["attributes"]) == (
        "x.acme.reminder", "Call Acme back.", {"due": "friday"})
    registered = alice.post(f"/v1/memories/{memory}/records", {"type": "x.task", "content": "", "attributes": {}})
    assert (registered.status_code, error_code(registered)) == (422, "memory_invalid")  # its schema still holds
    alice.remember(memory, "An ordinary fact.")
    got = alice.get(f"/v1/memories/{memory}/records/{task['id']}").json()
    assert (got["type"], got["attributes"]) == ("x.acme.reminder", {"due": "friday"})
    only_tasks = alice.get(f"/v1/memories/{memory}/records", types="x.acme.reminder").json()["data"]
    assert [r["id"] for r in only_tasks] == [task["id"]]
    revised = alice.patch(f"/v1/memories/{memory}/records/{task['id']}", {"attributes": {"due": "monday"}})
    assert revised.status_code == 200, revised.text
    assert (revised.json()["type"], revised.json()["attributes"]) == ("x.acme.reminder", {"due": "monday"})


def test_a_mem0_memory_answers_its_real_records_count(alice: Client) -> None:
    """§2 `records.count`: it was always 0 for a mem0 memory, its writes passing the server's counter (issue 36)."""
    parent = alice.create_memory("Native parent")["id"]
    memory = mem0_memory(alice, parent_id=parent)["id"]
    kept = [alice.remember(memory, f"Fact number {n}.")["id"] for n in range(3)]
    alice.delete(f"/v1/memories/{memory}/records/{kept[0]}")  # forgotten: no longer counted
    assert alice.get(f"/v1/memories/{memory}").json()["records"] == {"count": 2}
    [child] = alice.get("/v1/memories", parent=parent).json()["data"]
    assert child["records"] == {"count": 2}
    erased = alice.post(f"/v1/memories/{memory}/erase", {"record_ids": [kept[0], kept[1]]})  # one forgotten
    assert erased.status_code in (200, 202), erased.text
    observed = alice.post(f"/v1/memories/{memory}/observe", {"episodes": [{"content": "user: hello."}]})
    assert observed.status_code == 200, observed.text
    assert alice.get(f"/v1/memories/{memory}").json()["records"] == {"count": 2}
    assert providers(alice)["mem0"]["records_count"] == "kept"


def test_filters_over_mem0s_top_candidates_say_so_in_degraded_when_they_fall_short(alice: Client) -> None:
    """§6.3: the adapter applies fields over mem0's best candidates only (4 per result asked, at most 400);
    an answer that fell short with more left beyond them said nothing (issue 36)."""
    memory = mem0_memory(alice)["id"]
    for n in range(5):
        alice.remember(memory, f"Renewal note {n} about the contract.", attributes={"account": "other"})
    acme = {"field": "attributes.account", "op": "eq", "value": "acme"}
    short = alice.post(f"/v1/memories/{memory}/recall", {"query": "contract renewal", "filters": acme, "limit": 1})
    assert short.status_code == 200, short.text
    assert (short.json()["results"], short.json()["degraded"]) == ([], ["filters:over_top_4"])
    # Asked for 8 candidates, mem0 held 5 and answered them all: every match was looked at.
    whole = alice.post(f"/v1/memories/{memory}/recall", {"query": "contract renewal", "filters": acme, "limit": 2})
    assert (whole.json()["results"], whole.json()["degraded"]) == ([], [])
    unfiltered = alice.post(f"/v1/memories/{memory}/recall", {"query": "contract renewal", "limit": 1})
    assert (len(unfiltered.json()["results"]), unfiltered.json()["degraded"]) == (1, [])
    declared = providers(alice)["mem0"]["recall"]["filters_over"]
    assert (declared["candidates_per_result"], declared["candidates_max"]) == (4, 400)


def test_mem0_history_shows_each_versions_own_attributes_and_as_of_is_refused_as_declared(alice: Client) -> None:
    """§5.3: an old version showed the record's current attributes (issue 36); each keeps its own now. mem0
    cannot read a memory as it stood: as_of is memory_unsupported, and the capability document says so."""
    memory = mem0_memory(alice)["id"]
    record = alice.remember(memory, "The proposal for Acme.", attributes={"stage": "draft"})
    alice.patch(f"/v1/memories/{memory}/records/{record['id']}", {"attributes": {"stage": "final"}})
    alice.patch(f"/v1/memories/{memory}/records/{record['id']}", {"content": "The signed proposal for Acme."})
    history = alice.get(f"/v1/memories/{memory}/records/{record['id']}/history").json()["data"]
    assert [(v["version"], v["content"], v["attributes"]) for v in history] == [
        (1, "The proposal for Acme.", {"stage": "draft"}),
        (2, "The proposal for Acme.", {"stage": "final"}),
        (3, "The signed proposal for Acme.", {"stage": "final"}),
    ]
    declared = providers(alice)["mem0"]
    assert declared["history"] == {"content": "versions", "attributes": "versions", "structure": "none",
                                   "as_of": False}
    for answer in (alice.get(f"/v1/memories/{memory}/records/{record['id']}", as_of="2026-01-01T00:00:00Z"),
                   alice.post(f"/v1/memories/{memory}/recall", {"query": "proposal", "as_of": "2026-01-01T00:00:00Z"})):
        assert (answer.status_code, error_code(answer)) == (422, "memory_unsupported"), answer.text


def test_a_reference_to_a_record_mem0_keeps_resolves_for_its_readers_alone(alice: Client, bob: Client) -> None:
    """§4.2 and §10: a reference to a mem0 memory's record was never available, even to its readers (the
    native store was asked for it: issue 36); it resolves through the provider that keeps it now."""
    kept = mem0_memory(alice)["id"]
    target = alice.remember(kept, "The Acme contract renews in March.")
    native = alice.create_memory("Notes")["id"]
    ref = {"memory_id": kept, "record_id": target["id"], "rel": "about"}
    noted = alice.post(f"/v1/memories/{native}/records",
                       {"type": "fact", "content": "Call Acme in February.", "references": [ref]})
    assert noted.status_code == 201, noted.text
    assert noted.json()["references"] == [{**ref, "available": True}]
    beside = alice.post(f"/v1/memories/{kept}/records",
                        {"type": "fact", "content": "Acme asked for a discount.", "references": [ref]})
    assert beside.status_code == 201, beside.text
    got = alice.get(f"/v1/memories/{kept}/records/{beside.json()['id']}").json()
    assert got["references"] == [{**ref, "available": True}]
    granted = alice.post(f"/v1/memories/{native}/grants", {"principal": "user:bob", "privileges": ["read"]})
    assert granted.status_code == 201, granted.text
    seen_by_bob = bob.get(f"/v1/memories/{native}/records/{noted.json()['id']}").json()
    assert seen_by_bob["references"] == [{"memory_id": kept, "record_id": target["id"], "available": False}]
    alice.delete(f"/v1/memories/{kept}/records/{target['id']}")  # forgotten: a version that still exists
    erased = alice.post(f"/v1/memories/{kept}/erase", {"record_ids": [target["id"]]})
    assert erased.status_code in (200, 202), erased.text
    after = alice.get(f"/v1/memories/{native}/records/{noted.json()['id']}").json()
    assert after["references"] == [{"memory_id": kept, "record_id": target["id"], "available": False}]


class FailsOnce:
    """A call that fails the first time it is made (the server stopping there), then is what it was."""

    def __init__(self, real: Any, after: int = 0) -> None:
        self.real, self.after, self.failed = real, after, False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed and self.after == 0:
            self.failed = True
            raise RuntimeError("stopped here")
        self.after -= 1
        return self.real(*args, **kwargs)


def test_a_keyed_mem0_write_that_stopped_before_its_marker_is_not_added_again_by_its_retry(
    alice: Client, local_aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idempotency-Key on a mem0 memory: mem0's add comes before the DynamoDB commit that carries the key's
    marker (the records count), so an attempt that stopped between them left mem0 holding a record no marker
    named, and its retry added it again (issue 36). Each add carries the write's tag: the retry answers what
    the first attempt added, and adds only what it did not."""
    memory = mem0_memory(alice)["id"]
    provider = connected_mem0(local_aws)
    key = {"Idempotency-Key": "mem0-once"}
    body = {"type": "fact", "content": "Written to mem0 once."}
    monkeypatch.setattr(local_aws.container.ports.memories, "count_records",
                        FailsOnce(local_aws.container.ports.memories.count_records))
    stopped = alice.post(f"/v1/memories/{memory}/records", body, headers=key)
    assert stopped.status_code == 500, stopped.text  # after mem0's add, before the marker: a 5xx is never kept
    retried = alice.post(f"/v1/memories/{memory}/records", body, headers=key)
    assert retried.status_code == 201, retried.text
    listed = alice.get(f"/v1/memories/{memory}/records").json()["data"]
    assert [r["id"] for r in listed] == [retried.json()["id"]]
    assert alice.get(f"/v1/memories/{memory}").json()["records"] == {"count": 1}
    again = alice.post(f"/v1/memories/{memory}/records", body, headers=key)
    assert (again.status_code, again.json()) == (201, retried.json())  # kept now: the answer replayed

    # An observe that stopped after its second episode's add: the retry adds the third alone.
    episodes = {"episodes": [{"content": f"user: episode {n}."} for n in range(3)]}
    monkeypatch.setattr(provider._client.inner, "add", FailsOnce(provider._client.inner.add, after=2))
    stopped = alice.post(f"/v1/memories/{memory}/observe", episodes, headers={"Idempotency-Key": "observed-once"})
    assert (stopped.status_code, error_code(stopped)) == (502, "memory_unavailable"), stopped.text
    retried = alice.post(f"/v1/memories/{memory}/observe", episodes, headers={"Idempotency-Key": "observed-once"})
    assert retried.status_code == 200, retried.text
    assert [r["content"] for r in retried.json()["records"]] == [f"user: episode {n}." for n in range(3)]
    listed = alice.get(f"/v1/memories/{memory}/records", types="episode").json()["data"]
    assert sorted(r["id"] for r in listed) == sorted(r["id"] for r in retried.json()["records"])
    assert alice.get(f"/v1/memories/{memory}").json()["records"] == {"count": 4}

    # Without a key, or under another, each request adds its own.
    for headers in ({}, {"Idempotency-Key": "another"}):
        assert alice.post(f"/v1/memories/{memory}/records", body, headers=headers).status_code == 201
    assert alice.get(f"/v1/memories/{memory}").json()["records"] == {"count": 6}
