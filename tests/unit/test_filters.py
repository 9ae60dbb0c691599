"""The filter language (parse, then match), the canonical time format, and opaque cursors."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from uhp_memories.domain import cursors
from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.filters import MAX_FILTER_NODES, Combination, Condition, matches, parse_filter
from uhp_memories.domain.records.model import RecordVersion
from uhp_memories.domain.timefmt import format_ms, parse_instant


def record(**fields: Any) -> RecordVersion:
    base: dict[str, Any] = {
        "tenant": "acme",
        "memory_id": "hmem_" + "1" * 32,
        "id": "hrec_" + "2" * 32,
        "chain_id": "hrec_" + "2" * 32,
        "version": 1,
        "type": "fact",
        "content": "Acme renews in March.",
        "attributes": {},
        "status": "active",
        "supersedes": None,
        "superseded_by": None,
        "valid_from": None,
        "valid_to": None,
        "written_at": "2026-10-01T17:02:11.000Z",
        "invalidated_at": None,
        "written_by": {"kind": "user", "id": "alice"},
    }
    base.update(fields)
    return RecordVersion(**base)


def test_no_filter_parses_to_none_and_matches_everything() -> None:
    assert parse_filter(None) is None
    assert matches(None, record())


def test_a_condition_parses_with_eq_as_the_default_operator() -> None:
    assert parse_filter({"field": "attributes.account", "value": "acme"}) == Condition(
        "attributes.account", "eq", "acme"
    )


def test_combinations_parse_into_a_tree() -> None:
    parsed = parse_filter(
        {"and": [{"field": "type", "op": "eq", "value": "fact"}, {"not": {"field": "attributes.x", "op": "exists",
                                                                          "value": True}}]}
    )
    assert parsed == Combination(
        "and", (Condition("type", "eq", "fact"), Combination("not", (Condition("attributes.x", "exists", True),)))
    )


@pytest.mark.parametrize(
    "raw",
    [
        "type = fact",
        ["type"],
        42,
        {"field": "type", "op": "eq", "value": "fact", "extra": 1},
        {"field": "content", "op": "eq", "value": "x"},
        {"field": "attributes.", "op": "eq", "value": "x"},
        {"field": "attributes", "op": "eq", "value": "x"},
        {"field": "attributes.a..b", "op": "eq", "value": "x"},
        {"field": "time.created_at", "op": "eq", "value": "2026-01-01T00:00:00Z"},
        {"field": 7, "op": "eq", "value": "x"},
        {"op": "eq", "value": "x"},
        {"field": "type", "op": "like", "value": "f%"},
        {"field": "type", "op": "in", "value": "fact"},
        {"field": "type", "op": "in", "value": ["x"] * 101},
        {"field": "type", "op": "exists", "value": "yes"},
        {"field": "type", "op": "exists"},
        {"field": "type", "op": "gt"},
        {"field": "attributes.a", "op": "eq", "value": {"nested": 1}},
        {"field": "attributes.a", "op": "eq", "value": [1, 2]},
        {"field": "attributes.a", "op": "in", "value": [[1]]},
        {"field": "time.valid_from", "op": "gte", "value": "yesterday"},
        {"field": "time.valid_from", "op": "gte", "value": "2026-01-01"},
        {"field": "time.valid_from", "op": "gte", "value": "2026-01-01T00:00:00"},
        {"field": "time.valid_from", "op": "gte", "value": 1790000000000},
        {"field": "time.written_at", "op": "in", "value": ["not a time"]},
        {"and": []},
        {"or": {"field": "type", "value": "fact"}},
        {"and": [{"field": "type", "value": "fact"}], "or": [{"field": "type", "value": "note"}]},
        {"and": [{"field": "type", "value": "fact"}], "field": "type"},
        {"not": [{"field": "type", "value": "fact"}]},
        {"and": [{"field": "type", "value": "fact"}, "bad"]},
    ],
)
def test_invalid_filters_are_refused_before_any_read(raw: Any) -> None:
    with pytest.raises(MemoryInvalid):
        parse_filter(raw)


def test_a_filter_may_hold_at_most_the_node_limit() -> None:
    fits = {"or": [{"field": "type", "value": f"t{i}"} for i in range(MAX_FILTER_NODES - 1)]}
    assert parse_filter(fits) is not None
    too_many = {"or": [{"field": "type", "value": f"t{i}"} for i in range(MAX_FILTER_NODES)]}
    with pytest.raises(MemoryInvalid):
        parse_filter(too_many)


def test_deep_nesting_counts_towards_the_limit() -> None:
    raw: Any = {"field": "type", "value": "fact"}
    for _ in range(MAX_FILTER_NODES):
        raw = {"not": raw}
    with pytest.raises(MemoryInvalid):
        parse_filter(raw)


def check(raw: Any, rec: RecordVersion) -> bool:
    return matches(parse_filter(raw), rec)


def test_equality_on_type_and_attributes() -> None:
    rec = record(type="note", attributes={"account": "acme", "tier": 2})
    assert check({"field": "type", "op": "eq", "value": "note"}, rec)
    assert not check({"field": "type", "op": "eq", "value": "fact"}, rec)
    assert check({"field": "attributes.account", "op": "eq", "value": "acme"}, rec)
    assert check({"field": "attributes.account", "op": "ne", "value": "globex"}, rec)
    assert not check({"field": "attributes.account", "op": "ne", "value": "acme"}, rec)


def test_numbers_strings_and_booleans_never_compare_equal_across_kinds() -> None:
    rec = record(attributes={"n": 1, "s": "1", "b": True, "f": 1.0})
    assert check({"field": "attributes.n", "op": "eq", "value": 1}, rec)
    assert check({"field": "attributes.n", "op": "eq", "value": 1.0}, rec)
    assert check({"field": "attributes.f", "op": "eq", "value": 1}, rec)
    assert not check({"field": "attributes.n", "op": "eq", "value": "1"}, rec)
    assert not check({"field": "attributes.s", "op": "eq", "value": 1}, rec)
    assert not check({"field": "attributes.n", "op": "eq", "value": True}, rec)
    assert not check({"field": "attributes.b", "op": "eq", "value": 1}, rec)
    assert check({"field": "attributes.b", "op": "eq", "value": True}, rec)
    assert check({"field": "attributes.b", "op": "ne", "value": 1}, rec)


def test_a_missing_field_fails_eq_and_passes_ne_and_nin() -> None:
    rec = record(attributes={})
    assert not check({"field": "attributes.account", "op": "eq", "value": "acme"}, rec)
    assert check({"field": "attributes.account", "op": "ne", "value": "acme"}, rec)
    assert not check({"field": "attributes.account", "op": "in", "value": ["acme"]}, rec)
    assert check({"field": "attributes.account", "op": "nin", "value": ["acme"]}, rec)
    assert not check({"field": "attributes.account", "op": "gt", "value": "a"}, rec)


def test_null_is_a_value_for_equality_but_never_ordered() -> None:
    rec = record(attributes={"owner": None})
    assert check({"field": "attributes.owner", "op": "eq", "value": None}, rec)
    assert check({"field": "attributes.owner", "op": "exists", "value": True}, rec)
    assert not check({"field": "attributes.owner", "op": "gte", "value": None}, rec)
    assert not check({"field": "attributes.missing", "op": "eq", "value": None}, rec)


def test_membership() -> None:
    rec = record(attributes={"stage": "won", "amount": 5})
    assert check({"field": "attributes.stage", "op": "in", "value": ["lost", "won"]}, rec)
    assert not check({"field": "attributes.stage", "op": "in", "value": ["lost", "open"]}, rec)
    assert not check({"field": "attributes.stage", "op": "nin", "value": ["lost", "won"]}, rec)
    assert check({"field": "attributes.amount", "op": "in", "value": ["5", 5]}, rec)
    assert not check({"field": "attributes.amount", "op": "in", "value": ["5"]}, rec)
    assert not check({"field": "attributes.amount", "op": "in", "value": []}, rec)
    assert check({"field": "attributes.amount", "op": "nin", "value": []}, rec)


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("lt", 10, True),
        ("lt", 5, False),
        ("lte", 5, True),
        ("gt", 4.5, True),
        ("gt", 5, False),
        ("gte", 5, True),
        ("gte", 6, False),
        ("gt", "4", False),
        ("lt", True, False),
    ],
)
def test_ranges_on_numbers(op: str, value: Any, expected: bool) -> None:
    assert check({"field": "attributes.amount", "op": op, "value": value}, record(attributes={"amount": 5})) is expected


def test_ranges_on_strings_and_never_on_booleans() -> None:
    rec = record(attributes={"name": "beta", "flag": True})
    assert check({"field": "attributes.name", "op": "gt", "value": "alpha"}, rec)
    assert not check({"field": "attributes.name", "op": "gt", "value": "gamma"}, rec)
    assert not check({"field": "attributes.flag", "op": "gte", "value": False}, rec)
    assert not check({"field": "attributes.flag", "op": "lte", "value": True}, rec)


def test_nested_attribute_paths() -> None:
    rec = record(attributes={"deal": {"stage": "won", "size": {"seats": 40}}, "flat": "x"})
    assert check({"field": "attributes.deal.stage", "op": "eq", "value": "won"}, rec)
    assert check({"field": "attributes.deal.size.seats", "op": "gte", "value": 40}, rec)
    assert not check({"field": "attributes.deal.missing", "op": "exists", "value": True}, rec)
    assert check({"field": "attributes.flat.deeper", "op": "exists", "value": False}, rec)


def test_exists() -> None:
    rec = record(attributes={"a": 0})
    assert check({"field": "attributes.a", "op": "exists", "value": True}, rec)
    assert not check({"field": "attributes.a", "op": "exists", "value": False}, rec)
    assert check({"field": "attributes.b", "op": "exists", "value": False}, rec)
    assert check({"field": "time.invalidated_at", "op": "exists", "value": False}, rec)
    assert not check({"field": "time.invalidated_at", "op": "exists", "value": False},
                     record(invalidated_at="2026-10-02T00:00:00.000Z"))


def test_time_fields_compare_as_instants_whatever_the_offset_written() -> None:
    rec = record(valid_from="2026-09-30T00:00:00.000Z", written_at="2026-10-01T17:02:11.000Z")
    assert check({"field": "time.valid_from", "op": "eq", "value": "2026-09-30T02:00:00+02:00"}, rec)
    assert check({"field": "time.valid_from", "op": "gte", "value": "2026-09-29T23:59:59.999Z"}, rec)
    assert not check({"field": "time.valid_from", "op": "gt", "value": "2026-09-30T00:00:00Z"}, rec)
    assert check({"field": "time.written_at", "op": "lt", "value": "2026-10-01T17:02:11.001Z"}, rec)
    assert not check({"field": "time.valid_to", "op": "lt", "value": "2030-01-01T00:00:00Z"}, rec)
    assert check({"field": "time.written_at", "op": "in", "value": ["2026-10-01T19:02:11+02:00"]}, rec)


def test_and_or_not() -> None:
    rec = record(type="fact", attributes={"account": "acme", "amount": 5})
    acme = {"field": "attributes.account", "value": "acme"}
    big = {"field": "attributes.amount", "op": "gt", "value": 10}
    assert check({"and": [acme, {"field": "type", "value": "fact"}]}, rec)
    assert not check({"and": [acme, big]}, rec)
    assert check({"or": [big, acme]}, rec)
    assert not check({"or": [big, {"not": acme}]}, rec)
    assert check({"not": big}, rec)
    assert check({"not": {"not": acme}}, rec)
    assert check({"and": [{"or": [big, acme]}, {"not": {"field": "type", "value": "note"}}]}, rec)


# -- time ----------------------------------------------------------------------------------------


def test_format_ms_is_rfc3339_utc_with_milliseconds() -> None:
    assert format_ms(0) == "1970-01-01T00:00:00.000Z"
    assert format_ms(1_790_000_000_123) == "2026-09-21T14:13:20.123Z"
    assert format_ms(-1) == "1969-12-31T23:59:59.999Z"


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("2026-10-01T17:02:11Z", "2026-10-01T17:02:11.000Z"),
        ("2026-10-01t17:02:11z", "2026-10-01T17:02:11.000Z"),
        ("2026-10-01T17:02:11.5Z", "2026-10-01T17:02:11.500Z"),
        ("2026-10-01T17:02:11.123456Z", "2026-10-01T17:02:11.123Z"),
        ("2026-10-01T17:02:11+02:00", "2026-10-01T15:02:11.000Z"),
        ("2026-10-01T00:30:00-01:00", "2026-10-01T01:30:00.000Z"),
        ("2026-12-31T23:30:00-01:00", "2027-01-01T00:30:00.000Z"),
        ("  2026-10-01T17:02:11Z ", "2026-10-01T17:02:11.000Z"),
    ],
)
def test_parse_instant_canonicalizes(given: str, canonical: str) -> None:
    assert parse_instant(given) == canonical


@pytest.mark.parametrize(
    "given",
    ["", "soon", "2026-10-01", "2026-10-01T17:02:11", "2026-13-01T00:00:00Z", "2026-10-01T25:00:00Z", "17:02:11Z",
     "1790000000000"],
)
def test_parse_instant_refuses_what_is_not_an_rfc3339_time(given: str) -> None:
    with pytest.raises(MemoryInvalid):
        parse_instant(given, "as_of")


def test_canonical_times_sort_as_strings_in_time_order() -> None:
    given = ["0999-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2026-10-01T17:02:11+02:00", "2026-10-01T16:02:12Z",
             "9999-12-31T23:59:59Z"]
    canonical = [parse_instant(value) for value in given]
    assert all(len(value) == len(canonical[0]) for value in canonical)
    assert sorted(canonical) == canonical
    assert canonical[0] == "0999-01-01T00:00:00.000Z"


@pytest.mark.parametrize("given", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_time_outside_the_representable_range_is_invalid_not_a_crash(given: str) -> None:
    with pytest.raises(MemoryInvalid):
        parse_instant(given)


# -- cursors -------------------------------------------------------------------------------------


def raw_cursor(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def test_a_cursor_round_trips_its_position() -> None:
    cursor = cursors.encode("children", [1790000000000, "hmem_x"], over="hmem_p")
    assert cursors.decode("children", cursor, over="hmem_p") == [1790000000000, "hmem_x"]
    assert cursors.decode("children", cursor, (int, str), over="hmem_p") == [1790000000000, "hmem_x"]
    assert cursors.decode("children", None, over="hmem_p") is None


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        "",
        raw_cursor("a string"),
        raw_cursor([1, 2]),
        raw_cursor({"k": "entry", "p": [1, "x"]}),
        raw_cursor({"p": [1, "x"]}),
        raw_cursor({"k": "children"}),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_cursor_not_made_by_this_listing_is_invalid(cursor: str) -> None:
    with pytest.raises(MemoryInvalid):
        cursors.decode("children", cursor, over="hmem_p")


@pytest.mark.parametrize(
    ("shape", "position"),
    [
        ((int, str), "x"),
        ((int, str), [1]),
        ((int, str), [1, "x", 2]),
        ((int, str), ["1", "x"]),
        ((int, str), [True, "x"]),
        ((int, str), None),
        (str, 5),
        (str, ["a"]),
        (int, "3"),
        (int, False),
    ],
)
def test_a_tampered_position_of_the_wrong_shape_is_invalid(shape: Any, position: Any) -> None:
    with pytest.raises(MemoryInvalid):
        cursors.decode("k", cursors.encode("k", position, over="m"), shape, over="m")


def test_limits() -> None:
    assert cursors.check_limit(None, 20, 100) == 20
    assert cursors.check_limit(1, 20, 100) == 1
    assert cursors.check_limit(100, 20, 100) == 100
    for bad in (0, -1, 101):
        with pytest.raises(MemoryInvalid):
            cursors.check_limit(bad, 20, 100)
