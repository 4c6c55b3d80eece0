"""Transparent huge pages for PyTorch's large CPU allocations, asked for by seqlab's own entry
points only.

A training step's largest tensors (the (N, V) logits and their gradient) are fresh allocations;
on 4 KiB pages the kernel zero-fills them page by page at first touch, which costs more than the
arithmetic on them. PyTorch's CPU allocator (``c10/core/alloc_cpu.cpp``) asks the kernel for huge
pages (``madvise``) for buffers of 2 MiB and more when ``THP_MEM_ALLOC_ENABLE=1``; it reads the
variable once, at the process's first CPU tensor allocation (not at ``import torch``: set after
the import and before any tensor, it still takes effect; set after the first tensor, it does
not). Measured on Linux with ``madvise`` THP: a 64 MiB tensor gets 62 MiB of huge pages when the
variable is set before the first allocation, none when it is set after.

So the variable is set where seqlab's process starts, by :func:`seqlab.cli.main` (``seqlab train``
and every other command, ``python -m seqlab`` too), before any command runs: ``import seqlab``
sets nothing in the environment of a program that uses the library. A user's own value (``0``)
is kept.
"""

from __future__ import annotations

import os

#: the variable PyTorch's CPU allocator reads
VARIABLE = "THP_MEM_ALLOC_ENABLE"


def use_huge_pages() -> None:
    """Ask PyTorch's CPU allocator for transparent huge pages, unless the environment already says
    (call it before the process allocates its first tensor; later it changes nothing)."""
    os.environ.setdefault(VARIABLE, "1")
