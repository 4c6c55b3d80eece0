"""Data parallelism through ``torch.distributed`` (gloo on CPU, NCCL on CUDA).

Started by ``torchrun --nproc_per_node=N -m seqlab train ...``: torchrun sets ``RANK``,
``WORLD_SIZE`` and the rendezvous variables; :func:`setup` joins the process group. Every
process sees the same global minibatch and keeps its own slice of the rows (:func:`shard`);
gradients are averaged by DistributedDataParallel. Rank 0 alone logs and writes files.
"""

from __future__ import annotations

import dataclasses
import os
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
    if dist.is_initialized():
        dist.destroy_process_group()


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


def shard(batch: Any, rank: int, world: int) -> Any:
    """This process's rows of a global minibatch: dimension 0 of every tensor, split evenly."""
    if world == 1:
        return batch

    def cut(x: Any) -> Any:
        if isinstance(x, Tensor) and x.dim() > 0:
            if x.shape[0] % world:
                raise ValueError(
                    f"batch of {x.shape[0]} rows does not split over {world} processes"
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
    if isinstance(batch, Tensor):
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
