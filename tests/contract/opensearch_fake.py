"""An in-process stand-in for the few OpenSearch APIs the recall adapter calls, interpreting the query
DSL subset it emits (bool, term, terms, range, exists, match_all, match_none, match, knn with a filter,
script_score with the one Painless similarity script the adapter sends, sorts, terminate_after) and the
clauses a free query may hold (adapters/opensearch/free_query.py: phrases, multi_match, dis_max, constant_score,
prefix). A date it cannot read, like a clause it does not know, is the cluster's 400
(search_phase_execution_exception), raised by search and answered inside msearch, as OpenSearch does.

It exists so the contract suite checks that the bodies the adapter builds *mean* what the embedded
engine does (filters, isolation, as_of, attribute typing), without a cluster. It is not OpenSearch:
ranking by BM25 is approximate (no stemming), k-NN is exact. A real OpenSearch 2.19 node runs the same
suites ("opensearch": tests/opensearch_node.py, or the cluster at OPENSEARCH_URL).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from collections import Counter
from datetime import datetime
from typing import Any

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")
_WORD = re.compile(r"\w+")


class FakeTransportError(Exception):
    def __init__(self, status_code: int, error: str) -> None:
        super().__init__(f"{status_code} {error}")
        self.status_code = status_code
        self.error = error


class FakeOpenSearch:
    def __init__(self) -> None:
        self.store: dict[str, _Index] = {}
        self.indices = _Indices(self)
        self.calls: list[tuple[str, Any]] = []

    def _index(self, name: str) -> _Index:
        if name not in self.store:
            raise FakeTransportError(404, "index_not_found_exception")
        return self.store[name]

    def bulk(self, body: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        self.calls.append(("bulk", body))
        items, errors, i = [], False, 0
        while i < len(body):
            ((action, meta),) = body[i].items()
            index = self._index(meta["_index"])
            if action == "index":
                item = index.put(meta, body[i + 1])
                i += 2
            else:
                item = index.remove(meta["_id"])
                i += 1
            errors = errors or "error" in item
            items.append({action: item})
        return {"errors": errors, "items": items}

    def get(self, index: str, id: str, ignore: Any = (), **params: Any) -> dict[str, Any]:
        found = self._index(index).docs.get(id)
        if found is None:
            if 404 in (ignore or ()):
                return {"_index": index, "_id": id, "found": False}
            raise FakeTransportError(404, "not_found")
        return {"_index": index, "_id": id, "found": True, "_source": copy.deepcopy(found[1])}

    def msearch(self, body: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        self.calls.append(("msearch", body))
        responses = []
        for header, query in zip(body[::2], body[1::2], strict=True):
            try:
                responses.append(self._index(header["index"]).search(query))
            except FakeTransportError as error:  # one search failed: the others still answer
                responses.append({"error": {"type": error.error, "reason": str(error)}, "status": error.status_code})
        return {"responses": responses}

    def search(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        """One search (free queries): every shard answered, nothing timed out or stopped early."""
        self.calls.append(("search", body))
        answer = self._index(index).search(body)
        return {**answer, "timed_out": False, "_shards": {"total": 1, "successful": 1, "failed": 0}}

    def delete_by_query(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        target = self._index(index)
        doomed = [i for i, (_, src) in target.docs.items() if target.score(body["query"], src, {}) is not None]
        for doc_id in doomed:
            del target.docs[doc_id]
        return {"deleted": len(doomed)}


class _Indices:
    def __init__(self, owner: FakeOpenSearch) -> None:
        self._owner = owner

    def exists(self, index: str, **params: Any) -> bool:
        return index in self._owner.store

    def create(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        if index in self._owner.store:
            raise FakeTransportError(400, "resource_already_exists_exception")
        assert body["settings"]["index"]["knn"] is True
        self._owner.store[index] = _Index(body["mappings"])
        return {"acknowledged": True}

    def get_mapping(self, index: str, **params: Any) -> dict[str, Any]:
        return {index: {"mappings": copy.deepcopy(self._owner._index(index).mappings)}}

    def delete(self, index: str, **params: Any) -> dict[str, Any]:
        self._owner.store.pop(index, None)
        return {"acknowledged": True}


class _Index:
    def __init__(self, mappings: dict[str, Any]) -> None:
        self.mappings = mappings
        self.fields: dict[str, dict[str, Any]] = mappings["properties"]
        self.docs: dict[str, tuple[int, dict[str, Any]]] = {}

    # -- writes ------------------------------------------------------------------------------

    def put(self, meta: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
        unknown = set(source) - set(self.fields)
        if unknown and self.mappings.get("dynamic") == "strict":
            return {"status": 400, "error": {"type": "strict_dynamic_mapping_exception", "reason": str(unknown)}}
        for name, spec in self.fields.items():
            value = source.get(name)
            if value is None:
                continue
            if spec["type"] == "date" and not (isinstance(value, str) and _DATE.match(value)):
                return {"status": 400, "error": {"type": "mapper_parsing_exception", "reason": name}}
            if spec["type"] == "knn_vector" and len(value) != spec["dimension"]:
                return {"status": 400, "error": {"type": "mapper_parsing_exception", "reason": name}}
        version = int(meta.get("version", 1))
        current = self.docs.get(meta["_id"])
        if current is not None and meta.get("version_type") == "external_gte" and version < current[0]:
            return {"status": 409, "error": {"type": "version_conflict_engine_exception", "reason": meta["_id"]}}
        self.docs[meta["_id"]] = (version, copy.deepcopy(source))
        return {"status": 200 if current else 201, "_id": meta["_id"]}

    def remove(self, doc_id: str) -> dict[str, Any]:
        if self.docs.pop(doc_id, None) is None:
            return {"status": 404, "result": "not_found", "_id": doc_id}
        return {"status": 200, "result": "deleted", "_id": doc_id}

    # -- search ------------------------------------------------------------------------------

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        cache: dict[Any, Any] = {}
        scored = []
        # A shard collects its matches in index order. With terminate_after N, OpenSearch 2.19 says it
        # stopped early when it meets a match past the Nth, or enters another segment once it has N
        # (whether or not that segment holds a match). Here every document is a segment of its own, as
        # the tests' writes with refresh=True mostly make them.
        stop_after, stopped = body.get("terminate_after"), False
        for doc_id, (_, src) in self.docs.items():
            if len(scored) == stop_after:
                stopped = True
                break
            score = self.score(body["query"], src, cache)
            if score is not None:
                scored.append((doc_id, score, src))
        for key in reversed(body.get("sort", [{"_score": "desc"}])):
            ((field, order),) = key.items()
            scored.sort(
                key=lambda hit, f=field: hit[1] if f == "_score" else self._sort_value(f, hit[2].get(f)),
                reverse=order == "desc",
            )
        if "sort" not in body:
            scored.sort(key=lambda hit: -hit[1])
        # Sorted by fields alone, OpenSearch scores nothing unless asked to (`track_scores`): _score is null.
        sorts = [next(iter(key)) for key in body.get("sort", [{"_score": "desc"}])]
        keep_score = "_score" in sorts or body.get("track_scores") is True
        hits = [
            self._hit(body, doc_id, score if keep_score else None, src)
            for doc_id, score, src in scored[: body.get("size", 10)]
        ]
        answer: dict[str, Any] = {"hits": {"total": {"value": len(scored)}, "hits": hits}, "status": 200}
        if stop_after is not None:
            answer["terminated_early"] = stopped
        return answer

    def _hit(self, body: dict[str, Any], doc_id: str, score: float | None, src: dict[str, Any]) -> dict[str, Any]:
        """`_source` as asked (none for false); `docvalue_fields` as `fields`, a list of values each (a
        time in the stored text: the adapter stores it as 2.19 prints strict_date_optional_time)."""
        hit: dict[str, Any] = {"_id": doc_id, "_score": score}
        if body.get("_source", True) is not False:
            hit["_source"] = {k: src.get(k) for k in body.get("_source", src)}
        asked = [f if isinstance(f, str) else f["field"] for f in body.get("docvalue_fields", [])]
        if asked:
            hit["fields"] = {f: _as_list(src.get(f)) for f in asked if src.get(f) is not None}
        return hit

    def score(self, query: dict[str, Any], src: dict[str, Any], cache: dict[Any, Any]) -> float | None:
        """None when the document does not match; otherwise its score."""
        ((kind, spec),) = query.items()
        if kind == "bool":
            return self._bool(spec, src, cache)
        if kind == "knn":
            return self._knn(spec, src, cache)
        if kind == "match":
            return self._match(spec, src, cache)
        if kind in ("match_phrase", "match_phrase_prefix"):
            ((field, params),) = spec.items()
            return self._phrase(field, params, src, cache, prefix=kind == "match_phrase_prefix")
        if kind == "multi_match":
            return self._multi_match(spec, src, cache)
        if kind == "dis_max":
            scores = [s for s in (self.score(q, src, cache) for q in spec["queries"]) if s is not None]
            if not scores:
                return None
            return max(scores) + spec.get("tie_breaker", 0.0) * (sum(scores) - max(scores))
        if kind == "constant_score":
            return float(spec.get("boost", 1.0)) if self.score(spec["filter"], src, cache) is not None else None
        if kind == "script_score":
            return self._script_score(spec, src, cache)
        return 0.0 if self._filter(kind, spec, src) else None

    def _phrase(
        self, field: str, params: Any, src: dict[str, Any], cache: dict[Any, Any], prefix: bool = False
    ) -> float | None:
        """The query's words in order, at most `slop` extra positions between them in all; with
        `prefix`, the last one a prefix. On a keyword field, the whole value (phrase prefix: refused)."""
        params = params if isinstance(params, dict) else {"query": params}
        if self.fields[field]["type"] != "text":
            if prefix:
                raise FakeTransportError(400, "search_phase_execution_exception")  # text fields only
            return self._whole(field, params["query"], src)
        wanted, words = _WORD.findall(params["query"].lower()), _WORD.findall((src.get(field) or "").lower())
        slop = int(params.get("slop", 0))
        for start in range(len(words)):
            end = _phrase_end(words, wanted, start, slop, prefix)
            if end is not None:
                return self._match({field: {"query": " ".join(words[start:end])}}, src, cache)
        return None

    def _whole(self, field: str, query: Any, src: dict[str, Any]) -> float | None:
        """A full-text query on a keyword or a time: the whole value, as a term query."""
        wanted = self._value(field, query)
        return 0.0 if any(self._value(field, v) == wanted for v in _as_list(src.get(field))) else None

    def _multi_match(self, spec: dict[str, Any], src: dict[str, Any], cache: dict[Any, Any]) -> float | None:
        kind = spec.get("type", "best_fields")
        scores = []
        for named in spec["fields"]:
            field = named.split("^", 1)[0]
            if kind in ("phrase", "phrase_prefix"):
                score = self._phrase(field, spec, src, cache, prefix=kind == "phrase_prefix")
            else:
                score = self._match({field: {k: v for k, v in spec.items() if k in ("query", "operator")}}, src, cache)
            if score is not None:
                scores.append(score)
        if not scores:
            return None
        if kind == "most_fields":
            return sum(scores)
        return max(scores) + spec.get("tie_breaker", 0.0) * (sum(scores) - max(scores))

    def _script_score(self, spec: dict[str, Any], src: dict[str, Any], cache: dict[Any, Any]) -> float | None:
        """The one script the adapter sends: Painless's k-NN cosine similarity, plus one."""
        if self.score(spec["query"], src, cache) is None:
            return None
        script = spec["script"]
        assert script["source"] == "1.0 + cosineSimilarity(params.query_value, doc[params.field])", script
        params = script["params"]
        vector = src.get(params["field"])
        assert vector is not None, "cosineSimilarity on a document without the field fails the search"
        return 1.0 + _cosine(params["query_value"], vector)

    def _bool(self, spec: dict[str, Any], src: dict[str, Any], cache: dict[Any, Any]) -> float | None:
        total = 0.0
        for clause in spec.get("filter", []):
            if self.score(clause, src, cache) is None:
                return None
        for clause in spec.get("must", []):
            score = self.score(clause, src, cache)
            if score is None:
                return None
            total += score
        for clause in spec.get("must_not", []):
            if self.score(clause, src, cache) is not None:
                return None
        should = spec.get("should", [])
        if should:
            default = 0 if spec.get("must") or spec.get("filter") else 1
            matched = [s for s in (self.score(c, src, cache) for c in should) if s is not None]
            if len(matched) < int(spec.get("minimum_should_match", default)):
                return None
            total += sum(matched)
        return total

    def _filter(self, kind: str, spec: dict[str, Any], src: dict[str, Any]) -> bool:
        if kind == "match_all":
            return True
        if kind == "match_none":
            return False
        if kind == "exists":
            value = src.get(spec["field"])
            return value is not None and value != []
        ((field, wanted),) = ((k, v) for k, v in spec.items() if k != "boost")
        if isinstance(wanted, dict) and kind in ("term", "prefix"):
            wanted = wanted["value"]
        if self.fields[field]["type"] == "text":  # by its words (lowercased; the fake does not stem)
            words = _WORD.findall((src.get(field) or "").lower())
            if kind == "prefix":
                return any(w.startswith(wanted.lower()) for w in words)
            if kind in ("term", "terms"):
                return any(str(w) in words for w in _as_list(wanted))
        if kind == "prefix":  # a keyword by its whole value, case and all
            return any(str(v).startswith(wanted) for v in _as_list(src.get(field)))
        values = [self._value(field, v) for v in _as_list(src.get(field))]
        if kind == "term":
            return self._value(field, wanted) in values
        if kind == "terms":
            return any(self._value(field, w) in values for w in wanted)
        if kind == "range":
            bounds = {op: self._value(field, v) for op, v in wanted.items()}
            return any(all(_compare(v, op, b) for op, b in bounds.items()) for v in values)
        raise AssertionError(f"the fake does not know the {kind} query")

    def _value(self, field: str, value: Any) -> Any:
        if self.fields[field]["type"] == "date":
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except (AttributeError, ValueError):  # "failed to parse date field [...]"
                raise FakeTransportError(400, "search_phase_execution_exception") from None
        assert self.fields[field]["type"] == "keyword", field
        return value if isinstance(value, str) else json.dumps(value)  # a keyword holds a number's text

    def _sort_value(self, field: str, value: Any) -> Any:
        return (value is not None, self._value(field, value) if value is not None else 0)

    def _knn(self, spec: dict[str, Any], src: dict[str, Any], cache: dict[Any, Any]) -> float | None:
        ((field, params),) = spec.items()
        key = id(params)
        if key not in cache:
            query = params["vector"]
            candidates = []
            for _, other in self.docs.values():
                vector = other.get(field)
                if vector is None:
                    continue
                inner = params.get("filter")
                if inner is not None and self.score(inner, other, {}) is None:
                    continue
                candidates.append((other["record_id"], (1 + _cosine(query, vector)) / 2))
            candidates.sort(key=lambda c: -c[1])
            cache[key] = dict(candidates[: params["k"]])
        return cache[key].get(src["record_id"])

    def _match(self, spec: dict[str, Any], src: dict[str, Any], cache: dict[Any, Any]) -> float | None:
        ((field, params),) = spec.items()
        if not isinstance(params, dict):  # {"match": {"text": "words"}}, as a free query may write it
            params = {"query": params}
        if self.fields[field]["type"] != "text":
            return self._whole(field, params["query"], src)
        terms = set(_WORD.findall(params["query"].lower()))
        if not terms:
            return None
        key = ("match", field)
        if key not in cache:
            docs = [Counter(_WORD.findall((s.get(field) or "").lower())) for _, s in self.docs.values()]
            avg = sum(sum(d.values()) for d in docs) / max(len(docs), 1)
            cache[key] = (docs, avg)
        docs, avg = cache[key]
        words = Counter(_WORD.findall((src.get(field) or "").lower()))
        found = terms & set(words)
        if not found or (str(params.get("operator", "or")).lower() == "and" and found != terms):
            return None
        length = sum(words.values())
        score = 0.0
        for term in found:
            n = sum(1 for d in docs if term in d)
            idf = math.log(1 + (len(docs) - n + 0.5) / (n + 0.5))
            tf = words[term]
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / max(avg, 1e-9)))
        return score * float(params.get("boost", 1.0))


def _phrase_end(words: list[str], wanted: list[str], start: int, slop: int, prefix: bool) -> int | None:
    """Where the phrase `wanted` ends if it starts at `start`, `slop` extra positions allowed in all."""
    if not wanted:
        return None
    at = start
    for i, word in enumerate(wanted):
        last = i == len(wanted) - 1

        def same(candidate: str, word: str = word, last: bool = last) -> bool:
            return candidate.startswith(word) if prefix and last else candidate == word

        while at < len(words) and not same(words[at]):
            if i == 0 or slop == 0:
                return None
            at, slop = at + 1, slop - 1
        if at >= len(words):
            return None
        at += 1
    return at


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _compare(value: Any, op: str, bound: Any) -> bool:
    return {"lt": value < bound, "lte": value <= bound, "gt": value > bound, "gte": value >= bound}[op]


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# -- the search backends every search contract suite runs against ------------------------------

SEARCH_BACKENDS = ["embedded", "opensearch-fake", "opensearch"]


def opensearch_client(backend: str) -> Any:
    """The stand-in for "opensearch-fake"; for "opensearch", the real node of this test session
    (tests/opensearch_node.py: OPENSEARCH_URL, or a node started on first use; requests signed with
    SigV4 when OPENSEARCH_AWS_REGION is set, for OPENSEARCH_AWS_SERVICE, default "es")."""
    if backend == "opensearch-fake":
        return FakeOpenSearch()
    from tests import opensearch_node
    from uhp_memories.adapters.opensearch import connect

    return connect(
        opensearch_node.url(),
        region=os.environ.get("OPENSEARCH_AWS_REGION"),
        service=os.environ.get("OPENSEARCH_AWS_SERVICE", "es"),
    )
