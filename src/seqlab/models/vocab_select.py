"""The searches' choices over a whole vocabulary, in few vectorised passes over the scores.

Each decoding step of a search scores R rows over V tokens (a few thousand: 640 × 8,000 for 128
sentences in a beam of 5) and needs only the best few per row or per sentence, and the
log-normaliser of each row. ``torch.topk`` and ``torch.max(dim=...)`` over such rows cost 4–10×
one pass of ``amax`` on a CPU (each row is copied and partially sorted; 640 × 8,000 scores on one
core of an Intel Xeon, ``benchmarks/vocab_select.py``), so the best are found in two stages:

1. the largest score of each group of :data:`GROUP` consecutive tokens, one vectorised pass;
2. the best k groups (a top-k over R × V / 64 maxima), then the best k among their k · 64 tokens.

Exact: each of the best k tokens lies in one of the k groups with the largest maxima. If its
group were not among them, each of those k groups would hold a token scoring at least as much
(its maximum), so k tokens would score at least as much as it. Equal scores may pick another of
the equal tokens than ``torch.topk`` would; the values chosen are the same.

Notation (shapes in comments): R rows, V vocabulary, G = ceil(V / GROUP) groups, B sentences,
K rows per sentence.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: consecutive tokens per group of the two-stage selection
GROUP = 64
#: |logit| below which exp needs no shift: exp(60) · 10⁸ tokens stays far below fp32's maximum
EXP_SAFE = 60.0


def group_max(logits: Tensor) -> Tensor:
    """The largest score in each group of :data:`GROUP` consecutive tokens (the last group holds
    the V mod GROUP left over, if any).

    Shape:
        logits ``(R, V)`` -> ``(R, G)``.
    """
    rows, vocab = logits.shape
    whole = vocab // GROUP * GROUP
    maxima = logits[:, :whole].view(rows, -1, GROUP).amax(dim=2)  # (R, V // GROUP)
    if whole < vocab:
        maxima = torch.cat([maxima, logits[:, whole:].amax(dim=1, keepdim=True)], dim=1)
    return maxima  # (R, G)


def group_columns(logits: Tensor, rows: Tensor, groups: Tensor) -> tuple[Tensor, Tensor]:
    """The scores and token ids of whole groups: group ``groups[i, j]`` of row ``rows[i, j]``.
    Columns past the vocabulary (in a short last group) score -inf.

    Shape:
        logits ``(R, V)``, rows and groups ``(N, M)`` -> scores and tokens ``(N, M · GROUP)``.
    """
    vocab = logits.shape[1]
    columns = groups[..., None] * GROUP + torch.arange(GROUP, device=logits.device)  # (N, M, g)
    tokens = columns.clamp(max=vocab - 1)  # (N, M, g)
    scores = logits.reshape(-1).take(rows[..., None] * vocab + tokens)  # (N, M, g)
    if vocab % GROUP:  # a short last group
        scores = scores.masked_fill(columns >= vocab, -math.inf)
    return scores.flatten(1), tokens.flatten(1)  # (N, M·g) each


def log_normaliser(logits: Tensor, top: Tensor, out: Tensor | None = None) -> Tensor:
    """log Σ_v exp(logits_v) of every row (the normaliser of the log-softmax), given each row's
    largest score ``top`` (the searches have it from :func:`group_max`). Two passes over the
    scores: ``exp`` into ``out`` (None: into ``logits`` itself, which is then overwritten) and
    the sum; faster on a CPU than ``log_softmax``, of which the searches need only a few
    entries. Rows whose largest score is within ±:data:`EXP_SAFE` need no shift before ``exp``
    (no overflow, and the largest term no underflow), which saves a pass.

    Shape:
        logits ``(R, V)``, top ``(R, 1)``, out ``(R, V)`` -> ``(R, 1)``.
    """
    out = logits if out is None else out
    if bool(top.abs().max() < EXP_SAFE):
        return torch.exp(logits, out=out).sum(dim=-1, keepdim=True).log_()  # (R, 1)
    shifted = torch.sub(logits, top, out=out).exp_()  # (R, V)
    return shifted.sum(dim=-1, keepdim=True).log_().add_(top)  # (R, 1)


def best_tokens(logits: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Each row's best token (the first, as ``argmax``, where several score alike), its score,
    and the groups' maxima (:func:`group_max`).

    Shape:
        logits ``(R, V)`` -> tokens ``(R, 1)``, scores ``(R, 1)``, maxima ``(R, G)``.
    """
    maxima = group_max(logits)  # (R, G)
    top, group = maxima.max(dim=1, keepdim=True)  # (R, 1) each: the first group holding it
    rows = torch.arange(logits.shape[0], device=logits.device)[:, None]  # (R, 1)
    scores, tokens = group_columns(logits, rows, group)  # (R, g)
    return tokens.gather(1, scores.argmax(dim=1, keepdim=True)), top, maxima


def best_extensions(
    logits: Tensor, offsets: Tensor, maxima: Tensor, per_block: int, k: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The ``k`` best (row, token) pairs of each block of ``per_block`` consecutive rows (the
    beams of one sentence), by ``logits[r, v] + offsets[r]``, best first. Where a block holds
    fewer than k pairs, the rest score -inf.

    Shape:
        logits ``(B · K, V)``, offsets ``(B · K, 1)``, maxima ``(B · K, G)`` (:func:`group_max`)
        -> scores, rows, tokens ``(B, k)``.
    """
    num_groups = maxima.shape[1]
    blocks = maxima.shape[0] // per_block
    shifted = (maxima + offsets).view(blocks, per_block * num_groups)  # (B, K·G)
    _, picked = shifted.topk(min(k, shifted.shape[1]), dim=1)  # (B, m) best groups
    base = torch.arange(blocks, device=logits.device)[:, None] * per_block  # (B, 1)
    rows = base + picked // num_groups  # (B, m)
    scores, tokens = group_columns(logits, rows, picked % num_groups)  # (B, m·g)
    scores = (scores.view(*rows.shape, GROUP) + offsets.view(-1)[rows][..., None]).flatten(1)
    if scores.shape[1] < k:  # fewer pairs than k (a tiny vocabulary): the rest at -inf
        missing = k - scores.shape[1]
        scores = torch.nn.functional.pad(scores, (0, missing), value=-math.inf)
        tokens = torch.nn.functional.pad(tokens, (0, missing))
        rows = torch.cat([rows, base.expand(-1, -(-missing // GROUP))], dim=1)
    best, where = scores.topk(k, dim=1)  # (B, k)
    return best, rows.gather(1, where // GROUP), tokens.gather(1, where)
