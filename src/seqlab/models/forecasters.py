"""Sequence-to-one forecasters of real values (d2l.ai §9.1): every model maps a window of the τ
latest values ``(B, τ)`` to the next value ``(B,)``.

- :class:`AutoRegressive`: the autoregressive model x̂_t = f(x_{t-1}, …, x_{t-τ}); f linear
  (AR(τ)) or a one-hidden-layer MLP (d2l.ai §9.1.3's model).
- :class:`RNNForecaster`: the latent autoregressive model h_t = g(h_{t-1}, x_{t-1}),
  x̂_t = w·h_t + b, with an RNN of any registered cell as g (``model.cell``; GRU by default).
- :class:`TransformerForecaster`: a causal Transformer encoder over the window; the output at the
  last position predicts the next value. ``model.positions`` (:mod:`seqlab.nn.attention_positions`)
  numbers the window's steps: learned (the default), sinusoidal, rope, alibi, t5_bias, or none
  (the causal mask alone).

With ``linear_skip`` a neural forecaster adds a linear AR(τ) term to its output,
x̂_t = f(window) + wᵀ window + b, so the network only learns what a linear model misses (the
"autoregressive component" of LSTNet, Lai et al. 2018).

The baselines need no parameters: :func:`persistence` (x̂_{t+1} = x_t) and
:func:`seasonal_persistence` (x̂_t = x_{t-s}).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import ARConfig, RNNForecasterConfig, TransformerForecasterConfig
from seqlab.nn.attention import causal_mask
from seqlab.nn.attention_positions import relative_positions_for
from seqlab.nn.positional_encoding import sinusoidal_table
from seqlab.nn.rnn import recurrent_layer, run_layer
from seqlab.nn.transformer_layers import EncoderBlock


class WindowForecaster(nn.Module):
    """Base: ``forward`` = :meth:`body` (the model's own prediction) + the optional linear skip."""

    def __init__(self, window: int, linear_skip: bool):
        super().__init__()
        self.window = window
        self.skip = nn.Linear(window, 1) if linear_skip else None

    def body(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """Shape: ``(B, τ) -> (B,)``."""
        if x.shape[1] != self.window:
            raise ValueError(f"expected windows of {self.window} values, got {x.shape[1]}")
        y = self.body(x)  # (B,)
        return y if self.skip is None else y + self.skip(x).squeeze(-1)


class AutoRegressive(WindowForecaster):
    """AR(τ): linear when ``cfg.hidden`` is 0, else Linear(τ, hidden) → ReLU → Linear(hidden, 1)."""

    def __init__(self, window: int, cfg: ARConfig):
        super().__init__(window, cfg.linear_skip and cfg.hidden > 0)
        if cfg.hidden:
            self.net: nn.Module = nn.Sequential(
                nn.Linear(window, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1)
            )
        else:
            self.net = nn.Linear(window, 1)

    def body(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)  # (B,)


class RNNForecaster(WindowForecaster):
    """An RNN of ``cfg.cell`` over the window, a linear read-out of the last hidden state."""

    def __init__(self, window: int, cfg: RNNForecasterConfig):
        super().__init__(window, cfg.linear_skip)
        self.rnn = recurrent_layer(cfg.cell, 1, cfg.hidden_size, cfg.num_layers, cfg.dropout)
        self.out = nn.Linear(cfg.hidden_size, 1)

    def body(self, x: Tensor) -> Tensor:
        h, _ = run_layer(self.rnn, x[..., None])  # (B, τ, H)
        return self.out(h[:, -1]).squeeze(-1)  # (B,)


class TransformerForecaster(WindowForecaster):
    """Values → Linear(1, d) + positions (learned by default) → causal pre-norm encoder →
    Linear(d, 1).

    ``pos`` ``(τ, d)``: the learned positions (a parameter, as in every checkpoint before
    ``cfg.positions``), the fixed sinusoidal table (not saved) or None; ``relative``: a relative
    scheme's rotation or bias, or None. ALiBi's and T5's causal bias hides the future keys itself
    (:attr:`~seqlab.nn.attention_positions.AttentionPositions.hides_future`): no mask then.
    """

    def __init__(self, window: int, cfg: TransformerForecasterConfig):
        super().__init__(window, cfg.linear_skip)
        self.inp = nn.Linear(1, cfg.d_model)
        if cfg.positions == "learned":
            self.pos = nn.Parameter(torch.randn(window, cfg.d_model) * 0.1)
        else:
            table = sinusoidal_table(window, cfg.d_model) if cfg.positions == "sinusoidal" else None
            self.register_buffer("pos", table, persistent=False)  # (τ, d) or None
        self.relative = relative_positions_for(
            cfg.positions, cfg.num_heads, cfg.d_model, causal=True
        )
        self.blocks = nn.ModuleList(
            EncoderBlock(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout, "pre")
            for _ in range(cfg.num_layers)
        )
        self.norm = nn.LayerNorm(cfg.d_model)
        self.out = nn.Linear(cfg.d_model, 1)

    def body(self, x: Tensor) -> Tensor:
        h = self.inp(x[..., None])  # (B, τ, d)
        if self.pos is not None:
            h = h + self.pos
        pos = None
        if self.relative is not None:
            pos = self.relative(x.shape[1], 0, h.dtype, h.device)
        mask = None
        if pos is None or not pos.hides_future:
            mask = causal_mask(x.shape[1], device=x.device)[None]  # (1, τ, τ)
        for block in self.blocks:
            h, _ = block(h, mask, positions=pos)  # (B, τ, d)
        return self.out(self.norm(h[:, -1])).squeeze(-1)


def persistence(x: Tensor) -> Tensor:
    """x̂_{t} = x_{t-1}: the last value of each window. Shape: ``(B, τ) -> (B,)``."""
    return x[:, -1]


def seasonal_persistence(series: Tensor, t: Tensor, season: int) -> Tensor:
    """x̂_t = x_{t-s}, for target steps ``t`` ``(M,)`` of ``series``. Shape: ``-> (M,)``."""
    return series[t - season]


register_model(ModelSpec(ARConfig, lambda cfg, sizes: AutoRegressive(sizes.need("window"), cfg)))
register_model(
    ModelSpec(
        RNNForecasterConfig,
        lambda cfg, sizes: RNNForecaster(sizes.need("window"), cfg),
    )
)
register_model(
    ModelSpec(
        TransformerForecasterConfig,
        lambda cfg, sizes: TransformerForecaster(sizes.need("window"), cfg),
    )
)
