"""Figures of robustness to new voices: one recording under each training augmentation
(:func:`augmented_views`, :func:`plot_augmentations`) and a reliability diagram of
probabilities before and after temperature scaling (:func:`plot_reliability`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch import Tensor  # noqa: E402

from seqlab.figure_files import save_figure  # noqa: E402
from seqlab.models.audio import AudioClassifier  # noqa: E402
from seqlab.nn import audio_augment as aug  # noqa: E402
from seqlab.nn.audio import SpecAugment  # noqa: E402


@torch.no_grad()
def augmented_views(model: AudioClassifier, wave: Tensor, seed: int = 0) -> dict[str, Tensor]:
    """One clip ``(N,)`` under each augmentation of :mod:`seqlab.nn.audio_augment` at a fixed
    strength, as raw log-mel frames ``(T, n_mels)`` in dB (the model's front end): the name of
    each view, then its frames; the draws are seeded."""
    torch.manual_seed(seed)
    rate = model.sample_rate
    x, n = wave[None].float(), torch.tensor([len(wave)])

    def mel(
        waves: Tensor, lengths: Tensor, warp: Tensor | None = None, gains: Tensor | None = None
    ) -> Tensor:
        feats, frames = model.log_mel(waves, lengths, warp, gains)
        return feats[0, : int(frames[0])]

    views = {"recorded": mel(x, n)}
    views["VTLP α = 0.85"] = mel(x, n, torch.tensor([0.85]))
    views["VTLP α = 1.15"] = mel(x, n, torch.tensor([1.15]))
    for f in (0.9, 1.1):
        fast, size = aug.speed_perturb(x, n, torch.tensor([f]))
        views[f"speed × {f:g}"] = mel(fast, size)
    for s in (-2.0, 2.0):
        views[f"pitch {s:+g} semitones"] = mel(aug.pitch_shift(x, n, torch.tensor([s])), n)
    views["pink noise, 10 dB SNR"] = mel(
        aug.add_noise(x, n, torch.tensor([10.0]), torch.tensor([1.0])), n
    )
    views["room, RT60 0.5 s"] = mel(aug.reverberate(x, n, torch.tensor([0.5]), rate), n)
    mic = aug.channel_gains(
        model.log_mel.bin_hz(), torch.tensor([-10.0]), torch.tensor([6.0]), torch.tensor([2500.0])
    )
    views["microphone: -10 dB, ±6 dB, 2.5 kHz low-pass"] = mel(x, n, gains=mic)
    masks = SpecAugment(2, 6, 2, 10).train()
    base = views["recorded"]
    floor = float(base.mean())  # SpecAugment's 0 is the normalised mean
    views["SpecAugment masks"] = masks(base[None] - floor, torch.tensor([len(base)]))[0] + floor
    return views


def plot_augmentations(
    views: dict[str, Tensor], hop_seconds: float, path: str | Path, title: str = ""
) -> Path:
    """A grid of log-mel spectrograms (dB, one shared colour scale), one per view."""
    cols = 4 if len(views) in (11, 12) else 5
    rows = -(-len(views) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(15, 2.6 * rows + 0.7), squeeze=False, layout="constrained"
    )
    low = min(float(v.min()) for v in views.values())
    high = max(float(v.max()) for v in views.values())
    image = None
    for i, (ax, (name, feats)) in enumerate(zip(axes.flat, views.items(), strict=False)):
        seconds = len(feats) * hop_seconds
        image = ax.imshow(
            feats.T.numpy(),
            origin="lower",
            aspect="auto",
            cmap="magma",
            vmin=max(low, high - 80),
            vmax=high,
            extent=(0.0, seconds, 0, feats.shape[1]),
        )
        ax.set_title(name, fontsize=9)
        if i // cols == rows - 1:
            ax.set_xlabel("time (s)", fontsize=8)
        if i % cols == 0:
            ax.set_ylabel("mel channel", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(views) :]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="log-mel (dB)", pad=0.01, shrink=0.9)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def plot_reliability(
    curves: dict[str, dict[str, list[float]]], path: str | Path, title: str = ""
) -> Path:
    """Reliability diagrams side by side: each bin's accuracy against its mean confidence
    (:func:`seqlab.tasks.classifier.calibration.reliability`), the diagonal being perfect
    calibration; ``curves`` maps a label (with its ECE, say) to a ``reliability`` result."""
    fig, axes = plt.subplots(
        1, len(curves), figsize=(4.2 * len(curves), 4.2), squeeze=False, layout="constrained"
    )
    for ax, (name, r) in zip(axes[0], curves.items(), strict=True):
        bins = len(r["count"])
        width = 1.0 / bins
        lefts = [k * width for k in range(bins)]
        used = [c > 0 for c in r["count"]]
        acc = [a if u else 0.0 for a, u in zip(r["accuracy"], used, strict=True)]
        ax.bar(
            lefts,
            acc,
            width=width,
            align="edge",
            color="tab:blue",
            alpha=0.7,
            edgecolor="white",
            label="accuracy",
        )
        conf = [m if u else 0.0 for m, u in zip(r["confidence"], used, strict=True)]
        low = [min(a, c) for a, c in zip(acc, conf, strict=True)]
        gap = [abs(c - a) for a, c in zip(acc, conf, strict=True)]
        ax.bar(
            lefts,
            gap,
            bottom=low,
            width=width,
            align="edge",
            fill=False,
            hatch="//",
            edgecolor="tab:red",
            lw=0.8,
            label="gap to the mean confidence",
        )
        ax.plot([0, 1], [0, 1], "--", color="0.4", lw=1, label="perfect calibration")
        ax.set(
            xlim=(0, 1),
            ylim=(0, 1),
            xlabel="confidence (top probability)",
            ylabel="accuracy",
            title=name,
        )
        ax.legend(fontsize="small", loc="upper left")
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)
