"""§6 recall through the local gateway: the embedded engine (sqlite3 FTS5 + numpy) and the real
all-MiniLM-L6-v2 model, read back from DynamoDB, confined to the memory in the path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.domain.recall.model import SearchUnavailable
from uhp_memories.local.moto_env import LocalAws

pytestmark = pytest.mark.slow

FACTS = [
    "Acme renews its contract in March and wants the annual discount kept.",
    "The CFO of Globex prefers email over phone calls.",
    "Lunch options near the office include sushi and tacos.",
    "Initech's procurement needs three quotes for any purchase above ten thousand dollars.",
]
ACCOUNTS = ["acme", "globex", "office", "initech"]


def recall(client: Client, memory_id: str, **body: Any) -> dict[str, Any]:
    answer = client.post(f"/v1/memories/{memory_id}/recall", body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def contents(answer: dict[str, Any]) -> list[str]:
    return [r["record"]["content"] for r in answer["results"]]


def seeded(client: Client, name: str = "Sales", **fields: Any) -> dict[str, Any]:
    memory = client.create_memory(name, description=f"what {name} knows", **fields)
    for fact, account in zip(FACTS, ACCOUNTS, strict=True):
        client.remember(memory["id"], fact, attributes={"account": account})
    return memory


def test_a_question_finds_the_record_that_answers_it(alice: Client) -> None:
    memory = seeded(alice)
    answer = recall(alice, memory["id"], query="When is the Acme renewal?", limit=2)
    assert contents(answer)[0] == FACTS[0]
    top = answer["results"][0]
    assert "query" in top["why"]
    assert 0 < top["score"] <= 1
    assert top["record"]["trust"] == "untrusted"
    assert top["record"]["written_by"] == {"kind": "user", "id": "alice"}
    assert answer["abstain"] is False
    assert answer["degraded"] == []


def test_words_alone_and_fields_alone(alice: Client) -> None:
    memory = seeded(alice)
    words = recall(alice, memory["id"], text="sushi")
    assert contents(words) == [FACTS[2]]
    assert words["results"][0]["why"] == ["text"]
    fields = recall(alice, memory["id"], filters={"field": "attributes.account", "op": "eq", "value": "globex"})
    assert contents(fields) == [FACTS[1]]
    assert fields["results"][0]["why"] == ["filters"]


def test_filters_confine_every_signal(alice: Client) -> None:
    memory = seeded(alice)
    answer = recall(alice, memory["id"], query="When is the Acme renewal?", text="renews contract",
                    filters={"field": "attributes.account", "op": "eq", "value": "initech"})
    assert contents(answer) == [FACTS[3]]
    assert set(answer["results"][0]["why"]) >= {"filters"}
    none = recall(alice, memory["id"], query="Acme renewal", types=["note"])
    assert none["results"] == []


def test_an_unanswerable_question_abstains(alice: Client) -> None:
    memory = seeded(alice)
    answer = recall(alice, memory["id"], query="What is the boiling point of mercury in kelvin?")
    assert answer["abstain"] is True


# An order number means little to the model: the question is closest in meaning to the other orders'
# deliveries (cosine 0.77 to 0.82 with MiniLM int8) and only then to the order it names (0.63).
ORDERS = ["Order 7731 left the Leeds warehouse on Monday."] + [
    f"Order {n} was delivered to the customer {when}."
    for n, when in zip(
        (7713, 1377, 3177, 7137, 7371, 1737, 3717, 7173),
        ("on Friday", "yesterday", "this morning", "on Tuesday", "last week", "on Monday", "at noon", "on time"),
        strict=True,
    )
]


def test_a_query_alone_is_searched_by_its_words_too(alice: Client) -> None:
    memory = alice.create_memory("Orders")
    for order in ORDERS:
        alice.remember(memory["id"], order)
    question = "Has order 7731 been delivered to the customer?"
    meaning_only = recall(alice, memory["id"], query=question, query_words=False, limit=3)
    assert ORDERS[0] not in contents(meaning_only)
    assert all(r["why"] == ["query"] for r in meaning_only["results"])
    asked = recall(alice, memory["id"], query=question, limit=3)
    assert contents(asked)[0] == ORDERS[0]
    assert asked["results"][0]["why"] == ["query"]  # the query's own words found it: they serve the query
    words_given = recall(alice, memory["id"], query=question, text="Leeds warehouse", limit=3)
    assert contents(words_given)[0] == ORDERS[0]


def test_scores_compare_across_requests_and_abstain_agrees_with_them(alice: Client) -> None:
    memory = seeded(alice)
    alice.remember(memory["id"], "The buyer prefers green tea.")
    on_topic = recall(alice, memory["id"], query="what does the buyer drink?")
    off_topic = recall(alice, memory["id"], query="What is the boiling point of mercury in kelvin?")
    assert contents(on_topic)[0] == "The buyer prefers green tea."
    for answer in (on_topic, off_topic):
        scores = [r["score"] for r in answer["results"]]
        assert scores == sorted(scores, reverse=True)
        assert all(0 <= score <= 1 for score in scores)
        assert answer["abstain"] is (scores[0] < 0.5)  # the first score is the answer's confidence
    assert on_topic["abstain"] is False
    assert off_topic["abstain"] is True
    assert off_topic["results"][0]["score"] < 0.5 <= on_topic["results"][0]["score"]


def test_a_recall_that_asks_for_nothing_is_refused_saying_what_to_send(alice: Client) -> None:
    memory = seeded(alice)
    path = f"/v1/memories/{memory['id']}/recall"
    for body in ({}, {"query": ""}, {"query": "  ", "limit": 3, "include": "all"}):
        answer = alice.post(path, body)
        assert answer.status_code == 422, body
        assert error_code(answer) == "memory_invalid"
        assert all(field in answer.json()["error"]["message"] for field in ("query", "text", "filters", "types"))
    assert contents(recall(alice, memory["id"], types=["fact"], limit=100)) == FACTS[::-1]  # newest first


def test_recall_reads_only_the_memory_in_the_path(alice: Client, make_client: ClientFactory) -> None:
    mine = seeded(alice, "Mine")
    other = alice.create_memory("Other")
    alice.remember(other["id"], "Acme renews its contract in March (a copy in another memory).")
    stranger = make_client("user:mallory", tenant_name="another-tenant")
    theirs = stranger.create_memory("Theirs")
    stranger.remember(theirs["id"], "Acme renews its contract in March (another tenant).")
    answer = recall(alice, mine["id"], query="Acme renewal", text="Acme renews", limit=100)
    assert {r["record"]["memory_id"] for r in answer["results"]} == {mine["id"]}
    assert error_code(stranger.post(f"/v1/memories/{mine['id']}/recall", {"query": "Acme"})) == "memory_not_found"


def test_parent_and_children_are_where_the_reader_may_go(alice: Client, make_client: ClientFactory) -> None:
    root = alice.create_memory("Company", description="the whole company")
    sales = seeded(alice, "Sales", parent_id=root["id"])
    acme = alice.create_memory("Acme", description="the Acme account", parent_id=sales["id"])
    alice.create_memory("Private", description="hidden", parent_id=sales["id"], restricted=True)
    alice.remember(acme["id"], "Acme legal needs 60 days notice.")
    answer = recall(alice, sales["id"], query="renewal")
    assert answer["parent"]["id"] == root["id"]
    assert answer["parent"]["description"] == "the whole company"
    assert sorted(c["name"] for c in answer["children"]) == ["Acme", "Private"]
    acme_summary = next(c for c in answer["children"] if c["name"] == "Acme")
    assert acme_summary["records"] == {"count": 1}
    # Bob may read Sales only: no parent (absent, not null), and only the children he may read.
    bob = make_client("user:bob")
    alice.grant(sales["id"], "user:bob", "read")
    seen = recall(bob, sales["id"], query="renewal")
    assert "parent" not in seen
    assert [c["name"] for c in seen["children"]] == ["Acme"]
    assert "parent" not in recall(alice, root["id"], query="renewal")


def test_only_memories_the_caller_may_read_are_named_as_parent_or_children(
    alice: Client, make_client: ClientFactory
) -> None:
    bob = make_client("user:bob")
    root = alice.create_memory("Company")
    alice.grant(root["id"], "user:bob", "create")  # bob may add under Company, not read it
    team = alice.create_memory("Team", parent_id=root["id"], restricted=True)
    alice.grant(team["id"], "user:bob", "read")
    inbox = alice.create_memory("Inbox", parent_id=team["id"], restricted=True)
    alice.grant(inbox["id"], "user:bob", "write")
    drafts = alice.create_memory("Drafts", parent_id=team["id"], restricted=True)
    alice.grant(drafts["id"], "user:bob", "create")
    notes = alice.create_memory("Notes", parent_id=team["id"], restricted=True)
    alice.grant(notes["id"], "user:bob", "read")
    seen = recall(bob, team["id"], query="anything")
    assert [c["name"] for c in seen["children"]] == ["Notes"]
    assert "parent" not in seen  # create on Company is not read: the parent is not named
    # A write-only or create-only grantee still reaches the memory by its id.
    assert bob.remember(inbox["id"], "dropped in the inbox")["memory_id"] == inbox["id"]
    assert bob.post("/v1/memories", {"name": "Mine", "parent_id": drafts["id"]}).status_code == 201
    assert bob.post("/v1/memories", {"name": "Also mine", "parent_id": root["id"]}).status_code == 201
    # Alice reads all of them.
    assert sorted(c["name"] for c in recall(alice, team["id"], query="anything")["children"]) == [
        "Drafts", "Inbox", "Notes"
    ]


def test_the_records_listing_names_parent_and_children_as_recall_does(
    alice: Client, make_client: ClientFactory
) -> None:
    root = alice.create_memory("Company", description="the whole company")
    sales = seeded(alice, "Sales", parent_id=root["id"])
    alice.create_memory("Acme", description="the Acme account", parent_id=sales["id"])
    alice.create_memory("Private", parent_id=sales["id"], restricted=True)
    listing = alice.get(f"/v1/memories/{sales['id']}/records").json()
    walk = recall(alice, sales["id"], query="renewal")
    assert listing["parent"] == walk["parent"]
    assert listing["parent"]["description"] == "the whole company"
    assert listing["children"] == walk["children"]
    assert sorted(c["name"] for c in listing["children"]) == ["Acme", "Private"]
    bob = make_client("user:bob")
    alice.grant(sales["id"], "user:bob", "read")
    seen = bob.get(f"/v1/memories/{sales['id']}/records").json()
    assert "parent" not in seen
    assert [c["name"] for c in seen["children"]] == ["Acme"]
    assert "parent" not in alice.get(f"/v1/memories/{root['id']}/records").json()


def test_depth_reads_descendants_and_reports_a_cap(alice: Client) -> None:
    sales = seeded(alice, "Sales")
    acme = alice.create_memory("Acme", parent_id=sales["id"])
    note = alice.remember(acme["id"], "Acme legal needs 60 days notice before any renewal.")
    flat = recall(alice, sales["id"], text="legal notice")
    assert note["id"] not in [r["record"]["id"] for r in flat["results"]]
    deep = recall(alice, sales["id"], text="legal notice", depth=1)
    assert deep["results"][0]["record"]["id"] == note["id"]
    assert deep["results"][0]["record"]["memory_id"] == acme["id"]
    capped = recall(alice, sales["id"], text="legal notice", depth=7)
    assert capped["degraded"] == ["depth:capped_at_3"]


def test_depth_ranks_every_memory_searched_on_one_scale(alice: Client, make_client: ClientFactory) -> None:
    sales = seeded(alice, "Sales")
    lunch = alice.create_memory("Office", parent_id=sales["id"])
    weak = alice.remember(lunch["id"], "The office contract for the coffee machine runs out in June.")
    secret = alice.create_memory("Board", parent_id=sales["id"], restricted=True)
    hidden = alice.remember(secret["id"], "Acme renews its contract in March, says the board.")
    question = {"query": "When does Acme renew its contract?", "text": "Acme renew contract March"}
    deep = recall(alice, sales["id"], **question, depth=1)
    found = [r["record"]["id"] for r in deep["results"]]
    # The child's weak match is found, and ranks below the strong match of the memory above it.
    assert deep["results"][0]["record"]["content"] == FACTS[0]
    assert found.index(weak["id"]) > 0
    assert deep["results"][found.index(weak["id"])]["score"] < deep["results"][0]["score"]
    # Depth reads only the descendants the caller may read: bob sees Sales and Office, not Board.
    bob = make_client("user:bob")
    alice.grant(sales["id"], "user:bob", "read")
    seen = recall(bob, sales["id"], **question, depth=1)
    assert hidden["id"] not in [r["record"]["id"] for r in seen["results"]]
    assert {r["record"]["memory_id"] for r in seen["results"]} <= {sales["id"], lunch["id"]}
    assert [c["name"] for c in seen["children"]] == ["Office"]


def test_revise_forget_and_as_of_keep_the_index_in_step(alice: Client) -> None:
    memory = alice.create_memory("Facts")
    first = alice.remember(memory["id"], "The launch is planned for April.")
    assert alice.post(f"/v1/memories/{memory['id']}/snapshots", {"name": "plan-a"}).status_code == 201
    revised = alice.patch(f"/v1/memories/{memory['id']}/records/{first['id']}",
                          {"content": "The launch moved to September."}).json()
    now = recall(alice, memory["id"], query="When is the launch?")
    assert contents(now) == ["The launch moved to September."]
    then = recall(alice, memory["id"], query="When is the launch?", as_of="plan-a")
    assert contents(then) == ["The launch is planned for April."]
    everything = recall(alice, memory["id"], text="launch", include="all")
    assert {r["record"]["status"] for r in everything["results"]} == {"active", "superseded"}
    assert alice.delete(f"/v1/memories/{memory['id']}/records/{revised['id']}").status_code == 200
    assert recall(alice, memory["id"], text="launch")["results"] == []


def test_erase_removes_the_record_from_the_index(alice: Client, local_aws: LocalAws) -> None:
    memory = alice.create_memory("Facts")
    secret = alice.remember(memory["id"], "The vault code is pelican-42.")
    assert recall(alice, memory["id"], text="pelican")["results"]
    erased = alice.post(f"/v1/memories/{memory['id']}/erase", {"record_ids": [secret["id"]]})
    assert erased.status_code == 200, erased.text
    assert recall(alice, memory["id"], text="pelican")["results"] == []
    engine = local_aws.container.recall_engine()  # type: ignore[union-attr]
    assert engine.index.get(alice.tenant, memory["id"], secret["id"]) is None


def test_recall_needs_read_and_valid_requests(alice: Client, make_client: ClientFactory) -> None:
    memory = seeded(alice)
    creator = make_client("user:creator")
    alice.grant(memory["id"], "user:creator", "create")
    path = f"/v1/memories/{memory['id']}/recall"
    assert error_code(creator.post(path, {"query": "x"})) == "memory_forbidden"
    for body in ({"limit": 101}, {"limit": 0}, {"filters": {"field": "nope", "op": "eq", "value": 1}},
                 {"include": "some"}, {"depth": -1}, {"as_of": "no-such-snapshot"}, {"bogus": 1}):
        answer = alice.post(path, body)
        assert answer.status_code == 422, body
        assert error_code(answer) == "memory_invalid"


def test_without_its_embedder_recall_searches_the_words_and_says_so(
    alice: Client, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = seeded(alice)
    engine = local_aws.container.recall_engine()  # type: ignore[union-attr]

    def down(texts: Any) -> Any:
        raise SearchUnavailable("Bedrock did not embed: ThrottlingException")

    monkeypatch.setattr(engine.embedder, "embed", down)
    # A question alone: its words are searched, the results say so, and so does degraded.
    asked = recall(alice, memory["id"], query="When does Acme renew its contract?")
    assert asked["degraded"] == ["query:embedder_unavailable"]
    assert contents(asked)[0] == FACTS[0]
    assert all(r["why"] == ["query"] for r in asked["results"])  # the query's words serve it
    assert asked["abstain"] is False
    # Words and fields given too: they are what was asked, and done.
    both = recall(alice, memory["id"], query="who likes email", text="email",
                  filters={"field": "attributes.account", "op": "eq", "value": "globex"})
    assert both["degraded"] == ["query:embedder_unavailable"]
    assert contents(both) == [FACTS[1]]
    assert both["results"][0]["why"] == ["text", "filters"]
    # Nothing the words find: "I do not know".
    none = recall(alice, memory["id"], query="zebra migration patterns")
    assert none["results"] == []
    assert none["abstain"] is True
    # Back up: the meaning is searched again, and nothing is reported.
    monkeypatch.undo()
    again = recall(alice, memory["id"], query="When does Acme renew its contract?")
    assert again["degraded"] == []
    assert "query" in again["results"][0]["why"]
