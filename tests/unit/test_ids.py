"""Ids (DESIGN: prefix + 32 hex) sort in the order they were made, which keeps a memory's log order."""

from __future__ import annotations

import re
import threading
import time

from uhp_memories.adapters.system import RandomIds


def test_ids_are_the_prefix_and_32_hex_and_sort_in_the_order_they_were_made() -> None:
    ids = RandomIds()
    made = [ids.new("hrec_") for _ in range(5000)]
    assert all(re.fullmatch(r"hrec_[0-9a-f]{32}", i) for i in made)
    assert made == sorted(made)
    assert len(set(made)) == len(made)


def test_ids_start_with_the_millisecond_they_were_made_in() -> None:
    before = time.time_ns() // 1_000_000
    made = RandomIds().new("hmem_")
    after = time.time_ns() // 1_000_000
    assert before <= int(made[5:17], 16) <= after


def test_two_generators_do_not_collide_and_threads_share_one_order() -> None:
    ids = RandomIds()
    other = {RandomIds().new("x_") for _ in range(2000)}
    per_thread: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(ids.new("x_") for _ in range(2000))

    threads = [threading.Thread(target=make, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in per_thread for i in out]
    assert len(set(every)) == len(every)
    assert not other & set(every)
    assert all(out == sorted(out) for out in per_thread)
