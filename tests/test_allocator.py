"""seqlab's process settings for PyTorch's CPU allocations (:mod:`seqlab.runtime.allocator`):
freed memory kept for reuse, measured by the page faults of a fresh buffer of the same size."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seqlab import cli
from seqlab.runtime import allocator

# a buffer over glibc's largest automatic mmap threshold (32 MiB): without the settings it is
# mapped when allocated and unmapped when freed, so the next buffer faults its pages in again;
# the second is smaller, so that the freed block holds it wherever it lies in the heap
_FAULTS_OF_A_SECOND_BUFFER = """
import resource, sys
import torch
from seqlab.runtime.allocator import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
torch.set_num_threads(1)
torch.empty(48 * 2**20 // 4).fill_(1.0)  # allocated, touched, freed
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
torch.empty(40 * 2**20 // 4).fill_(1.0)
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _second_buffer(mode: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["THP_MEM_ALLOC_ENABLE"] = "0"  # 4 KiB pages: 10,240 of them in 40 MiB
    env.pop("GLIBC_TUNABLES", None)
    out = subprocess.run(
        [sys.executable, "-c", _FAULTS_OF_A_SECOND_BUFFER, mode],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    kept, faults = out.stdout.split()
    return kept, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_memory_is_reused_instead_of_faulted_in_again():
    kept, faults = _second_buffer("keep")
    if kept != "True":
        pytest.skip("not glibc: the settings change nothing here")
    _, default_faults = _second_buffer("default")
    assert default_faults >= 10_000  # every page of the fresh mapping
    assert faults < 1_000  # the freed block, reused


@pytest.mark.parametrize(
    "variable, value",
    [
        ("MALLOC_MMAP_THRESHOLD_", "65536"),
        ("MALLOC_TRIM_THRESHOLD_", "0"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0"),
    ],
)
def test_a_users_own_malloc_settings_are_kept(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    assert allocator.keep_freed_memory() is False


def test_the_command_keeps_freed_memory(monkeypatch):
    calls = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: calls.append(1) or True)
    assert cli.main(["demo", "--list"]) == 0
    assert calls == [1]
