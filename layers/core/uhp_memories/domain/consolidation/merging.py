"""What a consolidation pass without a model concludes about two records (§9.2), as pure rules.

- **A repeat**: the same type, the same text once whitespace and case are folded, the same attributes.
- **A near duplicate**: the same type and attributes, and texts that say the same thing in nearly the
  same words: cosine similarity of their embeddings at least NEAR_SIMILARITY *and* at least
  NEAR_WORDS of their words shared (Jaccard over folded words). Both, because either alone merges
  near misses: the embedding thinks "renews in March" and "renews in April" say the same thing, and
  word overlap thinks "Acme pays by card" and "Acme never pays by card" do. The thresholds are
  calibrated on bench/consolidation_corpus.py's planted duplicates and near misses
  (docs/benchmarks.md, "Consolidation").
- **A restatement**: a record that names what it states in `attributes.key` (e.g. "acme.renewal") is
  superseded by a later record of the same type and key whose `valid_from` is later: the older
  chain takes the newer statement as its next version, so history reads "March, then April". A
  record with a key is compared with its subject's records only (a repeat of one is forgotten), never
  merged as a near duplicate: two statements of one subject differ in exactly the word that matters.

Episodes are raw experience (§4.1): two identical episodes are two events, so no rule applies to them.
Files are their writer's (docs/file-memory.md): no rule applies to them either.
"""

from __future__ import annotations

import json
import re
from typing import Any

from uhp_memories.domain.records.model import RecordVersion

NEAR_SIMILARITY = 0.92
NEAR_WORDS = 0.80
SUBJECT_KEY = "key"
_WORDS = re.compile(r"\w+", re.UNICODE)


def eligible(record: RecordVersion) -> bool:
    """A record a pass may merge, supersede or expire."""
    return record.type != "episode" and record.path is None and record.is_current and record.status == "active"


def folded(content: Any) -> str:
    if isinstance(content, str):
        return re.sub(r"\s+", " ", content).strip().casefold()
    return json.dumps(content, sort_keys=True)


def identity(record: RecordVersion) -> tuple[str, str, str]:
    """What makes two records say exactly the same thing."""
    return record.type, folded(record.content), json.dumps(record.attributes, sort_keys=True)


def words(record: RecordVersion) -> set[str]:
    return set(_WORDS.findall(folded(record.content)))


def word_overlap(a: RecordVersion, b: RecordVersion) -> float:
    left, right = words(a), words(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def repeats(newer: RecordVersion, older: RecordVersion) -> bool:
    return identity(newer) == identity(older)


def near_duplicate(newer: RecordVersion, older: RecordVersion, similarity: float) -> bool:
    same_subject = newer.type == older.type and newer.attributes == older.attributes
    return same_subject and similarity >= NEAR_SIMILARITY and word_overlap(newer, older) >= NEAR_WORDS


def subject(record: RecordVersion) -> str | None:
    key = record.attributes.get(SUBJECT_KEY)
    return key if isinstance(key, str) and key else None


def restates(newer: RecordVersion, older: RecordVersion) -> bool:
    """`newer` says what `older` says about the same subject, as of a later time."""
    key = subject(newer)
    if key is None or newer.type != older.type or subject(older) != key or newer.chain_id == older.chain_id:
        return False
    return (newer.valid_from or newer.written_at) > (older.valid_from or older.written_at)
