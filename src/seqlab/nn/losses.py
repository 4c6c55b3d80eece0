"""Losses over padded sequences."""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: elements of logits per piece of the fused loss (rows × V): a piece's fp32 copy, 2 MiB, stays
#: in cache; a small vocabulary takes all its rows in one piece
PIECE_ELEMENTS = 1 << 19


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy with label smoothing over selected rows of ``logits``, its gradient
    computed in the same pass, piece by piece.

    For logits z of one row, target y, ε smoothing over V classes and lse = log Σ_v exp z_v:
    ``loss = (1 - ε) (lse - z_y) + ε (lse - mean_v z_v)`` and
    ``∂loss/∂z = softmax(z) - (1 - ε) onehot(y) - ε / V`` (Szegedy et al. 2016, §7). One pass
    over a cache-sized piece replaces the several passes over the whole ``(N, V)`` array that
    ``log_softmax``, the smoothing sum and their backward take; the gradient is kept in the
    logits' dtype (where the cast back would put it anyway).
    """

    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor, rows: Tensor, smoothing: float) -> Tensor:
        # logits (N, V), targets (N,), rows (n,): the rows that count
        vocab = logits.shape[1]
        need_grad = ctx.needs_input_grad[0]
        grad = torch.zeros_like(logits) if need_grad else None  # (N, V)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        piece = max(1, PIECE_ELEMENTS // vocab)
        if logits.device.type != "cpu":  # pieces fit a CPU's cache; on CUDA, one launch of each
            piece = max(1, rows.numel())
        for start in range(0, rows.numel(), piece):
            idx = rows[start : start + piece]  # (C,)
            z = logits.index_select(0, idx).float()  # (C, V)
            y = targets.index_select(0, idx)[:, None]  # (C, 1)
            z -= z.amax(-1, keepdim=True)  # shifted: exp cannot overflow
            z_y, z_mean = z.gather(1, y), z.mean(-1, keepdim=True)  # (C, 1)
            z.exp_()
            norm = z.sum(-1, keepdim=True)  # (C, 1)
            lse = norm.log()
            total += ((1.0 - smoothing) * (lse - z_y) + smoothing * (lse - z_mean)).sum()
            if grad is not None:
                z.div_(norm).sub_(smoothing / vocab)  # softmax - ε/V
                z.scatter_add_(1, y, torch.full_like(z_y, smoothing - 1.0))
                grad.index_copy_(0, idx, z.to(grad.dtype))
        count = rows.numel()
        ctx.count, ctx.spent = count, False
        if grad is not None:
            ctx.save_for_backward(grad)
        return total / count  # 0 rows: nan, as F.cross_entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        if ctx.spent:  # the gradient is scaled in place: a second backward would be wrong
            raise RuntimeError("masked_cross_entropy: backward can run once per loss")
        ctx.spent = True
        (grad,) = ctx.saved_tensors
        return grad.mul_(grad_output / ctx.count), None, None, None


def masked_cross_entropy(
    logits: Tensor, targets: Tensor, lengths: Tensor, label_smoothing: float = 0.0
) -> tuple[Tensor, int]:
    """Mean token cross-entropy over the first ``lengths[b]`` positions of each row.

    Positions at or after a row's length are ignored, so neither their logits nor their targets
    affect the loss, and they cost nothing. With ``label_smoothing`` ε the target distribution
    is (1 - ε) one-hot + ε uniform over V (Szegedy et al. 2016), as in ``F.cross_entropy``, whose
    values and gradients it reproduces (computed in fp32 whatever the logits' dtype).

    Shape:
        logits ``(B, T, V)``, targets ``(B, T)``, lengths ``(B,)`` -> scalar loss, and the number of
        tokens it averages over.
    """
    steps = torch.arange(targets.shape[1], device=targets.device)  # (T,)
    valid = steps[None, :] < lengths[:, None].to(targets.device)  # (B, T)
    rows = valid.flatten().nonzero().squeeze(1)  # (n,)
    vocab = logits.shape[-1]
    picked = targets.flatten().index_select(0, rows)
    if picked.numel():
        low, high = torch.stack([picked.min(), picked.max()]).tolist()  # one read of the device
    if picked.numel() and not (low >= 0 and high < vocab):
        raise IndexError(f"target ids must lie in [0, {vocab}), got ids from {low} to {high}")
    loss = _SmoothedCrossEntropy.apply(
        logits.flatten(0, 1), targets.flatten(), rows, float(label_smoothing)
    )
    return loss, int(rows.numel())


def perplexity(loss: float) -> float:
    """exp(loss) of a mean per-token cross-entropy in nats (d2l.ai §9.3.2), in double precision:
    ``inf`` once the loss passes ~709.78 nats (the largest double), never a capped value."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf
