"""Progress bars for long loops (validation, evaluation, statistics), on a terminal only.

A caller whose standard error is a log rather than a person's terminal (the server's workers,
:mod:`seqlab.serve`) turns them off for a block with :func:`no_progress`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")

#: set inside :func:`no_progress` (per thread and per asyncio task, as every context variable)
_OFF: ContextVar[bool] = ContextVar("seqlab_progress_off", default=False)


@contextmanager
def no_progress() -> Iterator[None]:
    """Show no progress bar inside this block, whatever standard error is. The setting is a
    context variable: it holds for the thread (or asyncio task) that enters the block, never for
    other threads."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


def progress(
    items: Iterable[T], desc: str, total: int | None = None, unit: str = "it"
) -> Iterator[T]:
    """``items``, with a tqdm bar on stderr when it is a terminal (nothing in logs and pipes, and
    nothing inside :func:`no_progress`). Without a bar no tqdm is built: its constructor walks
    every bar alive, a cost a server's worker would pay per batch."""
    if _OFF.get() or not sys.stderr.isatty():
        yield from items
        return
    yield from tqdm(
        items,
        desc=desc,
        total=total,
        unit=unit,
        file=sys.stderr,
        leave=False,
        mininterval=0.5,
    )
