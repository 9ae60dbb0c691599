"""Ids (DESIGN: prefix + 32 hex) sort in the order they were made, which keeps a memory's log order."""

from __future__ import annotations

import re
import threading
import time
from itertools import pairwise

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


def test_an_id_does_not_name_the_next_one() -> None:
    """Within one millisecond the random part was counted up by 1..65,536: one id named its neighbours.
    Now each id's last 64 bits are drawn afresh, and only a 16-bit count keeps their order."""
    ids = RandomIds()
    made = [ids.new("hrec_") for _ in range(5000)]
    same_ms = [(a, b) for a, b in pairwise(made) if a[5:17] == b[5:17]]
    assert len(same_ms) > 100
    for a, b in same_ms:
        assert int(b[17:21], 16) == int(a[17:21], 16) + 1
        assert abs(int(b[21:], 16) - int(a[21:], 16)) > 1 << 20  # 2**-43 that two draws come this close
    tails = [int(i[21:], 16) for i in made]
    assert len(set(tails)) == len(tails)
    assert sum(bin(t).count("1") for t in tails) / len(tails) > 28  # about 32 of 64 bits set, not a count
