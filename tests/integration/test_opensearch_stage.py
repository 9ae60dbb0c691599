"""The local server configured as a deployed stage recalls: the OpenSearch adapter on a real OpenSearch 2.19
node behind the same API (`uhp-memories serve --search-url`), over real HTTP, the local MiniLM embedding.

The session's local stage lives in this process with the embedded engine (moto's backends and the
installed container are the process's own), so this stage is a process of its own, started once for the
module as a user starts it, with a keys file and an index of its own; each test makes its own memories.
What the index holds is read from OpenSearch directly, beside what the API answers."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests import opensearch_node
from tests.integration.conftest import Client, error_code
from tests.integration.serve_process import ServeProcess
from tests.integration.test_mcp import call, tool_names
from tests.integration.test_queries import OPEN_DEALS
from tests.integration.test_recall import FACTS, contents, recall, seeded
from uhp_memories.adapters.opensearch import connect, doc_id
from uhp_memories.domain.capabilities import native_provider
from uhp_memories.domain.fence import unwrap

pytestmark = pytest.mark.slow


@dataclass
class Stage:
    server: ServeProcess
    index: str
    search: Any  # an OpenSearch client of the node, to read the index beside the API
    alice: Client
    bob: Client
    harness: Client

    def documents(self, memory_id: str) -> set[str]:
        """The record ids the index holds for one memory (every version, current or not)."""
        self.search.indices.refresh(index=self.index)
        found = self.search.search(index=self.index, body={
            "size": 1000, "_source": ["record_id"], "query": {"term": {"memory_id": memory_id}}})
        return {hit["_source"]["record_id"] for hit in found["hits"]["hits"]}


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    url = opensearch_node.url()
    tenant = "t-" + secrets.token_hex(6)
    keys = {name: "k-" + secrets.token_hex(16) for name in ("alice", "bob", "harness", "admin")}
    principals = {"alice": "user:alice", "bob": "user:bob", "harness": "harness:os_stage", "admin": "user:root"}
    groups = {"admin": ["group:admins"]}  # the tenant's administrator, who hands a new harness list to alice
    keys_file = Path(tmp_path_factory.mktemp("opensearch-stage")) / "keys.json"
    keys_file.write_text(json.dumps({"keys": [
        {"key": keys[name], "tenant": tenant, "principal": principals[name], "groups": groups.get(name, [])}
        for name in keys]}))
    index = "uhp-stage-" + secrets.token_hex(6)
    with pytest.MonkeyPatch.context() as env:  # what the server process inherits
        env.setenv("UHP_SEARCH_INDEX", index)
        env.setenv("UHP_SEARCH_REPLICAS", "0")  # one node
        server = ServeProcess("--search-url", url, "--keys-file", str(keys_file))
    search = connect(url)
    try:
        server.wait_listening()
        assert f"recall searches the OpenSearch index {index} at {url}" in server.lines
        clients = {name: Client(server.url, keys[name], tenant, principals[name], requests.Session(),
                                admin=lambda: clients["admin"]) for name in keys}
        yield Stage(server, index, search, clients["alice"], clients["bob"], clients["harness"])
    finally:
        server.stop()
        search.indices.delete(index=index, ignore=[404])


def test_the_stage_declares_free_queries_in_opensearch_dsl(stage: Stage) -> None:
    """The capability document of this variant: the native provider with free queries on its index.
    Every capability it declares is exercised by a test of this module."""
    providers = stage.alice.get("/v1/memories/providers")
    assert providers.status_code == 200, providers.text
    assert providers.json()["data"] == [native_provider(("opensearch-dsl",))]
    assert "memory_query" in tool_names(stage.harness)  # the MCP tool is offered where the index confines


def test_remember_and_recall_with_every_signal(stage: Stage) -> None:
    alice = stage.alice
    memory = seeded(alice)
    assert len(stage.documents(memory["id"])) == 4  # remembered records are in the OpenSearch index
    by_meaning = recall(alice, memory["id"], query="When is the Acme renewal?", limit=2)
    assert contents(by_meaning)[0] == FACTS[0]
    assert "query" in by_meaning["results"][0]["why"]
    assert by_meaning["abstain"] is False
    assert by_meaning["degraded"] == []
    words = recall(alice, memory["id"], text="sushi")
    assert contents(words) == [FACTS[2]]
    assert words["results"][0]["why"] == ["text"]
    fields = recall(alice, memory["id"], filters={"field": "attributes.account", "op": "eq", "value": "globex"})
    assert contents(fields) == [FACTS[1]]
    assert fields["results"][0]["why"] == ["filters"]
    confined = recall(alice, memory["id"], query="When is the Acme renewal?", text="renews contract",
                      filters={"field": "attributes.account", "op": "eq", "value": "initech"})
    assert contents(confined) == [FACTS[3]]
    assert recall(alice, memory["id"], query="Acme renewal", types=["note"])["results"] == []
    assert recall(alice, memory["id"], query="What is the boiling point of mercury in kelvin?")["abstain"] is True
    # Depth: a child's record, found from the parent, on one scale; a depth past the cap says so.
    child = alice.create_memory("Acme", parent_id=memory["id"])
    note = alice.remember(child["id"], "Acme legal needs 60 days notice before any renewal.")
    assert note["id"] not in [r["record"]["id"] for r in recall(alice, memory["id"], text="legal notice")["results"]]
    deep = recall(alice, memory["id"], text="legal notice", depth=1)
    assert deep["results"][0]["record"]["id"] == note["id"]
    assert deep["results"][0]["record"]["memory_id"] == child["id"]
    assert recall(alice, memory["id"], text="legal notice", depth=7)["degraded"] == ["depth:capped_at_3"]
    # Another principal's memory is never reached, whatever the index holds.
    assert error_code(stage.bob.post(f"/v1/memories/{memory['id']}/recall", {"query": "Acme"})) == "memory_not_found"


def test_revise_forget_history_snapshots_and_as_of(stage: Stage) -> None:
    alice = stage.alice
    memory = alice.create_memory("Facts")
    first = alice.remember(memory["id"], "The launch is planned for April.")
    assert alice.post(f"/v1/memories/{memory['id']}/snapshots", {"name": "plan-a"}).status_code == 201
    revised = alice.patch(f"/v1/memories/{memory['id']}/records/{first['id']}",
                          {"content": "The launch moved to September."}).json()
    assert contents(recall(alice, memory["id"], query="When is the launch?")) == ["The launch moved to September."]
    then = recall(alice, memory["id"], query="When is the launch?", as_of="plan-a")
    assert contents(then) == ["The launch is planned for April."]
    everything = recall(alice, memory["id"], text="launch", include="all")
    assert {r["record"]["status"] for r in everything["results"]} == {"active", "superseded"}
    history = alice.get(f"/v1/memories/{memory['id']}/records/{revised['id']}/history").json()["data"]
    assert {v["content"] for v in history} == {"The launch is planned for April.", "The launch moved to September."}
    assert stage.documents(memory["id"]) == {first["id"], revised["id"]}  # both versions indexed
    assert alice.delete(f"/v1/memories/{memory['id']}/records/{revised['id']}").status_code == 200
    assert recall(alice, memory["id"], text="launch")["results"] == []
    forgotten = recall(alice, memory["id"], text="launch", include="all")
    assert "forgotten" in {r["record"]["status"] for r in forgotten["results"]}


def test_erase_takes_its_documents_out_of_the_index_and_reports_the_segments(stage: Stage) -> None:
    alice = stage.alice
    memory = alice.create_memory("Facts")
    secret = alice.remember(memory["id"], "The vault code is pelican-42.")
    kept = alice.remember(memory["id"], "The vault opens at nine.")
    revised = alice.patch(f"/v1/memories/{memory['id']}/records/{secret['id']}",
                          {"content": "The vault code is pelican-43."}).json()
    assert stage.documents(memory["id"]) == {secret["id"], kept["id"], revised["id"]}
    erased = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [revised["id"]]})
    assert erased.status_code == 200, erased.text
    report = erased.json()
    assert set(report["erased"]) == {secret["id"], revised["id"]}
    # A deployed stage's search index keeps a deleted document in its segments until a merge: said.
    assert {(u["record_id"], u["where"]) for u in report["unreachable"]} == {
        (secret["id"], "opensearch_segments"), (revised["id"], "opensearch_segments")}
    assert stage.documents(memory["id"]) == {kept["id"]}
    for record_id in (secret["id"], revised["id"]):
        assert stage.search.get(index=stage.index, id=doc_id(alice.tenant, memory["id"], record_id),
                                ignore=[404])["found"] is False
    assert recall(alice, memory["id"], text="pelican", include="all")["results"] == []
    # Deleting the memory takes every document of it out of the index.
    assert alice.delete(f"/v1/memories/{memory['id']}").status_code in (200, 202, 204)
    assert stage.documents(memory["id"]) == set()


def test_free_queries_over_rest_and_mcp_stay_in_their_memory(stage: Stage) -> None:
    alice, bob = stage.alice, stage.bob
    memory = seeded(alice)
    theirs = seeded(bob, "Bob's")
    old = alice.remember(memory["id"], "Acme asked for a discount in April.")
    alice.patch(f"/v1/memories/{memory['id']}/records/{old['id']}", {"content": "Acme asked for a discount in May."})
    path = f"/v1/memories/{memory['id']}/query"
    answer = alice.post(path, {"language": "opensearch-dsl", "statement": {"match": {"text": "acme discount"}}})
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert sorted(contents(found)) == sorted([FACTS[0], "Acme asked for a discount in May."])
    assert {r["record"]["memory_id"] for r in found["results"]} == {memory["id"]}
    assert all(r["why"] == ["statement"] for r in found["results"])
    assert found["degraded"] == []
    # Parameters fill the statement; a statement that tries to reach elsewhere reaches nothing more.
    by_param = alice.post(path, {"language": "opensearch-dsl", "statement": {"match": {"text": "{{word}}"}},
                                 "params": {"word": "sushi"}})
    assert contents(by_param.json()) == [FACTS[2]]
    escape = {"bool": {"should": [{"match_all": {}}, {"term": {"record_id": theirs["id"]}}]}}
    everything = alice.post(path, {"language": "opensearch-dsl", "statement": escape, "limit": 100}).json()
    assert len(everything["results"]) == 5
    assert {r["record"]["memory_id"] for r in everything["results"]} == {memory["id"]}
    # The allowlist refuses what could walk the shared index; the cluster refuses what it cannot read.
    refused = alice.post(path, {"language": "opensearch-dsl", "statement": {"term": {"tenant": "other"}}})
    assert error_code(refused) == "memory_invalid"
    unreadable = alice.post(path, {"language": "opensearch-dsl",
                                   "statement": {"range": {"written_at": {"gte": "yesterday"}}}})
    assert error_code(unreadable) == "memory_invalid"
    assert "search_phase_execution_exception" in unreadable.json()["error"]["message"]
    assert error_code(stage.bob.post(path, {"language": "opensearch-dsl", "statement": {"match_all": {}}})) \
        == "memory_not_found"
    # The same statement over MCP, by a harness attached to read the memory.
    alice.claim("os_stage")
    attached = alice.put("/v1/harnesses/os_stage/memories",
                         {"memories": [{"memory_id": memory["id"], "access": "read", "default": False}]})
    assert attached.status_code == 200, attached.text
    failed, tool = call(stage.harness, "memory_query", {
        "memory_id": memory["id"], "language": "opensearch-dsl", "statement": {"match": {"text": "sushi"}}})
    assert not failed, tool
    assert [r["id"] for r in tool["results"]] == [found_id(alice, memory["id"], FACTS[2])]
    assert [unwrap(r["content"], tool["fence"]) for r in tool["results"]] == [FACTS[2]]
    assert tool["results"][0]["why"] == ["statement"]
    failed, tool = call(stage.harness, "memory_query", {
        "memory_id": theirs["id"], "language": "opensearch-dsl", "statement": {"match_all": {}}})
    assert failed
    assert tool["error"]["code"] == "memory_not_found"


def found_id(client: Client, memory_id: str, content: str) -> str:
    (hit,) = recall(client, memory_id, text=content, limit=1)["results"]
    return str(hit["record"]["id"])


def test_named_queries_types_observe_consolidation_prime_and_files(stage: Stage) -> None:
    """The rest of what the document declares, on this stage: each reads or writes the OpenSearch index."""
    alice = stage.alice
    memory = alice.create_memory("Deals")
    for account, stage_name, text in (("acme", "open", "Acme deal for 40 seats"),
                                      ("acme", "closed", "Acme deal for 5 seats")):
        alice.remember(memory["id"], text, attributes={"account": account, "stage": stage_name})
    query = f"/v1/memories/{memory['id']}/queries/open_deals_for"
    assert alice.put(query, OPEN_DEALS).status_code == 200
    ran = alice.post(query, {"params": {"account": "acme"}})
    assert contents(ran.json()) == ["Acme deal for 40 seats"], ran.text
    # A typed record and one of its read operations.
    task = alice.post(f"/v1/memories/{memory['id']}/records",
                      {"type": "x.task", "content": "", "attributes": {"title": "Send the Acme quote"}}).json()
    assert "query" in recall(alice, memory["id"], query="Send the Acme quote")["results"][0]["why"]
    done = alice.post(f"/v1/memories/{memory['id']}/records/{task['id']}/operations/complete", {})
    assert done.status_code == 200, done.text
    (found,) = recall(alice, memory["id"], text="quote", types=["x.task"])["results"]
    assert (found["record"]["id"], found["record"]["attributes"]["status"]) == (done.json()["record"]["id"], "done")
    # Observe keeps episodes, which recall reads with the turns around them.
    episodes = [{"content": "alice: did the quote go out?"}, {"content": "bob: yes, on Friday morning"}]
    observed = alice.post(f"/v1/memories/{memory['id']}/observe", {"episodes": episodes})
    assert observed.status_code in (200, 201), observed.text
    turn = recall(alice, memory["id"], query="did the quote go out?", types=["episode"])
    assert contents(turn)[:2] == ["alice: did the quote go out?", "bob: yes, on Friday morning"]
    # A consolidation run forgets an exact repeat, and the index follows.
    repeat = alice.remember(memory["id"], "  acme DEAL for 40 seats ", attributes={"account": "acme", "stage": "open"})
    run = alice.post(f"/v1/memories/{memory['id']}/consolidations", {})
    assert run.status_code == 201, run.text
    assert run.json()["changes"]["forgotten"] == 1
    assert repeat["id"] not in [r["record"]["id"] for r in recall(alice, memory["id"], text="deal")["results"]]
    # Prime places a pinned record for an attached harness.
    pinned = alice.put(f"/v1/memories/{memory['id']}/prime", {"record_ids": [done.json()["record"]["id"]]})
    assert pinned.status_code == 200, pinned.text
    alice.claim("os_stage")  # when this test runs alone
    alice.put("/v1/harnesses/os_stage/memories",
              {"memories": [{"memory_id": memory["id"], "access": "read", "default": False}]})
    primed = stage.harness.get("/v1/harnesses/os_stage/prime")
    assert primed.status_code == 200, primed.text
    assert [r["id"] for r in primed.json()["memories"][0]["records"]] == [done.json()["record"]["id"]]
    # A file record is remembered and indexed like any other.
    uploaded = alice.upload("notes.txt", b"the kickoff is in Lisbon")
    filed = alice.remember(memory["id"], type="note", content={"file": {"id": uploaded["id"]}})  # type: ignore[arg-type]
    assert filed["id"] in stage.documents(memory["id"])
