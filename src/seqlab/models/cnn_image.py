"""A small convolutional image classifier, the baseline ViT is measured against.

Blocks of two 3×3 convolutions (same padding, ReLU, batch norm) and 2×2 max-pooling, one block
per entry of ``widths``; the flattened feature map then feeds a hidden layer with dropout and the
linear head — the classic MNIST ConvNet shape.
"""

from __future__ import annotations

from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import ImageCNNConfig


class ImageCNN(nn.Module):
    """Images ``(B, C, H, W)`` → class logits ``(B, C_out)``."""

    def __init__(self, num_classes: int, cfg: ImageCNNConfig):
        super().__init__()
        layers: list[nn.Module] = []
        width, size = cfg.channels, cfg.image_size
        for out in cfg.widths:
            layers += [
                nn.Conv2d(width, out, 3, padding=1),
                nn.BatchNorm2d(out),
                nn.ReLU(),
                nn.Conv2d(out, out, 3, padding=1),
                nn.BatchNorm2d(out),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            width, size = out, size // 2
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(cfg.dropout),
            nn.Linear(width * size * size, cfg.hidden),
            nn.ReLU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, num_classes),
        )

    def forward(self, images: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Shape: images ``(B, C, H, W)`` -> logits ``(B, C_out)`` (``lengths`` unused)."""
        return self.classifier(self.features(images))  # (B, C_out)


register_model(
    ModelSpec(
        ImageCNNConfig,
        lambda cfg, sizes: ImageCNN(sizes.need("num_classes"), cfg),
    )
)
