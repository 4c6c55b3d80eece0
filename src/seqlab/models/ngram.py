"""Markov (n-gram) language models: counted, not trained (d2l.ai §9.3.1, Markov Models and n-grams).

An order-n model assumes P(x_t | x_1 … x_{t-1}) = P(x_t | x_{t-n+1} … x_{t-1}); n = 2 is the
first-order Markov chain P(x_1 … x_T) = Π P(x_t | x_{t-1}). All orders up to n are counted in
one pass over the token ids. Two smoothings give unseen n-grams probability:

- **add-k** (Laplace for k = 1): P(w | h) = (c(h w) + k) / (c(h ·) + k V), V the vocabulary size.
- **interpolated Kneser–Ney** (Chen & Goodman 1998, eq. 26): at the highest order
  P(w | h) = max(c(h w) − D, 0) / c(h ·) + D N₁₊(h ·) / c(h ·) · P(w | h'), with h' the context
  without its first token; lower orders use *continuation* counts N₁₊(· h' w) (how many distinct
  tokens precede h' w) in place of c(h' w); the unigram level interpolates with the uniform
  distribution 1 / V, so every token has probability. D = n₁ / (n₁ + 2 n₂) per order (n_r: the
  number of n-grams seen exactly r times) unless given. A context never seen backs off entirely.

Both sum to 1 over the vocabulary for every context (tested).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

Smoothing = Literal["add_k", "kneser_ney"]
Context = tuple[int, ...]


class NGramLM:
    """An order-``order`` n-gram model over ids ``0 .. vocab_size - 1``.

    Args:
        smoothing: ``add_k`` or ``kneser_ney`` (interpolated).
        k: add-k's pseudo-count.
        discount: Kneser–Ney's D for every order; None estimates it per order.
    """

    def __init__(
        self,
        order: int,
        vocab_size: int,
        smoothing: Smoothing = "kneser_ney",
        k: float = 1.0,
        discount: float | None = None,
    ) -> None:
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        if smoothing not in ("add_k", "kneser_ney"):
            raise ValueError(f"smoothing must be add_k or kneser_ney, got {smoothing!r}")
        if smoothing == "add_k" and not (k > 0 and math.isfinite(k)):
            raise ValueError(f"add-k needs a finite k > 0, got {k}")
        if discount is not None and not 0 < discount <= 1:
            raise ValueError(f"discount must be in (0, 1], got {discount}")
        self.order, self.vocab_size, self.smoothing, self.k = order, vocab_size, smoothing, k
        self.fixed_discount = discount
        # counts[m][context][w]: c(context w) for contexts of length m (m = 0 .. order - 1);
        # for Kneser–Ney, orders below the highest hold continuation counts instead
        self.counts: list[dict[Context, Counter[int]]] = []
        self.discounts: list[float] = []

    # ------------------------------------------------------------------------- counting
    def fit(self, ids: Sequence[int]) -> NGramLM:
        """Count every n-gram of order 1 … n in ``ids`` (one pass)."""
        ids = [int(i) for i in ids]
        if ids and not 0 <= min(ids) <= max(ids) < self.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.vocab_size})")
        n = self.order
        raw: list[dict[Context, Counter[int]]] = [defaultdict(Counter) for _ in range(n)]
        for t in range(len(ids)):
            for m in range(min(n, t + 1)):
                raw[m][tuple(ids[t - m : t])][ids[t]] += 1
        if self.smoothing == "kneser_ney":
            # continuation counts for the lower orders: N1+(. h w) = distinct tokens before h w
            for m in range(n - 1):
                cont: dict[Context, Counter[int]] = defaultdict(Counter)
                for longer, nexts in raw[m + 1].items():
                    for w in nexts:
                        cont[longer[1:]][w] += 1
                raw[m] = cont
        self.counts = [dict(level) for level in raw]
        self.discounts = [self._discount(level) for level in self.counts]
        return self

    def _discount(self, level: dict[Context, Counter[int]]) -> float:
        if self.fixed_discount is not None:
            return self.fixed_discount
        freq = Counter(c for nexts in level.values() for c in nexts.values())
        n1, n2 = freq.get(1, 0), freq.get(2, 0)
        return n1 / (n1 + 2 * n2) if n1 + n2 else 0.75

    def _check_fitted(self) -> None:
        if not self.counts:
            raise RuntimeError("the model has no counts: call fit(ids) first")

    # ---------------------------------------------------------------------- probabilities
    def distribution(self, context: Sequence[int]) -> Tensor:
        """P(· | context) over the vocabulary, ``(V,)`` (float64); the last n − 1 tokens count."""
        self._check_fitted()
        ctx = tuple(int(i) for i in context)[max(len(context) - (self.order - 1), 0) :]
        if self.order == 1:
            ctx = ()
        if self.smoothing == "add_k":
            return self._add_k(ctx)
        return self._kneser_ney(ctx)

    def _add_k(self, ctx: Context) -> Tensor:
        nexts = self.counts[len(ctx)].get(ctx, Counter())
        p = torch.full((self.vocab_size,), float(self.k), dtype=torch.float64)
        if nexts:
            words, counts = _as_tensors(nexts)
            p.index_add_(0, words, counts)
        return p / (sum(nexts.values()) + self.k * self.vocab_size)

    def _kneser_ney(self, ctx: Context) -> Tensor:
        if ctx:
            lower = self._kneser_ney(ctx[1:])  # (V,)
        else:
            lower = torch.full((self.vocab_size,), 1.0 / self.vocab_size, dtype=torch.float64)
        m = len(ctx)
        nexts = self.counts[m].get(ctx)
        if not nexts:  # unseen context: back off entirely
            return lower
        d = self.discounts[m]
        total = sum(nexts.values())
        p = lower * (d * len(nexts) / total)
        words, counts = _as_tensors(nexts)
        p.index_add_(0, words, (counts - d).clamp(min=0.0) / total)
        return p

    def prob(self, context: Sequence[int], token: int) -> float:
        """P(token | context)."""
        return float(self.distribution(context)[token])

    def log_likelihood(self, ids: Sequence[int], history: Sequence[int] = ()) -> tuple[float, int]:
        """Σ log P(x_t | previous n − 1 tokens) over ``ids`` (each predicted from what precedes it
        in ``history + ids``; the first token of the whole text has no prediction) and the
        number of tokens predicted."""
        self._check_fitted()
        seq = [int(i) for i in history] + [int(i) for i in ids]
        start = max(len(history), 1)
        cache: dict[Context, Tensor] = {}
        total = 0.0
        for t in range(start, len(seq)):
            ctx = tuple(seq[max(t - (self.order - 1), 0) : t]) if self.order > 1 else ()
            if ctx not in cache:
                cache[ctx] = self.distribution(ctx).log()
            total += float(cache[ctx][seq[t]])
        return total, len(seq) - start

    def perplexity(self, ids: Sequence[int], history: Sequence[int] = ()) -> float:
        """exp of the mean negative log-likelihood per predicted token."""
        ll, n = self.log_likelihood(ids, history)
        if n == 0:
            raise ValueError("perplexity needs at least one token to predict")
        return math.exp(-ll / n)

    def sample(
        self,
        prefix: Sequence[int],
        tokens: int,
        generator: torch.Generator | None = None,
        never: Sequence[int] = (),
    ) -> list[int]:
        """Continue ``prefix`` by ``tokens`` ids drawn from the model; ids in ``never`` (e.g. the
        reserved ``<unk>``, ``<pad>``, ``<bos>``) are never drawn: the others' probabilities are
        renormalised."""
        if len(set(never)) >= self.vocab_size:
            raise ValueError("every token id is excluded: nothing to sample")
        seq, out = [int(i) for i in prefix], []
        for _ in range(tokens):
            p = self.distribution(seq[-(self.order - 1) :] if self.order > 1 else [])
            if never:
                p = p.index_fill(0, torch.tensor(list(never)), 0.0)
            w = int(torch.multinomial(p.float(), 1, generator=generator))
            seq.append(w)
            out.append(w)
        return out


def _as_tensors(nexts: Counter[int]) -> tuple[Tensor, Tensor]:
    """The tokens seen after one context and their counts, as ``(K,)`` long and float64 tensors
    (each token once: adding them with ``index_add_`` is one addition per token)."""
    return (
        torch.tensor(list(nexts.keys()), dtype=torch.long),
        torch.tensor(list(nexts.values()), dtype=torch.float64),
    )
