"""Data parallelism through ``torch.distributed`` (gloo on CPU, NCCL on CUDA).

Started by ``torchrun --nproc_per_node=N -m seqlab train ...``: torchrun sets ``RANK``,
``WORLD_SIZE`` and the rendezvous variables; :func:`setup` joins the process group. Gradients are
averaged by DistributedDataParallel; rank 0 alone evaluates, logs and writes files.

**Who trains on what** (:class:`RankBatches`). Each process takes whole minibatches: with W
processes, rank r gets minibatches r, r + W, r + 2W, … of the epoch (as fairseq's sharded
iterator does), so token-budget batches with any number of rows work. Where the epoch's count
does not divide by W, the short ranks get a padding entry (a real minibatch with weight 0) so
that every process runs the same number of steps. Minibatches that carry recurrent state from
one to the next (sequential partitioning for language models) cannot be dealt out: there each
process keeps its own B / W rows of every minibatch instead, so each row's state keeps flowing.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor


def setup(device: torch.device) -> tuple[int, int]:
    """Join the process group if launched by torchrun; return ``(rank, world_size)``."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def teardown() -> None:
    """Leave the process group. Garbage holding it (a dropped DistributedDataParallel in a
    reference cycle) is collected first: a gloo thread still alive when the interpreter shuts
    down aborts the process ("terminate called without an active exception") after a run that
    finished well."""
    if dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
        gc.collect()


def is_main() -> bool:
    """Rank 0, or a single process (also after the process group is torn down)."""
    if dist.is_initialized():
        return dist.get_rank() == 0
    return os.environ.get("RANK", "0") == "0"


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def all_sum(values: list[float]) -> list[float]:
    """Sum a few numbers over all processes (identity when not distributed)."""
    if not dist.is_initialized():
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def broadcast_flag(flag: bool) -> bool:
    """Rank 0's decision, seen by everyone."""
    if not dist.is_initialized():
        return flag
    t = torch.tensor([int(flag)])
    dist.broadcast(t, src=0)
    return bool(t.item())


def same_on_all_ranks(value: Any) -> Any:
    """Rank 0's value (any picklable object), seen by everyone: one decision for the whole run,
    even where the nodes differ (e.g. one has native bf16 and another has not)."""
    if not dist.is_initialized():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class RankBatches:
    """This process's share of an epoch of minibatches, as ``(batch, weight)`` pairs.

    ``weight`` is 1 for real work and 0 for padding (see the module docstring). ``len()`` is the
    same on every process: ceil(N / W) for dealt-out batches, N for row-split ones.

    Raises:
        ValueError: row-split batches whose row count does not divide by W.
    """

    def __init__(self, batches: Any, rank: int, world: int) -> None:
        self.batches, self.rank, self.world = batches, rank, world
        self.split_rows = world > 1 and bool(getattr(batches, "carries_state", False))

    @property
    def carries_state(self) -> bool:
        return bool(getattr(self.batches, "carries_state", False))

    def set_epoch(self, epoch: int) -> None:
        self.batches.set_epoch(epoch)

    def __len__(self) -> int:
        n = len(self.batches)
        return n if self.split_rows or self.world == 1 else -(-n // self.world)

    def __iter__(self) -> Iterator[tuple[Any, float]]:
        if self.world == 1:
            for batch in self.batches:
                yield batch, 1.0
            return
        if self.split_rows:
            for batch in self.batches:
                yield rows_of(batch, self.rank, self.world), 1.0
            return
        first = None
        for index, batch in enumerate(self.batches):
            first = batch if first is None else first
            if index % self.world == self.rank:
                yield batch, 1.0
        n = len(self.batches)
        if n % self.world and self.rank >= n % self.world and first is not None:
            yield first, 0.0  # padding: every process runs the same number of steps


def rows_of(batch: Any, rank: int, world: int) -> Any:
    """This process's rows of a minibatch: dimension 0 of every tensor, split evenly."""

    def cut(x: Any) -> Any:
        if isinstance(x, Tensor) and x.dim() > 0:
            if x.shape[0] % world:
                raise ValueError(
                    f"a minibatch of {x.shape[0]} rows does not split over {world} processes; "
                    f"make data.batch_size a multiple of {world}"
                )
            n = x.shape[0] // world
            return x[rank * n : (rank + 1) * n]
        if isinstance(x, tuple | list):
            return type(x)(cut(v) for v in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return dataclasses.replace(
                x, **{f.name: cut(getattr(x, f.name)) for f in dataclasses.fields(x)}
            )
        return x

    return cut(batch)


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` (tensors, or tuples or dataclasses of them) on ``device``. To a GPU each tensor
    goes through pinned memory, so that the copy is queued without waiting (a copy from pageable
    memory blocks the host until it is done)."""
    if isinstance(batch, Tensor):
        if device.type == "cuda" and batch.device.type == "cpu" and not batch.is_pinned():
            batch = batch.pin_memory()
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple | list):
        return type(batch)(to_device(v, device) for v in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(
            batch,
            **{
                f.name: to_device(getattr(batch, f.name), device) for f in dataclasses.fields(batch)
            },
        )
    return batch
