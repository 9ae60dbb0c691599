"""RecallService (§6) over the in-memory fakes and a real RecallEngine on the embedded index with the
hashing embedder: access, depth and its cap, parent and children, abstain, a query that cannot be
embedded, limits, and every hit read back from the record repository."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.unit.conftest import World, caller
from uhp_memories.adapters.system import ThreadOverlap
from uhp_memories.api.errors import HTTP_STATUS
from uhp_memories.domain.errors import MemoryForbidden, MemoryInvalid, MemoryNotFound
from uhp_memories.domain.limits import MAX_DEPTH, RECALL_LIMIT_MAX
from uhp_memories.domain.memories.model import Memory
from uhp_memories.domain.recall.abstain import (
    ABSTAIN_BELOW,
    CALIBRATIONS,
    UNCALIBRATED,
    UNCALIBRATED_SIMILARITY,
    AbstainPolicy,
    Calibration,
    Judgement,
    best_similarity,
    named_words,
)
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import (
    QUERY_NOT_EMBEDDED,
    MemoryUnavailable,
    RecallAnswer,
    RecallInput,
    SearchUnavailable,
)
from uhp_memories.domain.recall.service import RecallService
from uhp_memories.domain.records.model import RecordInput
from uhp_memories.domain.records.service import RecordService
from uhp_memories.local.embedded import EmbeddedSearchIndex
from uhp_memories.local.hashing import HashingEmbedder

ALICE = caller("user:alice")
BOB = caller("user:bob")
BOB_ELSEWHERE = caller("user:bob", tenant="globex")


class SwitchableEmbedder(HashingEmbedder):
    """The hashing embedder, which stops answering when told to (Bedrock throttled or down)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.down = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.down:
            raise SearchUnavailable("the embedding model did not answer")
        return super().embed(texts)


BESIDE_THE_REQUEST = ThreadOverlap(name="test-recall-beside")


@dataclass
class Rig:
    world: World
    embedder: SwitchableEmbedder
    engine: RecallEngine
    records: RecordService
    connected: list[bool] = field(default_factory=lambda: [True])

    def service(self, abstain: AbstainPolicy | None = None) -> RecallService:
        # As deployed (bootstrap.py): what a recall reads beside its search runs on another thread.
        return RecallService(
            self.world.ports, self.world.memories, self.records, self.index, abstain or AbstainPolicy(0.0),
            overlap=BESIDE_THE_REQUEST,
        )

    def index(self) -> RecallEngine | None:
        return self.engine if self.connected[0] else None

    def recall(self, who: Any, memory_id: str, **request: Any) -> RecallAnswer:
        return self.service().recall(who, memory_id, RecallInput(**request))

    def memory(self, name: str, parent: Memory | None = None, restricted: bool = False) -> Memory:
        return self.world.memories.create(
            ALICE, name=name, parent_id=parent.id if parent else None, restricted=restricted
        ).memory

    def remember(self, memory: Memory, content: str, type_: str = "fact") -> str:
        return self.records.remember(ALICE, memory.id, RecordInput(type_, content, {})).record.id


@pytest.fixture
def rig(world: World) -> Iterator[Rig]:
    embedder = SwitchableEmbedder()
    index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    engine = RecallEngine(index, embedder)
    rig = Rig(world, embedder, engine, RecordService(world.ports, world.memories, None, lambda: engine))
    yield rig
    index.close()


def contents(answer: RecallAnswer) -> list[str]:
    return [r.record.record.content for r in answer.results]


# -- access --------------------------------------------------------------------------------------


def test_an_unknown_memory_and_one_the_caller_holds_nothing_on_are_the_same_not_found(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews in March")
    errors = []
    for who, memory_id in ((BOB, sales.id), (ALICE, "hmem_" + "f" * 32), (BOB_ELSEWHERE, sales.id)):
        with pytest.raises(MemoryNotFound) as raised:
            rig.recall(who, memory_id, query="Acme renews")
        errors.append(raised.value)
    assert {e.code for e in errors} == {"memory_not_found"}
    assert {type(e) for e in errors} == {MemoryNotFound}


def test_recall_needs_read_and_a_write_only_grantee_is_forbidden(rig: Rig) -> None:
    inbox = rig.memory("Inbox")
    rig.remember(inbox, "Acme renews in March")
    rig.world.grants.create(ALICE, inbox.id, "user:bob", ["write", "create", "delete"])
    with pytest.raises(MemoryForbidden):
        rig.recall(BOB, inbox.id, query="Acme renews")


def test_a_read_grant_inherited_from_an_ancestor_is_enough_to_recall(rig: Rig) -> None:
    company = rig.memory("Company")
    sales = rig.memory("Sales", company)
    rig.remember(sales, "Acme renews in March")
    rig.world.grants.create(ALICE, company.id, "group:staff", ["read"])
    staff = caller("user:carol", groups=("group:staff",))
    assert contents(rig.recall(staff, sales.id, text="Acme")) == ["Acme renews in March"]


def test_a_memory_being_deleted_is_not_found_to_recall(rig: Rig) -> None:
    doomed = rig.memory("Doomed")
    rig.remember(doomed, "Acme renews in March")
    rig.world.ports.memories.mark_deleting("acme", [doomed.id])
    with pytest.raises(MemoryNotFound):
        rig.recall(ALICE, doomed.id, text="Acme")


def test_access_is_checked_before_the_request_is_validated(rig: Rig) -> None:
    sales = rig.memory("Sales")
    with pytest.raises(MemoryNotFound):
        rig.recall(BOB, sales.id, text="Acme", limit=0, include="bogus", depth=-1)


def test_an_outsider_is_told_not_found_even_while_the_embedder_is_down(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.embedder.down = True
    with pytest.raises(MemoryNotFound):
        rig.recall(BOB, sales.id, query="Acme renews")


# -- depth ---------------------------------------------------------------------------------------


def chain(rig: Rig, levels: int) -> list[Memory]:
    """A root and `levels` descendants below it, one per level, each holding one record naming it."""
    nodes = [rig.memory("level0")]
    rig.remember(nodes[0], "renewal noted at level0")
    for level in range(1, levels + 1):
        nodes.append(rig.memory(f"level{level}", nodes[-1]))
        rig.remember(nodes[-1], f"renewal noted at level{level}")
    return nodes


def test_depth_zero_searches_this_memory_only(rig: Rig) -> None:
    nodes = chain(rig, 2)
    answer = rig.recall(ALICE, nodes[0].id, text="renewal")
    assert contents(answer) == ["renewal noted at level0"]
    assert answer.degraded == []


def test_depth_adds_descendants_level_by_level(rig: Rig) -> None:
    nodes = chain(rig, 3)
    for depth in (1, 2, 3):
        found = contents(rig.recall(ALICE, nodes[0].id, text="renewal", depth=depth))
        assert sorted(found) == [f"renewal noted at level{n}" for n in range(depth + 1)]


def test_depth_starts_from_the_memory_recalled_not_the_root(rig: Rig) -> None:
    nodes = chain(rig, 3)
    found = contents(rig.recall(ALICE, nodes[1].id, text="renewal", depth=1))
    assert sorted(found) == ["renewal noted at level1", "renewal noted at level2"]


def test_depth_above_the_cap_is_capped_and_the_cap_is_reported(rig: Rig) -> None:
    nodes = chain(rig, MAX_DEPTH + 1)
    answer = rig.recall(ALICE, nodes[0].id, text="renewal", depth=MAX_DEPTH + 5)
    assert answer.degraded == [f"depth:capped_at_{MAX_DEPTH}"]
    assert sorted(contents(answer)) == [f"renewal noted at level{n}" for n in range(MAX_DEPTH + 1)]
    assert f"renewal noted at level{MAX_DEPTH + 1}" not in contents(answer)


def test_depth_at_the_cap_is_not_degraded(rig: Rig) -> None:
    nodes = chain(rig, MAX_DEPTH)
    assert rig.recall(ALICE, nodes[0].id, text="renewal", depth=MAX_DEPTH).degraded == []


def test_depth_searches_only_descendants_the_caller_may_read(rig: Rig) -> None:
    team = rig.memory("Team")
    shared = rig.memory("Shared", team)
    private = rig.memory("Private", team, restricted=True)
    drop_box = rig.memory("Drop box", team, restricted=True)
    rig.remember(team, "renewal in the team")
    rig.remember(shared, "renewal in shared")
    rig.remember(private, "renewal in private")
    rig.remember(drop_box, "renewal in the drop box")
    rig.world.grants.create(ALICE, team.id, "user:bob", ["read"])
    rig.world.grants.create(ALICE, drop_box.id, "user:bob", ["write"])  # seen, but not readable

    as_bob = contents(rig.recall(BOB, team.id, text="renewal", depth=1))
    assert sorted(as_bob) == ["renewal in shared", "renewal in the team"]
    as_alice = contents(rig.recall(ALICE, team.id, text="renewal", depth=1))
    assert len(as_alice) == 4


def test_depth_skips_a_descendant_being_deleted(rig: Rig) -> None:
    nodes = chain(rig, 1)
    rig.world.ports.memories.mark_deleting("acme", [nodes[1].id])
    assert contents(rig.recall(ALICE, nodes[0].id, text="renewal", depth=1)) == ["renewal noted at level0"]


def test_an_equal_score_ranks_this_memory_before_its_descendants(rig: Rig) -> None:
    root = rig.memory("Root")
    child = rig.memory("Child", root)
    rig.remember(child, "identical renewal note")
    rig.remember(root, "identical renewal note")
    answer = rig.recall(ALICE, root.id, text="identical renewal note", depth=1)
    assert [r.record.record.memory_id for r in answer.results] == [root.id, child.id]
    assert answer.results[0].score == answer.results[1].score


# -- parent and children -------------------------------------------------------------------------


def test_parent_and_children_are_named_where_the_caller_may_read(rig: Rig) -> None:
    company = rig.memory("Company")
    sales = rig.memory("Sales", company)
    north = rig.memory("North", sales)
    board = rig.memory("Board", sales, restricted=True)
    answer = rig.recall(ALICE, sales.id, text="anything")
    assert answer.parent is not None
    assert answer.parent.id == company.id
    assert [c.id for c in answer.children] == [north.id, board.id]  # alice created Board: she reads it

    rig.world.grants.create(ALICE, sales.id, "user:bob", ["read"])
    as_bob = rig.recall(BOB, sales.id, text="anything")
    assert as_bob.parent is None  # bob cannot read Company: it is not named
    assert [c.id for c in as_bob.children] == [north.id]  # the restricted Board is not named


def test_at_depth_zero_the_children_are_read_while_the_search_runs(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a reader can go from here is read beside the search, neither before nor after it: the
    children's read and the search each wait until the other is under way too, which only two pieces
    of work in progress at once can do (read one after the other, in either order, the wait times out
    and the recall fails)."""
    team = rig.memory("Team")
    notes = rig.memory("Notes", team)
    rig.remember(team, "the launch is on Friday")
    both_under_way = threading.Barrier(2, timeout=5)
    met: set[str] = set()
    children_read = rig.world.ports.memories.children
    search = rig.engine.search

    def under_way(side: str) -> None:
        if side not in met:  # the first call of each side meets the other (a child's count reads again)
            met.add(side)
            both_under_way.wait()

    def children_while_searching(tenant: str, parent_id: str) -> list[Memory]:
        under_way("children")
        return children_read(tenant, parent_id)

    def search_while_the_children_are_read(*args: Any, **kwargs: Any) -> Any:
        under_way("search")
        return search(*args, **kwargs)

    monkeypatch.setattr(rig.world.ports.memories, "children", children_while_searching)
    monkeypatch.setattr(rig.engine, "search", search_while_the_children_are_read)
    answer = rig.recall(ALICE, team.id, text="launch")
    assert contents(answer) == ["the launch is on Friday"]
    assert [c.id for c in answer.children] == [notes.id]


def test_a_child_the_caller_may_only_write_is_not_named(rig: Rig) -> None:
    team = rig.memory("Team")
    inbox = rig.memory("Inbox", team, restricted=True)
    rig.world.grants.create(ALICE, team.id, "user:bob", ["read"])
    rig.world.grants.create(ALICE, inbox.id, "user:bob", ["write"])
    assert rig.recall(BOB, team.id, text="anything").children == []


def test_a_parent_the_caller_may_only_write_is_not_named(rig: Rig) -> None:
    team = rig.memory("Team")
    notes = rig.memory("Notes", team)
    rig.world.grants.create(ALICE, team.id, "user:bob", ["write"])
    rig.world.grants.create(ALICE, notes.id, "user:bob", ["read"])
    assert rig.recall(BOB, notes.id, text="anything").parent is None


def test_children_carry_their_counts(rig: Rig) -> None:
    root = rig.memory("Root")
    child = rig.memory("Child", root)
    rig.memory("Grandchild", child)
    rig.remember(child, "one")
    rig.remember(child, "two")
    summary = rig.recall(ALICE, root.id, text="anything").children[0]
    assert (summary.id, summary.name, summary.records_count, summary.children_count) == (child.id, "Child", 2, 1)


# -- abstain -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    record_id: str = "r"
    score: float = 1.0
    why: tuple[str, ...] = ()
    signals: dict[str, float] = field(default_factory=dict)
    memory_id: str = ""


def test_the_policy_abstains_when_nothing_answers_a_query_or_text() -> None:
    policy = AbstainPolicy(0.5)
    assert policy.abstain(RecallInput(query="q"), []) is True
    assert policy.abstain(RecallInput(text="t"), []) is True
    assert policy.abstain(RecallInput(filters={"field": "type", "op": "eq", "value": "fact"}), []) is False


def test_the_policy_abstains_when_the_best_similarity_is_below_the_threshold() -> None:
    policy = AbstainPolicy(0.5)
    weak = [Hit(signals={"query": 0.2}), Hit(signals={"query": 0.49})]
    assert policy.abstain(RecallInput(query="q"), weak) is True
    assert policy.abstain(RecallInput(query="q"), [*weak, Hit(signals={"query": 0.5})]) is False
    assert policy.abstain(RecallInput(query="q"), [Hit(signals={"text": 1.0})]) is True  # no similarity


MINILM = "sentence-transformers/all-MiniLM-L6-v2:onnx-int8-u8u8"


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("What is Caroline's identity?", ["caroline"]),
        ("Did Nate and Joanna meet? Answer yes or no.", ["nate", "joanna"]),  # "Answer" starts a sentence
        ('Would Melanie enjoy "The Four Seasons" by Vivaldi?', ["melanie", "vivaldi"]),  # a title is no name
        ("What did Mel paint on October 13, 2023?", ["mel"]),  # a month is no name
        ("When did John run a 5K with Dr Smith?", ["john", "smith"]),
        ("what did she say?", []),
    ],
)
def test_the_names_a_question_uses(question: str, names: list[str]) -> None:
    assert named_words(question) == names


def test_a_weak_match_naming_someone_the_memory_never_mentions_abstains() -> None:
    policy = AbstainPolicy()
    threshold, named = CALIBRATIONS[MINILM].threshold, CALIBRATIONS[MINILM].named
    assert named is not None
    weak = [Hit(signals={"query": (threshold + named) / 2})]
    asked: list[list[str]] = []

    def nobody(words: list[str]) -> list[str]:
        asked.append(words)
        return words

    def everybody(words: list[str]) -> list[str]:
        return []

    question = RecallInput(query="What did Caroline research?")
    assert policy.abstain(question, weak, MINILM, unmatched=nobody) is True
    assert asked == [["caroline"]]
    assert policy.abstain(question, weak, MINILM, unmatched=everybody) is False
    assert policy.abstain(RecallInput(query="what did she research?"), weak, MINILM, unmatched=nobody) is False
    strong = [Hit(signals={"query": named})]
    assert policy.abstain(question, strong, MINILM, unmatched=nobody) is False  # names not even asked
    assert asked == [["caroline"]]
    assert policy.abstain(question, weak, "a-model-not-calibrated", unmatched=nobody) is False


def test_recall_asks_the_index_whether_the_memory_mentions_the_names(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every match is weak (below `named`), and none below the threshold.
    monkeypatch.setitem(CALIBRATIONS, rig.engine.model_id, Calibration(threshold=-1.0, certain=1.0, named=1.01))
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews in March with Globex")
    service = RecallService(rig.world.ports, rig.world.memories, rig.records, rig.index)
    known = service.recall(ALICE, sales.id, RecallInput(query="When does Globex renew with Acme?"))
    unknown = service.recall(ALICE, sales.id, RecallInput(query="When does Initech renew with Acme?"))
    assert known.results
    assert unknown.results
    assert (known.abstain, unknown.abstain) == (False, True)


def test_a_names_check_the_index_cannot_answer_neither_fails_nor_abstains(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(CALIBRATIONS, rig.engine.model_id, Calibration(threshold=-1.0, certain=1.0, named=1.01))
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews in March")

    def down(*args: Any, **kwargs: Any) -> list[str]:
        raise SearchUnavailable("the search index did not answer")

    monkeypatch.setattr(rig.engine, "unmatched", down)
    service = RecallService(rig.world.ports, rig.world.memories, rig.records, rig.index)
    answer = service.recall(ALICE, sales.id, RecallInput(query="When does Initech renew?"))
    assert answer.results
    assert answer.abstain is False


def test_the_policy_never_abstains_on_a_text_only_request_that_matched() -> None:
    assert AbstainPolicy(0.99).abstain(RecallInput(text="t"), [Hit(signals={"text": 0.01})]) is False


def test_the_threshold_is_the_configured_one_else_the_models_calibration() -> None:
    minilm = next(iter(CALIBRATIONS))
    assert AbstainPolicy(0.7).threshold(minilm) == 0.7
    assert AbstainPolicy().threshold(minilm) == CALIBRATIONS[minilm].threshold
    assert AbstainPolicy().threshold("some-other-model") == UNCALIBRATED_SIMILARITY
    assert AbstainPolicy().threshold(None) == UNCALIBRATED_SIMILARITY
    assert best_similarity([]) == -1.0
    assert best_similarity([Hit(signals={"query": 0.3}), Hit(signals={"query": 0.6})]) == 0.6


def test_recall_abstains_but_still_returns_what_it_found_when_the_match_is_weak(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews its contract in March")
    strict = rig.service(AbstainPolicy(0.99)).recall(ALICE, sales.id, RecallInput(query="Acme contract"))
    assert strict.abstain is True
    assert contents(strict) == ["Acme renews its contract in March"]
    lenient = rig.service(AbstainPolicy(0.1)).recall(ALICE, sales.id, RecallInput(query="Acme contract"))
    assert lenient.abstain is False


def test_recall_abstains_when_nothing_matches(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews its contract in March")
    answer = rig.recall(ALICE, sales.id, query="zebra quantum")
    assert answer.results == []
    assert answer.abstain is True


def test_recall_without_a_policy_uses_the_engines_model_threshold(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "alpha beta gamma delta")
    service = RecallService(rig.world.ports, rig.world.memories, rig.records, rig.index)
    exact = service.recall(ALICE, sales.id, RecallInput(query="alpha beta gamma delta"))
    assert exact.abstain is False  # similarity 1, above the uncalibrated placeholder
    assert rig.engine.model_id not in CALIBRATIONS


# -- scores a reader compares across requests, and abstain that agrees with them ----------------


def test_a_calibration_is_one_line_through_half_at_the_threshold_and_one_at_certain() -> None:
    scale = Calibration(threshold=0.4, certain=0.6, named=0.5)
    assert [scale.score(s) for s in (0.4, 0.5, 0.6, 0.3)] == [0.5, 0.75, 1.0, 0.25]
    assert (scale.score(0.95), scale.score(-0.2)) == (1.0, 0.0)  # clipped to [0, 1]
    # A weak match to a question naming someone no record mentions reads (named - threshold) lower:
    # below one half, so recall abstains; a match at `named` or above is read as it is.
    assert scale.score(0.45, unknown_name=True) == scale.score(0.35) == 0.375
    assert scale.score(0.55, unknown_name=True) == scale.score(0.55)
    moved = scale.at(0.3)  # a stage's own threshold moves the whole scale
    assert (moved.threshold, moved.certain, moved.named) == pytest.approx((0.3, 0.5, 0.4))
    assert UNCALIBRATED.score(UNCALIBRATED_SIMILARITY) == 0.5
    with pytest.raises(ValueError, match="certain"):
        Calibration(threshold=0.5, certain=0.5)


def test_abstain_is_the_confidence_below_one_half_never_beside_a_confident_score() -> None:
    policy = AbstainPolicy()
    scale = policy.calibration(MINILM)
    question = RecallInput(query="what does the buyer drink?")
    for similarity in (-0.2, 0.1, scale.threshold - 0.01, scale.threshold, 0.5, scale.certain, 0.95):
        judged = policy.judge(question, [Hit(signals={"query": 0.05}), Hit(signals={"query": similarity})], MINILM)
        assert judged.confidence == scale.score(max(similarity, 0.05))
        assert judged.abstain is (judged.confidence < ABSTAIN_BELOW)
        assert judged.abstain is (similarity < scale.threshold)
    # Without a query there is no meaning to measure: what matched is certain, nothing found is 0,
    # and an empty selection by fields alone is an answer, not "I do not know".
    assert policy.judge(RecallInput(text="tea"), [Hit(signals={"text": 0.1})], MINILM) == Judgement(1.0, False)
    assert policy.judge(RecallInput(text="tea"), [], MINILM) == Judgement(0.0, True)
    assert policy.judge(RecallInput(types=("fact",)), [], MINILM) == Judgement(0.0, False)


def test_the_first_score_is_the_answers_confidence_and_an_off_topic_answer_scores_below_it(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    scale = Calibration(threshold=0.5, certain=0.9)
    monkeypatch.setitem(CALIBRATIONS, rig.engine.model_id, scale)
    sales = rig.memory("Sales")
    for text in ("alpha beta gamma delta", "alpha beta gamma", "alpha beta", "epsilon zeta"):
        rig.remember(sales, text)
    service = RecallService(rig.world.ports, rig.world.memories, rig.records, rig.index)

    def similarity(question: str, text: str) -> float:
        a, b = rig.embedder.embed([question, text])
        return sum(x * y for x, y in zip(a, b, strict=True))

    on_topic = service.recall(ALICE, sales.id, RecallInput(query="alpha beta gamma delta"))
    off_topic = service.recall(ALICE, sales.id, RecallInput(query="epsilon omega theta iota kappa"))
    for answer, question in ((on_topic, "alpha beta gamma delta"), (off_topic, "epsilon omega theta iota kappa")):
        scores = [r.score for r in answer.results]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= score <= 1.0 for score in scores)
        best = max(similarity(question, r.record.record.content) for r in answer.results)
        assert scores[0] == scale.score(best)  # the first result's score is the answer's confidence
        assert answer.abstain is (scores[0] < ABSTAIN_BELOW)
    assert on_topic.results[0].score == 1.0
    assert off_topic.results[0].score < ABSTAIN_BELOW < on_topic.results[0].score
    assert off_topic.abstain is True
    assert on_topic.abstain is False


def test_a_query_alone_is_searched_by_its_words_unless_the_caller_says_otherwise(rig: Rig) -> None:
    sales = rig.memory("Sales")
    index = FixedIndex([])
    service = RecallService(rig.world.ports, rig.world.memories, rig.records, lambda: index, AbstainPolicy(0.0))
    question = "When does Acme renew?"
    service.recall(ALICE, sales.id, RecallInput(query=question))
    service.recall(ALICE, sales.id, RecallInput(query=question, text="Acme"))
    service.recall(ALICE, sales.id, RecallInput(query=question, query_words=False))
    service.recall(ALICE, sales.id, RecallInput(query="", types=("fact",)))  # a blank query has no words
    assert [(asked["query"], asked["text"]) for asked in index.searched] == [
        (question, question), (question, "Acme"), (question, None), ("", None)
    ]


def test_why_names_the_query_for_a_result_a_query_alone_found_by_its_words(rig: Rig) -> None:
    """`why` names the request's signals (§6.3): the words searched to serve a query are the query's."""
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews in March")
    words_too = rig.recall(ALICE, sales.id, query="Acme renewal")
    meaning_only = rig.recall(ALICE, sales.id, query="Acme renewal", query_words=False)
    words_given = rig.recall(ALICE, sales.id, query="Acme renewal", text="Acme")
    assert [r.why for r in words_too.results] == [("query",)]
    assert [r.why for r in meaning_only.results] == [("query",)]
    assert [r.why for r in words_given.results] == [("query", "text")]


@pytest.mark.parametrize(
    "request_fields",
    [{}, {"query": ""}, {"query": "  ", "text": ""}, {"limit": 5, "depth": 1, "include": "all", "as_of": None}],
    ids=["empty", "blank-query", "blank-query-and-text", "no-signal"],
)
def test_a_request_that_asks_for_nothing_is_refused_saying_what_to_send(
    rig: Rig, request_fields: dict[str, Any]
) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews in March")
    with pytest.raises(MemoryInvalid) as raised:
        rig.recall(ALICE, sales.id, **request_fields)
    assert all(field in str(raised.value) for field in ("query", "text", "filters", "types"))
    with pytest.raises(MemoryNotFound):  # access first: an outsider learns nothing from the refusal
        rig.recall(BOB, sales.id, **request_fields)


def test_fields_alone_ask_for_something_and_list_the_newest(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews in March")
    rig.remember(sales, "Globex prefers email", "x.crm.preference")
    by_type = rig.recall(ALICE, sales.id, types=("x.crm.preference",))
    assert contents(by_type) == ["Globex prefers email"]
    assert (by_type.results[0].why, by_type.results[0].score, by_type.abstain) == (("filters",), 1.0, False)
    blank_query = rig.recall(ALICE, sales.id, query="", types=("fact",))  # as a harness with no input asks
    assert contents(blank_query) == ["Acme renews in March"]
    assert contents(rig.recall(ALICE, sales.id, filters={"field": "type", "op": "eq", "value": "fact"})) == [
        "Acme renews in March"
    ]


# -- a query that cannot be embedded -------------------------------------------------------------


def test_a_query_the_embedder_cannot_embed_is_searched_by_its_words_and_degraded_says_so(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews its contract in March")
    rig.remember(sales, "Globex pays late")
    rig.embedder.down = True
    answer = rig.recall(ALICE, sales.id, query="Acme contract")
    assert QUERY_NOT_EMBEDDED in answer.degraded
    assert contents(answer) == ["Acme renews its contract in March"]
    assert all(r.why == ("query",) for r in answer.results)  # the query's words served it (§6.3)
    assert answer.abstain is False  # judged as the text request it became: it matched


def test_without_the_embedder_the_given_text_is_searched_rather_than_the_query(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews its contract in March")
    rig.remember(sales, "Globex pays late")
    rig.embedder.down = True
    answer = rig.recall(ALICE, sales.id, query="Acme contract", text="Globex")
    assert contents(answer) == ["Globex pays late"]
    assert answer.degraded == [QUERY_NOT_EMBEDDED]


def test_without_the_embedder_words_that_match_nothing_abstain(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "Acme renews its contract in March")
    rig.embedder.down = True
    answer = rig.recall(ALICE, sales.id, query="zebra")
    assert (answer.results, answer.abstain, answer.degraded) == ([], True, [QUERY_NOT_EMBEDDED])


def test_the_depth_cap_and_the_missing_embedder_are_both_reported(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.embedder.down = True
    answer = rig.recall(ALICE, sales.id, query="Acme", depth=MAX_DEPTH + 1)
    assert answer.degraded == [f"depth:capped_at_{MAX_DEPTH}", QUERY_NOT_EMBEDDED]


def test_a_disconnected_index_is_unavailable_not_empty(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.connected[0] = False
    with pytest.raises(MemoryUnavailable) as raised:
        rig.recall(ALICE, sales.id, text="Acme")
    assert HTTP_STATUS[raised.value.code] == 503


# -- limits and invalid requests -----------------------------------------------------------------


@pytest.mark.parametrize(
    "request_fields",
    [
        {"limit": 0},
        {"limit": RECALL_LIMIT_MAX + 1},
        {"limit": -1},
        {"include": "forgotten"},
        {"depth": -1},
        {"filters": "type = fact"},
        {"as_of": "no-such-snapshot"},
    ],
    ids=["limit-zero", "limit-above-max", "limit-negative", "include-unknown", "depth-negative",
         "filters-not-an-object", "as-of-unknown-snapshot"],
)
def test_an_invalid_request_is_memory_invalid_422(rig: Rig, request_fields: dict[str, Any]) -> None:
    sales = rig.memory("Sales")
    with pytest.raises(MemoryInvalid) as raised:
        rig.recall(ALICE, sales.id, text="Acme", **request_fields)
    assert raised.value.code == "memory_invalid"
    assert HTTP_STATUS["memory_invalid"] == 422


def test_the_limit_defaults_to_ten_and_bounds_the_results(rig: Rig) -> None:
    sales = rig.memory("Sales")
    for n in range(12):
        rig.remember(sales, f"renewal number {n}")
    assert len(rig.recall(ALICE, sales.id, text="renewal").results) == 10
    assert len(rig.recall(ALICE, sales.id, text="renewal", limit=1).results) == 1
    assert len(rig.recall(ALICE, sales.id, text="renewal", limit=RECALL_LIMIT_MAX).results) == 12


def test_the_limit_bounds_the_fused_ranking_across_depth(rig: Rig) -> None:
    nodes = chain(rig, 2)
    assert len(rig.recall(ALICE, nodes[0].id, text="renewal", depth=2, limit=2).results) == 2


def test_types_narrow_the_results(rig: Rig) -> None:
    sales = rig.memory("Sales")
    rig.remember(sales, "renewal fact", "fact")
    rig.remember(sales, "renewal preference", "x.crm.preference")
    assert contents(rig.recall(ALICE, sales.id, text="renewal", types=("x.crm.preference",))) == ["renewal preference"]


# -- every hit read back from the record repository ----------------------------------------------


def test_a_hit_the_repository_no_longer_holds_is_dropped(rig: Rig) -> None:
    sales = rig.memory("Sales")
    kept = rig.remember(sales, "renewal kept")
    erased = rig.remember(sales, "renewal erased behind the index")
    del rig.world.ports.records.versions[("acme", sales.id, erased)]  # the index still holds it
    answer = rig.recall(ALICE, sales.id, text="renewal")
    assert [r.record.record.id for r in answer.results] == [kept]


def test_the_only_hit_dropped_leaves_nothing_and_recall_abstains(rig: Rig) -> None:
    sales = rig.memory("Sales")
    erased = rig.remember(sales, "renewal erased behind the index")
    del rig.world.ports.records.versions[("acme", sales.id, erased)]
    answer = rig.recall(ALICE, sales.id, text="renewal")
    assert (answer.results, answer.abstain) == ([], True)


def test_what_is_returned_is_the_repositorys_record_not_the_indexs(rig: Rig) -> None:
    sales = rig.memory("Sales")
    record_id = rig.remember(sales, "renewal as indexed")
    key = ("acme", sales.id, record_id)
    stored = rig.world.ports.records.versions[key]
    rig.world.ports.records.versions[key] = stored.evolve(content="renewal as the table holds it")
    assert contents(rig.recall(ALICE, sales.id, text="indexed")) == ["renewal as the table holds it"]


def test_a_hit_superseded_or_forgotten_behind_the_index_is_dropped_unless_all_is_asked(rig: Rig) -> None:
    sales = rig.memory("Sales")
    revised = rig.remember(sales, "renewal first draft")
    forgotten = rig.remember(sales, "renewal to forget")
    lagging = RecordService(rig.world.ports, rig.world.memories)  # writes the index never hears of
    lagging.revise(ALICE, sales.id, revised, {"content": "renewal second draft"})
    lagging.forget(ALICE, sales.id, forgotten)

    assert contents(rig.recall(ALICE, sales.id, text="renewal")) == []
    found = rig.recall(ALICE, sales.id, text="renewal", include="all")
    assert sorted(r.record.record.id for r in found.results) == sorted([revised, forgotten])


def test_a_forgotten_record_is_not_recalled_once_the_index_knows(rig: Rig) -> None:
    sales = rig.memory("Sales")
    kept = rig.remember(sales, "renewal kept")
    gone = rig.remember(sales, "renewal gone")
    rig.records.forget(ALICE, sales.id, gone)
    assert [r.record.record.id for r in rig.recall(ALICE, sales.id, text="renewal").results] == [kept]


def test_as_of_a_snapshot_recalls_the_records_as_they_were(rig: Rig) -> None:
    sales = rig.memory("Sales")
    before = rig.remember(sales, "renewal before the snapshot")
    rig.world.clock.advance(1000)
    rig.records.create_snapshot(ALICE, sales.id, "q1")
    rig.world.clock.advance(1000)
    rig.remember(sales, "renewal after the snapshot")
    rig.records.forget(ALICE, sales.id, before)

    then = rig.recall(ALICE, sales.id, text="renewal", as_of="q1")
    assert contents(then) == ["renewal before the snapshot"]
    assert contents(rig.recall(ALICE, sales.id, text="renewal")) == ["renewal after the snapshot"]


@dataclass
class FixedIndex:
    """An index answering with the hits it is given (a lagging or confused index)."""

    hits: list[Hit]
    model_id: str = "fixed"
    searched: list[dict[str, Any]] = field(default_factory=list)

    def embedding(self, query: str) -> Any:
        from concurrent.futures import Future

        future: Future[Any] = Future()
        future.set_result([1.0, 0.0])
        return future

    def search(self, tenant: str, memory_id: str, **request: Any) -> list[Hit]:
        self.searched.append({"tenant": tenant, "memory_id": memory_id, **request})
        return self.hits


def test_a_hit_in_a_memory_the_recall_did_not_search_is_never_returned(rig: Rig) -> None:
    sales = rig.memory("Sales")
    private = rig.memory("Private")
    mine = rig.remember(sales, "renewal in sales")
    elsewhere = rig.remember(private, "renewal in private")
    index = FixedIndex([
        Hit(record_id=elsewhere, score=1.0, signals={"query": 1.0}, memory_id=private.id),
        Hit(record_id=mine, score=0.5, signals={"query": 1.0}, memory_id=""),  # no memory: the one recalled
    ])
    service = RecallService(rig.world.ports, rig.world.memories, rig.records, lambda: index, AbstainPolicy(0.0))
    answer = service.recall(ALICE, sales.id, RecallInput(query="renewal", depth=MAX_DEPTH))
    assert [r.record.record.id for r in answer.results] == [mine]
    assert index.searched[0]["memory_id"] == sales.id
    assert index.searched[0]["also"] == []
    assert index.searched[0]["vector"] == [1.0, 0.0]


def test_the_search_is_one_call_naming_every_memory_reached(rig: Rig) -> None:
    nodes = chain(rig, 2)
    index = FixedIndex([])
    service = RecallService(rig.world.ports, rig.world.memories, rig.records, lambda: index)
    service.recall(ALICE, nodes[0].id, RecallInput(text="renewal", depth=2, limit=7))
    assert len(index.searched) == 1
    assert index.searched[0]["also"] == [nodes[1].id, nodes[2].id]
    assert index.searched[0]["limit"] == 7
