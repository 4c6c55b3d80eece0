"""A plain-PyTorch, nanoGPT-style reference for character-level Tiny Shakespeare on a CPU.

Written from scratch after nanoGPT's ``model.py`` / ``train.py`` (Karpathy), with the published
CPU recipe for ``config/train_shakespeare_char.py``::

    --device=cpu --compile=False --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
    --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0

i.e. GPT with 4 layers, 4 heads, n_embd 128, context 64, no biases, GELU MLP (4x), learned
positions, tied embedding/head; AdamW (lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on matrices
only), 100 warm-up steps then cosine decay to 1e-4 at step 2000, gradient clipping at 1.0, fp32,
12 random windows of 64 characters per step (nanoGPT's ``get_batch``).

Comparison with seqlab, apples to apples:

- **data**: the reference trains and validates on seqlab's own corpus (``build_lm_corpus`` with
  ``dataset: tinyshakespeare, tokenizer: char, val_fraction: 0.1``): the same split (the last 10%
  of the characters) and the same character ids. nanoGPT's own split (``data[:int(0.9 n)]``)
  differs from it by at most one character.
- **loss**: :func:`validation_loss` is seqlab's :func:`seqlab.language_modeling.evaluate_lm` over
  the *whole* validation split (every character predicted once, in windows of ``block`` characters
  that each start without context), in fp32, nats per character. nanoGPT's printed number is a
  mean over 200 (or 20) random windows of the same length, an estimate of the same quantity.
- **time**: ``wall_s`` is the training loop only (batches, forward, backward, optimizer), without
  nanoGPT's periodic evaluations (``eval_interval`` 250) and without the final evaluation.

Notation (shapes in comments): B batch, T context length, d = n_embd, h heads, d_k = d / h,
V vocabulary.

Run: ``SEQLAB_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/nanogpt_reference.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.data.lm_corpus import LMCorpus, build_lm_corpus, corpus_path, read_text
from seqlab.tasks.language_modeling import evaluate_lm


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)  # 3 x (B, T, d)
        q = q.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)  # (B, h, T, d_k)
        k = k.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)  # (B, h, T, d_k)
        v = v.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)  # (B, h, T, d_k)
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )  # (B, h, T, d_k)
        y = y.transpose(1, 2).contiguous().view(b, t, d)  # (B, T, d)
        return self.resid_dropout(self.c_proj(y))  # (B, T, d)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))  # (B, T, d)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))  # (B, T, d)
        return x + self.mlp(self.ln_2(x))  # (B, T, d)


class GPT(nn.Module):
    """nanoGPT's GPT. ``forward`` returns ``(logits, None)``, the seqlab LM interface."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: Tensor, cache: None = None) -> tuple[Tensor, None]:
        """Shape: idx ``(B, T)`` -> logits ``(B, T, V)``."""
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)  # (T,)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, d)
        for block in self.h:
            x = block(x)  # (B, T, d)
        return self.lm_head(self.ln_f(x)), None  # (B, T, V)

    def configure_optimizer(
        self, weight_decay: float, lr: float, betas: tuple[float, float]
    ) -> torch.optim.AdamW:
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas)


def get_lr(it: int, lr: float, min_lr: float, warmup: int, decay_iters: int) -> float:
    """nanoGPT's schedule: linear warm-up, cosine decay to ``min_lr`` at ``decay_iters``."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def get_batch(data: Tensor, block: int, batch: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """nanoGPT's ``get_batch``: ``batch`` random windows of ``block`` characters.

    Shape: data ``(N,)`` -> x, y ``(B, T)``.
    """
    ix = torch.randint(len(data) - block, (batch,), generator=gen)  # (B,)
    idx = ix[:, None] + torch.arange(block)  # (B, T)
    return data[idx], data[idx + 1]


def shakespeare_corpus() -> LMCorpus:
    """seqlab's character corpus of Tiny Shakespeare (last 10% of the characters = validation)."""
    return build_lm_corpus(
        read_text(corpus_path("tinyshakespeare")), tokenizer="char", val_fraction=0.1
    )


def validation_loss(model: nn.Module, corpus: LMCorpus, window: int, batch_size: int = 64) -> float:
    """Mean cross-entropy (nats/char) over the whole validation split, fp32, seqlab's evaluator.

    ``window`` is the number of characters per evaluation window (the model's context length);
    the batch size (rows of the split) barely matters; use the same one for every model compared.
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return evaluate_lm(model, corpus.val, batch_size, window)["val_loss"]
    finally:
        model.train(was_training)


def train_reference(
    seconds_budget: float | None = None,
    iters: int = 2000,
    seed: int = 0,
    corpus: LMCorpus | None = None,
    threads: int | None = None,
    log_every: int = 0,
) -> dict[str, float]:
    """Train the reference GPT; return its validation loss, training wall time and iterations.

    Args:
        seconds_budget: stop early once the training loop has run this long (None: no limit).
        iters: nanoGPT's ``max_iters`` (also its ``lr_decay_iters``).
        corpus: seqlab's Tiny Shakespeare corpus (loaded when not given).
        threads: ``torch.set_num_threads`` for the run (None: leave as it is).
        log_every: print the training loss every this many iterations (0: quiet).

    Returns:
        ``val_loss`` (nats/char over the whole validation split, windows of 64), ``wall_s``
        (training loop only), ``iters`` (steps taken), ``eval_s`` (the final evaluation).
    """
    if threads:
        torch.set_num_threads(threads)
    corpus = corpus or shakespeare_corpus()
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=len(corpus.vocab))
    model = GPT(cfg)
    lr, min_lr, warmup, batch = 1e-3, 1e-4, 100, 12
    optimizer = model.configure_optimizer(weight_decay=0.1, lr=lr, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    start = time.perf_counter()
    it = 0
    while it < iters:
        for group in optimizer.param_groups:
            group["lr"] = get_lr(it, lr, min_lr, warmup, iters)
        x, y = get_batch(corpus.train, cfg.block_size, batch, gen)  # (B, T) each
        logits, _ = model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        it += 1
        if log_every and it % log_every == 0:
            print(f"iter {it}: loss {loss.item():.4f}  {time.perf_counter() - start:.1f} s")
        if seconds_budget is not None and time.perf_counter() - start > seconds_budget:
            break
    wall = time.perf_counter() - start
    eval_start = time.perf_counter()
    val = validation_loss(model, corpus, cfg.block_size)
    return {
        "val_loss": val,
        "wall_s": wall,
        "iters": it,
        "eval_s": time.perf_counter() - eval_start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=None, help="training time budget")
    args = parser.parse_args()
    result = train_reference(
        args.seconds, args.iters, args.seed, threads=args.threads, log_every=250
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
