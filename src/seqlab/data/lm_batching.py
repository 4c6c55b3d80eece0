"""Language-model minibatches from one long token-id sequence (d2l.ai §9.3.3, Partitioning
Sequences; both iterators below are those of d2l 0.17 §8.3.4, Reading Long Sequence Data).

Two ways to cut a corpus of ids into ``(X, Y)`` minibatches of shape ``(B, T)``, where ``Y`` is
``X`` shifted left by one token:

- **Random sampling** (随机采样): drop a random number of leading tokens, offset ∈ [0, T), cut the
  rest into non-overlapping subsequences of length T and visit them in shuffled order. Adjacent
  minibatches are unrelated, so the hidden state is re-initialised for every minibatch.
- **Sequential partitioning** (顺序分区): drop a random offset ∈ [0, T), split the rest into B
  contiguous rows and walk along them T tokens at a time. Row i of minibatch k+1 continues exactly
  where row i of minibatch k ended, so the hidden state can be carried across minibatches
  (detached: truncated BPTT).

Both are seeded: the same (seed, epoch) gives the same minibatches.

Notation: B batch size, T number of steps (``num_steps``), N corpus length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

import torch
from torch import Tensor

Sampling = Literal["random", "sequential"]


def _as_tensor(corpus: Sequence[int] | Tensor) -> Tensor:
    return corpus if isinstance(corpus, Tensor) else torch.tensor(list(corpus), dtype=torch.long)


def random_sampling(
    corpus: Sequence[int] | Tensor, batch_size: int, num_steps: int, generator: torch.Generator
) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield ``(X, Y)`` minibatches of randomly ordered, non-overlapping subsequences.

    Shape:
        X, Y: (B, T)
    """
    corpus = _as_tensor(corpus)
    offset = int(torch.randint(0, num_steps, (1,), generator=generator))
    corpus = corpus[offset:]  # (N - offset,)
    num_subseqs = (len(corpus) - 1) // num_steps  # the last token only ever appears in Y
    starts = torch.arange(0, num_subseqs * num_steps, num_steps)
    starts = starts[torch.randperm(num_subseqs, generator=generator)]
    steps = torch.arange(num_steps)
    for i in range(num_subseqs // batch_size):
        idx = starts[i * batch_size : (i + 1) * batch_size, None] + steps  # (B, T)
        yield corpus[idx], corpus[idx + 1]


def sequential_partitioning(
    corpus: Sequence[int] | Tensor, batch_size: int, num_steps: int, generator: torch.Generator
) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield ``(X, Y)`` minibatches whose rows continue those of the previous minibatch.

    Shape:
        X, Y: (B, T)
    """
    corpus = _as_tensor(corpus)
    offset = int(torch.randint(0, num_steps, (1,), generator=generator))
    num_tokens = ((len(corpus) - offset - 1) // batch_size) * batch_size
    xs = corpus[offset : offset + num_tokens].reshape(batch_size, -1)  # (B, N')
    ys = corpus[offset + 1 : offset + 1 + num_tokens].reshape(batch_size, -1)  # (B, N')
    for i in range(xs.shape[1] // num_steps):
        cols = slice(i * num_steps, (i + 1) * num_steps)
        yield xs[:, cols], ys[:, cols]


def num_batches(corpus_len: int, batch_size: int, num_steps: int, sampling: Sampling) -> int:
    """Minibatches per epoch in the worst case over offsets (the offset can only remove some)."""
    usable = corpus_len - num_steps  # after the largest offset, num_steps - 1, and the shift by one
    if sampling == "random":
        return max(usable // num_steps, 0) // batch_size
    return max((usable // batch_size) // num_steps, 0)


class LMBatches:
    """Epoch-aware iterable of ``(X, Y)`` minibatches over a token-id corpus.

    Args:
        corpus: token ids of the whole split.
        batch_size, num_steps: B and T.
        sampling: ``"random"`` or ``"sequential"``.
        seed: with the epoch (see :meth:`set_epoch`) it fixes offsets and order.

    ``carries_state`` tells a trainer whether the hidden state may flow between minibatches.
    """

    def __init__(
        self,
        corpus: Sequence[int] | Tensor,
        batch_size: int,
        num_steps: int,
        sampling: Sampling = "sequential",
        seed: int = 0,
    ) -> None:
        if sampling not in ("random", "sequential"):
            raise ValueError(f"sampling must be 'random' or 'sequential', got {sampling!r}")
        self.corpus = _as_tensor(corpus)
        if len(self.corpus) < batch_size * num_steps + num_steps:
            raise ValueError(
                f"corpus of {len(self.corpus)} tokens is too short for batch_size={batch_size} "
                f"× num_steps={num_steps}"
            )
        self.batch_size, self.num_steps, self.sampling, self.seed = (
            batch_size,
            num_steps,
            sampling,
            seed,
        )
        self.epoch = 0

    @property
    def carries_state(self) -> bool:
        return self.sampling == "sequential"

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return num_batches(len(self.corpus), self.batch_size, self.num_steps, self.sampling)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        make = random_sampling if self.sampling == "random" else sequential_partitioning
        # Both may yield one more batch than len() for small offsets; len() is the guaranteed count.
        for i, batch in enumerate(make(self.corpus, self.batch_size, self.num_steps, gen)):
            if i >= len(self):
                return
            yield batch
