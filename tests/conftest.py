"""Shared test setup (offline, deterministic, one thread per test worker) and builders."""

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from seqlab.config import BahdanauConfig, Seq2SeqConfig, TransformerConfig
from seqlab.data.translation_batching import Batch
from seqlab.models import build_model
from seqlab.tokens import BOS, EOS, PAD

os.environ.setdefault("SEQLAB_OFFLINE", "1")
# `precision: auto` decides fp32 in every test (and its subprocesses) on every CPU, so that no
# test depends on the machine; the tests that compare two paths also run with bf16 forced
# (tests/precision_helpers.py), and tests/test_precision.py checks the detection itself.
os.environ["SEQLAB_NATIVE_BF16"] = "0"
torch.set_num_threads(1)


@functools.cache
def docs_hook(name: str) -> ModuleType:
    """``docs/_hooks/NAME.py`` (the site's hooks and the tutorials' runner), loaded once."""
    path = Path(__file__).resolve().parents[1] / "docs" / "_hooks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


# --------------------------------------------------------------------- encoder–decoders
SRC_V, TGT_V = 13, 11  # tiny vocabularies (4 reserved ids + symbols)

#: one small configuration per encoder–decoder variant, by test id
ENCODER_DECODERS = {
    "seq2seq-gru-1": Seq2SeqConfig(cell="gru", embed_dim=8, hidden_size=12, num_layers=1),
    "seq2seq-gru-2": Seq2SeqConfig(cell="gru", embed_dim=8, hidden_size=12, num_layers=2),
    "seq2seq-lstm-2": Seq2SeqConfig(cell="lstm", embed_dim=8, hidden_size=12, num_layers=2),
    "bahdanau-1": BahdanauConfig(embed_dim=8, hidden_size=12, num_layers=1),
    "bahdanau-2": BahdanauConfig(embed_dim=8, hidden_size=12, num_layers=2),
    "bahdanau-general": BahdanauConfig(embed_dim=8, hidden_size=12, attention="general"),
    "bahdanau-location": BahdanauConfig(
        embed_dim=8, hidden_size=12, attention="location", max_len=16
    ),
    "bahdanau-linear-dot": BahdanauConfig(
        embed_dim=8, hidden_size=12, num_layers=2, decoder="linear", attention="dot"
    ),
    "bahdanau-linear-scaled": BahdanauConfig(
        embed_dim=8, hidden_size=12, decoder="linear", attention="scaled_dot"
    ),
    "transformer-post": TransformerConfig(
        d_model=16, num_heads=4, encoder_layers=2, decoder_layers=2, d_ff=32, max_len=32
    ),
    "transformer-pre": TransformerConfig(
        d_model=16,
        num_heads=4,
        encoder_layers=2,
        decoder_layers=2,
        d_ff=32,
        max_len=32,
        norm="pre",
        tie_output=False,
    ),
}


def make_encoder_decoder(name, dropout=0.0, src_vocab=SRC_V, tgt_vocab=TGT_V):
    """A fresh model of variant ``name`` (see ``ENCODER_DECODERS``), in eval mode."""
    cfg = ENCODER_DECODERS[name].model_copy(update={"dropout": dropout})
    model = build_model(cfg, src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab)
    return model.eval()


def random_translation_batch(src_vocab=SRC_V, tgt_vocab=TGT_V, b=4, s=7, t=6, seed=0):
    """Random padded batch: source ``x <eos>``, target ``<bos> y`` / ``y <eos>``; row 0 has the
    longest source, the last row the longest target, the others are shorter (padded)."""
    g = torch.Generator().manual_seed(seed)
    src_lengths = torch.randint(2, s + 1, (b,), generator=g)
    src_lengths[0] = s
    tgt_lengths = torch.randint(2, t + 1, (b,), generator=g)
    tgt_lengths[-1] = t
    src = torch.randint(4, src_vocab, (b, s), generator=g)
    y = torch.randint(4, tgt_vocab, (b, t), generator=g)
    tgt_in = torch.cat([torch.full((b, 1), BOS), y[:, :-1]], dim=1)
    tgt_out = y.clone()
    for i in range(b):
        src[i, src_lengths[i] - 1], src[i, src_lengths[i] :] = EOS, PAD
        tgt_out[i, tgt_lengths[i] - 1], tgt_out[i, tgt_lengths[i] :] = EOS, PAD
        tgt_in[i, tgt_lengths[i] :] = PAD
    return Batch(src, src_lengths, tgt_in, tgt_out, tgt_lengths, torch.arange(b))


def run_offline(args, empty, cwd=None, stdin=None):
    """``python -m seqlab ARGS`` as on a machine without the datasets: data and cache folders
    point at the empty folder ``empty`` and downloads are off."""
    env = {
        **os.environ,
        "SEQLAB_DATA_DIR": str(empty),
        "SEQLAB_CACHE_DIR": str(empty),
        "SEQLAB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "seqlab", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    """Tiny trained runs of every task by name (``tiny_runs["mt"]``), each trained once per
    session on first use (see tiny_runs.py)."""
    from tiny_runs import TinyRuns

    return TinyRuns(tmp_path_factory.mktemp("tiny-runs"))


@pytest.fixture(scope="module")
def runs(tiny_runs, request):
    """A few tiny runs trained for 2-4 steps, by short name (``runs / "mt"``), and the files they
    were trained on (``runs / "corpus.txt"``): see ``RunsByName`` in tiny_runs.py. ``mt`` is a
    Bahdanau model unless the test file sets ``RUNS_MT`` (``"transformer-dates-2"``)."""
    return tiny_runs.view(
        lm="lm-2",
        mt=getattr(request.module, "RUNS_MT", "bahdanau-2"),
        s2s="seq2seq-2",
        tf="transformer-2",
        cls="cls-short",
        fc="fc-val",
    )


def tiny_dates_transformer(data=None, train=None):
    """A raw config: a 1+1-layer, 16-wide Transformer on generated dates (character tokens),
    trained for a few steps; ``data`` and ``train`` keys are added to the defaults."""
    return {
        "data": {
            "dataset": "dates",
            "tokenizer": "char",
            "num_examples": 120,
            "val_examples": 10,
            "max_len": 40,
            **(data or {}),
        },
        "model": {
            "arch": "transformer",
            "d_model": 16,
            "num_heads": 2,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "d_ff": 32,
            "dropout": 0.0,
            "max_len": 64,
        },
        "train": {"eval_every": 2, "threads": 1, **(train or {})},
        "decode": {"max_len_a": 0.0, "max_len_b": 12},
    }


def png_claiming(width, height):
    """A PNG file (bytes) whose header claims ``width``×``height`` 1-bit pixels, with one row of
    data: a decompression bomb's header, built without allocating its pixels."""
    import struct
    import zlib

    def chunk(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit grey, no interlace
    row = zlib.compress(b"\0" * (1 + (width + 7) // 8))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", row) + chunk(b"IEND", b"")
