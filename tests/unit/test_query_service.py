"""Named queries (§6.4) and free queries (§6.5) over the in-memory fakes: a named query is a recall
template written by someone who may write the memory, run as a recall by the caller, with its own
privileges; a free query runs only where an index can confine it, and every hit is read back from
the records. What recall then finds is for the recall suites to say."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import pytest

from tests.fakes import InMemoryFreeQueryIndex, InMemoryMemoryRepository, InMemoryQueryRepository
from tests.unit.conftest import World, caller
from uhp_memories.domain.errors import MemoryForbidden, MemoryInvalid, MemoryNotFound, MemoryUnsupported
from uhp_memories.domain.model import Caller
from uhp_memories.domain.queries.model import MAX_BODY_BYTES, MAX_PARAMS, MAX_QUERIES, NamedQuery, QueryNotFound
from uhp_memories.domain.queries.service import QueryService
from uhp_memories.domain.recall.model import RecallAnswer, RecallInput
from uhp_memories.domain.recall.service import RecallService
from uhp_memories.domain.records.model import RecordInput

ALICE = caller("user:alice")
READER = caller("user:reader")
WRITER = caller("user:writer")
STRANGER = caller("user:stranger")

OPEN_DEALS: dict[str, Any] = {
    "description": "Deals not yet closed for one account.",
    "params": {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
    "requires": "read",
    "language": "uhp-recall",
    "body": {
        "text": "deal",
        "filters": {"and": [{"field": "attributes.account", "op": "eq", "value": "{{account}}"},
                            {"field": "attributes.stage", "op": "ne", "value": "closed"}]},
        "limit": 10,
    },
}


class RecordingRecall:
    """Recall as a named query sees it: every request is kept, with who asked and where; it finds nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[Caller, str, RecallInput]] = []

    def recall(self, caller: Caller, memory_id: str, request: RecallInput) -> RecallAnswer:
        self.calls.append((caller, memory_id, request))
        return RecallAnswer(results=[], parent=None, children=[])

    @property
    def last(self) -> RecallInput:
        return self.calls[-1][2]


class DeletedWhileDefining(InMemoryQueryRepository):
    """A delete that lands between the service's checks and its write."""

    def put(self, query: NamedQuery) -> None:
        self.memories.mark_deleting(query.tenant, [query.memory_id])
        super().put(query)


@dataclass
class Setup:
    world: World
    repo: InMemoryQueryRepository
    recall: RecordingRecall
    free_index: InMemoryFreeQueryIndex | None
    service: QueryService
    memory_id: str

    def remember(self, text: str, memory_id: str | None = None, **attributes: Any) -> str:
        given = RecordInput(type="fact", content=text, attributes=attributes)
        return self.world.records.remember(ALICE, memory_id or self.memory_id, given).record.id


def build(world: World, free_index: InMemoryFreeQueryIndex | None = None,
          repo: InMemoryQueryRepository | None = None) -> Setup:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    recall = RecordingRecall()
    repo = repo or InMemoryQueryRepository(memories)
    service = QueryService(world.ports, repo, cast(RecallService, recall), world.memories, world.records,
                           lambda: free_index, ("opensearch-dsl",) if free_index else ())
    memory_id = world.memories.create(ALICE, name="Deals").memory.id
    world.grants.create(ALICE, memory_id, READER.principal, ["read"])
    world.grants.create(ALICE, memory_id, WRITER.principal, ["read", "write"])
    return Setup(world, repo, recall, free_index, service, memory_id)


@pytest.fixture
def setup(world: World) -> Setup:
    return build(world)


def definition(**changes: Any) -> dict[str, Any]:
    return {**OPEN_DEALS, **changes}


# -- define ------------------------------------------------------------------------------------


def test_define_stores_the_query_with_its_author_and_time(setup: Setup) -> None:
    defined = setup.service.define(WRITER, setup.memory_id, "open_deals_for", OPEN_DEALS)
    assert defined == NamedQuery(
        tenant="acme", memory_id=setup.memory_id, name="open_deals_for", description=OPEN_DEALS["description"],
        params={**OPEN_DEALS["params"]}, requires="read", language="uhp-recall", body=OPEN_DEALS["body"],
        updated_by=WRITER.principal, updated_at=defined.updated_at,
    )
    assert defined.updated_at == setup.world.clock.now  # the instant of this write
    assert setup.repo.get("acme", setup.memory_id, "open_deals_for") == defined


def test_a_minimal_definition_takes_the_defaults(setup: Setup) -> None:
    defined = setup.service.define(ALICE, setup.memory_id, "deals", {"body": {"text": "deal"}})
    assert (defined.description, defined.requires, defined.language) == ("", "read", "uhp-recall")
    assert defined.params == {"type": "object", "properties": {}, "required": []}


def test_redefining_a_name_replaces_the_query(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "deals", {"body": {"text": "deal"}})
    again = setup.service.define(WRITER, setup.memory_id, "deals", {"body": {"text": "seats"}, "requires": "write"})
    assert setup.repo.list("acme", setup.memory_id) == [again]


def test_define_needs_write_and_a_memory_the_caller_can_see(setup: Setup) -> None:
    with pytest.raises(MemoryForbidden):
        setup.service.define(READER, setup.memory_id, "deals", OPEN_DEALS)
    with pytest.raises(MemoryNotFound):
        setup.service.define(STRANGER, setup.memory_id, "deals", OPEN_DEALS)
    with pytest.raises(MemoryNotFound):
        setup.service.define(caller("user:alice", tenant="other"), setup.memory_id, "deals", OPEN_DEALS)
    assert setup.repo.list("acme", setup.memory_id) == []


@pytest.mark.parametrize("name", ["Open", "1deals", "", "a" * 65, "with-dash", "with space", "é"])
def test_define_refuses_a_name_that_is_not_lowercase_letters_digits_and_underscores(setup: Setup, name: str) -> None:
    with pytest.raises(MemoryInvalid):
        setup.service.define(ALICE, setup.memory_id, name, OPEN_DEALS)


def test_the_definitions_own_name_must_be_the_name_in_the_path(setup: Setup) -> None:
    with pytest.raises(MemoryInvalid, match="another_name"):
        setup.service.define(ALICE, setup.memory_id, "open_deals_for", definition(name="another_name"))
    assert setup.service.define(ALICE, setup.memory_id, "open_deals_for", definition(name="open_deals_for"))


@pytest.mark.parametrize(
    "changes",
    [
        {"language": "cypher"},
        {"requires": "delete"},
        {"params": {"type": "array"}},
        {"params": {"type": "object", "properties": []}},
        {"params": {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_PARAMS + 1)}}},
        {"params": {"type": "object", "properties": {"a": {"type": "object"}}}},
        {"params": {"type": "object", "properties": {"Bad": {"type": "string"}}}},
        {"params": {"type": "object", "properties": {"a": "string"}}},
        {"params": {"type": "object", "properties": {"a": {"type": "string", "enum": "x"}}}},
        {"params": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}},
    ],
    ids=["language", "requires", "params-not-object", "properties-not-object", "too-many-params",
         "param-type", "param-name", "param-spec", "enum-not-list", "required-undeclared"],
)
def test_define_refuses_a_bad_language_requirement_or_param_schema(setup: Setup, changes: dict[str, Any]) -> None:
    with pytest.raises(MemoryInvalid):
        setup.service.define(ALICE, setup.memory_id, "q", definition(**changes))
    assert setup.repo.list("acme", setup.memory_id) == []


def test_a_body_sent_as_a_string_holding_an_object_is_stored_as_the_object(setup: Setup) -> None:
    defined = setup.service.define(ALICE, setup.memory_id, "q", definition(body=json.dumps(OPEN_DEALS["body"])))
    assert defined.body == OPEN_DEALS["body"]


@pytest.mark.parametrize("body", ["MATCH (d:Deal) RETURN d", "[1, 2]", '"text"', "", None, ["text"]])
def test_a_body_that_is_not_a_recall_object_is_refused(setup: Setup, body: Any) -> None:
    with pytest.raises(MemoryInvalid):
        setup.service.define(ALICE, setup.memory_id, "q", definition(body=body))


@pytest.mark.parametrize(
    "body",
    [
        {"text": "deal", "memory_id": "hmem_x"},  # a template never says where
        {"text": "{{undeclared}}"},
        {"filters": {"field": "nope", "op": "eq", "value": "{{account}}"}},
        {"text": "deal", "include": "everything"},
        {"text": "deal", "depth": -1},
        {"text": "deal", "limit": 0},
        {"text": "deal", "limit": 101},
        {"text": "deal", "limit": "many"},
        {"query": 7},
        {"limit": 5},
    ],
    ids=["where", "undeclared-param", "filter", "include", "depth", "limit-0", "limit-101", "limit-text",
         "query-not-text", "asks-nothing"],
)
def test_a_template_that_cannot_make_a_valid_recall_request_is_refused(setup: Setup, body: dict[str, Any]) -> None:
    with pytest.raises(MemoryInvalid):
        setup.service.define(ALICE, setup.memory_id, "q", definition(body=body))


def test_a_body_is_at_most_16_kib(setup: Setup) -> None:
    with pytest.raises(MemoryInvalid, match=str(MAX_BODY_BYTES)):
        setup.service.define(ALICE, setup.memory_id, "q", definition(body={"text": "x" * MAX_BODY_BYTES}))


def test_a_full_memory_refuses_a_new_query_but_still_replaces_one(setup: Setup) -> None:
    for n in range(MAX_QUERIES):
        setup.service.define(ALICE, setup.memory_id, f"q{n}", {"body": {"text": "deal"}})
    with pytest.raises(MemoryInvalid, match=str(MAX_QUERIES)):
        setup.service.define(ALICE, setup.memory_id, "one_more", {"body": {"text": "deal"}})
    replaced = setup.service.define(ALICE, setup.memory_id, "q7", {"body": {"text": "seats"}})
    assert setup.repo.get("acme", setup.memory_id, "q7") == replaced


def test_a_memory_deleted_while_defining_is_not_found(world: World) -> None:
    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    setup = build(world, repo=DeletedWhileDefining(memories))
    with pytest.raises(MemoryNotFound):
        setup.service.define(ALICE, setup.memory_id, "q", OPEN_DEALS)
    assert setup.repo.list("acme", setup.memory_id) == []


# -- list --------------------------------------------------------------------------------------


def test_list_offers_only_the_queries_the_caller_may_run(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "for_readers", OPEN_DEALS)
    setup.service.define(ALICE, setup.memory_id, "for_writers", definition(requires="write"))
    assert [q.name for q in setup.service.list(READER, setup.memory_id)] == ["for_readers"]
    assert [q.name for q in setup.service.list(WRITER, setup.memory_id)] == ["for_readers", "for_writers"]
    with pytest.raises(MemoryNotFound):
        setup.service.list(STRANGER, setup.memory_id)


# -- run ---------------------------------------------------------------------------------------


def test_run_recalls_the_memory_in_the_path_as_the_caller_with_the_params_filled_in(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "open_deals_for", OPEN_DEALS)
    setup.service.run(READER, setup.memory_id, "open_deals_for", {"account": "acme"})
    assert setup.recall.calls == [(READER, setup.memory_id, RecallInput(
        text="deal",
        filters={"and": [{"field": "attributes.account", "op": "eq", "value": "acme"},
                         {"field": "attributes.stage", "op": "ne", "value": "closed"}]},
        limit=10,
    ))]


def test_a_placeholder_standing_alone_keeps_the_params_type_and_inside_text_becomes_text(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "at_least", {
        "params": {"type": "object", "properties": {
            "seats": {"type": "integer"}, "ratio": {"type": "number"}, "open": {"type": "boolean"},
            "word": {"type": "string"}}, "required": ["seats", "word"]},
        "body": {"text": "{{word}} for {{ seats }} seats", "limit": "{{seats}}", "filters": {"and": [
            {"field": "attributes.seats", "op": "gte", "value": "{{seats}}"},
            {"field": "attributes.ratio", "op": "lt", "value": "{{ratio}}"},
            {"field": "attributes.open", "op": "eq", "value": "{{open}}"},
            {"field": "attributes.{{word}}", "op": "eq", "value": "{{word}}"}]}},
    })
    setup.service.run(READER, setup.memory_id, "at_least", {"seats": 12, "ratio": 0.5, "open": False, "word": "deal"})
    assert setup.recall.last.text == "deal for 12 seats"
    assert setup.recall.last.limit == 12
    assert setup.recall.last.filters == {"and": [
        {"field": "attributes.seats", "op": "gte", "value": 12},
        {"field": "attributes.ratio", "op": "lt", "value": 0.5},
        {"field": "attributes.open", "op": "eq", "value": False},
        {"field": "attributes.deal", "op": "eq", "value": "deal"}]}


def test_a_param_not_given_takes_its_default_and_an_optional_one_without_default_is_left_empty(
    setup: Setup,
) -> None:
    setup.service.define(ALICE, setup.memory_id, "deals", definition(
        params={"type": "object", "properties": {"account": {"type": "string", "default": "globex"},
                                                 "topic": {"type": "string"}}},
        body={"text": "deal {{topic}}", "filters": {"field": "attributes.account", "op": "eq", "value": "{{account}}"}},
    ))
    setup.service.run(READER, setup.memory_id, "deals", None)
    assert setup.recall.last.filters == {"field": "attributes.account", "op": "eq", "value": "globex"}
    assert setup.recall.last.text == "deal "


def test_keys_of_the_template_are_never_substituted(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "q", {
        "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "body": {"text": "{{text}}"},
    })
    setup.service.run(READER, setup.memory_id, "q", {"text": "query"})
    assert setup.recall.last == RecallInput(text="query")


@pytest.mark.parametrize(
    "params",
    [{}, {"account": 7}, {"account": True}, {"account": "acme", "extra": 1}, {"account": "x" * 2001}, ["acme"],
     {"account": "acme", "stage": "won"}, {"account": "acme", "seats": 1.5}, {"account": "acme", "seats": True}],
    ids=["missing", "number-for-string", "bool-for-string", "unknown", "too-long", "not-an-object",
         "not-in-enum", "float-for-integer", "bool-for-integer"],
)
def test_run_refuses_params_that_do_not_match_the_schema(setup: Setup, params: Any) -> None:
    setup.service.define(ALICE, setup.memory_id, "deals", definition(params={"type": "object", "properties": {
        "account": {"type": "string"},
        "stage": {"type": "string", "enum": ["open", "closed"]},
        "seats": {"type": "integer"},
    }, "required": ["account"]}))
    with pytest.raises(MemoryInvalid):
        setup.service.run(READER, setup.memory_id, "deals", params)
    assert setup.recall.calls == []


def test_a_string_param_may_be_as_long_as_its_max_length(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "deals", definition(params={"type": "object", "properties": {
        "account": {"type": "string", "maxLength": 5}}, "required": ["account"]}))
    setup.service.run(READER, setup.memory_id, "deals", {"account": "acme!"})
    with pytest.raises(MemoryInvalid):
        setup.service.run(READER, setup.memory_id, "deals", {"account": "acme!!"})
    assert len(setup.recall.calls) == 1


def test_run_of_an_unknown_or_malformed_name_is_query_not_found(setup: Setup) -> None:
    for name in ("nope", "Bad-Name"):
        with pytest.raises(QueryNotFound) as refused:
            setup.service.run(READER, setup.memory_id, name, {})
        assert refused.value.code == "memory_query_not_found"


def test_run_needs_what_the_query_requires(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "for_writers", definition(requires="write"))
    with pytest.raises(MemoryForbidden):
        setup.service.run(READER, setup.memory_id, "for_writers", {"account": "acme"})
    setup.service.run(WRITER, setup.memory_id, "for_writers", {"account": "acme"})
    assert [who for who, _, _ in setup.recall.calls] == [WRITER]


def test_a_caller_who_cannot_see_the_memory_is_told_it_does_not_exist(setup: Setup) -> None:
    setup.service.define(ALICE, setup.memory_id, "open_deals_for", OPEN_DEALS)
    for stranger in (STRANGER, caller("user:alice", tenant="other")):
        with pytest.raises(MemoryNotFound):
            setup.service.run(stranger, setup.memory_id, "open_deals_for", {"account": "acme"})
    assert setup.recall.calls == []


# -- free --------------------------------------------------------------------------------------


def test_free_queries_are_unsupported_where_no_index_can_confine_them(setup: Setup) -> None:
    assert setup.service.free_languages_configured() == ()
    with pytest.raises(MemoryUnsupported):
        setup.service.free(READER, setup.memory_id, "opensearch-dsl", {"match_all": {}}, None, 10)


def test_a_language_the_index_does_not_offer_is_unsupported(world: World) -> None:
    setup = build(world, InMemoryFreeQueryIndex())
    with pytest.raises(MemoryUnsupported):
        setup.service.free(READER, setup.memory_id, "sql", "SELECT *", None, 10)
    assert setup.free_index is not None
    assert setup.free_index.calls == []


def test_the_configured_languages_are_known_without_building_the_index(world: World) -> None:
    def never_built() -> None:
        raise AssertionError("the index was built")

    memories = world.ports.memories
    assert isinstance(memories, InMemoryMemoryRepository)
    service = QueryService(world.ports, InMemoryQueryRepository(memories), cast(RecallService, RecordingRecall()),
                           world.memories, world.records, never_built, ("opensearch-dsl",))
    assert service.free_languages_configured() == ("opensearch-dsl",)


def test_a_free_query_answers_only_current_active_versions_of_the_memory_read_back(world: World) -> None:
    index = InMemoryFreeQueryIndex(bounds=["size:capped_at_100"])
    setup = build(world, index)
    active = setup.remember("Acme renews in March")
    revised = setup.remember("Acme has 40 seats")
    newer = world.records.revise(ALICE, setup.memory_id, revised, {"content": "Acme has 45 seats"}).record.id
    forgotten = setup.remember("Globex is a prospect")
    world.records.forget(ALICE, setup.memory_id, forgotten)
    elsewhere_memory = world.memories.create(ALICE, name="Elsewhere").memory.id
    elsewhere = setup.remember("Elsewhere", memory_id=elsewhere_memory)
    index.answers[("acme", setup.memory_id)] = [revised, elsewhere, active, forgotten, "hrec_" + "f" * 32, newer]

    answer = setup.service.free(READER, setup.memory_id, "opensearch-dsl", {"match_all": {}}, None, 10)
    assert [r.record.record.id for r in answer.results] == [active, newer]
    # Scored by the index's rank, counting the hits dropped on the way.
    assert [(r.score, r.why) for r in answer.results] == [(round(1 / 3, 6), ("statement",)), (round(1 / 6, 6),
                                                                                                 ("statement",))]
    assert answer.degraded == ["size:capped_at_100"]
    assert answer.abstain is False
    assert index.calls[0].tenant == "acme"
    assert index.calls[0].memory_id == setup.memory_id


def test_a_free_query_with_no_hit_abstains(world: World) -> None:
    setup = build(world, InMemoryFreeQueryIndex())
    answer = setup.service.free(READER, setup.memory_id, "opensearch-dsl", {"match_all": {}}, None, 10)
    assert answer.results == []
    assert answer.abstain is True


def test_a_free_query_substitutes_its_params_into_the_statement(world: World) -> None:
    index = InMemoryFreeQueryIndex()
    setup = build(world, index)
    statement = {"match": {"text": "{{word}}"}, "size": "{{n}}"}
    setup.service.free(READER, setup.memory_id, "opensearch-dsl", statement, {"word": "renews", "n": 3}, 5)
    assert index.calls[0].statement == {"match": {"text": "renews"}, "size": 3}
    assert index.calls[0].limit == 5


def test_a_free_query_needs_read_a_limit_from_1_to_100_and_params_as_an_object(world: World) -> None:
    index = InMemoryFreeQueryIndex()
    setup = build(world, index)
    with pytest.raises(MemoryNotFound):
        setup.service.free(STRANGER, setup.memory_id, "opensearch-dsl", {}, None, 10)
    for limit in (0, 101):
        with pytest.raises(MemoryInvalid):
            setup.service.free(READER, setup.memory_id, "opensearch-dsl", {}, None, limit)
    with pytest.raises(MemoryInvalid):
        setup.service.free(READER, setup.memory_id, "opensearch-dsl", {}, ["word"], 10)
    assert index.calls == []
