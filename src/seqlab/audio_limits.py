"""How much audio each surface reads, named in one place: :data:`LOCAL_LIMITS` for
``seqlab classify`` and the Python API, :data:`SERVER_LIMITS` for ``seqlab serve`` (its
defaults, which its ``--max-audio-seconds``, ``--max-sample-rate`` and ``--max-channels`` flags
change), each with the reason for it.

| surface | longest | highest rate | channels | why |
|---|---|---|---|---|
| ``seqlab classify``, ``seqlab.load(run)`` | 600 s | 768 kHz | any | the user's own machine |
| ``seqlab serve`` | 30 s | 192 kHz | 8 | a shared server |

A model that reads fewer frames lowers the first row's 600 s (a Transformer body's position
table, a ViT's ``model.max_frames``). Imports nothing heavy: the command line's parsers read it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the lowest and highest sample rates any surface accepts (Hz): below, no speech survives;
#: above, the header is corrupt (768 kHz is the highest rate audio interfaces record at)
MIN_RATE, MAX_RATE = 1_000, 768_000


@dataclass(frozen=True)
class AudioLimits:
    """What one surface reads: recordings up to ``max_seconds`` long, ``max_sample_rate`` Hz
    and ``max_channels`` channels (None: any), and ``why``."""

    max_seconds: float
    max_sample_rate: int
    max_channels: int | None
    why: str


#: ``seqlab classify`` and the Python API: ten minutes bounds memory (600 s at 44.1 kHz is
#: 106 MB of float32) on the user's own machine, whose time is the user's to spend
LOCAL_LIMITS = AudioLimits(
    600.0, MAX_RATE, None, "your own machine: the limit bounds memory, not your time"
)
#: ``seqlab serve``: a shared server bounds the work one request may cost, so that one client
#: cannot hold the model for every other; 30 s is several spoken words
SERVER_LIMITS = AudioLimits(
    30.0,
    192_000,
    8,
    "a shared server: one request's work is bounded so that it cannot hold the model for "
    "every other client",
)
