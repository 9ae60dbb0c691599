"""A question that names a month and its year lifts what the memory holds from then (search/periods.py,
ranking's second ranking within the period): parsing, and ranking over the embedded index."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.conftest import World, caller
from uhp_memories.domain.filters import Combination, Condition, parse_filter
from uhp_memories.domain.records import RecordInput, RecordService
from uhp_memories.search.embedded import EmbeddedSearchIndex
from uhp_memories.search.engine import RecallEngine
from uhp_memories.search.hashing import HashingEmbedder
from uhp_memories.search.periods import Period, named_period
from uhp_memories.search.ports import Fusion

ALICE = caller("user:alice")


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did Maria do on 3 May, 2023?", "2023-05-01", "2023-07-01"),
        ("Who came to dinner on May 3, 2023?", "2023-05-01", "2023-07-01"),
        ("What did John attend in March 2023?", "2023-03-01", "2023-05-01"),
        ("Plans for Dec. 2023?", "2023-12-01", "2024-02-01"),
        ("What happened in November 2022?", "2022-11-01", "2023-01-01"),
    ],
)
def test_a_month_and_its_year_name_that_month_and_the_next(question: str, start: str, end: str) -> None:
    period = named_period(question)
    assert period == Period(f"{start}T00:00:00.000Z", f"{end}T00:00:00.000Z")


@pytest.mark.parametrize("question", ["When did Melanie go camping in June?", "What may 20 bring?", "", None])
def test_a_month_without_its_year_names_no_period(question: str | None) -> None:
    assert named_period(question) is None


def test_the_words_are_read_before_the_query() -> None:
    assert named_period("in May 2023", "in June 2024") == named_period("in May 2023")
    assert named_period(None, "in June 2024") == named_period("June 2024")


def test_within_keeps_the_request_filters() -> None:
    account = Condition("attributes.account", "eq", "acme")
    combined = Period("2023-05-01T00:00:00.000Z", "2023-07-01T00:00:00.000Z").within(account)
    assert isinstance(combined, Combination)
    assert combined.kind == "and"
    assert account in combined.parts


@pytest.fixture
def engine() -> Iterator[RecallEngine]:
    embedder = HashingEmbedder(64)
    index = EmbeddedSearchIndex(":memory:", model_id=embedder.model_id, dimensions=embedder.dimensions)
    yield RecallEngine(index, embedder)
    index.close()


def test_a_question_naming_a_month_lifts_what_was_said_then(world: World, engine: RecallEngine) -> None:
    records = RecordService(world.ports, world.memories, None, lambda: engine)
    memory = world.memories.create(ALICE, name="m").memory
    said = {}
    for when in ("2023-01-10T10:00:00Z", "2023-05-20T10:00:00Z", "2023-06-02T10:00:00Z", "2023-09-01T10:00:00Z"):
        view = records.remember(ALICE, memory.id, RecordInput("fact", "We went camping by the lake", {}, when))
        said[view.record.id] = when
    question = "When did we go camping in May 2023?"
    lifted = engine.search(ALICE.tenant, memory.id, query=question, text=question, limit=4)
    assert {said[h.record_id][:7] for h in lifted[:2]} == {"2023-05", "2023-06"}  # the month and the next
    assert all(0 < h.score <= 1 for h in lifted)
    plain = engine.search(ALICE.tenant, memory.id, query=question, text=question, limit=4,
                          fusion=Fusion(period_weight=0.0))
    assert len({h.score for h in plain}) == 1  # the same text: nothing else tells them apart


def test_a_period_lifts_only_what_the_request_admits(world: World, engine: RecallEngine) -> None:
    records = RecordService(world.ports, world.memories, None, lambda: engine)
    memory = world.memories.create(ALICE, name="m").memory
    january, may = "2023-01-10T10:00:00Z", "2023-05-10T10:00:00Z"
    kept = records.remember(ALICE, memory.id, RecordInput("fact", "camping trip", {"who": "a"}, january))
    records.remember(ALICE, memory.id, RecordInput("fact", "camping trip", {"who": "b"}, may))
    only_a = parse_filter({"field": "attributes.who", "op": "eq", "value": "a"})
    hits = engine.search(ALICE.tenant, memory.id, text="camping in May 2023", filters=only_a, limit=5)
    assert [h.record_id for h in hits] == [kept.record.id]
