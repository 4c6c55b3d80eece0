"""Figures of recordings: the waveform, its spectrogram and the log-mel frames a model reads
(:func:`plot_audio_pipeline`), and the log-mel frames with the model's attention over time
(:func:`plot_spectrogram_attention`, ``seqlab classify --attention-png``)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch import Tensor  # noqa: E402

from seqlab.figure_files import literal_user_text, save_figure  # noqa: E402
from seqlab.fonts import use_cjk_fonts  # noqa: E402


def plot_spectrogram_attention(
    feats: Tensor, received: Tensor | None, hop_seconds: float, path: str | Path, title: str = ""
) -> Path:
    """Log-mel frames ``(T, n_mels)`` as an image (time across, mel channel up) and, under it,
    the share of attention each frame receives ``(T,)`` (none: the spectrogram alone)."""
    rows = 2 if received is not None else 1
    fig, axes = plt.subplots(
        rows,
        1,
        figsize=(7, 4.2 if rows == 2 else 3),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [3, 1.2][:rows]},
    )
    seconds = len(feats) * hop_seconds
    ax = axes[0, 0]
    image = ax.imshow(
        feats.T.numpy(),
        origin="lower",
        aspect="auto",
        cmap="magma",
        extent=(0.0, seconds, 0, feats.shape[1]),
    )
    ax.set_ylabel("mel channel")
    fig.colorbar(image, ax=axes[:, 0].tolist(), label="normalised log-mel", pad=0.02)
    if received is not None:
        share = axes[1, 0]
        times = (torch.arange(len(received)) + 0.5) * hop_seconds
        share.fill_between(times.numpy(), received.numpy(), step="mid", color="tab:blue", alpha=0.6)
        share.set_ylabel("attention\nreceived")
        share.set_ylim(0, float(received.max()) * 1.15 or 1.0)
    axes[-1, 0].set_xlabel("time (s)")
    axes[-1, 0].set_xlim(0, seconds)
    if title:
        fig.suptitle(title, fontsize=10)
    literal_user_text(fig)
    return save_figure(fig, path)


def plot_audio_pipeline(
    wave: Tensor,
    rate: int,
    power: Tensor,
    feats: Tensor,
    hop_seconds: float,
    path: str | Path,
    title: str = "",
) -> Path:
    """One recording three ways: the waveform ``(N,)``, its power spectrogram in dB
    ``(frequency bins, T)`` and the normalised log-mel frames ``(T, n_mels)`` the model reads."""
    fig, axes = plt.subplots(3, 1, figsize=(7, 6.4), sharex=True)
    seconds = len(wave) / rate
    axes[0].plot((torch.arange(len(wave)) / rate).numpy(), wave.numpy(), lw=0.6, color="tab:blue")
    axes[0].set_ylabel("amplitude")
    axes[0].set_title("waveform", fontsize=9)
    db = 10 * torch.log10(power.clamp_min(1e-10))
    axes[1].imshow(
        db.numpy(),
        origin="lower",
        aspect="auto",
        cmap="magma",
        extent=(0.0, seconds, 0, rate / 2 / 1000),
    )
    axes[1].set_ylabel("kHz")
    axes[1].set_title("spectrogram (dB)", fontsize=9)
    axes[2].imshow(
        feats.T.numpy(),
        origin="lower",
        aspect="auto",
        cmap="magma",
        extent=(0.0, len(feats) * hop_seconds, 0, feats.shape[1]),
    )
    axes[2].set_ylabel("mel channel")
    axes[2].set_title("log-mel frames, normalised (what the model reads)", fontsize=9)
    axes[2].set_xlabel("time (s)")
    axes[2].set_xlim(0, seconds)
    if title:
        fig.suptitle(title, fontsize=10)
    use_cjk_fonts(fig)  # a title in Chinese: its glyphs, before the layout measures it
    fig.tight_layout()
    literal_user_text(fig)
    return save_figure(fig, path)
