"""The period a question names, read at query time against the records' own time (`valid_from`).

"What did Maria do on 3 May, 2023?", "When did John start boxing in March 2023?": a question that
names a month and its year asks about what happened then, which the conversation may mention then
or afterwards ("last week I went camping"). Ranking (search/ranking.py) searches such a question a
second time among the records whose `valid_from` falls in that month or the month after, and lifts
what it finds there (Fusion.period_weight). A month without its year names no period: a memory
spans years, and guessing one would lift the wrong year's records. Pure Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from uhp_memories.domain.filters import Combination, Filter, parse_filter

MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)
_ABBREVIATED = {name[:3]: number for number, name in enumerate(MONTHS, 1)}
# "May 2023", "3 May, 2023", "May 3, 2023", "Sept 2023": a month's name (or its first three letters,
# four for "sept") and, after an optional day, its four-digit year.
_NAMED = re.compile(
    r"\b(" + "|".join(MONTHS) + r"|sept|jan|feb|mar|apr|jun|jul|aug|sep|oct|nov|dec)\.?"
    r"(?:\s+\d{1,2}(?:st|nd|rd|th)?)?,?\s+(\d{4})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Period:
    """[start, end) as record times (RFC 3339, UTC): the month named and the month after it."""

    start: str
    end: str

    def within(self, filters: Filter | None) -> Filter:
        """The request's own filters, and `valid_from` in this period."""
        period = {
            "and": [
                {"field": "time.valid_from", "op": "gte", "value": self.start},
                {"field": "time.valid_from", "op": "lt", "value": self.end},
            ]
        }
        parsed = parse_filter(period)
        assert parsed is not None
        return parsed if filters is None else Combination("and", (parsed, filters))


def named_period(*texts: str | None) -> Period | None:
    """The first month-and-year named in these texts (a request's words, then its query), or None."""
    for text in texts:
        if not text:
            continue
        found = _NAMED.search(text)
        if found is None:
            continue
        month = _ABBREVIATED[found.group(1).lower()[:3]]
        year = int(found.group(2))
        if not 1 <= year <= 9998:
            continue
        after = month + 2  # the first month past the one after
        end_year, end_month = (year + 1, after - 12) if after > 12 else (year, after)
        return Period(f"{year:04d}-{month:02d}-01T00:00:00.000Z", f"{end_year:04d}-{end_month:02d}-01T00:00:00.000Z")
    return None
