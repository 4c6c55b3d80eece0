"""Fewer page faults for PyTorch's large CPU allocations, asked for by seqlab's own entry points
only: transparent huge pages, and freed memory kept for reuse.

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

**Freed memory kept** (:func:`keep_freed_memory`). Huge pages make fewer faults, but each fresh
buffer is still zero-filled by the kernel: glibc's ``malloc`` hands large freed blocks back to the
operating system (blocks over its mmap threshold are unmapped when freed, and free memory at the
top of the heap is trimmed), so the next step's tensors of the same sizes fault in anew. A beam-5
decoding pass over 512 sentences on one thread (``benchmarks/page_faults.py``; 2-core Intel Xeon,
fp32): 272,328 minor faults and 0.70 s in the kernel, 9.30 s in all; with huge pages 36,572 and
0.32 s (9.02 s); with huge pages and freed memory kept 2,821 and 0.10 s (7.74 s). Raising both
thresholds (``mallopt``: ``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``) keeps such blocks in the
process's heap, reused from one step to the next, as PyTorch's CUDA allocator keeps device
memory: the process holds its peak memory instead of returning it between steps. glibc only
(elsewhere nothing changes); a user's own malloc settings (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``glibc.malloc`` tunables) are kept. :func:`seqlab.cli.main` calls
it; a program using the library may call it itself.
"""

from __future__ import annotations

import ctypes
import os

#: the variable PyTorch's CPU allocator reads
VARIABLE = "THP_MEM_ALLOC_ENABLE"


def use_huge_pages() -> None:
    """Ask PyTorch's CPU allocator for transparent huge pages, unless the environment already says
    (call it before the process allocates its first tensor; later it changes nothing)."""
    os.environ.setdefault(VARIABLE, "1")


#: blocks smaller than this come from the heap and are reused once freed (glibc's default: 128 KiB,
#: raised by itself up to 32 MiB as large blocks are freed)
MMAP_THRESHOLD = 256 * 2**20
#: free memory at the top of the heap kept before any is returned to the system (default 128 KiB)
TRIM_THRESHOLD = 512 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_memory() -> bool:
    """Keep freed blocks under :data:`MMAP_THRESHOLD` in the process's heap for reuse, unless the
    environment sets glibc's malloc itself; returns whether the thresholds were set (False off
    glibc). Process-wide and lasting: call it once, where the process starts."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if any(name in os.environ for name in _USER_SETTINGS) or "glibc.malloc." in tunables:
        return False
    if os.name != "posix":
        return False
    libc = ctypes.CDLL(None)  # the C library the process already runs on (no search for it)
    if not hasattr(libc, "gnu_get_libc_version"):  # mallopt is glibc's (musl's does nothing)
        return False
    return bool(
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
