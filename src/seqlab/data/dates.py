"""A translation task generated on the spot: dates in human formats → ISO 8601.

``"saturday 9 may 1998"``, ``"09/05/98"``, ``"May 9, 1998"`` ... → ``"1998-05-09"``. Every source
string is produced from a real calendar date by one of many formats, so the task needs no
download and has an exact answer; a model must learn to find day, month and year in the
source, which makes its attention alignments easy to read.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from typing import Any

MONTHS = [
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
]  # fmt: skip
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FIRST, LAST = dt.date(1950, 1, 1), dt.date(2049, 12, 31)


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _formats(d: dt.date) -> list[str]:
    month, mon = MONTHS[d.month - 1], MONTHS[d.month - 1][:3]
    day_name = DAYS[d.weekday()]
    yy = f"{d.year % 100:02d}"
    return [
        f"{day_name} {d.day} {month} {d.year}",
        f"{d.day} {month} {d.year}",
        f"{d.day:02d}/{d.month:02d}/{yy}",
        f"{d.day:02d}/{d.month:02d}/{d.year}",
        f"{d.day}.{d.month}.{d.year}",
        f"{month.capitalize()} {d.day}, {d.year}",
        f"{mon.capitalize()} {d.day}, {d.year}",
        f"{mon} {d.day} {d.year}",
        f"{d.day} {mon} {d.year}",
        f"{d.day} {mon.upper()} {yy}",
        f"{day_name}, {month} {_ordinal(d.day)}, {d.year}",
        f"the {_ordinal(d.day)} of {month} {d.year}",
        f"{day_name.capitalize()} {_ordinal(d.day)} {month.capitalize()} {d.year}",
        f"{d.year}/{d.month:02d}/{d.day:02d}",
        f"{d.day}-{mon}-{d.year}",
    ]


NUM_FORMATS = len(_formats(FIRST))


def render(d: dt.date, fmt: int) -> str:
    """The date ``d`` in human format number ``fmt`` (0 ≤ fmt < NUM_FORMATS)."""
    return _formats(d)[fmt]


def make_date_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (human, ISO) pairs of random dates in 1950–2049 and random formats, seeded."""
    rng = random.Random(seed)
    span = (LAST - FIRST).days
    pairs = []
    for _ in range(n):
        d = FIRST + dt.timedelta(days=rng.randrange(span + 1))
        pairs.append((render(d, rng.randrange(NUM_FORMATS)), d.isoformat()))
    return pairs


def date_splits(
    num_train: int = 20000, num_val: int = 1000, num_test: int = 1000, seed: int = 0
) -> dict[str, list[tuple[str, str]]]:
    """Disjoint train / val / test pairs: no source string appears in two splits."""
    pool = make_date_pairs(2 * (num_train + num_val + num_test), seed)
    seen: set[str] = set()
    unique = []
    for pair in pool:
        if pair[0] not in seen:
            seen.add(pair[0])
            unique.append(pair)
    if len(unique) < num_train + num_val + num_test:  # pragma: no cover - the calendar is large
        raise ValueError("not enough distinct dates for the requested split sizes")
    return {
        "val": unique[:num_val],
        "test": unique[num_val : num_val + num_test],
        "train": unique[num_val + num_test : num_val + num_test + num_train],
    }


def read_dates(data: Any, seed: int) -> dict[str, list[tuple[str, str]]]:
    """The ``dates`` dataset's splits: ``data.num_examples`` training pairs (20,000 unless set),
    ``data.val_examples`` validation and as many test pairs, drawn with ``train.seed``."""
    n = data.val_examples
    return date_splits(num_train=data.num_examples or 20000, num_val=n, num_test=n, seed=seed)


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "dates": read_dates,
}
