"""Recall on LoCoMo through the public HTTP API of a local server: quality, abstain and latency.

Not a test. Starts the local mode in this process (moto + the local gateway on 127.0.0.1, the
embedded engine with all-MiniLM-L6-v2) and talks to it over real HTTP with `requests`.

Quality (the default): one memory per LoCoMo conversation of the dev file; every turn observed as
an episode ("Speaker: text", attributes dia_id / session / speaker, time.valid_from = the session
date), in session order, one observe call per session (<= 50 turns). Then every question is
recalled, and R@k is LoCoMo's retrieval measure: the share of a question's evidence turns found in
the top k, averaged over questions (adversarial ones included), per category and overall. Side by
side in the same run: BM25 alone (`text` only), MiniLM alone (`query` only), the product default
(`query` + `text`), and, through the engine in process on the same index, the fusion settings the
default was chosen against (so every figure has its baseline from the same machine and minute).
Abstain is measured on the default `limit` on answerable (categories 1-4), adversarial (5) and
foreign questions (questions of the other conversations, about people this memory never met).

Scale (`--scale N`): one memory of N episodes (the dev file's turns, cycled), ingested through
observe in calls of 50, then recall latency p50/p95 through the gateway for the default request
and for BM25 alone, and the engine's own share of it.

OpenSearch (`--opensearch`, `make bench-recall SEARCH=opensearch`): R@k and recall latency of the default
request through HTTP, once on the embedded engine and once on the OpenSearch adapter over a real
OpenSearch 2.19 node started for the run (tests/opensearch_node.py; OPENSEARCH_URL names another).

Results go to bench/results/*.json; docs/benchmarks.md is rebuilt from every result file present.

Usage:
  python bench/recall_locomo.py [--data PATH]       # quality on the dev set
  python bench/recall_locomo.py --scale 10000 [--scale 100000] [--searches 300]
  python bench/recall_locomo.py --opensearch        # the default request through the OpenSearch adapter
  python bench/recall_locomo.py --render            # rebuild docs/benchmarks.md only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from locomo_data import DEFAULT_DATA, Conversation, Turn, abstain_questions, load_locomo
from locomo_data import Question as Question  # re-exported: recall_locomo.Question, as before the move

if TYPE_CHECKING:
    from uhp_memories.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RUN_LOG = RESULTS / "recall-scale-runs.jsonl"
VERSUS_LOG = RESULTS / "recall-versus-runs.jsonl"  # bench/recall_versus.py: two commits side by side
DOC = ROOT / "docs" / "benchmarks.md"
KS = (1, 5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TENANT, KEY = "bench", "k-bench-" + "0" * 24
OBSERVE_MAX = 50
THRESHOLDS = (0.30, 0.35, 0.375, 0.40, 0.425, 0.45, 0.475, 0.50, 0.55)


# -- the server and its API ----------------------------------------------------------------------


@dataclass
class Api:
    """The public HTTP API, as a client sees it."""

    base_url: str
    session: Any
    calls: dict[str, list[float]] = field(default_factory=dict)

    def post(self, path: str, body: Any, timer: str | None = None) -> Any:
        start = time.perf_counter()
        answer = self.session.post(self.base_url + path, json=body, headers={"x-api-key": KEY}, timeout=120)
        elapsed = (time.perf_counter() - start) * 1000
        if answer.status_code not in (200, 201):
            raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text[:300]}")
        if timer:
            self.calls.setdefault(timer, []).append(elapsed)
        return answer.json()

    def create_memory(self, name: str, description: str) -> str:
        return str(self.post("/v1/memories", {"name": name, "description": description})["id"])

    def observe(self, memory_id: str, episodes: list[dict[str, Any]]) -> list[str]:
        answer = self.post(f"/v1/memories/{memory_id}/observe", {"episodes": episodes}, timer="observe")
        return [r["id"] for r in answer["records"]]

    def recall(self, memory_id: str, body: dict[str, Any], timer: str) -> dict[str, Any]:
        return dict(self.post(f"/v1/memories/{memory_id}/recall", body, timer=timer))


@dataclass
class Local:
    api: Api
    engine: Any  # the RecallEngine of the running server, for the in-process comparisons


@contextmanager
def local_server(search: Settings | None = None) -> Iterator[Local]:
    """The local server in this process; with `search`, recalling on that OpenSearch index as a deployed
    stage does (`uhp-memories serve --search-url`), else on the embedded engine."""
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    import requests

    from uhp_memories.local.gateway import LocalGateway
    from uhp_memories.local.moto_env import KeyEntry, LocalAws

    aws = LocalAws(search).start()
    gateway = LocalGateway("127.0.0.1", 0).start_background()
    try:
        aws.add_keys([KeyEntry(KEY, TENANT, "user:bench")])
        assert aws.container is not None
        engine = aws.container.recall_engine()
        engine.embedder.load()  # the model loads once, before anything is timed
        yield Local(Api(gateway.url, requests.Session()), engine)
    finally:
        gateway.stop()
        aws.stop()


def episodes_of(turns: Sequence[Turn], copy: int | None = None) -> list[dict[str, Any]]:
    out = []
    for t in turns:
        attributes: dict[str, Any] = {"dia_id": t.dia_id, "session": t.session, "speaker": t.speaker}
        if copy is not None:
            attributes["copy"] = copy
        out.append({"content": t.content, "attributes": attributes, "time": {"valid_from": t.date}})
    return out


def session_batches(turns: Sequence[Turn]) -> list[list[Turn]]:
    """The turns in order, one batch per session (or per 50 turns): what one observe call takes."""
    batches: list[list[Turn]] = []
    for turn in turns:
        if not batches or len(batches[-1]) == OBSERVE_MAX or batches[-1][-1].session != turn.session:
            batches.append([])
        batches[-1].append(turn)
    return batches


def ingest(api: Api, memory_id: str, turns: Sequence[Turn], copy: int | None = None) -> dict[str, str]:
    """Observe the turns in order, one call per session (or per 50 turns): record id -> dia_id."""
    ids: dict[str, str] = {}
    for batch in session_batches(turns):
        for record_id, turn in zip(api.observe(memory_id, episodes_of(batch, copy)), batch, strict=True):
            ids[record_id] = turn.dia_id
    return ids


def ingest_cycled(api: Api, memory_id: str, turns: Sequence[Turn], size: int, progress: bool = False) -> None:
    """`size` records in one memory: the turns observed again and again (each pass marked by its
    `copy` attribute) until there are that many."""
    start, written, copy = time.perf_counter(), 0, 0
    while written < size:
        chunk = turns[: size - written]
        ingest(api, memory_id, chunk, copy=copy)
        written += len(chunk)
        copy += 1
        if progress:
            print(f"  {written:,} records, {written / (time.perf_counter() - start):.0f} records/s", flush=True)


# -- mem0 OSS beside us --------------------------------------------------------------------------

MEM0_PYTHON = ROOT / ".venv-bench" / "bin" / "python"  # made by `make .venv-bench` (bench only)
MEM0_WORKER = ROOT / "bench" / "mem0_side.py"
# mem0's two local layouts (bench/mem0_side.py): one store for every user, searched with a user_id
# filter (as mem0 documents it), and a store of its own per user (its fastest local layout).
MEM0_LAYOUTS = ("shared", "per-user")
REMEMBERED = 400  # turns remembered one at a time on each side, for remember's latency


class Mem0:
    """mem0 OSS (`infer=False`, our MiniLM int8 embedder, its local Qdrant store) in a process of its
    own in the bench-only venv, asked call by call (bench/mem0_side.py). `calls` keeps the time of each
    mem0 call as measured inside that process: no HTTP, no pipe."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [str(MEM0_PYTHON), str(MEM0_WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.calls: dict[str, list[float]] = {}
        self.info = self._ask({"op": "info"})

    def _ask(self, request: dict[str, Any], timer: str | None = None) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the mem0 worker stopped (see its standard error above)")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"mem0 worker: {answer['error']}")
        if timer:
            self.calls.setdefault(timer, []).append(answer["ms"])
            if "embed_ms" in answer:
                self.calls.setdefault(timer + ": embedding", []).append(answer["embed_ms"])
        return dict(answer)

    def add(self, layout: str, user: str, texts: Sequence[str], timer: str) -> list[str]:
        asked = {"op": "add", "layout": layout, "user": user, "messages": list(texts)}
        return list(self._ask(asked, f"{layout}: {timer}")["ids"])

    def search(self, layout: str, user: str, query: str, limit: int, timer: str) -> list[str]:
        asked = {"op": "search", "layout": layout, "user": user, "query": query, "limit": limit}
        return list(self._ask(asked, f"{layout}: {timer}")["ids"])

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)


@contextmanager
def mem0_side(wanted: bool) -> Iterator[Mem0 | None]:
    if not wanted:
        yield None
        return
    if not MEM0_PYTHON.exists():
        raise SystemExit("mem0 runs in the bench-only venv: `make .venv-bench` first (or pass --no-mem0)")
    side = Mem0()
    try:
        yield side
    finally:
        side.close()


def turns_to_remember(conversations: Sequence[Conversation]) -> list[Turn]:
    """REMEMBERED turns spread over the dev file (every k-th), for remember's latency on both sides."""
    every = [t for c in conversations for t in c.turns]
    step = max(1, len(every) // REMEMBERED)
    return every[::step][:REMEMBERED]


def rotated[T](sides: Sequence[T], n: int) -> list[T]:
    """The sides in turn n's order: each goes first as often as the others."""
    shift = n % len(sides)
    return [*sides[shift:], *sides[:shift]]


def remember_side_by_side(api: Api, mem0: Mem0 | None, turns: Sequence[Turn]) -> None:
    """Each turn remembered alone, through our API (POST .../records) and by mem0's add of one
    message, alternating which goes first, into a memory (a mem0 user) of their own."""
    memory_id = api.create_memory("remember-latency", "turns remembered one at a time")
    for n, turn in enumerate(turns):
        body = {**episodes_of([turn])[0], "type": "fact"}

        def ours(body: dict[str, Any] = body) -> None:
            api.post(f"/v1/memories/{memory_id}/records", body, timer="remember")

        sides: list[Callable[[], None]] = [ours]
        if mem0 is not None:
            sides += [
                lambda layout=layout, text=turn.content: mem0.add(layout, "remember-latency", [text], "add one")
                for layout in MEM0_LAYOUTS
            ]
        for side in rotated(sides, n):
            side()


# -- measures ----------------------------------------------------------------------------------


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def latency(samples: Sequence[float]) -> dict[str, float]:
    return {"p50": statistics.median(samples), "p95": percentile(samples, 0.95), "n": len(samples)}


def recall_at(ranked: Sequence[str], evidence: frozenset[str]) -> dict[int, float]:
    return {k: len(evidence & set(ranked[:k])) / len(evidence) for k in KS}


def summarise(per_question: list[tuple[int, dict[int, float]]]) -> dict[str, Any]:
    def mean(rows: list[dict[int, float]]) -> dict[str, float]:
        return {str(k): statistics.fmean(r[k] for r in rows) for k in KS}

    out: dict[str, Any] = {"overall": mean([r for _, r in per_question]), "n": len(per_question)}
    for category in CATEGORIES:
        rows = [r for c, r in per_question if c == category]
        out[str(category)] = {**mean(rows), "n": len(rows)}
    return out


@dataclass
class Run:
    """One way of asking: through HTTP (`fusion` None) or through the engine in process with these
    fusion settings, on the same memories."""

    name: str
    body: Callable[[str], dict[str, Any]]
    fusion: Any
    note: str


def quality(data_path: Path, with_mem0: bool = True) -> dict[str, Any]:
    from uhp_memories.domain.recall.model import Fusion

    conversations = load_locomo(data_path)
    default = Fusion()
    text_only, query_only, both = (lambda q: {"text": q}), (lambda q: {"query": q}), (lambda q: {"query": q, "text": q})
    meaning_only = lambda q: {"query": q, "query_words": False}  # noqa: E731
    runs = [
        Run("BM25 alone", text_only, Fusion(query_weight=0.0, context_weight=0.0), "the baseline: FTS5 BM25"),
        Run("MiniLM alone", query_only, Fusion(text_weight=0.0, context_weight=0.0), "cosine similarity, `query` only"),
        Run("RRF k=60, no context", both, Fusion(method="rrf", k=60.0, context_weight=0.0), "the previous default"),
        Run("relative fusion, no context", both, Fusion(context_weight=0.0), "the new fusion alone"),
        Run("default, text only", text_only, None, "`text` = question"),
        Run("default, meaning only", meaning_only, None, "`query` = question, `query_words`: false"),
        Run("default", query_only, None, "`query` = question (its words searched too)"),
    ]
    results: dict[str, Any] = {"runs": {}, "data": str(data_path.name), "machine": machine()}
    with local_server() as local, mem0_side(with_mem0) as mem0:
        api = local.api
        load_before = os.getloadavg()[0]
        memories, mem0_dia = ingest_side_by_side(api, mem0, conversations, results)
        remember_side_by_side(api, mem0, turns_to_remember(conversations))
        results["remember"] = {"ours": latency(api.calls["remember"])}
        if mem0 is not None:
            for layout in MEM0_LAYOUTS:
                results["remember"][layout] = latency(mem0.calls[f"{layout}: add one"])

        for run in runs:
            per_question: list[tuple[int, dict[int, float]]] = []
            timer = "recall:" + run.name
            for conv, memory_id, dia_of in memories:
                for question in conv.questions:
                    if not question.evidence:
                        continue
                    body = run.body(question.text)
                    if run.fusion is None:
                        answer = api.recall(memory_id, {**body, "limit": max(KS)}, timer)
                        ranked = [dia_of.get(r["record"]["id"], "") for r in answer["results"]]
                    else:
                        hits = local.engine.search(TENANT, memory_id, limit=max(KS), fusion=run.fusion, **body)
                        ranked = [dia_of.get(h.record_id, "") for h in hits]
                    per_question.append((question.category, recall_at(ranked, question.evidence)))
            record_run(results, run.name, per_question, run.note, "HTTP" if run.fusion is None else "engine")
        if mem0 is not None:
            per_question = []
            for conv, _, _ in memories:
                for question in conv.questions:
                    if question.evidence:
                        found = mem0.search("per-user", conv.sample_id, question.text, max(KS), "search@25")
                        ranked = [mem0_dia[conv.sample_id].get(i, "") for i in found]
                        per_question.append((question.category, recall_at(ranked, question.evidence)))
            note = "mem0 OSS, `infer=False`, same MiniLM int8 (a store per user)"
            record_run(results, "mem0 search", per_question, note, "mem0")

        results["abstain"], results["calibration"], results["latency"] = abstain_and_latency(
            local, memories, conversations, default, mem0
        )
        results["machine"]["load"] = [load_before, os.getloadavg()[0]]
    results["fusion"] = {
        "method": default.method,
        "query_weight": default.query_weight,
        "text_weight": default.text_weight,
        "candidates": default.candidates,
        "context_weight": default.context_weight,
        "context_window": default.context_window,
        "context_types": list(default.context_types),
    }
    return results


def ingest_side_by_side(
    api: Api, mem0: Mem0 | None, conversations: Sequence[Conversation], results: dict[str, Any]
) -> tuple[list[tuple[Conversation, str, dict[str, str]]], dict[str, dict[str, str]]]:
    """One memory (a mem0 user) per conversation; session by session, our observe and mem0's add of
    the same turns, alternating which goes first, so both share the machine's ups and downs. Returns
    our memories (with record id -> dia_id) and, per conversation, mem0's memory id -> dia_id."""
    memories: list[tuple[Conversation, str, dict[str, str]]] = []
    mem0_dia: dict[str, dict[str, str]] = {}
    start = time.perf_counter()
    for conv in conversations:
        memory_id = api.create_memory(conv.sample_id, f"LoCoMo {conv.sample_id}: {' and '.join(conv.speakers)}")
        ids: dict[str, str] = {}
        theirs = mem0_dia.setdefault(conv.sample_id, {})
        for n, batch in enumerate(session_batches(conv.turns)):

            def observe(batch: list[Turn] = batch, memory_id: str = memory_id, ids: dict[str, str] = ids) -> None:
                for record_id, turn in zip(api.observe(memory_id, episodes_of(batch)), batch, strict=True):
                    ids[record_id] = turn.dia_id

            def add(
                layout: str, batch: list[Turn] = batch, user: str = conv.sample_id, theirs: dict[str, str] = theirs
            ) -> None:
                assert mem0 is not None
                added = mem0.add(layout, user, [t.content for t in batch], timer="add session")
                theirs.update(zip(added, (t.dia_id for t in batch), strict=True))

            sides: list[Callable[[], None]] = [observe]
            if mem0 is not None:
                sides += [lambda layout=layout: add(layout) for layout in MEM0_LAYOUTS]  # type: ignore[misc]
            for side in rotated(sides, n):
                side()
        memories.append((conv, memory_id, ids))
    turns = sum(len(c.turns) for c in conversations)
    observe_s = sum(api.calls["observe"]) / 1000
    results["ingest"] = {
        "records": turns,
        "seconds": observe_s,  # the observe calls' own time (mem0's calls ran between them)
        "records_per_s": turns / observe_s,
        "observe_ms": latency(api.calls["observe"]),
        "wall_seconds": time.perf_counter() - start,
    }
    print(f"ingested {turns} turns: observe {observe_s:.1f} s ({turns / observe_s:.0f} records/s)", flush=True)
    if mem0 is not None:
        results["mem0"] = {"info": mem0.info}
        for layout in MEM0_LAYOUTS:
            add_s = sum(mem0.calls[f"{layout}: add session"]) / 1000
            results["mem0"][layout] = {
                "ingest": {
                    "records": turns,
                    "seconds": add_s,
                    "records_per_s": turns / add_s,
                    "add_ms": latency(mem0.calls[f"{layout}: add session"]),
                },
            }
            print(f"mem0 ({layout}) added {turns} turns: add {add_s:.1f} s ({turns / add_s:.0f} records/s)", flush=True)
    return memories, mem0_dia


def record_run(
    results: dict[str, Any], name: str, per_question: list[tuple[int, dict[int, float]]], note: str, through: str
) -> None:
    summary = summarise(per_question)
    summary["note"] = note
    summary["through"] = through
    results["runs"][name] = summary
    overall = summary["overall"]
    print(f"{name:32s} " + " ".join(f"R@{k}={overall[str(k)]:.3f}" for k in KS), flush=True)


def abstain_and_latency(
    local: Local,
    memories: list[tuple[Conversation, str, dict[str, str]]],
    conversations: list[Conversation],
    default: Any,
    mem0: Mem0 | None = None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Ask every question with the default limit, as a caller would: abstain rates and latency. The
    best `query` similarity among the returned hits (what AbstainPolicy reads) is taken from the
    engine in process, for the trade-off curve of the threshold. mem0's search of the same question
    (top 10) is asked right beside our default request, which of the two goes first alternating."""
    from uhp_memories.domain.recall.abstain import AbstainPolicy, best_similarity

    api = local.api
    policy = AbstainPolicy()
    abstained: dict[str, dict[str, list[bool]]] = {}
    best: dict[str, list[float]] = {"answerable": [], "adversarial": [], "foreign": []}
    asks = [("default", lambda q: {"query": q}),
            ("default, meaning only", lambda q: {"query": q, "query_words": False}),
            ("default, text only", lambda q: {"text": q})]
    asked = 0
    for index, (conv, memory_id, _) in enumerate(memories):  # in the order of `conversations`
        for kind, text in abstain_questions(conversations, index):
            asked += 1
            for name, body in asks:
                if name != "default" or mem0 is None:
                    answer = api.recall(memory_id, body(text), timer="latency:" + name)
                else:  # beside mem0's search of the same question in each layout, each first in turn
                    for side in rotated(["ours", *MEM0_LAYOUTS], asked):
                        if side == "ours":
                            answer = api.recall(memory_id, body(text), timer="latency:default")
                        else:
                            mem0.search(side, conv.sample_id, text, 10, "search")
                abstained.setdefault(name, {}).setdefault(kind, []).append(bool(answer["abstain"]))
            hits = local.engine.search(TENANT, memory_id, query=text, text=text, limit=10)
            best[kind].append(best_similarity(hits))
    rates = {
        name: {kind: {"rate": statistics.fmean(flags), "n": len(flags)} for kind, flags in by_kind.items()}
        for name, by_kind in abstained.items()
    }
    curve = {
        f"{t:.3f}": {kind: statistics.fmean(v < t for v in values) for kind, values in best.items()}
        for t in THRESHOLDS
    }
    import calibrate_abstain

    chosen = calibrate_abstain.threshold_by_rule(best["answerable"])
    calibration = {
        "threshold": policy.threshold(local.engine.model_id),
        "named": policy.calibration(local.engine.model_id).named,
        "rule": f"highest threshold abstaining on <= {calibrate_abstain.TARGET:.1%} of answerable questions",
        "rule_threshold": chosen,
        "curve": curve,
    }
    timings = {name: latency(api.calls["latency:" + name]) for name, _ in asks}
    if mem0 is not None:
        for layout in MEM0_LAYOUTS:
            timings[f"mem0 search ({layout})"] = latency(mem0.calls[f"{layout}: search"])
            embedding = mem0.calls[f"{layout}: search: embedding"]
            timings[f"mem0 search ({layout}): embedding the query"] = latency(embedding)
    return rates, calibration, timings


# -- the OpenSearch adapter beside the embedded engine -------------------------------------------

OPENSEARCH_RESULT = RESULTS / "recall-opensearch.json"


def opensearch_versus(data_path: Path) -> dict[str, Any]:
    """The default request on every question of the dev set through HTTP, once with the embedded engine
    and once through the OpenSearch adapter on a real OpenSearch 2.19 node (tests/opensearch_node.py, or
    OPENSEARCH_URL), the local MiniLM embedding both: R@k and recall latency. Each side is a process of
    its own (a local stage is the process's own), one after the other, the same questions in the same
    order."""
    sys.path.insert(0, str(ROOT))
    from tests import opensearch_node

    results: dict[str, Any] = {"sides": {}, "data": data_path.name}
    try:
        url = opensearch_node.url()
        for name, search in (("embedded", None), ("opensearch", url)):
            command = [sys.executable, __file__, "--data", str(data_path), "--side", name]
            done = subprocess.run([*command, *(["--search-url", search] if search else [])],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"the {name} side failed:\n{done.stderr[-3000:]}")
            results["sides"][name] = json.loads(done.stdout.strip().splitlines()[-1])
            side = results["sides"][name]
            print(f"{name:12s} R@10={side['quality']['overall']['10']:.3f} recall p50 {side['recall']['p50']:.1f} ms "
                  f"p95 {side['recall']['p95']:.1f} ms", file=sys.stderr, flush=True)
    finally:
        opensearch_node.stop()
    results["opensearch"] = {"version": opensearch_node.VERSION, "heap": opensearch_node.HEAP,
                             "url": "OPENSEARCH_URL" if os.environ.get("OPENSEARCH_URL") else "a node of the run"}
    results["machine"] = results["sides"]["embedded"]["machine"]
    return results


def run_side(data_path: Path, search_url: str | None) -> dict[str, Any]:
    """One side of opensearch_versus, in this process: ingest the dev set, then ask every question."""
    from uhp_memories.settings import Settings

    search = None
    if search_url:
        index = f"uhp-bench-{os.getpid()}-{int(time.time())}"
        search = Settings(search_endpoint=search_url, search_index=index, search_replicas=0)
    conversations = load_locomo(data_path)
    out: dict[str, Any] = {"machine": machine()}
    with local_server(search) as local:
        api = local.api
        started = time.perf_counter()
        memories = []
        for conv in conversations:
            memory_id = api.create_memory(conv.sample_id, f"LoCoMo conversation {conv.sample_id}")
            memories.append((conv, memory_id, ingest(api, memory_id, conv.turns)))
        out["ingest"] = {"seconds": time.perf_counter() - started, "observe": latency(api.calls["observe"])}
        load_before = os.getloadavg()[0]
        per_question: list[tuple[int, dict[int, float]]] = []
        for conv, memory_id, dia_of in memories:
            for question in conv.questions:
                if question.evidence:
                    answer = api.recall(memory_id, {"query": question.text}, timer="recall")
                    ranked = [dia_of.get(r["record"]["id"], "") for r in answer["results"]]
                    per_question.append((question.category, recall_at(ranked, question.evidence)))
        out["machine"]["load"] = [load_before, os.getloadavg()[0]]
        out["quality"] = summarise(per_question)
        out["recall"] = latency(api.calls["recall"])
        if search is not None:
            from uhp_memories.adapters.opensearch import connect

            connect(search_url or "").indices.delete(index=search.search_index, ignore=[404])
    return out


def scale(size: int, data_path: Path, searches: int) -> dict[str, Any]:
    conversations = load_locomo(data_path)
    every = [t for c in conversations for t in c.turns]
    questions = [q.text for c in conversations for q in c.questions]
    random.Random(size).shuffle(questions)
    results: dict[str, Any] = {"size": size, "machine": machine()}
    with local_server() as local:
        api = local.api
        memory_id = api.create_memory(f"scale-{size}", f"{size} LoCoMo turns, cycled")
        start = time.perf_counter()
        ingest_cycled(api, memory_id, every, size, progress=True)
        elapsed = time.perf_counter() - start
        results["ingest"] = {
            "records": size,
            "seconds": elapsed,
            "records_per_s": size / elapsed,
            "observe_ms": latency(api.calls["observe"]),
        }
        # A caller of the gateway is another process (as with `make dev`): the recalls are timed by
        # a client process, so the client's own Python does not share the server's interpreter.
        load_before = os.getloadavg()[0]
        client = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--client", api.base_url, "--memory", memory_id,
             "--searches", str(searches), "--seed", str(size)],
            capture_output=True, text=True, check=True,
        )
        samples = json.loads(client.stdout)
        results["machine"]["load"] = [load_before, os.getloadavg()[0]]
        results["latency"] = {name: latency(samples[name]) for name in ASKS}
        results["first_search_ms"] = samples["warm"][0]
        engine_ms: list[float] = []
        embed_ms: list[float] = []
        for question in questions[:searches]:
            start = time.perf_counter()
            local.engine.embedder.embed([question])
            embed_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            local.engine.search(TENANT, memory_id, query=question, text=question, limit=10)
            engine_ms.append((time.perf_counter() - start) * 1000)
        results["engine"] = {"search": latency(engine_ms), "embed_query": latency(embed_ms)}
    return results


def run_summary(result: dict[str, Any], searches: int) -> dict[str, Any]:
    """One line of the run log: every latency run is kept, so a slow or a fast run is never the only
    one shown (this machine's speed drifts by half from one run to the next)."""
    latency, engine = result["latency"], result["engine"]
    return {
        "size": result["size"],
        "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": _commit(),
        "searches": searches,
        "client": "own process",
        "default": [round(latency["default"]["p50"], 1), round(latency["default"]["p95"], 1)],
        "text_only_p50": round(latency["default, text only"]["p50"], 1),
        "embed_p50": round(engine["embed_query"]["p50"], 1),
        "load": [round(v, 2) for v in result["machine"].get("load", [])],
    }


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "-"


ASKS: dict[str, Callable[[str], dict[str, Any]]] = {
    "default": lambda q: {"query": q, "text": q},
    "default, query only": lambda q: {"query": q},
    "default, text only": lambda q: {"text": q},
}


def client(base_url: str, memory_id: str, searches: int, seed: int, data_path: Path) -> dict[str, list[float]]:
    """The latency loop, run as a separate client process: the questions in a shuffled order, the
    three request kinds interleaved question by question (they share the machine's ups and downs)."""
    import requests

    questions = [q.text for c in load_locomo(data_path) for q in c.questions]
    random.Random(seed).shuffle(questions)
    api = Api(base_url, requests.Session())
    for body in ASKS.values():  # warm: the first search loads the memory's vectors
        api.recall(memory_id, body(questions[0]), timer="warm")
    for question in questions[:searches]:
        for name, body in ASKS.items():
            api.recall(memory_id, body(question), timer=name)
    return api.calls


def machine() -> dict[str, Any]:
    import numpy
    import onnxruntime

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "onnxruntime": onnxruntime.__version__,
        "sqlite": sqlite3.sqlite_version,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }


# -- the report --------------------------------------------------------------------------------


def _r(value: float) -> str:
    return f"{value:.3f}"


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else "-"


def render_mem0(q: dict[str, Any]) -> list[str]:
    """Ours beside mem0 OSS and BM25: quality per category, and each operation's cost as a ratio of
    mem0's in both its local layouts, with the issue's targets (all from this one run)."""
    if "mem0" not in q or "mem0 search" not in q["runs"]:
        return []
    runs, m = q["runs"], q["mem0"]
    info = m["info"]
    lines = [
        "## Beside mem0 OSS",
        "",
        f"mem0ai {info['mem0ai']} (qdrant-client {info['qdrant-client']}, Python {info['python']}) in a process "
        "of its own in the bench-only venv (`make .venv-bench`), driven call by call by the benchmark, on "
        "the same turns and questions in the same run: `Memory()` with its local Qdrant store (embedded, "
        "in memory), every write with `infer=False` (no LLM), and our embedder (all-MiniLM-L6-v2 int8, "
        "the same arithmetic) as its custom embedder. Two layouts: **shared**, one store for every "
        "conversation, each search filtered by `user_id` (as mem0 documents it), and **per-user**, a "
        "store of its own per conversation (its fastest local layout). mem0's keyword signal was "
        + ("on" if info.get("keyword_search") else "off: it needs fastembed's `Qdrant/bm25` and spaCy's "
           "`en_core_web_sm`, fetched from model hubs at run time, which this machine cannot reach, so mem0 "
           "searched by meaning alone, as `pip install mem0ai` gives offline")
        + ". mem0's times are of its call alone, inside its process; ours are a client's, over HTTP "
        "through the local gateway (HTTP, the deployed handler, DynamoDB on moto and the read-back included). "
        "Each call is made beside the others' of the same item, which side goes first rotating. The targets "
        "are judged against the per-user layout, the faster of the two.",
        "",
        "| run | R@10 overall | " + " | ".join(f"{c} {n}" for c, n in CATEGORIES.items()) + " |",
        "|---|---|" + "---|" * len(CATEGORIES),
    ]
    for name in ("default", "BM25 alone", "mem0 search"):
        run = runs[name]
        lines.append(
            f"| {name} | {_r(run['overall']['10'])} | " + " | ".join(_r(run[str(c)]["10"]) for c in CATEGORIES) + " |"
        )
    lat, rem, ours_in = q["latency"], q["remember"], q["ingest"]

    def verdict(ratio: float, bound: float, at_most: bool = True) -> str:
        met = ratio <= bound if at_most else ratio >= bound
        return ("met" if met else "NOT met") + f" ({'<=' if at_most else '>='} {bound}x)"

    def row(name: str, ours: dict[str, float], theirs: dict[str, dict[str, float]], target: str) -> str:
        cells = [f"{ours['p50']:.1f} / {ours['p95']:.1f}"]
        for layout in MEM0_LAYOUTS:
            t = theirs[layout]
            cells.append(
                f"{t['p50']:.1f} / {t['p95']:.1f} ({ours['p50'] / t['p50']:.2f}x / {ours['p95'] / t['p95']:.2f}x)"
            )
        return f"| {name} | " + " | ".join(cells) + f" | {target} |"

    recall = lat["default"]
    search = {layout: lat[f"mem0 search ({layout})"] for layout in MEM0_LAYOUTS}
    fast = search["per-user"]
    lines += [
        "",
        "ms p50 / p95, and ours over mem0's in brackets:",
        "",
        "| operation | ours | mem0 shared | mem0 per-user | target (vs per-user) |",
        "|---|---|---|---|---|",
        row(f"recall (default request) vs search, top 10, n={recall['n']}", recall, search,
            f"p50 {verdict(recall['p50'] / fast['p50'], 0.5)}; p95 {verdict(recall['p95'] / fast['p95'], 0.5)}"),
        row(f"remember one record vs add one message, n={rem['ours']['n']}", rem["ours"], rem,
            f"p50 {verdict(rem['ours']['p50'] / rem['per-user']['p50'], 0.5)}"),
        row(f"observe one session vs add its messages, n={ours_in['observe_ms']['n']}", ours_in["observe_ms"],
            {layout: m[layout]["ingest"]["add_ms"] for layout in MEM0_LAYOUTS}, ""),
        "",
    ]
    for layout in MEM0_LAYOUTS:
        embedding = lat.get(f"mem0 search ({layout}): embedding the query")
        if embedding:
            lines.append(
                f"Of mem0's search ({layout}), p50 {search[layout]['p50']:.1f} ms, embedding the query took "
                f"{embedding['p50']:.1f} ms ({embedding['p50'] / search[layout]['p50']:.0%})."
            )
    rates = {layout: m[layout]["ingest"]["records_per_s"] for layout in MEM0_LAYOUTS}
    ratio = ours_in["records_per_s"] / rates["per-user"]
    load = q["machine"].get("load") or [float("nan"), float("nan")]
    lines += [
        "",
        f"Ingest of the {ours_in['records']} dev turns, records per second of call time: ours (observe, one call "
        f"per session) {ours_in['records_per_s']:.0f}; mem0 (add of the session's messages) shared "
        f"{rates['shared']:.0f}, per-user {rates['per-user']:.0f}: {ratio:.2f}x mem0's per-user rate, target "
        f"{verdict(ratio, 2.0, at_most=False)}. Load average (1 min) {load[0]:.2f} before the run, {load[-1]:.2f} "
        "after (2 cores, shared with other work).",
        "",
    ]
    return lines


def render_quality(q: dict[str, Any]) -> list[str]:
    runs = q["runs"]
    base = runs["BM25 alone"]["overall"]
    lines = [
        *render_mem0(q),
        "## Quality on the LoCoMo dev set",
        "",
        f"{q['runs']['default']['n']} questions with evidence (of 6 conversations, "
        f"{q['ingest']['records']} turns), adversarial ones included. R@k: the share of a question's "
        "evidence turns in the top k, LoCoMo's own measure. Ratios are against BM25 alone, run in the "
        "same process on the same memories.",
        "",
        "| run | through | R@1 | R@5 | R@10 | R@25 | R@10 vs BM25 | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        o = run["overall"]
        lines.append(
            f"| {name} | {run['through']} | " + " | ".join(_r(o[str(k)]) for k in KS)
            + f" | {_ratio(o['10'], base['10'])} | {run['note']} |"
        )
    lines += [
        "",
        "R@10 per category (LoCoMo's numbering; n = questions with evidence):",
        "",
        "| run | " + " | ".join(f"{c} {n} (n={runs['default'][str(c)]['n']})" for c, n in CATEGORIES.items())
        + " |",
        "|---|" + "---|" * len(CATEGORIES),
    ]
    for name, run in runs.items():
        lines.append(f"| {name} | " + " | ".join(_r(run[str(c)]["10"]) for c in CATEGORIES) + " |")
    lines += ["", "The default per category, every k:", "", "| category | R@1 | R@5 | R@10 | R@25 |"]
    lines.append("|---|---|---|---|---|")
    for c, n in CATEGORIES.items():
        row = runs["default"][str(c)]
        lines.append(f"| {c} {n} | " + " | ".join(_r(row[str(k)]) for k in KS) + " |")
    ab = q["abstain"]
    lines += [
        "",
        "### Abstain",
        "",
        "Share of questions answered with `abstain: true` at the default limit. Answerable: categories "
        "1-4 of the memory's own conversation; adversarial: category 5 (they name the wrong speaker for "
        "something that was said); foreign: questions of the other conversations, about people this "
        "memory never heard of.",
        "",
        "| request | answerable | adversarial | foreign |",
        "|---|---|---|---|",
    ]
    for name, kinds in ab.items():
        lines.append(
            f"| {name} | " + " | ".join(
                f"{kinds[k]['rate']:.3f} (n={kinds[k]['n']})" for k in ("answerable", "adversarial", "foreign")
            ) + " |"
        )
    cal = q["calibration"]
    lines += [
        "",
        f"Trade-off of the abstain threshold (default for MiniLM: {cal['threshold']}): abstain when the "
        "best cosine similarity among the returned hits (default request, default limit) is below it. "
        f"The default follows the rule \"{cal['rule']}\", which picks {cal['rule_threshold']:.2f} on this run. "
        f"The curve is similarity alone; the product also abstains on a weak match (below {cal.get('named')}) "
        "that names someone no record of the memory mentions (docs/decisions.md, Recall), which the first "
        "table includes.",
        "",
        "| threshold | answerable | adversarial | foreign |",
        "|---|---|---|---|",
    ]
    for threshold, kinds in cal["curve"].items():
        lines.append(
            f"| {threshold} | " + " | ".join(f"{kinds[k]:.3f}" for k in ("answerable", "adversarial", "foreign")) + " |"
        )
    import calibrate_abstain

    if calibrate_abstain.RESULT.exists():
        lines += calibrate_abstain.render(json.loads(calibrate_abstain.RESULT.read_text()))
    lat = q["latency"]
    base_lat = lat["default, text only"]
    lines += [
        "",
        "### Latency and ingest (dev set, ~600 records per memory)",
        "",
        "Recall through the gateway, client side, default limit (10), every question asked once per request kind.",
        "",
        "| request | p50 ms | p95 ms | p50 vs text only | p95 vs text only |",
        "|---|---|---|---|---|",
    ]
    for name, t in lat.items():
        lines.append(
            f"| {name} | {t['p50']:.1f} | {t['p95']:.1f} | {_ratio(t['p50'], base_lat['p50'])} | "
            f"{_ratio(t['p95'], base_lat['p95'])} |"
        )
    ing = q["ingest"]
    lines += [
        "",
        f"Ingest: {ing['records']} turns through observe (one call per session) in {ing['seconds']:.1f} s, "
        f"{ing['records_per_s']:.0f} records/s; an observe call p50 {ing['observe_ms']['p50']:.0f} ms, "
        f"p95 {ing['observe_ms']['p95']:.0f} ms (embedding included).",
        "",
    ]
    return lines


def render_scale(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Latency at scale: one memory of N records",
        "",
        "The dev set's turns cycled into one memory (so texts repeat every 3,435 records), ingested "
        "through observe in calls of at most 50 episodes; then the questions of the dev set, in a "
        "shuffled order, through the gateway with the default limit, timed by a client in its own "
        "process (earlier runs timed it in the server's process: the `client` column of the run log "
        "below). `engine` is the search alone in the server's process (embedding of the "
        "query included); the rest of a request is HTTP, the handler, the access checks and the "
        "read-back of every hit from DynamoDB (moto). The three request kinds are interleaved "
        "question by question, so they share the machine's ups and downs.",
        "",
        "| records | request | p50 ms | p95 ms | p50 vs text only | p95 vs text only | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        size = r["size"]
        base = r["latency"]["default, text only"]
        for name, t in r["latency"].items():
            target = ""
            if name == "default":
                def verdict(value: float, bound: float) -> str:
                    return "met" if value <= bound else "NOT met"

                if size <= 10_000:
                    target = f"p50 <= 25: {verdict(t['p50'], 25)}; p95 <= 60: {verdict(t['p95'], 60)}"
                else:
                    target = f"p95 <= 100 (issue 18): {verdict(t['p95'], 100)}"
            lines.append(
                f"| {size:,} | {name} | {t['p50']:.1f} | {t['p95']:.1f} | {_ratio(t['p50'], base['p50'])} | "
                f"{_ratio(t['p95'], base['p95'])} | {target} |"
            )
        e = r["engine"]
        lines.append(
            f"| {size:,} | engine: search (query + text) | {e['search']['p50']:.1f} | {e['search']['p95']:.1f} | | | |"
        )
        lines.append(
            f"| {size:,} | engine: embed the query | {e['embed_query']['p50']:.1f} | "
            f"{e['embed_query']['p95']:.1f} | | | |"
        )
    if RUN_LOG.exists():
        runs = [json.loads(line) for line in RUN_LOG.read_text().splitlines() if line.strip()]
        lines += [
            "",
            "Every latency run, oldest first (the table above is the newest of each size). The time to "
            "embed a query, the same work in every run, shows how fast the machine was running; the "
            "ratio to the text-only request is the figure that stays put.",
            "",
            "| records | when (UTC) | commit | client | searches | default p50 ms | p95 ms | text only p50 ms | "
            "default / text only | embed p50 ms | load |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for run in runs:
            p50, p95 = run["default"]
            load = " -> ".join(f"{v:.2f}" for v in run.get("load", [])) or "-"
            lines.append(
                f"| {run['size']:,} | {run['at']} | {run['commit']} | {run.get('client', 'server process')} | "
                f"{run['searches']} | {p50:.1f} | {p95:.1f} | "
                f"{run['text_only_p50']:.1f} | {_ratio(p50, run['text_only_p50'])} | {run['embed_p50']:.1f} | {load} |"
            )
    lines += render_versus()
    lines += ["", "| records | ingest records/s | observe call p50 ms | p95 ms | first search ms (loads vectors) |",
              "|---|---|---|---|---|"]
    for r in results:
        i = r["ingest"]
        lines.append(
            f"| {r['size']:,} | {i['records_per_s']:.0f} | {i['observe_ms']['p50']:.0f} | "
            f"{i['observe_ms']['p95']:.0f} | {r['first_search_ms']:.0f} |"
        )
    lines.append("")
    return lines


def render_versus() -> list[str]:
    """The side-by-side runs of bench/recall_versus.py: this machine's speed cancels out of them."""
    if not VERSUS_LOG.exists():
        return []
    runs = [json.loads(line) for line in VERSUS_LOG.read_text().splitlines() if line.strip()]
    lines = [
        "",
        "Side by side (`bench/recall_versus.py BASELINE`): two local servers at once, one on an earlier "
        "commit's code and one on the commit named, the same records in each, one client alternating "
        "the same questions between them. The ratio is the figure to compare across runs; the "
        "milliseconds move with the machine.",
        "",
        "| records | when (UTC) | baseline -> commit | request | baseline p50 / p95 ms | commit p50 / p95 ms | "
        "p50 ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for kind in [k for k in ("default", "text only", "remember", "observe") if k in run]:
            base, now = run[kind]["baseline"], run[kind]["now"]
            lines.append(
                f"| {run['size']:,} | {run['at']} | {run['baseline']} -> {run['commit']} | {kind} | "
                f"{base[0]:.1f} / {base[1]:.1f} | {now[0]:.1f} / {now[1]:.1f} | {now[0] / base[0]:.2f}x |"
            )
    return lines


def render_opensearch(o: dict[str, Any]) -> list[str]:
    embedded, opensearch = o["sides"]["embedded"], o["sides"]["opensearch"]
    gap = opensearch["quality"]["overall"]["10"] - embedded["quality"]["overall"]["10"]
    lines = [
        "## Recall through the OpenSearch adapter",
        "",
        f"`make bench-recall SEARCH=opensearch` ({o['machine']['date']}): the default request (`query` = the "
        f"question, limit 10) on every question of the dev set with evidence, through HTTP to the local "
        f"server, once on the embedded engine and once on the OpenSearch adapter over a real OpenSearch "
        f"{o['opensearch']['version']} node on this machine (the `lucene` k-NN engine, one shard, "
        f"{o['opensearch']['heap']} heap; tests/opensearch_node.py), as a deployed stage recalls; the local "
        "MiniLM embeds on both sides. Each side ingests the dev set through observe, then asks.",
        "",
        "| engine | R@1 | R@5 | R@10 | n | recall p50 ms | p95 ms | ingest s (observe p50 ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in (("embedded (sqlite FTS5 + numpy)", embedded), ("OpenSearch adapter", opensearch)):
        q, lat, ing = run["quality"]["overall"], run["recall"], run["ingest"]
        lines.append(
            f"| {name} | {q['1']:.3f} | {q['5']:.3f} | {q['10']:.3f} | {run['quality']['n']} | "
            f"{lat['p50']:.1f} | {lat['p95']:.1f} | {ing['seconds']:.0f} ({ing['observe']['p50']:.0f}) |"
        )
    verdict = "met" if abs(gap) <= 0.01 else "**not met**"
    lines += [
        "",
        f"- **R@10 within 0.01 of the embedded engine**: {verdict} ({gap:+.3f}).",
        f"- Recall through OpenSearch, p50 {opensearch['recall']['p50'] / embedded['recall']['p50']:.2f}x and "
        f"p95 {opensearch['recall']['p95'] / embedded['recall']['p95']:.2f}x the embedded engine's on this "
        "machine (the node shares its 2 cores with the server and the client).",
        "",
    ]
    return lines


def render() -> None:
    quality_file = RESULTS / "recall-locomo.json"
    scales = sorted(
        (json.loads(p.read_text()) for p in RESULTS.glob("recall-scale-*.json")), key=lambda r: r["size"]
    )
    intro = (ROOT / "bench" / "recall_locomo.md").read_text()
    lines = [intro.rstrip(), ""]
    machines = []
    if quality_file.exists():
        q = json.loads(quality_file.read_text())
        lines += render_quality(q)
        machines.append(("quality", q["machine"]))
    if scales:
        lines += render_scale(scales)
        machines += [(f"scale {r['size']:,}", r["machine"]) for r in scales]
    if OPENSEARCH_RESULT.exists():
        o = json.loads(OPENSEARCH_RESULT.read_text())
        lines += render_opensearch(o)
        machines.append(("OpenSearch adapter", o["machine"]))
    # The other benchmarks' sections (file memory, consolidation) are written by hand beside this one.
    lines += [(ROOT / "bench" / "other_benchmarks.md").read_text().split("\n", 2)[2].rstrip(), ""]
    if machines:
        lines += [
            "## Machine",
            "",
            "Load: the 1-minute load average before and after the latency loop (this machine has 2 cores; "
            "anything above 1 means another process competed for them while latency was measured).",
            "",
            "| run | date | cpu | cores | load | python | numpy | onnxruntime | sqlite |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name, m in machines:
            load = " -> ".join(f"{v:.2f}" for v in m.get("load", [])) or "-"
            lines.append(
                f"| {name} | {m['date']} | {m['cpu']} | {m['cores']} | {load} | {m['python']} | {m['numpy']} | "
                f"{m['onnxruntime']} | {m['sqlite']} |"
            )
        lines.append("")
    DOC.write_text("\n".join(lines))
    print(f"wrote {DOC.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--scale", type=int, action="append", help="records in one memory (repeatable)")
    parser.add_argument("--searches", type=int, default=500, help="recalls per request kind at scale")
    parser.add_argument("--render", action="store_true", help="only rebuild docs/benchmarks.md from the results")
    parser.add_argument("--no-mem0", action="store_true", help="leave mem0 out (it runs in .venv-bench)")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)  # the latency loop's client process
    parser.add_argument("--memory", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--opensearch", action="store_true",
                        help="R@k and recall latency through the OpenSearch adapter beside the embedded engine")
    parser.add_argument("--side", choices=["embedded", "opensearch"], help=argparse.SUPPRESS)  # one side of it
    parser.add_argument("--search-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(client(args.client, args.memory, args.searches, args.seed, args.data)))
        return 0
    if args.side:
        print(json.dumps(run_side(args.data, args.search_url)))
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.render:
        if args.opensearch:
            OPENSEARCH_RESULT.write_text(json.dumps(opensearch_versus(args.data), indent=1))
        elif args.scale:
            for size in args.scale:
                result = scale(size, args.data, args.searches)
                (RESULTS / f"recall-scale-{size}.json").write_text(json.dumps(result, indent=1))
                with RUN_LOG.open("a") as log:
                    log.write(json.dumps(run_summary(result, args.searches)) + "\n")
        else:
            result = quality(args.data, with_mem0=not args.no_mem0)
            (RESULTS / "recall-locomo.json").write_text(json.dumps(result, indent=1))
            import calibrate_abstain  # abstain chosen by leave-one-conversation-out (the engine in process)

            calibrate_abstain.run(args.data)
    render()
    return 0


if __name__ == "__main__":
    sys.exit(main())
