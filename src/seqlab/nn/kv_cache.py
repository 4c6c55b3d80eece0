"""The key/value cache of incremental decoding (Vaswani et al. 2017 decode one position at a
time; each attention layer keeps the keys and values of the positions decoded so far).

Notation (shapes in comments): B batch, h heads, P positions cached, C positions of storage,
d_k head width.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

#: positions a growing :class:`KVCache` allocates at a time
ROOM = 16


class _Room:
    """Preallocated key/value storage for C positions, time-major ``(C, B, h, d_k)`` so that the
    positions filled are one contiguous block; shared by the caches that view its first
    ``filled`` positions."""

    def __init__(self, key: Tensor, value: Tensor, filled: int) -> None:
        self.key, self.value, self.filled = key, value, filled  # (C, B, h, d_k) each

    @property
    def capacity(self) -> int:
        return self.key.shape[0]

    def view(self, length: int) -> KVCache:
        """The cache of the first ``length`` positions, ``(B, h, length, d_k)`` views."""
        key = self.key[:length].permute(1, 2, 0, 3)  # (B, h, P, d_k)
        return KVCache(key, self.value[:length].permute(1, 2, 0, 3), self)


@dataclass(frozen=True)
class KVCache:
    """Projected keys and values of one attention layer, split into heads.

    For self-attention during incremental decoding it holds every position seen so far and
    grows by :meth:`append`; for cross-attention it holds the projected encoder output,
    computed once by :meth:`seqlab.nn.attention.MultiHeadAttention.project_kv`.

    **Preallocated.** A cache that grows keeps its positions in storage with room for more
    (``room``, :data:`ROOM` positions at a time), time-major, so that the positions filled are
    one contiguous block: :meth:`append` writes the new positions in place instead of copying
    the old ones (``torch.cat``), and :meth:`index_select` (beam search's reorder) copies just
    the positions filled, in one pass. A step so copies the cache once (the reorder) where
    concatenating copied it twice. ``key``/``value`` are ``(B, h, P, d_k)`` views of the filled
    positions, and a cache never changes once made: only the newest cache on a storage writes
    into it; appending to an older one (two continuations of one prefix) copies.
    """

    key: Tensor  # (B, h, Tk, d_k)
    value: Tensor  # (B, h, Tk, d_k)
    room: _Room | None = field(default=None, repr=False, compare=False)

    @property
    def length(self) -> int:
        return self.key.shape[2]

    def append(self, key: Tensor, value: Tensor) -> KVCache:
        """A new cache with ``key``/``value`` ``(B, h, T, d_k)`` added after the stored ones."""
        past, new = self.length, key.shape[2]
        room = self.room
        if room is None or room.filled != past or room.capacity < past + new:
            room = self._grow(past + new, key)
        room.key[past : past + new] = key.permute(2, 0, 1, 3)  # (T, B, h, d_k)
        room.value[past : past + new] = value.permute(2, 0, 1, 3)
        room.filled = past + new
        return room.view(past + new)

    def _grow(self, needed: int, like: Tensor) -> _Room:
        """Storage for ``needed`` positions rounded up to a multiple of :data:`ROOM`, holding
        the stored ones."""
        batch, heads, past, dim = self.key.shape
        capacity = -(-needed // ROOM) * ROOM
        key = like.new_empty(capacity, batch, heads, dim)  # (C, B, h, d_k)
        value = like.new_empty(capacity, batch, heads, dim)  # (C, B, h, d_k)
        key[:past], value[:past] = self.key.permute(2, 0, 1, 3), self.value.permute(2, 0, 1, 3)
        return _Room(key, value, past)

    def index_select(self, indices: Tensor) -> KVCache:
        """Rows ``indices`` of the batch (beam search selects, repeats and permutes them)."""
        differentiable = torch.is_grad_enabled() and self.key.requires_grad
        if self.room is None or differentiable:  # (out= cannot be differentiated)
            return KVCache(self.key.index_select(0, indices), self.value.index_select(0, indices))
        past, (capacity, _, heads, dim) = self.length, self.room.key.shape
        key = self.room.key.new_empty(capacity, indices.shape[0], heads, dim)  # (C, B', h, d_k)
        value = self.room.key.new_empty(capacity, indices.shape[0], heads, dim)
        torch.index_select(self.room.key[:past], 1, indices, out=key[:past])  # contiguous
        torch.index_select(self.room.value[:past], 1, indices, out=value[:past])
        return _Room(key, value, past).view(past)
