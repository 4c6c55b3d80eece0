"""A 2-D convolutional classifier over a spectrogram, the audio front end's body
``cnn_spectrogram``: convolutions over time and frequency, as in the keyword-spotting CNNs of
Sainath & Parada (2015), here in small VGG-style blocks.

The log-mel frames ``(B, T, F)`` are read as a one-channel image ``(B, 1, F, T)``. Each block
is two 3×3 convolutions (same padding, batch norm, ReLU) and a 2×2 max-pool over frequency and
time; the kernels slide along the mel axis as well as along time, so a formant pattern moved up
or down a few channels (a shorter or longer vocal tract) meets the same filter — the invariance
a 1-D CNN over frames (:mod:`seqlab.models.cnn_text`) lacks, whose filters see every mel channel
at a fixed place. The last block's map is max-pooled over each clip's own frames (with
``pooling: mean_max`` also averaged over them, the two side by side: statistics pooling, as
utterance-level paralinguistic features take both) and flattened over what is left of the
frequency axis, then dropout and the linear head.

**Padding**: past each clip's end every block's input is zero (the frames are, and each
convolution's output is re-zeroed there), and the pools round up (``ceil_mode``), so a clip's
last window holds only its own frames or zeros, which never win a maximum of ReLU outputs; the
final maximum is over the clip's own columns. A clip gets the same logits alone and in a padded
batch (batch norm in eval mode; in training its statistics include the padding).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.config.audio import SpectrogramCNNConfig


def _conv(inputs: int, outputs: int) -> nn.Sequential:
    """A 3×3 convolution (same padding), batch norm, ReLU: ``(B, inputs, F, T) -> (B, outputs, F,
    T)``."""
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU()
    )


class SpectrogramCNN(nn.Module):
    """Frames ``(B, T, F)`` with lengths ``(B,)`` → class logits ``(B, C)``.

    Args:
        input_dim: F, the mel channels.
        num_classes: C.
        cfg: the body's section.
    """

    def __init__(self, input_dim: int, num_classes: int, cfg: SpectrogramCNNConfig):
        super().__init__()
        self.blocks = nn.ModuleList()
        width, height = 1, input_dim
        for out in cfg.widths:
            self.blocks.append(nn.ModuleList([_conv(width, out), _conv(out, out)]))
            width, height = out, -(-height // 2)
        self.pool = nn.MaxPool2d(2, ceil_mode=True)
        self.dropout = nn.Dropout(cfg.dropout)
        self.mean_max = cfg.pooling == "mean_max"
        self.head = nn.Linear(width * height * (2 if self.mean_max else 1), num_classes)

    def forward(self, frames: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Shape: frames ``(B, T, F)``, lengths ``(B,)`` -> logits ``(B, C)``."""
        b, t = frames.shape[:2]
        n = torch.full((b,), t) if lengths is None else lengths
        n = n.to(frames.device)
        x = frames.transpose(1, 2)[:, None]  # (B, 1, F, T)
        for convs in self.blocks:
            real = torch.arange(x.shape[-1], device=x.device)[None, :] < n[:, None]  # (B, T')
            x = x.masked_fill(~real[:, None, None, :], 0.0)
            for conv in convs:
                x = conv(x).masked_fill(~real[:, None, None, :], 0.0)  # (B, K, F', T')
            x, n = self.pool(x), (n + 1) // 2  # (B, K, ceil(F'/2), ceil(T'/2))
        real = torch.arange(x.shape[-1], device=x.device)[None, :] < n.clamp(min=1)[:, None]
        pooled = x.masked_fill(~real[:, None, None, :], float("-inf")).amax(-1)  # (B, K, F')
        if self.mean_max:
            total = x.masked_fill(~real[:, None, None, :], 0.0).sum(-1)  # (B, K, F')
            pooled = torch.cat([pooled, total / n.clamp(min=1)[:, None, None]], 1)  # (B, 2K, F')
        return self.head(self.dropout(pooled.flatten(1)))  # (B, C)
