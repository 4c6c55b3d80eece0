"""Progress bars for long loops (validation, evaluation, statistics), on a terminal only."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress(
    items: Iterable[T], desc: str, total: int | None = None, unit: str = "it"
) -> Iterator[T]:
    """``items``, with a tqdm bar on stderr when it is a terminal (nothing in logs and pipes)."""
    yield from tqdm(
        items,
        desc=desc,
        total=total,
        unit=unit,
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        leave=False,
        mininterval=0.5,
    )
