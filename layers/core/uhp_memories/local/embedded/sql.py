"""A request's filter as SQL over the embedded store's `docs` table, and the questions asked with it:
which of these documents does the request admit, and which documents of a memory does it admit.

The memory (scope), the visibility (include, as_of), the types and the field filters are one WHERE
clause, in two forms: `correlated` checks attribute conditions per candidate row (cheap for a few
candidates: the text signal's matches, the vector signal's best rows, the log around a candidate),
the other lists the admitted documents once (cheap when the whole memory is scanned).
"""

# SQL text in this module is built from constants only; every value is bound as a parameter, so
# string-built statements (S608) are safe here.
# ruff: noqa: S608

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uhp_memories.adapters.predicates import (
    BOOLEAN,
    NULL,
    NUMBER,
    All,
    Any_,
    Compare,
    Const,
    Equals,
    FieldRef,
    Not,
    Predicate,
    Present,
    lower,
)
from uhp_memories.domain.filters import TIME_FIELDS
from uhp_memories.domain.recall.model import SearchRequest

Where = tuple[str, list[Any]]  # a WHERE fragment over `docs d` and its parameters
# Checking documents against a filter one by one (Admission.passing: json_each and a correlated
# attribute lookup) costs a little per document; listing every admitted document of a 10,000-record
# memory (Admission.every) costs as much as checking several hundred. The episode log is read as far
# out as it takes to find enough admitted episodes, four times farther each round when the filter
# admits few: past a few hundred to check, one list costs less than the rounds (the filtered request
# of bench/recall_engine.py at 10,000 records came nearer the time of the engine before the episode
# log counted admitted episodes only, side by side). Measured: docs/performance.md,
# "Figures behind design choices in the code".
PROBE_MAX = 256
_SQL_OPS = {"lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
_INT64 = (-(2**63), 2**63 - 1)


def sql_value(kind: str, value: Any) -> Any:
    """An attribute value as the `attrs` table stores it (predicates.attribute_leaves' kinds)."""
    if kind == BOOLEAN:
        return int(bool(value))
    if kind == NUMBER:
        return value if isinstance(value, float) or _INT64[0] <= value <= _INT64[1] else float(value)
    if kind == NULL:
        return None
    return value


def narrows(request: SearchRequest) -> bool:
    """Whether the request admits anything but the current active versions of its memory."""
    return request.include != "active" or request.as_of is not None or request.has_filters


def where(request: SearchRequest, scope: int, correlated: bool = False) -> Where:
    """The whole filter of one request inside one memory: its scope, its visibility, its types and
    its fields."""
    params: list[Any] = [scope]
    clauses = ["d.scope = ?"]
    if request.as_of is None:
        if request.include == "active":
            clauses.append("d.status = 'active'")
    else:
        clauses.append("d.written_at <= ?")
        params.append(request.as_of)
        if request.include == "active":
            clauses.append("(d.invalidated_at IS NULL OR d.invalidated_at > ?)")
            params.append(request.as_of)
    if request.types:
        clauses.append("d.type IN (" + ",".join("?" * len(request.types)) + ")")
        params.extend(request.types)
    predicate = lower(request.filters)
    if predicate != Const(True):
        compiler = _Sql(scope, request.as_of, params, correlated)
        clauses.append(compiler.compile(predicate))
    return " AND ".join(clauses), params


@dataclass(frozen=True)
class Admission:
    """Which documents of one memory a request admits, asked of SQLite."""

    db: sqlite3.Connection
    scan: Where
    probe: Where  # correlated
    narrowed: bool  # False: exactly the current active versions (the vector block's flags tell)
    every_version: bool = False  # every version of the memory, whatever its status (include=all)

    @classmethod
    def of(cls, db: sqlite3.Connection, request: SearchRequest, scope: int) -> Admission:
        every_version = request.include == "all" and request.as_of is None and not request.has_filters
        return cls(db, where(request, scope), where(request, scope, correlated=True), narrows(request), every_version)

    def passing(self, doc_ids: np.ndarray) -> np.ndarray:
        """Whether each of these documents passes the request's filter, in one query."""
        clause, params = self.probe
        passed = self.db.execute(
            f"SELECT d.id FROM docs d WHERE d.id IN (SELECT value FROM json_each(?)) AND {clause}",
            [json.dumps(doc_ids.tolist()), *params],
        ).fetchall()
        return np.isin(doc_ids, np.fromiter((r[0] for r in passed), dtype=np.int64, count=len(passed)))

    def every(self, types: Sequence[str] = ()) -> np.ndarray:
        """The ids of every document the request admits (of these types, when given)."""
        clause, params = self.scan
        if types:
            clause += " AND d.type IN (" + ",".join("?" * len(types)) + ")"
            params = [*params, *types]
        admitted = self.db.execute(f"SELECT d.id FROM docs d WHERE {clause}", params).fetchall()
        return np.fromiter((r[0] for r in admitted), dtype=np.int64, count=len(admitted))


@dataclass
class _Sql:
    """A predicate compiled to a WHERE fragment over `docs d`, with its positional parameters."""

    scope: int
    as_of: str | None
    params: list[Any]
    correlated: bool = False

    def compile(self, pred: Predicate) -> str:
        if isinstance(pred, Const):
            return "1" if pred.value else "0"
        if isinstance(pred, Not):
            return f"NOT ({self.compile(pred.part)})"
        if isinstance(pred, (All, Any_)):
            joiner = " AND " if isinstance(pred, All) else " OR "
            return "(" + joiner.join(self.compile(p) for p in pred.parts) + ")"
        if pred.field.kind == "attr":
            return self._attribute(pred)
        column = self._column(pred.field)
        if isinstance(pred, Present):
            return f"({column} IS NOT NULL)"
        if isinstance(pred, Equals):
            self.params.append(pred.value)
            return f"COALESCE({column} = ?, 0)"
        self.params.append(pred.value)
        return f"COALESCE({column} {_SQL_OPS[pred.op]} ?, 0)"

    def _column(self, ref: FieldRef) -> str:
        if ref.kind == "type":
            return "d.type"
        if ref.name not in TIME_FIELDS:
            raise ValueError(f"unknown time field {ref.name}")
        if ref.name == "invalidated_at" and self.as_of is not None:
            # As of T, a close that came after T has not happened yet.
            self.params.append(self.as_of)
            return "(CASE WHEN d.invalidated_at <= ? THEN d.invalidated_at END)"
        return f"d.{ref.name}"

    def _attribute(self, pred: Present | Equals | Compare) -> str:
        if self.correlated:  # probe each candidate document: cheap when the candidates are few
            self.params.append(pred.field.path_key)
            sql = "EXISTS (SELECT 1 FROM attrs WHERE attrs.doc = d.id AND path = ?"
        else:  # list the admitted documents once: cheap when the whole memory is scanned
            self.params.extend((self.scope, pred.field.path_key))
            sql = "d.id IN (SELECT doc FROM attrs WHERE scope = ? AND path = ?"
        if isinstance(pred, Present):
            return sql + ")"
        self.params.append(pred.kind)
        if pred.kind == NULL:
            return sql + " AND kind = ?)"
        self.params.append(sql_value(pred.kind, pred.value))
        op = "=" if isinstance(pred, Equals) else _SQL_OPS[pred.op]
        return sql + f" AND kind = ? AND v {op} ?)"
