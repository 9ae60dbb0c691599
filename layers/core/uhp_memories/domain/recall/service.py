"""Recall (§6): read one memory by meaning, words and fields, fused into one ranking; say why each
result came, what was asked and not done (`degraded`), and when nothing answers (`abstain`).

A `query` alone is searched by its meaning and by its words (`why` says `text` for a result its
words found); scores are on one scale across requests, the first result's being the answer's
confidence, and `abstain` is true exactly when that is below 0.5 (AbstainPolicy, Calibration).

Recall reads the one memory in the path; `depth` adds descendants the caller may read, level by
level, capped at MAX_DEPTH (the cap is reported, never applied in silence). The index is derived
and may lag: every hit is read back from DynamoDB, the source of truth, before it is returned.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from uhp_memories.domain.access.check import AccessView
from uhp_memories.domain.context import Ports
from uhp_memories.domain.errors import DomainError, MemoryInvalid
from uhp_memories.domain.filters import Filter, matches, parse_filter
from uhp_memories.domain.limits import MAX_DEPTH, RECALL_LIMIT_MAX
from uhp_memories.domain.memories.service import MemoryService, MemorySummary
from uhp_memories.domain.models import Caller, Memory, RecordVersion
from uhp_memories.domain.providers.ports import RecordProvider
from uhp_memories.domain.records.service import INCLUDE_VALUES, RecordService, RecordView

logger = logging.getLogger(__name__)
RECALL_LIMIT_DEFAULT = 10
# Reads a recall makes beside its search (one a request; a Lambda runs one request at a time).
_BESIDE = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-beside")


class MemoryUnavailable(DomainError):
    code = "memory_unavailable"


class QueryNotEmbedded(MemoryUnavailable):
    """Raised by RecallIndex.embed_query when the embedding model did not answer (Bedrock throttled or
    down). Recall goes on with the words and says so in `degraded`: a 503 would take the text and the
    filters away from a caller that asked for them too. (Anywhere else it is a 503.)"""


# In `degraded` when the meaning signal could not be computed (the words were searched instead).
QUERY_NOT_EMBEDDED = "query:embedder_unavailable"
NOTHING_ASKED = (
    "recall needs something to look for: a query (a question), text (words to match), filters or types; "
    "GET /v1/memories/{id}/records lists a memory's records, newest first"
)


class SearchHit(Protocol):
    """One hit of the index (uhp_memories.search.Hit), read-only."""

    @property
    def record_id(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def why(self) -> tuple[str, ...]: ...

    @property
    def signals(self) -> Any: ...

    @property
    def memory_id(self) -> str: ...


def _checked_limit(request: RecallInput) -> int:
    """The request's limit, once its shape is checked (memory_invalid otherwise)."""
    limit = request.limit if request.limit is not None else RECALL_LIMIT_DEFAULT
    if not 1 <= limit <= RECALL_LIMIT_MAX:
        raise MemoryInvalid(f"limit must be between 1 and {RECALL_LIMIT_MAX}")
    if request.include not in INCLUDE_VALUES:
        raise MemoryInvalid(f"include must be one of {list(INCLUDE_VALUES)}")
    if request.depth < 0:
        raise MemoryInvalid("depth is 0 (this memory only) or more")
    if not request.asks:
        raise MemoryInvalid(NOTHING_ASKED)
    return limit


@dataclass(frozen=True)
class _ProviderHit:
    """Another provider's hit, as abstain reads a hit (SearchHit)."""

    record_id: str
    score: float
    why: tuple[str, ...]
    signals: Any
    memory_id: str


class RecallIndex(Protocol):
    """The search side of recall (uhp_memories.search.RecallEngine)."""

    def search(
        self,
        tenant: str,
        memory_id: str,
        *,
        query: str | None = None,
        text: str | None = None,
        filters: Filter | None = None,
        types: Sequence[str] = (),
        include: str = "active",
        as_of: str | None = None,
        limit: int = 10,
        fusion: Any = None,
        vector: Sequence[float] | None = None,
        also: Sequence[str] = (),
    ) -> Sequence[SearchHit]:
        ...

    def embedding(self, query: str) -> Future[Any]:
        """The query's vector, computed while the caller goes on: None for a blank query; the future
        raises QueryNotEmbedded when the model does not answer."""
        ...

    def unmatched(
        self,
        tenant: str,
        memory_id: str,
        words: Sequence[str],
        *,
        filters: Filter | None = None,
        types: Sequence[str] = (),
        include: str = "active",
        as_of: str | None = None,
        also: Sequence[str] = (),
    ) -> list[str]:
        """The words (lowercased) that no document these memories hold, as the request admits them,
        contains: one call to the index for all of them."""
        ...


@dataclass(frozen=True)
class RecallInput:
    """A recall request (§6.2). `query_words`: whether a `query` given without `text` is searched by
    its words too (the `text` signal, with the query as its text); False searches its meaning only."""

    query: str | None = None
    text: str | None = None
    filters: Any = None
    types: tuple[str, ...] = ()
    as_of: str | None = None
    include: str = "active"
    limit: int | None = None
    depth: int = 0
    query_words: bool = True

    @property
    def asks(self) -> bool:
        """Whether the request names something to look for: a query, words, filters or types (a
        blank query or text names nothing)."""
        return bool(_given(self.query) or _given(self.text) or self.filters is not None or self.types)

    def searched(self) -> RecallInput:
        """The request as it is searched: a query alone is searched by its words too (as `text`),
        unless `query_words` is False; text given is searched as given."""
        if self.text is None and self.query_words and _given(self.query):
            return replace(self, text=self.query)
        return self


def _given(words: str | None) -> bool:
    return words is not None and bool(words.strip())


@dataclass(frozen=True)
class RecallResult:
    record: RecordView
    score: float
    why: tuple[str, ...]


@dataclass(frozen=True)
class RecallAnswer:
    results: list[RecallResult]
    parent: MemorySummary | None
    children: list[MemorySummary]
    degraded: list[str] = field(default_factory=list)
    abstain: bool = False


# Below this score recall abstains: the best result's score is the answer's confidence (see
# Calibration), so `abstain` and the scores a reader sees always agree.
ABSTAIN_BELOW = 0.5


@dataclass(frozen=True)
class Calibration:
    """How one embedding model's cosine similarities read as recall scores, comparable across requests.

    A score is `0.5 + 0.5 * (similarity - threshold) / (certain - threshold)`, clipped to [0, 1]: a
    straight line through 0.5 at `threshold` (below it recall abstains) and 1.0 at `certain`. A
    question that names someone or something no record of the memory mentions (named_words), and
    whose similarity is below `named`, is scored as if its similarity were `named - threshold` lower:
    below 0.5, so recall abstains on it (it asks about people this memory never met). Names are
    checked only then, in one index call that stops at each name's first document.

    Chosen on the LoCoMo dev split by leave-one-conversation-out (bench/calibrate_abstain.py,
    docs/benchmarks.md "Abstain"): `threshold` the highest that abstains on at most 0.5% of the
    calibration conversations' answerable questions (at 1% the held-out rate was 1.4%); `named` the
    highest that keeps them there; `certain` the best similarity any question about another
    conversation reached (a score of 1 is a match no off-topic question got). LoCoMo's adversarial
    questions, which name the wrong speaker for something that was said, look exactly as similar
    as answerable ones and are not caught: similarity cannot tell who said it."""

    threshold: float
    certain: float
    named: float | None = None

    def __post_init__(self) -> None:
        if not self.certain > self.threshold:
            raise ValueError("a calibration's certain similarity is above its threshold")

    def score(self, similarity: float, unknown_name: bool = False) -> float:
        """The score of a best cosine similarity (rounded as a result's score is: what abstain reads
        is what the reader sees); `unknown_name`: the question names someone no record mentions."""
        if unknown_name and self.named is not None and similarity < self.named:
            similarity -= self.named - self.threshold
        line = 0.5 + 0.5 * (similarity - self.threshold) / (self.certain - self.threshold)
        return round(min(1.0, max(0.0, line)), 6)

    def at(self, threshold: float) -> Calibration:
        """The same scale moved to another threshold (a stage's setting: `UHP_ABSTAIN_SIMILARITY`)."""
        shift = threshold - self.threshold
        named = self.named + shift if self.named is not None else None
        return Calibration(threshold, self.certain + shift, named)


# Each embedding model's calibration (bench/calibrate_abstain.py prints it). A model not listed has
# UNCALIBRATED's until a stage sets the threshold bench/calibrate_abstain.py measures for it.
CALIBRATIONS = {
    "sentence-transformers/all-MiniLM-L6-v2:onnx-int8-u8u8": Calibration(threshold=0.40, certain=0.66, named=0.54),
}
# A model not calibrated in code (Titan in AWS, which cannot be reached from where this is built): a
# placeholder, until a stage sets the threshold bench/calibrate_abstain.py measures for its model
# (cdk.json `embeddings.abstain_similarity`, read as UHP_ABSTAIN_SIMILARITY); the scale keeps the
# placeholder's width (0.30 from 0.5 to 1), and no names rule applies.
UNCALIBRATED_SIMILARITY = 0.30
UNCALIBRATED = Calibration(threshold=UNCALIBRATED_SIMILARITY, certain=0.60)
# Capitalized words that name no one: months and days (a question's dates), and titles.
_NOT_NAMES = frozenset(
    (
        *("january", "february", "march", "april", "may", "june", "july", "august", "september"),
        *("october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep"),
        *("sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday"),
        *("saturday", "sunday", "dr", "mr", "mrs", "ms"),
    )
)
_QUOTED = re.compile("\"[^\"]*\"|\u201c[^\u201d]*\u201d")  # "..." and the curly pair
_SENTENCE_END = re.compile(r"[.?!]\s+")
_WORD = re.compile("[^\\W\\d_][\\w'\u2019]*")  # a letter, then letters, digits, apostrophes
_POSSESSIVE = re.compile("['\u2019]s$")


def named_words(question: str) -> list[str]:
    """The names a question uses (lowercased, in order, once each): capitalized words that do not
    start a sentence, outside quotes (a title's words are capitalized for being a title), longer
    than a letter, neither a month, a day nor a title such as Dr; "Caroline's" names Caroline."""
    found: list[str] = []
    for sentence in _SENTENCE_END.split(_QUOTED.sub(" ", question)):
        for place, word in enumerate(_WORD.findall(sentence)):
            name = _POSSESSIVE.sub("", word)
            lowered = name.lower()
            if place and len(name) > 1 and name[0].isupper() and lowered not in _NOT_NAMES and lowered not in found:
                found.append(lowered)
    return found


def best_similarity(hits: Sequence[SearchHit]) -> float:
    """The best cosine similarity of the query among these hits (-1 when none has one): what the
    confidence of an answer is read from, and calibrated on."""
    return max((float(h.signals.get("query", -1.0)) for h in hits), default=-1.0)


@dataclass(frozen=True)
class Judgement:
    """How well an answer answers its request: `confidence`, the best result's score (0 to 1), and
    `abstain`, true when nothing was found for a query or words, or the confidence is below 0.5."""

    confidence: float
    abstain: bool


@dataclass(frozen=True)
class AbstainPolicy:
    """How sure an answer is, and when it does not answer the question (§6.3 `abstain`).

    For a `query`, the confidence is the model's Calibration of the best cosine similarity among
    the results returned (`min_query_similarity` moves the model's scale to that threshold; None:
    as calibrated), lowered for a question naming someone the memory never mentions. A request
    without a query (words, fields), or whose query could not be embedded, has no meaning to
    measure: what matched is certain (1.0). Nothing found for a query or words is 0, and abstains;
    nothing found for fields alone does not (an empty selection is an answer)."""

    min_query_similarity: float | None = None

    def calibration(self, model_id: str | None) -> Calibration:
        calibrated = CALIBRATIONS.get(model_id or "", UNCALIBRATED)
        if self.min_query_similarity is None:
            return calibrated
        return calibrated.at(self.min_query_similarity)

    def threshold(self, model_id: str | None) -> float:
        return self.calibration(model_id).threshold

    def judge(
        self,
        request: RecallInput,
        hits: Sequence[SearchHit],
        model_id: str | None = None,
        unmatched: Callable[[list[str]], list[str]] | None = None,
    ) -> Judgement:
        """`request` as searched (its query None when it was not embedded); `unmatched(words)`: the
        words no record the request admits contains (asked only of a weak match naming someone)."""
        if not hits:
            return Judgement(0.0, bool(request.query or request.text))
        if not request.query:
            return Judgement(1.0, False)
        calibration = self.calibration(model_id)
        best = best_similarity(hits)
        confidence = calibration.score(best)
        if calibration.named is not None and best < calibration.named and unmatched is not None:
            names = named_words(request.query)
            if names and unmatched(names):
                confidence = calibration.score(best, unknown_name=True)
        return Judgement(confidence, confidence < ABSTAIN_BELOW)

    def abstain(
        self,
        request: RecallInput,
        hits: Sequence[SearchHit],
        model_id: str | None = None,
        unmatched: Callable[[list[str]], list[str]] | None = None,
    ) -> bool:
        return self.judge(request, hits, model_id, unmatched).abstain


def _unmatched(index: RecallIndex, tenant: str, memory_id: str, words: list[str], **request: Any) -> list[str]:
    """The names no record mentions; none when the index cannot say (a recall that found its
    results is not failed, nor abstained on, for the names check alone)."""
    try:
        return index.unmatched(tenant, memory_id, words, **request)
    except Exception as error:  # the search has answered already: this only refines abstain
        logger.warning("recall names check failed", extra={"error_type": type(error).__name__})
        return []


class RecallService:
    def __init__(
        self,
        ports: Ports,
        memories: MemoryService,
        records: RecordService,
        index: Callable[[], RecallIndex | None],
        abstain: AbstainPolicy | None = None,
    ) -> None:
        self._ports = ports
        self._memories = memories
        self._records = records
        self._index = index
        self._abstain = abstain or AbstainPolicy()

    def recall(self, caller: Caller, memory_id: str, request: RecallInput) -> RecallAnswer:
        # The query is embedded while the caller's access is checked and the memories to search are
        # read; nothing of the memory is read for it, and its answer is dropped if access fails.
        index = self._index()
        embedding = index.embedding(request.query) if index and request.query else None
        access = self._ports.access(caller)
        memory = access.require(memory_id, "read")
        limit = _checked_limit(request)
        flt = parse_filter(request.filters)
        provider = self._ports.providers.of(memory)
        if provider is not None:  # another provider keeps this memory's records (§10)
            return self._recall_in(provider, access, memory, request, flt, limit, index)
        instant = self._records.resolve_as_of(caller, memory_id, request.as_of) if request.as_of else None
        degraded: list[str] = []
        depth = request.depth
        if depth > MAX_DEPTH:
            depth = MAX_DEPTH
            degraded.append(f"depth:capped_at_{MAX_DEPTH}")
        if index is None:
            raise MemoryUnavailable("the search index of this provider is not connected")
        # Where a reader can go from here (the parent and the readable children) is read beside the
        # search when the search does not need the children (depth 0, the common request): one
        # DynamoDB round trip fewer in the recall's own time. Deeper, the children are read once,
        # for both. The access view is used by one thread at a time: the search does not read it.
        beside: Future[tuple[MemorySummary | None, list[MemorySummary]]] | None = None
        if depth == 0:
            searched = [memory]
            beside = _BESIDE.submit(self._memories.neighbours, access, memory)
        else:
            below = self._ports.memories.children(caller.tenant, memory.id)
            searched = self._memories_to_search(access, memory, depth, below)
            parent, children = self._memories.neighbours(access, memory, below)
        # Embedded once, the query serves every memory the recall searches (depth). A query alone
        # is searched by its words too (RecallInput.searched).
        searched_for = request.searched()
        try:
            vector = embedding.result() if embedding else None
        except QueryNotEmbedded:
            # Without its meaning, a question still has its words: they are searched (as text, when
            # no text was given) and the caller is told the meaning signal was not computed.
            vector = None
            degraded.append(QUERY_NOT_EMBEDDED)
            words = request.text if request.text is not None else request.query
            searched_for = replace(request, query=None, text=words)

        # One search of every memory reached, fused as one ranking: every signal on one scale, so a
        # weak memory's best match does not rank beside a strong one's.
        order = {m.id: i for i, m in enumerate(searched)}
        hits = index.search(
            caller.tenant,
            memory.id,
            query=searched_for.query,
            text=searched_for.text,
            filters=flt,
            types=request.types,
            include=request.include,
            as_of=instant,
            limit=limit,
            vector=vector,
            also=[m.id for m in searched[1:]],
        )
        if beside is not None:
            parent, children = beside.result()
        by_memory: dict[str, list[SearchHit]] = {}
        for hit in hits:
            by_memory.setdefault(hit.memory_id or memory.id, []).append(hit)
        scored: list[tuple[float, int, RecordVersion, SearchHit]] = []
        for memory_id, found_there in by_memory.items():
            if memory_id not in order:
                continue  # never a record of a memory this recall did not search
            found = self._ports.records.get_many(caller.tenant, memory_id, [hit.record_id for hit in found_there])
            for hit in found_there:
                record = self._confirmed(found.get(hit.record_id), request.include, instant)
                if record is not None:
                    scored.append((hit.score, -order[memory_id], record, hit))
        scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
        best = scored[:limit]
        judged = self._abstain.judge(
            searched_for,
            [hit for _, _, _, hit in best],
            getattr(index, "model_id", None),
            unmatched=lambda words: _unmatched(
                index,
                caller.tenant,
                memory.id,
                words,
                filters=flt,
                types=request.types,
                include=request.include,
                as_of=instant,
                also=[m.id for m in searched[1:]],
            ),
        )
        # The ranking's scores are relative to this request (its best match of each signal is 1):
        # each is shown as its share of the best one times the answer's confidence, so the first
        # result's score is the confidence, which a reader compares across requests.
        top = best[0][0] if best else 0.0
        return RecallAnswer(
            results=[
                RecallResult(
                    self._records.view(access, record),
                    round(judged.confidence * (score / top if top > 0 else 1.0), 6),
                    tuple(hit.why),
                )
                for score, _, record, hit in best
            ],
            parent=parent,
            children=children,
            degraded=degraded,
            abstain=judged.abstain,
        )

    def _recall_in(
        self,
        provider: RecordProvider,
        access: AccessView,
        memory: Memory,
        request: RecallInput,
        flt: Any,
        limit: int,
        index: RecallIndex | None,
    ) -> RecallAnswer:
        """Recall in a memory another provider keeps: its search, by the signals it has (§10.2); the
        fields the adapter applies over what it answers; what it lacks said in `degraded`, never ignored
        (§6.3); scores and abstain on the same scale as the native provider's, when it embeds with the
        stage's model (mem0 does: it is given ours)."""
        if request.as_of:
            self._ports.providers.require_native(memory, "as_of (reading a memory as it stood)")
        degraded: list[str] = []
        if request.depth > 0:
            degraded.append("depth:capped_at_0")  # each memory's provider answers for that memory alone
        searched_for = request.searched()
        if request.text:  # words the caller sent (a query's own words are asked of a word index only)
            degraded.append("text:not_supported")
        wanted = set(request.types)
        if searched_for.query:
            # Over-asked, for the fields and types the adapter applies over what the provider answers.
            answered = provider.recall(memory, searched_for.query, None, min(limit * 4, 400), request.include)
            degraded += [d for d in answered.degraded if d not in degraded]
            found = [(v, score, why) for v, score, why in answered.hits
                     if (not wanted or v.type in wanted) and matches(flt, v)][:limit]
        elif request.text:
            found = []
        else:  # fields (and types) alone: the memory's newest records that match
            found = []
            for _, version in provider.scan(memory, request.include, None):
                if (not wanted or version.type in wanted) and matches(flt, version):
                    found.append((version, 1.0, ("filters" if request.filters else "types",)))
                    if len(found) == limit:
                        break
        hits = [_ProviderHit(v.id, score, why, {"query": score} if "query" in why else {}, memory.id)
                for v, score, why in found]
        judged = self._abstain.judge(
            replace(searched_for, text=None) if searched_for.query else searched_for,
            hits, getattr(index, "model_id", None),
        )
        parent, children = self._memories.neighbours(access, memory)
        top = max((h.score for h in hits), default=0.0)
        return RecallAnswer(
            results=[
                RecallResult(
                    self._records.view(access, version),
                    round(judged.confidence * (hit.score / top if top > 0 else 1.0), 6),
                    hit.why,
                )
                for (version, _, _), hit in zip(found, hits, strict=True)
            ],
            parent=parent,
            children=children,
            degraded=degraded,
            abstain=judged.abstain,
        )

    def _memories_to_search(
        self, access: AccessView, memory: Memory, depth: int, children: Sequence[Memory]
    ) -> list[Memory]:
        """This memory, then its readable descendants level by level down to `depth` (`children`:
        the memory's own, already read)."""
        found = [memory]
        frontier = [memory]
        for _ in range(depth):
            next_level: list[Memory] = []
            for node in frontier:
                below = children if node is memory else self._ports.memories.children(access.caller.tenant, node.id)
                access.from_store(below)
                for child in below:
                    if not child.deleting and "read" in access.privileges(child.id):
                        next_level.append(child)
            found.extend(next_level)
            frontier = next_level
        return found

    @staticmethod
    def _confirmed(record: RecordVersion | None, include: str, instant: str | None) -> RecordVersion | None:
        """The hit as DynamoDB holds it now (read back in one batch), if it still answers the request
        (the index may lag)."""
        if record is None:
            return None
        if instant is not None:
            if include == "active" and not record.held_at(instant):
                return None
            if record.written_at > instant:
                return None
            return record.as_of(instant)
        if include == "active" and not (record.is_current and record.status == "active"):
            return None
        return record
