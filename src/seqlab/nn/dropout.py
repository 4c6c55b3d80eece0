"""Dropout (Srivastava et al. 2014, §2), inverted as in every modern framework."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Dropout(nn.Module):
    """In training, zero each element with probability ``p`` and scale the rest by 1 / (1 - p),
    so that expectations are unchanged; in eval mode, the identity.

    The function of ``nn.Dropout``, with the mask drawn as uniform numbers compared with ``p``
    (``torch.rand``) instead of by PyTorch's Bernoulli sampler, which on a CPU takes several times
    as long: a Transformer's dropouts were the largest cost of its training step after the matrix
    products. The mask and the scale are one tensor, so backward is one product.

    Shape: any ``(*)`` -> the same.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return x * 0.0
        uniform = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
        keep = torch.rand(x.shape, dtype=uniform, device=x.device).ge_(self.p)  # 1.0 kept, 0.0 not
        return x * keep.mul_(1.0 / (1.0 - self.p)).to(x.dtype)  # (*)

    def extra_repr(self) -> str:
        return f"p={self.p}"
