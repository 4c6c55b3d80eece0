"""Whether a clip holds anything to classify: the no-speech detector, batched over padded clips.

A clip is cut into analysis frames of ``win_length`` samples every ``hop_length`` samples (the
model's own, ``model.features``: 25 ms every 10 ms at 8 kHz). A frame's level is its RMS in
dB relative to full scale, ``L = 10 log10(mean(x²))`` dBFS (a full-scale square wave is 0 dBFS,
a full-scale sine −3 dBFS, digital silence −inf). A clip holds speech when at least one whole
frame (one that lies inside the clip: padding never counts) reaches :data:`SPEECH_DBFS`.
Otherwise it is *no speech*, for one of two reasons: it is shorter than one analysis window
(there is no whole frame to hear), or no frame is loud enough.

**The threshold, −60 dBFS**, was checked on FSDD's 3,000 recordings at 8 kHz with 200-sample
frames every 80: the quietest recording's loudest frame is −48.0 dBFS (``6_theo_33.wav``; the
next −47.1), 12 dB above the threshold, so every FSDD clip is speech. Digital silence (−inf),
16-bit dither (about −100 dBFS), noise at −80 dBFS and a stereo clip whose channels cancel
when averaged (L = −R) are 20 dB or more below it. The rule is a level, not a voice detector:
room noise from a real microphone (often −60 to −45 dBFS) counts as sound, and a click or a
hum is heard as much as a word.

Frame energies come from one cumulative sum of squares per clip (float64), so a clip's answer
does not depend on the clips it is batched with or the padding after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["SPEECH_DBFS", "Speech", "detect_speech", "loudest_frames"]

#: a frame at or above this RMS level (dBFS) is sound worth classifying (see the module)
SPEECH_DBFS = -60.0


@dataclass(frozen=True)
class Speech:
    """The detector's answer for one clip: ``heard`` (whether it holds speech), the level of
    its loudest whole frame (``loudest_dbfs``, -inf for digital silence or a clip shorter
    than one frame) and, when nothing was heard, why (``reason``, one line)."""

    heard: bool
    loudest_dbfs: float
    reason: str | None = None


def loudest_frames(waves: Tensor, lengths: Tensor, win_length: int, hop_length: int) -> Tensor:
    """The RMS level (dBFS) of the loudest whole frame of each clip ``(B,)``: -inf where there
    is none (a clip shorter than ``win_length``) or where every frame is digital silence.

    Shape:
        waves: ``(B, N)`` clips right-padded with anything; lengths: ``(B,)`` samples.
    """
    x = waves.detach().to(torch.float64)
    squares = torch.nn.functional.pad(x * x, (1, 0)).cumsum(-1)  # (B, N + 1), 0 first
    n = waves.shape[-1]
    if n < win_length:
        return torch.full((len(waves),), -math.inf, dtype=torch.float64)
    starts = torch.arange(0, n - win_length + 1, hop_length)  # (F,)
    energy = (squares[:, starts + win_length] - squares[:, starts]) / win_length  # (B, F)
    whole = starts[None, :] + win_length <= lengths[:, None].to(starts.device)  # (B, F)
    energy = energy.clamp(min=0.0).masked_fill(~whole, -1.0)  # cumsum rounding: never < 0
    loudest = energy.max(-1).values  # (B,): -1 where no whole frame
    levels = 10 * torch.log10(loudest.clamp(min=0.0))  # 0 → -inf
    return levels.masked_fill(loudest < 0, -math.inf)


def detect_speech(
    waves: Tensor,
    lengths: Tensor,
    rate: int,
    win_length: int,
    hop_length: int,
    threshold: float = SPEECH_DBFS,
) -> list[Speech]:
    """Whether each clip of a padded batch holds speech (see the module).

    Args:
        waves: ``(B, N)`` clips at ``rate`` Hz, right-padded.
        lengths: ``(B,)`` each clip's samples.
        win_length, hop_length: the analysis frames (samples), the model's front end's.
        threshold: the level (dBFS) a frame must reach.
    """
    levels = loudest_frames(waves, lengths, win_length, hop_length)
    window = f"{1000 * win_length / rate:g} ms"
    out = []
    for n, level in zip(lengths.tolist(), levels.tolist(), strict=True):
        if n < win_length:
            reason = (
                f"{n:,} sample(s) ({1000 * n / rate:.1f} ms at {rate:,} Hz), shorter than one "
                f"{window} analysis window ({win_length:,} samples): nothing to hear"
            )
            out.append(Speech(False, level, reason))
        elif level < threshold:
            loudest = "digital silence" if math.isinf(level) else f"{level:.1f} dBFS"
            reason = (
                f"no {window} frame reaches {threshold:g} dBFS (the loudest: {loudest}): "
                "silence or near-silence"
            )
            out.append(Speech(False, level, reason))
        else:
            out.append(Speech(True, level))
    return out
