"""Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words"; d2l.ai §11.8).

An image ``(C, H, W)`` is cut into N = HW / P² patches of P×P pixels; each flattened patch
``x_p ∈ R^{P²C}`` is mapped linearly to the model width (eq. 1: ``z_0 = [x_class; x_p¹E; …;
x_pᴺE] + E_pos``). A strided P×P convolution with stride P computes exactly that linear map
(:func:`patchify` + a linear layer gives the same numbers; tested). A learned class token is
prepended, learned position embeddings added, then L pre-norm encoder blocks with GELU MLPs
(eqs. 2–3), a final LayerNorm, and a linear head on the class token's output (eq. 4).

``model.positions`` (:mod:`seqlab.nn.attention_positions`) may replace the learned embeddings
(the default, the paper's): ``sinusoidal`` adds a fixed table; ``rope``, ``alibi`` and
``t5_bias`` act in every layer's self-attention instead. All of them number the 1 + N tokens in
one dimension, the class token at 0 and the patches row by row (raster order), as the paper's 1-D
embeddings do (§3.1; its Appendix D.4 found 2-D-aware ones no better): a patch's right-hand
neighbour is 1 away, the one below it w (the grid's width) away. ``none`` is refused: a
bidirectional encoder without positions cannot tell the patches' order.

The image may be rectangular (``image_shape``): the audio classifier (:mod:`seqlab.models.audio`)
reads a log-mel spectrogram as a one-channel ``n_mels × frames`` image, as the Audio Spectrogram
Transformer does (Gong et al. 2021, "AST"; its patches overlap, these do not). An image padded on
the right says how many of its ``columns`` are real, and the patches wholly past them are masked
as keys in every layer, so they never reach the class token.

Where ViT stands against convolutions (Dosovitskiy et al. 2021, §3.1 and §4.3): a convolution
builds in locality and translation equivariance; self-attention must learn them from data, so
with little data CNNs win and with much data ViT wins (``seqlab demo vit-vs-cnn`` measures it on
MNIST).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import ViTConfig
from seqlab.nn.attention_positions import AttentionPositions, relative_positions_for
from seqlab.nn.positional_encoding import sinusoidal_table
from seqlab.nn.transformer_layers import EncoderBlock


def patchify(images: Tensor, patch: int) -> Tensor:
    """Flattened non-overlapping patches, row by row, each as (channel, row, column).

    Shape: ``(B, C, H, W) -> (B, N, C·P·P)`` with ``N = (H/P)·(W/P)``.
    """
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)  # (B, C, h, P, w, P)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, (h // patch) * (w // patch), c * patch * patch)


class PatchEmbedding(nn.Module):
    """The linear projection E of flattened P×P patches, as a P×P convolution with stride P."""

    def __init__(self, channels: int, d_model: int, patch: int):
        super().__init__()
        self.patch = patch
        self.proj = nn.Conv2d(channels, d_model, kernel_size=patch, stride=patch)

    def forward(self, images: Tensor) -> Tensor:
        """Shape: ``(B, C, H, W) -> (B, N, d)``."""
        return self.proj(images).flatten(2).transpose(1, 2)  # (B, N, d)


class VisionTransformer(nn.Module):
    """Images ``(B, C, H, W)`` → class logits ``(B, C_out)``; ``image_shape`` ``(C, H, W)``
    (both sides multiples of the patch size) replaces the config's square image.

    ``pos_embed`` ``(1, 1 + N, d)``: the learned embeddings (a parameter, as in every checkpoint
    before ``cfg.positions``), the fixed sinusoidal table (not saved) or None; ``relative``: the
    rotation or bias of a relative scheme, over the same 1 + N positions, or None.
    """

    def __init__(
        self, num_classes: int, cfg: ViTConfig, *, image_shape: tuple[int, int, int] | None = None
    ):
        super().__init__()
        d = cfg.d_model
        assert d is not None and cfg.num_heads and cfg.num_layers and cfg.d_ff
        c, h, w = image_shape or (cfg.channels, cfg.image_size, cfg.image_size)
        if h % cfg.patch_size or w % cfg.patch_size:
            raise ValueError(f"image {h}x{w} is not cut into patches of {cfg.patch_size}")
        self.image_shape, self.channels, self.patch = (c, h, w), c, cfg.patch_size
        self.grid = (h // cfg.patch_size, w // cfg.patch_size)  # patches: rows, columns
        self.num_patches = self.grid[0] * self.grid[1]
        self.patch_embed = PatchEmbedding(c, d, cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        tokens = 1 + self.num_patches
        if cfg.positions == "learned":
            self.pos_embed = nn.Parameter(torch.randn(1, tokens, d) * 0.02)
        else:
            table = sinusoidal_table(tokens, d)[None] if cfg.positions == "sinusoidal" else None
            self.register_buffer("pos_embed", table, persistent=False)  # (1, 1 + N, d) or None
        self.relative = relative_positions_for(cfg.positions, cfg.num_heads, d, causal=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(
                d,
                cfg.num_heads,
                cfg.d_ff,
                cfg.dropout,
                "pre",
                "gelu",
                attention_dropout=cfg.attention_dropout,
            )
            for _ in range(cfg.num_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, num_classes)

    def _check(self, images: Tensor) -> None:
        want = self.image_shape
        if images.dim() != 4 or tuple(images.shape[1:]) != want:
            raise ValueError(
                f"expected images of shape (B, {', '.join(map(str, want))}), got "
                f"{tuple(images.shape)}"
            )

    def _tokens(self, images: Tensor) -> Tensor:
        self._check(images)
        x = self.patch_embed(images)  # (B, N, d)
        cls = self.cls_token.expand(x.shape[0], -1, -1)  # (B, 1, d)
        x = torch.cat([cls, x], dim=1)  # (B, 1 + N, d)
        if self.pos_embed is not None:
            x = x + self.pos_embed
        return self.dropout(x)  # (B, 1 + N, d)

    def _positions(self, x: Tensor) -> AttentionPositions | None:
        """The relative scheme's rotation or bias over the 1 + N tokens, once for every layer."""
        if self.relative is None:
            return None
        return self.relative(x.shape[1], 0, x.dtype, x.device)

    def _mask(self, columns: Tensor | None) -> Tensor | None:
        """``(B, 1, 1 + N)``: True at the class token and at the patches that begin before each
        image's ``columns``; None for whole images."""
        if columns is None:
            return None
        first = torch.arange(self.grid[1], device=columns.device) * self.patch  # (w,)
        real = first[None, :] < columns[:, None]  # (B, w): patch columns holding a real one
        real = real[:, None, :].expand(-1, self.grid[0], -1).flatten(1)  # (B, N), row by row
        return torch.cat([real.new_ones(real.shape[0], 1), real], dim=1)[:, None, :]

    def forward(
        self, images: Tensor, lengths: Tensor | None = None, *, columns: Tensor | None = None
    ) -> Tensor:
        """Shape: images ``(B, C, H, W)``, columns ``(B,)`` (real columns of each image; None:
        all) -> logits ``(B, C_out)`` (``lengths`` unused)."""
        x, mask = self._tokens(images), self._mask(columns)
        pos = self._positions(x)
        for block in self.blocks:
            x, _ = block(x, mask, positions=pos)  # (B, 1 + N, d)
        return self.head(self.norm(x[:, 0]))  # (B, C_out)

    @torch.no_grad()
    def attention(
        self, images: Tensor, lengths: Tensor | None = None, *, columns: Tensor | None = None
    ) -> list[Tensor]:
        """Each layer's self-attention weights ``(B, h, 1 + N, 1 + N)`` (position 0: the class
        token; patch ``1 + r·w + c`` the one in row r and column c of ``grid`` ``(h, w)``)."""
        x, mask, weights = self._tokens(images), self._mask(columns), []
        pos = self._positions(x)
        for block in self.blocks:
            x, w = block(x, mask, need_weights=True, positions=pos)
            weights.append(w)
        return weights


def attention_rollout(weights: list[Tensor]) -> Tensor:
    """Attention rollout (Abnar & Zuidema 2020): average the heads, add the identity for the
    residual path, renormalise rows, and multiply through the layers; the class token's row over
    the patches says how much each patch flows into the prediction.

    Shape: L × ``(B, h, T, T)`` -> ``(B, T - 1)`` (class token's share of each patch, sums to ≤ 1).
    """
    rollout = None
    for w in weights:
        a = w.float().mean(1)  # (B, T, T)
        a = a + torch.eye(a.shape[-1], device=a.device)
        a = a / a.sum(-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout
    assert rollout is not None
    return rollout[:, 0, 1:]  # (B, N)


register_model(
    ModelSpec(
        ViTConfig,
        lambda cfg, sizes: VisionTransformer(
            sizes.need("num_classes"),
            cfg,
            image_shape=None
            if sizes.input_dim is None
            else (1, sizes.input_dim, sizes.need("input_frames")),
        ),
    )
)
