"""The SearchIndex contract, run against every adapter:

- `embedded`: sqlite3 + FTS5 + numpy, on disk (always);
- `opensearch-fake`: the OpenSearch adapter over an in-process interpreter of the bodies it builds,
  which checks that those bodies mean what the embedded engine does (always);
- `opensearch`: the OpenSearch adapter on a real OpenSearch 2.19 node (tests/opensearch_node.py), or
  on the cluster at OPENSEARCH_URL (with OPENSEARCH_AWS_REGION, requests are signed with SigV4 for
  OPENSEARCH_AWS_SERVICE, default "es").

Vectors come from a deterministic bag-of-words embedder, so texts that share words are close.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract.opensearch_fake import SEARCH_BACKENDS, opensearch_client
from uhp_memories.domain.filters import matches, parse_filter
from uhp_memories.domain.recall.engine import RecallEngine
from uhp_memories.domain.recall.model import EmbeddingModelMismatch, Fusion, SearchDocument, SearchRequest
from uhp_memories.domain.recall.ports import SearchIndex
from uhp_memories.domain.recall.ranking import rank
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.domain.timefmt import format_ms
from uhp_memories.local.hashing import HashingEmbedder

pytestmark = pytest.mark.slow

EMBEDDER = HashingEmbedder(64)
TENANT, OTHER_TENANT = "acme", "globex"
MEMORY, OTHER_MEMORY = "hmem_" + "a" * 32, "hmem_" + "b" * 32
T0 = 1_790_000_000_000
BACKENDS = SEARCH_BACKENDS


def at(seconds: float) -> str:
    return format_ms(int(T0 + seconds * 1000))


def rid(n: int) -> str:
    return f"hrec_{n:032x}"


def doc(
    n: int,
    text: str = "",
    *,
    tenant: str = TENANT,
    memory: str = MEMORY,
    chain: int | None = None,
    type: str = "fact",
    status: str = "active",
    attributes: dict[str, Any] | None = None,
    valid_from: str | None = None,
    valid_to: str | None = None,
    written: float = 0,
    invalidated: float | None = None,
    embed: bool = True,
) -> SearchDocument:
    return SearchDocument(
        tenant=tenant,
        memory_id=memory,
        record_id=rid(n),
        chain_id=rid(chain if chain is not None else n),
        type=type,
        status=status,
        attributes=attributes or {},
        valid_from=valid_from,
        valid_to=valid_to,
        written_at=at(written),
        invalidated_at=None if invalidated is None else at(invalidated),
        text=text,
        embedding=EMBEDDER.embed([text])[0] if embed and text else None,
    )


def ask(**fields: Any) -> SearchRequest:
    fields.setdefault("tenant", TENANT)
    fields.setdefault("memory_id", MEMORY)
    if "query" in fields:
        fields["vector"] = EMBEDDER.embed([fields.pop("query")])[0]
    if "filters" in fields:
        fields["filters"] = parse_filter(fields["filters"])
    return SearchRequest(**fields)


def ids(hits: list[Any]) -> list[str]:
    return [h.record_id for h in hits]


# -- backends ----------------------------------------------------------------------------------


@dataclass
class Backend:
    """Opens indexes on one store: opening twice reaches the same documents (and recorded model)."""

    name: str
    open: Callable[..., SearchIndex]


def open_backend(name: str, tmp: Path) -> Iterator[Backend]:
    if name == "embedded":
        from uhp_memories.local.embedded import EmbeddedSearchIndex

        opened: list[EmbeddedSearchIndex] = []

        def open_embedded(model_id: str = EMBEDDER.model_id, dimensions: int = EMBEDDER.dimensions, **kw: Any):
            index = EmbeddedSearchIndex(tmp / "recall.db", model_id=model_id, dimensions=dimensions, **kw)
            opened.append(index)
            return index

        yield Backend(name, open_embedded)
        for index in opened:
            index.close()
        return

    from uhp_memories.adapters.opensearch import OpenSearchIndex

    client = opensearch_client(name)
    index_name = f"uhp-contract-{uuid.uuid4().hex[:12]}"

    def open_opensearch(model_id: str = EMBEDDER.model_id, dimensions: int = EMBEDDER.dimensions, **kw: Any):
        index = OpenSearchIndex(
            client, index_name, model_id=model_id, dimensions=dimensions, refresh=True, replicas=0, **kw
        )
        index.ensure_index()
        return index

    yield Backend(name, open_opensearch)
    client.indices.delete(index=index_name, ignore=[404])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from open_backend(request.param, tmp_path)


@pytest.fixture
def index(backend: Backend) -> SearchIndex:
    return backend.open()


# -- the three signals -------------------------------------------------------------------------


def test_text_finds_the_documents_with_the_words_and_says_text(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "Acme renews in March and wants the discount kept"),
            doc(2, "Globex churned in May"),
            doc(3, "Acme asked about the discount twice, discount again"),
        ]
    )
    hits = rank(index, ask(text="discount"))
    assert set(ids(hits)) == {rid(1), rid(3)}
    assert all(h.why == ("text",) and h.signals["text"] > 0 for h in hits)
    assert rank(index, ask(text="zebra")) == []


def test_query_ranks_by_similarity_and_says_query(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "renewal terms for acme in march"),
            doc(2, "lunch menu pizza pasta salad"),
            doc(3, "acme renewal"),
        ]
    )
    hits = rank(index, ask(query="acme renewal"))
    assert ids(hits)[0] == rid(3)
    assert ids(hits)[1] == rid(1)
    assert rid(2) not in ids(hits)  # no word in common: similarity 0 is not a match
    assert hits[0].why == ("query",)
    assert hits[0].signals["query"] == pytest.approx(1.0, abs=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_query_and_text_together_put_what_both_found_first(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "acme renewal march discount"),
            doc(2, "acme renewal march"),
            doc(3, "discount"),
            doc(4, "unrelated words entirely"),
        ]
    )
    hits = rank(index, ask(query="acme renewal march", text="discount"))
    assert ids(hits)[0] == rid(1)
    assert hits[0].why == ("query", "text")
    assert set(ids(hits)) == {rid(1), rid(2), rid(3)}
    assert {h.record_id: h.why for h in hits}[rid(3)] == ("text",)


def test_filters_alone_rank_newest_first_and_say_filters(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "a", attributes={"account": "acme"}, written=1),
            doc(2, "b", attributes={"account": "acme"}, written=3),
            doc(3, "c", attributes={"account": "globex"}, written=2),
            doc(4, "d", attributes={"account": "acme"}, written=2),
        ]
    )
    hits = rank(index, ask(filters={"field": "attributes.account", "op": "eq", "value": "acme"}))
    assert ids(hits) == [rid(2), rid(4), rid(1)]
    assert all(h.why == ("filters",) for h in hits)
    assert ids(rank(index, ask(types=("fact",), limit=2))) == [rid(2), rid(4)]


def test_limit_cuts_and_scores_descend(index: SearchIndex) -> None:
    index.index([doc(n, f"apple number{n} " + "apple " * n) for n in range(1, 8)])
    hits = rank(index, ask(text="apple", query="apple", limit=3))
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(0 < h.score <= 1 for h in hits)


def test_a_document_without_vector_is_found_by_text_and_filters_only(index: SearchIndex) -> None:
    index.index([doc(1, "quiet note about acme", embed=False), doc(2, "acme note")])
    assert ids(rank(index, ask(query="acme note"))) == [rid(2)]
    assert set(ids(rank(index, ask(text="acme")))) == {rid(1), rid(2)}
    assert set(ids(rank(index, ask(types=("fact",))))) == {rid(1), rid(2)}


# -- isolation ---------------------------------------------------------------------------------


def test_no_signal_ever_reaches_another_memory_or_tenant(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "secret acme plan", memory=MEMORY),
            doc(2, "secret acme plan", memory=OTHER_MEMORY),
            doc(3, "secret acme plan", tenant=OTHER_TENANT, memory=MEMORY),
        ]
    )
    for request in (
        ask(text="secret"),
        ask(query="secret acme plan"),
        ask(types=("fact",)),
        ask(filters={"not": {"field": "type", "op": "eq", "value": "nothing"}}),
        ask(include="all"),
        ask(query="secret", text="plan", filters={"or": [{"field": "type", "value": "fact"}]}),
    ):
        assert ids(rank(index, request)) == [rid(1)], request


def test_mentioned_names_the_words_an_admitted_document_holds(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "Caroline went to the support group", attributes={"speaker": "caroline"}),
            doc(2, "Melanie painted a sunset", attributes={"speaker": "melanie"}),
            doc(3, "Jolene plays the guitar", memory=OTHER_MEMORY),
            doc(4, "Oscar forgot the keys", status="forgotten"),
            doc(5, "Zebulon lives elsewhere", tenant=OTHER_TENANT),
        ]
    )
    words = ["caroline", "melanie", "jolene", "oscar", "zebulon", "nobody"]
    assert index.mentioned(ask(), words) == {"caroline", "melanie"}
    assert index.mentioned(ask(include="all"), words) == {"caroline", "melanie", "oscar"}
    only_melanie = {"field": "attributes.speaker", "op": "eq", "value": "melanie"}
    assert index.mentioned(ask(filters=only_melanie), words) == {"melanie"}
    assert index.mentioned(ask(also=(OTHER_MEMORY,)), words) == {"caroline", "melanie", "jolene"}
    assert index.mentioned(ask(), []) == frozenset()


THIRD_MEMORY = "hmem_" + "d" * 32


def test_a_search_of_several_memories_ranks_them_on_one_scale_and_reaches_no_other(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "acme renewal plan for march", memory=MEMORY),
            doc(2, "acme renewal plan", memory=MEMORY),
            doc(3, "the renewal of the office lease", memory=OTHER_MEMORY),  # a weak match, its memory's best
            doc(4, "acme renewal plan for march", memory=THIRD_MEMORY),  # not searched
            doc(5, "acme renewal plan for march", tenant=OTHER_TENANT, memory=OTHER_MEMORY),
        ]
    )
    for request in (
        ask(text="acme renewal march", also=(OTHER_MEMORY,)),
        ask(query="acme renewal march", also=(OTHER_MEMORY,)),
        ask(query="acme renewal march", text="acme renewal march", also=(OTHER_MEMORY,)),
    ):
        hits = rank(index, request)
        assert ids(hits) == [rid(1), rid(2), rid(3)], request
        # The other memory's best is a weak match of the whole search, not a first place of its own.
        assert hits[2].score < hits[1].score < hits[0].score
        assert [h.memory_id for h in hits] == [MEMORY, MEMORY, OTHER_MEMORY]
    alone = rank(index, ask(text="acme renewal march", memory_id=OTHER_MEMORY))
    assert ids(alone) == [rid(3)]
    assert alone[0].memory_id == OTHER_MEMORY
    assert alone[0].score == pytest.approx(1.0)  # searched alone, it is its memory's first place
    newest = rank(index, ask(also=(OTHER_MEMORY,), limit=3))
    assert set(ids(newest)) == {rid(1), rid(2), rid(3)}


def test_get_checks_the_tenant_and_the_memory(index: SearchIndex) -> None:
    index.index([doc(1, "acme", attributes={"k": [1, {"x": None}]}, valid_from=at(-5))])
    found = index.get(TENANT, MEMORY, rid(1))
    assert found is not None
    assert (found.tenant, found.memory_id, found.record_id, found.text) == (TENANT, MEMORY, rid(1), "acme")
    assert found.attributes == {"k": [1, {"x": None}]}
    assert (found.valid_from, found.written_at, found.invalidated_at) == (at(-5), at(0), None)
    assert found.embedding is not None
    assert len(found.embedding) == EMBEDDER.dimensions
    assert index.get(TENANT, OTHER_MEMORY, rid(1)) is None
    assert index.get(OTHER_TENANT, MEMORY, rid(1)) is None
    assert index.get(TENANT, MEMORY, rid(2)) is None


def test_a_search_of_an_empty_or_unknown_memory_finds_nothing(index: SearchIndex) -> None:
    assert rank(index, ask(text="anything", query="anything")) == []
    assert rank(index, ask(memory_id="hmem_" + "c" * 32)) == []


# -- versions: include and as_of ---------------------------------------------------------------


def chain_of_three() -> list[SearchDocument]:
    """One record: v1 written at 10, revised at 20 into v2, v2 forgotten at 30; another record v9
    written at 15 and still active."""
    return [
        doc(1, "plan version one", chain=1, status="superseded", written=10, invalidated=20),
        doc(2, "plan version two", chain=1, status="forgotten", written=20, invalidated=30),
        doc(9, "plan other", written=15),
    ]


def test_include_active_keeps_current_active_versions_and_all_adds_the_rest(index: SearchIndex) -> None:
    index.index(chain_of_three())
    assert ids(rank(index, ask(text="plan"))) == [rid(9)]
    assert set(ids(rank(index, ask(text="plan", include="all")))) == {rid(1), rid(2), rid(9)}
    assert set(ids(rank(index, ask(query="plan version", include="all")))) == {rid(1), rid(2), rid(9)}


@pytest.mark.parametrize(
    ("moment", "active", "every"),
    [
        (5, set(), set()),
        (10, {1}, {1}),
        (16, {1, 9}, {1, 9}),
        (20, {2, 9}, {1, 2, 9}),
        (29.999, {2, 9}, {1, 2, 9}),
        (30, {9}, {1, 2, 9}),
    ],
)
def test_as_of_reads_the_memory_as_it_stood(
    index: SearchIndex, moment: float, active: set[int], every: set[int]
) -> None:
    index.index(chain_of_three())
    for signals in ({}, {"text": "plan"}, {"query": "plan version"}):
        got = set(ids(rank(index, ask(as_of=at(moment), **signals))))
        assert got == {rid(n) for n in active}, (signals, moment)
        got_all = set(ids(rank(index, ask(as_of=at(moment), include="all", **signals))))
        assert got_all == {rid(n) for n in every}, (signals, moment)


def test_as_of_filters_see_a_later_close_as_not_yet_happened(index: SearchIndex) -> None:
    index.index(chain_of_three())
    still_open = {"field": "time.invalidated_at", "op": "exists", "value": False}
    assert set(ids(rank(index, ask(as_of=at(25), include="all", filters=still_open)))) == {rid(2), rid(9)}
    assert set(ids(rank(index, ask(include="all", filters=still_open)))) == {rid(9)}
    closed_by_25 = {"field": "time.invalidated_at", "op": "lte", "value": at(25)}
    assert ids(rank(index, ask(as_of=at(25), include="all", filters=closed_by_25))) == [rid(1)]
    closed_at_30 = {"field": "time.invalidated_at", "op": "eq", "value": at(30)}
    assert ids(rank(index, ask(as_of=at(25), include="all", filters=closed_at_30))) == []
    assert ids(rank(index, ask(include="all", filters=closed_at_30))) == [rid(2)]


# -- filters inside every signal, before the cut -------------------------------------------------


def test_filters_apply_inside_the_vector_signal_before_its_top_k(index: SearchIndex) -> None:
    crowd = [doc(n, "acme renewal march", attributes={"account": "globex"}) for n in range(1, 31)]
    index.index([*crowd, doc(99, "acme renewal in the spring", attributes={"account": "acme"})])
    narrow = Fusion(candidates=5)
    flt = {"field": "attributes.account", "op": "eq", "value": "acme"}
    hits = rank(index, ask(query="acme renewal march", filters=flt, limit=1, fusion=narrow))
    assert ids(hits) == [rid(99)]
    assert hits[0].why == ("query", "filters")


def test_filters_apply_inside_the_text_signal_before_its_top_k(index: SearchIndex) -> None:
    crowd = [doc(n, "renewal renewal renewal", type="note") for n in range(1, 31)]
    index.index([*crowd, doc(99, "renewal mentioned once among many other words here", type="fact")])
    narrow = Fusion(candidates=5)
    assert ids(rank(index, ask(text="renewal", types=("fact",), limit=1, fusion=narrow))) == [rid(99)]
    flt = {"field": "type", "op": "ne", "value": "note"}
    assert ids(rank(index, ask(text="renewal", filters=flt, limit=1, fusion=narrow))) == [rid(99)]


def test_visibility_applies_inside_the_signals_before_their_top_k(index: SearchIndex) -> None:
    closed = [doc(n, "acme renewal march", status="superseded", invalidated=5) for n in range(1, 31)]
    index.index([*closed, doc(99, "acme renewal, said once")])
    narrow = Fusion(candidates=5)
    assert ids(rank(index, ask(query="acme renewal march", limit=1, fusion=narrow))) == [rid(99)]
    assert ids(rank(index, ask(text="march renewal", limit=1, fusion=narrow))) == [rid(99)]


def test_equal_text_scores_keep_the_lowest_record_ids_whatever_the_write_order(index: SearchIndex) -> None:
    same = [doc(n, "renewal notes", written=n) for n in range(1, 25)]
    random.Random(7).shuffle(same)
    index.index(same)
    index.index([doc(n, "renewal notes", status="superseded", invalidated=50) for n in range(25, 40)])
    narrow = Fusion(candidates=5)
    assert ids(rank(index, ask(text="renewal", limit=5, fusion=narrow))) == [rid(n) for n in range(1, 6)]


# -- the filter language: the same answers as domain/filters.matches ----------------------------

FIELDS = [
    "type",
    "attributes.a",
    "attributes.n",
    "attributes.flag",
    "attributes.o",
    "attributes.o.x",
    "attributes.tags",
    "attributes.missing",
    "attributes.d.e",
    "time.valid_from",
    "time.valid_to",
    "time.written_at",
    "time.invalidated_at",
]
SCALARS = st.sampled_from(
    ["acme", "Acme", "", "globex", "2", "fact", "note", 0, 1, 2, 2.5, -3, 1e300, True, False, None]
)
TIMES = st.sampled_from([at(s) for s in (0, 10, 20, 25, 30, 40, 60)])


def conditions() -> st.SearchStrategy[dict[str, Any]]:
    def build(field: str, op: str, scalar: Any, many: list[Any], time: str, exists: bool) -> dict[str, Any]:
        is_time = field.startswith("time.")
        if op == "exists":
            return {"field": field, "op": op, "value": exists}
        if op in ("in", "nin"):
            return {"field": field, "op": op, "value": [time] if is_time else many}
        return {"field": field, "op": op, "value": time if is_time and scalar is not None else scalar}

    return st.builds(
        build,
        st.sampled_from(FIELDS),
        st.sampled_from(["eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "exists"]),
        SCALARS,
        st.lists(SCALARS, max_size=3),
        TIMES,
        st.booleans(),
    )


FILTERS = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.builds(lambda parts: {"and": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda parts: {"or": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda part: {"not": part}, inner),
    ),
    max_leaves=6,
)


def corpus() -> list[SearchDocument]:
    pick = random.Random(7)
    values: dict[str, list[Any]] = {
        "a": ["acme", "Acme", "", "globex", 2, None, "2"],
        "n": [1, 2, 2.0, 2.5, -3, 0, True, "2", None, 1e300, [2]],
        "flag": [True, False, 0, 1],
        "o": [{"x": 1}, {"x": "1"}, {"x": None}, {}, "o", {"x": {"y": 1}}],
        "tags": [["a"], [], ["acme", 2]],
        "d.e": [1],
        "d": [{"e": 1}],
    }
    docs = []
    for n in range(1, 49):
        attributes = {k: pick.choice(v) for k, v in values.items() if pick.random() < 0.7}
        written = pick.choice([0, 10, 20, 30, 40])
        closed = pick.random() < 0.35
        docs.append(
            doc(
                n,
                f"memo {n} " + pick.choice(["acme", "globex", "plan"]),
                type=pick.choice(["fact", "note", "episode"]),
                status=pick.choice(["superseded", "forgotten"]) if closed else "active",
                attributes=attributes,
                valid_from=pick.choice([None, at(0), at(25), at(-100)]),
                valid_to=pick.choice([None, None, at(30)]),
                written=written,
                invalidated=written + pick.choice([5, 10, 20]) if closed else None,
            )
        )
    return docs


def as_record(d: SearchDocument) -> RecordVersion:
    return RecordVersion(
        tenant=d.tenant,
        memory_id=d.memory_id,
        id=d.record_id,
        chain_id=d.chain_id,
        version=1,
        type=d.type,
        content=d.text,
        attributes=dict(d.attributes),
        status=d.status,
        supersedes=None,
        superseded_by=None if d.invalidated_at is None else "hrec_" + "f" * 32,
        valid_from=d.valid_from,
        valid_to=d.valid_to,
        written_at=d.written_at,
        invalidated_at=d.invalidated_at,
        written_by={"kind": "user", "id": "test"},
    )


def expected(docs: list[SearchDocument], raw: dict[str, Any], include: str, as_of: str | None) -> set[str]:
    flt = parse_filter(raw)
    found = set()
    for d in docs:
        record = as_record(d)
        if as_of is None:
            if include == "active" and d.status != "active":
                continue
        else:
            if include == "active" and not record.held_at(as_of):
                continue
            if include == "all" and record.written_at > as_of:
                continue
            record = record.as_of(as_of)
        if matches(flt, record):
            found.add(d.record_id)
    return found


@pytest.fixture(scope="module", params=BACKENDS)
def corpus_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    docs = corpus()
    for backend in open_backend(request.param, tmp_path_factory.mktemp(request.param)):
        index = backend.open()
        index.index(docs)
        yield index, docs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=FILTERS, include=st.sampled_from(["active", "all"]), as_of=st.sampled_from([None, at(15), at(30), at(45)]))
def test_every_signal_filters_exactly_as_the_domain_matches(
    corpus_index: Any, raw: dict[str, Any], include: str, as_of: str | None
) -> None:
    index, docs = corpus_index
    want = expected(docs, raw, include, as_of)
    wide = Fusion(candidates=1000, min_similarity=None)
    common = {"filters": raw, "include": include, "as_of": as_of, "limit": 1000, "fusion": wide}
    assert set(ids(rank(index, ask(**common)))) == want
    assert set(ids(rank(index, ask(text="memo", **common)))) == want
    assert set(ids(rank(index, ask(query="memo", **common)))) == want


# -- writes ------------------------------------------------------------------------------------


def test_indexing_is_idempotent_and_replaces_a_version_by_id(index: SearchIndex) -> None:
    first = doc(1, "alpha words", attributes={"k": 1})
    index.index([first])
    index.index([first])
    assert ids(rank(index, ask(text="alpha", include="all"))) == [rid(1)]
    index.index([replace(first, text="beta words", attributes={"k": 2}, embedding=EMBEDDER.embed(["beta"])[0])])
    assert rank(index, ask(text="alpha")) == []
    assert ids(rank(index, ask(text="beta"))) == [rid(1)]
    assert ids(rank(index, ask(query="beta"))) == [rid(1)]
    assert ids(rank(index, ask(filters={"field": "attributes.k", "value": 2}))) == [rid(1)]
    assert rank(index, ask(filters={"field": "attributes.k", "value": 1})) == []


def test_a_closed_version_never_reopens_from_a_late_image(index: SearchIndex) -> None:
    opened = doc(1, "acme plan")
    closed = replace(opened, status="forgotten", invalidated_at=at(5))
    index.index([closed])
    index.index([opened])  # a retried or late event of the version before it was closed
    found = index.get(TENANT, MEMORY, rid(1))
    assert found is not None
    assert (found.status, found.invalidated_at) == ("forgotten", at(5))
    assert rank(index, ask(text="acme")) == []
    assert rank(index, ask(query="acme plan")) == []


def test_revise_and_forget_move_a_record_out_of_active_reads(index: SearchIndex) -> None:
    index.index([doc(1, "acme renews in march", chain=1)])
    index.index(
        [
            doc(1, "acme renews in march", chain=1, status="superseded", invalidated=5),
            doc(2, "acme renews in april", chain=1, written=5),
        ]
    )
    assert ids(rank(index, ask(query="acme renews"))) == [rid(2)]
    assert ids(rank(index, ask(text="march"))) == []
    index.index([doc(2, "acme renews in april", chain=1, written=5, status="forgotten", invalidated=9)])
    assert rank(index, ask(query="acme renews")) == []
    assert set(ids(rank(index, ask(text="acme", include="all")))) == {rid(1), rid(2)}


def test_delete_removes_documents_from_every_signal_and_from_get(index: SearchIndex) -> None:
    index.index([doc(1, "erase me please", attributes={"k": "v"}), doc(2, "keep me please")])
    index.delete(TENANT, MEMORY, [rid(1), rid(77)])
    index.delete(TENANT, OTHER_MEMORY, [rid(2)])  # not in that memory: ignored
    assert index.get(TENANT, MEMORY, rid(1)) is None
    assert ids(rank(index, ask(text="please", query="erase me please", include="all"))) == [rid(2)]
    assert rank(index, ask(filters={"field": "attributes.k", "op": "exists", "value": True}, include="all")) == []


def test_delete_memory_removes_only_that_memory(index: SearchIndex) -> None:
    index.index(
        [
            doc(1, "shared words", memory=MEMORY),
            doc(2, "shared words", memory=OTHER_MEMORY),
            doc(3, "shared words", tenant=OTHER_TENANT, memory=MEMORY),
        ]
    )
    index.delete_memory(TENANT, MEMORY)
    assert rank(index, ask(text="shared", include="all")) == []
    assert index.get(TENANT, MEMORY, rid(1)) is None
    assert ids(rank(index, ask(memory_id=OTHER_MEMORY, text="shared"))) == [rid(2)]
    assert ids(rank(index, ask(tenant=OTHER_TENANT, query="shared words"))) == [rid(3)]
    index.index([doc(4, "shared words again")])  # the memory can be written again
    assert ids(rank(index, ask(text="shared"))) == [rid(4)]


# -- one embedding model per index ---------------------------------------------------------------


def test_vectors_of_another_size_are_refused(index: SearchIndex) -> None:
    with pytest.raises(EmbeddingModelMismatch):
        index.index([replace(doc(1, "x"), embedding=[0.1] * (EMBEDDER.dimensions + 1))])
    with pytest.raises(EmbeddingModelMismatch):
        rank(index, ask(vector=[0.1] * 3))
    assert index.get(TENANT, MEMORY, rid(1)) is None


def test_an_index_refuses_to_be_opened_with_another_model(backend: Backend) -> None:
    first = backend.open()
    first.index([doc(1, "kept")])
    with pytest.raises(EmbeddingModelMismatch):
        backend.open(model_id="another-model", dimensions=EMBEDDER.dimensions)
    with pytest.raises(EmbeddingModelMismatch):
        backend.open(model_id=EMBEDDER.model_id, dimensions=EMBEDDER.dimensions * 2)
    again = backend.open()
    assert ids(rank(again, ask(text="kept"))) == [rid(1)]


def test_the_engine_refuses_an_embedder_of_another_model(index: SearchIndex) -> None:
    with pytest.raises(EmbeddingModelMismatch):
        RecallEngine(index, HashingEmbedder(32))


# -- the engine over each index ----------------------------------------------------------------


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(EMBEDDER.dimensions)
        self.texts: list[str] = []

    def embed(self, texts: Any) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed(texts)


def version(n: int, content: Any, **fields: Any) -> RecordVersion:
    base: dict[str, Any] = {
        "tenant": TENANT,
        "memory_id": MEMORY,
        "id": rid(n),
        "chain_id": rid(n),
        "version": 1,
        "type": "fact",
        "content": content,
        "attributes": {},
        "status": "active",
        "supersedes": None,
        "superseded_by": None,
        "valid_from": None,
        "valid_to": None,
        "written_at": at(0),
        "invalidated_at": None,
        "written_by": {"kind": "user", "id": "alice"},
    }
    base.update(fields)
    return RecordVersion(**base)


def test_the_engine_keeps_the_index_in_step_with_remember_revise_forget(index: SearchIndex) -> None:
    embedder = CountingEmbedder()
    engine = RecallEngine(index, embedder)
    first = version(1, "Acme renews in March")
    engine.index_versions([first])  # remember
    revision = version(2, "Acme renews in April", chain_id=rid(1), version=2, supersedes=rid(1), written_at=at(5))
    closed = first.evolve(status="superseded", superseded_by=rid(2), invalidated_at=at(5))
    engine.index_versions([closed, revision])  # revise
    assert embedder.texts == ["Acme renews in March", "Acme renews in April"]  # the closed one kept its vector
    assert ids(engine.search(TENANT, MEMORY, query="acme renews")) == [rid(2)]
    assert ids(engine.search(TENANT, MEMORY, text="march", as_of=at(3))) == [rid(1)]
    engine.index_versions([revision.evolve(status="forgotten", invalidated_at=at(9))])  # forget
    assert engine.search(TENANT, MEMORY, query="acme renews") == []
    assert embedder.texts.count("Acme renews in April") == 1  # forget re-embedded nothing
    engine.erase(TENANT, MEMORY, [rid(1), rid(2)])
    assert engine.search(TENANT, MEMORY, text="acme", include="all") == []


def test_the_engine_indexes_a_version_without_text_for_filters_only(index: SearchIndex) -> None:
    embedder = CountingEmbedder()
    engine = RecallEngine(index, embedder)
    blank = version(1, "   ", attributes={"k": 1})
    engine.index_versions([blank, version(2, {"file": {"id": "file_1", "name": "q3.pdf"}})])
    assert embedder.texts == ["q3.pdf"]
    flt = parse_filter({"field": "attributes.k", "value": 1})
    assert ids(engine.search(TENANT, MEMORY, filters=flt)) == [rid(1)]
    assert ids(engine.search(TENANT, MEMORY, text="q3")) == [rid(2)]


def test_a_typed_time_field_filters_by_range_on_every_backend(index: SearchIndex) -> None:
    """Extension types keep date-time attributes in the one form that sorts (domain/types/service.py), so a range on
    `attributes.starts_at` compares instants, the same on both search engines."""
    starts = [
        "2026-12-04T09:00:00.000Z", "2026-12-15T00:00:00.000Z", "2026-12-31T23:59:59.999Z", "2027-01-02T08:00:00.000Z"
    ]
    index.index(
        [doc(n, "event", type="x.calendar.event", attributes={"starts_at": s}) for n, s in enumerate(starts, 1)]
    )
    december_after_15 = {"and": [
        {"field": "attributes.starts_at", "op": "gte", "value": "2026-12-15T00:00:00.000Z"},
        {"field": "attributes.starts_at", "op": "lt", "value": "2027-01-01T00:00:00.000Z"},
    ]}
    assert sorted(ids(rank(index, ask(filters=december_after_15)))) == [rid(2), rid(3)]
