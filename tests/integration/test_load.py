"""A bounded load on loopback: CLIENTS concurrent clients, each with its own key, mixing remember, revise,
recall and list against one shared memory and one of its own for SECONDS. Checked: no 5xx, and no lost
write (every record a client was told was written, and every revision, is there afterwards, once).
Timings are measured and never asserted (the machine is shared); with UHP_LOAD_REPORT=path the run's
p50/p95/p99 per operation are written there as JSON (docs/performance.md, "Load on loopback")."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory

pytestmark = pytest.mark.slow

CLIENTS = 6
SECONDS = 20.0
WORDS = ["acme", "globex", "renewal", "march", "april", "discount", "email", "calls", "pricing", "contract"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def test_concurrent_clients_get_no_server_error_and_lose_no_write(
    alice: Client, make_client: ClientFactory
) -> None:
    shared = alice.create_memory("shared", description="every client writes here")
    clients = []
    for n in range(CLIENTS):
        principal = f"user:load{n}"
        alice.grant(shared["id"], principal, "read", "write")
        client = make_client(principal)
        clients.append((client, client.create_memory(f"own {n}")["id"]))

    latencies: dict[str, list[float]] = defaultdict(list)
    server_errors: list[str] = []
    written: dict[str, tuple[str, str]] = {}  # chain's first id -> (memory, the content last acknowledged)
    lock = threading.Lock()
    deadline = time.monotonic() + SECONDS

    def timed(name: str, call: Any) -> Any:
        started = time.perf_counter()
        answer = call()
        elapsed = time.perf_counter() - started
        with lock:
            latencies[name].append(elapsed)
            if answer.status_code >= 500:
                server_errors.append(f"{name} {answer.status_code} {answer.text[:200]}")
        return answer

    def work(client: Client, own: str, seed: int) -> None:
        chance = random.Random(seed)
        mine: list[tuple[str, str, str]] = []  # (memory, chain's first id, current id)
        while time.monotonic() < deadline:
            memory_id = chance.choice([shared["id"], own])
            text = " ".join(chance.choices(WORDS, k=6))
            roll = chance.random()
            if roll < 0.35 or not mine:
                answer = timed("remember", lambda m=memory_id, t=text: client.post(
                    f"/v1/memories/{m}/records", {"type": "fact", "content": t}))
                if answer.status_code == 201:
                    record = answer.json()
                    mine.append((memory_id, record["id"], record["id"]))
                    with lock:
                        written[record["id"]] = (memory_id, text)
            elif roll < 0.55:
                position = chance.randrange(len(mine))
                memory_id, chain, current = mine[position]
                answer = timed("revise", lambda m=memory_id, c=current, t=text: client.patch(
                    f"/v1/memories/{m}/records/{c}", {"content": t}))
                if answer.status_code == 200:
                    mine[position] = (memory_id, chain, answer.json()["id"])
                    with lock:
                        written[chain] = (memory_id, text)
            elif roll < 0.8:
                timed("recall", lambda m=memory_id, t=text: client.post(
                    f"/v1/memories/{m}/recall", {"query": t, "limit": 5}))
            else:
                timed("list", lambda m=memory_id: client.get(f"/v1/memories/{m}/records", limit="20"))

    threads = [threading.Thread(target=work, args=(c, own, n)) for n, (c, own) in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=SECONDS + 120)
    assert not any(t.is_alive() for t in threads)

    assert server_errors == []
    assert sum(len(v) for v in latencies.values()) > 0
    readers = {shared["id"]: alice, **{own: client for client, own in clients}}
    assert_no_write_lost(readers, written)
    write_report(latencies)


def assert_no_write_lost(readers: dict[str, Client], written: dict[str, tuple[str, str]]) -> None:
    """Every chain acknowledged is there, once, holding the content last acknowledged; each memory
    lists exactly the chains acknowledged in it."""
    for chain, (memory_id, content) in written.items():
        reader = readers[memory_id]
        history = reader.get(f"/v1/memories/{memory_id}/records/{chain}/history", limit="100").json()["data"]
        current = [v for v in history if v["status"] == "active"]
        assert len(current) == 1, (chain, history)
        assert current[0]["content"] == content
    for memory_id, reader in readers.items():
        listed, cursor = [], None
        while True:
            page = reader.get(f"/v1/memories/{memory_id}/records", limit="100", cursor=cursor).json()
            listed += page["data"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        ids = [r["id"] for r in listed]
        assert len(ids) == len(set(ids))
        assert len(ids) == sum(1 for m, _ in written.values() if m == memory_id)


def write_report(latencies: dict[str, list[float]]) -> None:
    report = os.environ.get("UHP_LOAD_REPORT")
    if report:
        figures = {
            name: {"requests": len(values), "p50_ms": round(1000 * percentile(values, 0.5), 1),
                   "p95_ms": round(1000 * percentile(values, 0.95), 1),
                   "p99_ms": round(1000 * percentile(values, 0.99), 1)}
            for name, values in sorted(latencies.items())
        }
        figures["_run"] = {"clients": CLIENTS, "seconds": SECONDS,  # type: ignore[dict-item]
                           "requests": sum(len(v) for v in latencies.values())}
        with open(report, "w") as out:
            json.dump(figures, out, indent=2)
