"""Tiny trained run directories of every task, built on first use (a few steps each, on data the
tests generate: written dates, a short text, labelled phrases, synthetic images, a sine wave).

``TinyRuns(root)[name]`` trains run ``name`` once into ``root/name`` and returns its path; the
``tiny_runs`` fixture (conftest.py) keeps one per test session. One run reads a dataset the
tests do not make: ``zh-en`` (:func:`zh_en_raw`) trains on Tatoeba's cmn-eng pairs, found at
:data:`CMN_ENG_ZIP`; its tests skip where that file is missing.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
import torch

from conftest import tiny_dates_transformer
from seqlab.config import config_from_dict
from seqlab.experiment import train

LM_TEXT = "the time traveller for so it will be convenient to speak of him was expounding. " * 30
POS = ["a great film", "truly wonderful acting", "great fun", "a wonderful story", "loved it"]
NEG = ["a dull film", "truly awful acting", "boring mess", "an awful story", "hated it"]
STEPS = {"max_steps": 4, "eval_every": 4, "threads": 1, "log_every": 1000}
DATES = {"dataset": "dates", "tokenizer": "char", "num_examples": 200, "val_examples": 8}
#: Tatoeba's Chinese–English pairs, where the ``zh-en`` run reads them
CMN_ENG_ZIP = Path(os.environ.get("SEQLAB_DATA_DIR", "/nonexistent")) / "cmn-eng" / "cmn-eng.zip"
#: EmoDB's WAVs (the ``emodb`` run; its tests skip where the folder is missing)
EMODB_WAVS = Path(os.environ.get("SEQLAB_DATA_DIR", "/nonexistent")) / "emodb" / "wav"


def lm_raw(corpus: Any, **train_keys: Any) -> dict[str, Any]:
    """A raw config: a GRU language model on the text file ``corpus``, 4 steps, validated every
    2, logged every step; ``train_keys`` are added to its ``train`` section."""
    return {
        "data": {"dataset": "text", "path": str(corpus), "batch_size": 4, "num_steps": 10},
        "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 8, "hidden_size": 16},
        "train": {"max_steps": 4, "eval_every": 2, "log_every": 1, "threads": 1, **train_keys},
    }


def dates_raw(arch: str, **model: Any) -> dict[str, Any]:
    """A raw config: model ``arch`` (Bahdanau: 8-wide embeddings, 16 hidden) on 150 generated
    dates, 2 steps; ``model`` keys are added to its ``model`` section."""
    base = {"bahdanau": {"embed_dim": 8, "hidden_size": 16}}.get(arch, {})
    return {
        "data": {"dataset": "dates", "tokenizer": "char", "num_examples": 150, "val_examples": 8},
        "model": {"arch": arch, "dropout": 0.0, **base, **model},
        "train": {"max_steps": 2, "eval_every": 2, "threads": 1},
        "decode": {"max_len_a": 0.0, "max_len_b": 12},
    }


def mt_raw(arch: str = "bahdanau") -> dict[str, Any]:
    """:func:`dates_raw` with an 8-wide embedding and 16 hidden units whatever ``arch``."""
    return dates_raw(arch, embed_dim=8, hidden_size=16)


def zh_en_raw() -> dict[str, Any]:
    """A raw config: a 1+1-layer, 16-wide zh→en Transformer on the first 600 cmn-eng pairs
    (``data.normalize: simplified``, a character model of 400 pieces each side), 3 steps."""
    return {
        "data": {
            "dataset": "cmn-eng",
            "src_lang": "zh",
            "tgt_lang": "en",
            "tokenizer": "subword",
            "normalize": "simplified",
            "subword": {"joint": False, "model_type": "char", "vocab_size": 400},
            "num_examples": 600,
            "val_examples": 20,
            "max_len": 24,
        },
        "model": {
            "arch": "transformer",
            "d_model": 16,
            "num_heads": 2,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "d_ff": 32,
            "max_len": 32,
        },
        "train": {"max_steps": 3, "eval_every": 3, "threads": 1, "log_every": 1000},
    }


def _transformer_dates() -> dict[str, Any]:
    """:func:`dates_raw` for a 1+1-layer, 16-wide Transformer on dates of at most 20 tokens."""
    raw = dates_raw(
        "transformer",
        d_model=16,
        num_heads=2,
        encoder_layers=1,
        decoder_layers=1,
        d_ff=32,
        max_len=32,
    )
    raw["data"]["max_len"] = 20
    return raw


def _configs(root: Path) -> dict[str, dict[str, Any]]:
    def _tones(body: dict[str, Any]) -> dict[str, Any]:
        """An audio classifier with ``body`` on the tones of ``root/tones`` (two pitches)."""
        return {
            "data": {
                "dataset": "audio-folder",
                "path": str(root / "tones"),
                "batch_size": 8,
                "val_fraction": 0.2,
                "test_fraction": 0.2,
            },
            "model": {
                "arch": "audio_classifier",
                "features": {"n_mels": 16},
                "augment": False,
                "body": body,
            },
            "train": {**STEPS, "max_steps": 30, "eval_every": 30, "lr": 0.01},
        }

    return {
        # translation: a Transformer (every layer's and head's attention) and Bahdanau (alignment)
        "mt": {
            "data": {**DATES, "max_len": 32},
            "model": {
                "arch": "transformer",
                "d_model": 16,
                "num_heads": 2,
                "encoder_layers": 2,
                "decoder_layers": 2,
                "d_ff": 32,
                "max_len": 48,
                "dropout": 0.0,
            },
            "train": {**STEPS, "max_steps": 6},
            "decode": {"max_len_a": 0.0, "max_len_b": 12},
        },
        "bahdanau": {
            "data": DATES,
            "model": {"arch": "bahdanau", "embed_dim": 8, "hidden_size": 16, "dropout": 0.0},
            "train": STEPS,
            "decode": {"max_len_a": 0.0, "max_len_b": 12},
        },
        "seq2seq": {
            "data": DATES,
            "model": {"arch": "seq2seq", "cell": "gru", "embed_dim": 8, "hidden_size": 16},
            "train": STEPS,
            "decode": {"max_len_a": 0.0, "max_len_b": 8},
        },
        "cls": {
            "data": {
                "dataset": "text-classification",
                "path": str(root / "reviews.tsv"),
                "tokenizer": "word",
                "normalize": "none",
                "batch_size": 8,
            },
            "model": {
                "arch": "transformer_classifier",
                "d_model": 16,
                "num_heads": 2,
                "d_ff": 32,
                "num_layers": 2,
                "dropout": 0.0,
            },
            "train": {**STEPS, "max_steps": 30, "eval_every": 30, "lr": 0.01},
        },
        "vit": {
            "data": {"dataset": "mnist", "batch_size": 16, "num_examples": 64, "val_examples": 16},
            "model": {
                "arch": "vit",
                "d_model": 16,
                "num_heads": 2,
                "d_ff": 32,
                "num_layers": 2,
                "patch_size": 7,
            },
            "train": STEPS,
        },
        # audio: tones of two pitches in a folder (audio-folder), a CNN over log-mel frames
        # audio: tones of two pitches in a folder (audio-folder), over log-mel frames
        "audio": _tones({"arch": "cnn_text", "embed_dim": 8, "widths": [3], "channels": 8}),
        "audio-transformer": _tones(
            {
                "arch": "transformer_classifier",
                "d_model": 16,
                "num_heads": 2,
                "d_ff": 32,
                "num_layers": 2,
                "dropout": 0.0,
            }
        ),
        "lm": {
            "data": {
                "dataset": "text",
                "path": str(root / "corpus.txt"),
                "batch_size": 4,
                "num_steps": 10,
            },
            "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 8, "hidden_size": 16},
            "train": STEPS,
        },
        "lm-transformer": {
            "data": {
                "dataset": "text",
                "path": str(root / "corpus.txt"),
                "batch_size": 4,
                "num_steps": 10,
            },
            "model": {
                "arch": "transformer_lm",
                "d_model": 16,
                "num_heads": 2,
                "num_layers": 1,
                "d_ff": 32,
                "max_len": 12,  # generation beyond it slides the window
            },
            "train": STEPS,
        },
        "fc": {
            "data": {"dataset": "sine", "length": 200, "window": 4, "test_fraction": 0.2},
            "model": {"arch": "ar", "hidden": 0},
            "train": {"lr": 0.05, "epochs": 2, "log_every": 1000, "threads": 1},
        },
        # the bad-input checks' runs (the ``runs`` fixture names them lm, mt, s2s, tf, cls, fc)
        "lm-2": lm_raw(root / "corpus.txt"),
        "bahdanau-2": mt_raw(),
        "seq2seq-2": mt_raw("seq2seq"),
        "transformer-2": _transformer_dates(),
        "transformer-dates-2": tiny_dates_transformer(
            data={"num_examples": 150, "val_examples": 8}, train={"max_steps": 2}
        ),
        "cls-short": {
            "data": {
                "dataset": "text-classification",
                "path": str(root / "reviews.tsv"),
                "tokenizer": "word",
                "batch_size": 8,
                "max_len": 8,
            },
            "model": {
                "arch": "transformer_classifier",
                "d_model": 16,
                "num_heads": 2,
                "d_ff": 32,
                "num_layers": 1,
                "dropout": 0.0,
                "max_len": 16,
            },
            "train": {"max_steps": 10, "eval_every": 10, "lr": 0.01, "threads": 1},
        },
        # Chinese→English on cmn-eng (needs CMN_ENG_ZIP): traditional input read as simplified
        "zh-en": zh_en_raw(),
        # an emotion from a voice on EmoDB (needs EMODB_WAVS): a few steps of a small CNN
        "emodb": {
            "data": {
                "dataset": "emodb",
                "sample_rate": 8000,
                "batch_size": 16,
                "num_examples": 64,
                "test_speaker": "16",
            },
            "model": {
                "arch": "audio_classifier",
                "features": {"n_mels": 16},
                "augment": False,
                "body": {"arch": "cnn_spectrogram", "widths": [4, 8], "dropout": 0.0},
            },
            "train": {**STEPS, "max_steps": 8, "eval_every": 8, "lr": 0.01},
        },  # fmt: skip
        "fc-val": {
            "data": {
                "dataset": "sine",
                "length": 200,
                "window": 4,
                "batch_size": 16,
                "val_fraction": 0.2,
                "test_fraction": 0.2,
            },
            "model": {"arch": "ar", "hidden": 0},
            "train": {"lr": 0.05, "epochs": 2, "log_every": 1000, "threads": 1},
        },
    }


def _synthetic_images(cfg: Any) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Stand-in for MNIST: a bright square whose position depends on the label."""
    g = torch.Generator().manual_seed(0)

    def split(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 10, (n,), generator=g)
        x = 0.1 * torch.rand(n, 1, 28, 28, generator=g)
        for i, label in enumerate(y.tolist()):
            r, c = 2 * label, 2 * label
            x[i, 0, r : r + 8, c : c + 8] = 1.0
        return x, y

    return {"train": split(64), "val": split(16), "test": split(16)}


#: the tiny audio runs' classes: a tone's pitch (Hz)
TONES = {"low": 330.0, "high": 1320.0}


def tone(freq: float, seconds: float = 0.5, rate: int = 8000, phase: float = 0.0) -> np.ndarray:
    """A sine tone with a short fade in and out, float32 in [-0.5, 0.5]."""
    t = np.arange(int(seconds * rate)) / rate
    fade = np.minimum(1.0, np.minimum(t, seconds - t) / 0.02)
    return (0.5 * fade * np.sin(2 * np.pi * freq * t + phase)).astype(np.float32)


def write_tones(folder: Path, per_class: int = 20) -> None:
    """``folder/LABEL/NN.wav``: 16-bit 8 kHz tones of each pitch in :data:`TONES`, of varied
    lengths and phases (an ``audio-folder`` dataset)."""
    for label, freq in TONES.items():
        (folder / label).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            wave = tone(freq * (1 + 0.02 * (i % 3)), 0.3 + 0.05 * (i % 5), phase=0.3 * i)
            soundfile.write(folder / label / f"{i:02d}.wav", wave, 8000, subtype="PCM_16")


class TinyRuns:
    """Run directories by name (see :func:`_configs`), each trained on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "corpus.txt").write_text(LM_TEXT)
        rows = [f"{s}\tpos" for s in POS] + [f"{s}\tneg" for s in NEG]
        (root / "reviews.tsv").write_text("\n".join(rows * 4) + "\n")
        write_tones(root / "tones")
        self._configs = _configs(root)

    def __getitem__(self, name: str) -> Path:
        run_dir = self.root / name
        if not (run_dir / "checkpoints").is_dir():
            cfg = config_from_dict(self._configs[name])
            quiet = io.StringIO()  # trained inside a test: its progress lines are not the test's
            with (
                warnings.catch_warnings(),
                pytest.MonkeyPatch.context() as patch,
                contextlib.redirect_stderr(quiet),
                contextlib.redirect_stdout(quiet),
            ):
                warnings.simplefilter("ignore")
                patch.setattr("seqlab.tasks.classifier.splits.image_splits", _synthetic_images)
                torch.manual_seed(0)
                train(cfg, run_dir)
        return run_dir

    def view(self, **names: str) -> RunsByName:
        """These runs under other names: ``view / "lm"`` is ``self[names["lm"]]``."""
        return RunsByName(self, names)


class RunsByName:
    """``folder / name``: the run that ``names[name]`` names (trained on first use), or else the
    file ``name`` of the runs' folder (``corpus.txt``, ``reviews.tsv``)."""

    def __init__(self, runs: TinyRuns, names: dict[str, str]) -> None:
        self.runs, self.names = runs, names

    def __truediv__(self, name: str) -> Path:
        return self.runs[self.names[name]] if name in self.names else self.runs.root / name


class ToyData:
    """Ten minibatches of 8 random 3-vectors per epoch, a pure function of the epoch."""

    carries_state = False

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return 10

    def __iter__(self):
        g = torch.Generator().manual_seed(self.epoch)
        for _ in range(10):
            yield torch.randn(8, 3, generator=g)
