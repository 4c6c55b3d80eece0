"""Training speed of the Multi30k en→de Transformer, each number measured in one process.

1. Throughput against a reference written the usual way (real target tokens per second):
   seqlab's Transformer as configured in ``configs/multi30k-en-de-transformer.yaml``
   (length-bucketed token batches, ``precision: auto``) against ``nn.Transformer`` of the same
   size with embeddings, sinusoidal positions and an output layer, fp32, unbucketed token batches
   of the same budget, the same loss and optimizer. Steps alternate between the two. Goal ≥ 3×.
2. The fused loss (:func:`seqlab.nn.losses.masked_cross_entropy`: cross-entropy with label
   smoothing and its gradient in one pass over cache-sized pieces, real positions only) against
   the same model trained with ``F.cross_entropy`` over every position, as before it: a copy of
   seqlab's model, the same batches, steps alternating.
3. Useful matrix-product FLOP/s of seqlab's training steps over the machine's measured
   ``torch.mm`` peak (fp32, and bf16 where the CPU runs it natively), measured in the same run.
   "Useful" counts the products a step needs for the real (unpadded) tokens: projections, FFN,
   attention over real positions (causal half for the decoder's self-attention), the output
   layer; backward as twice the forward (:func:`training_flops`). Goal ≥ 50 %.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/translation_training.py [--steps 20]

Writes ``benchmarks/results/translation_training.json``, with the machine it ran on.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from seqlab.config import TransformerConfig, load_config
from seqlab.data.translation_batching import Batch, TranslationBatches
from seqlab.nn.positional_encoding import sinusoidal_table
from seqlab.runtime.allocator import use_huge_pages
from seqlab.runtime.machine import machine, matmul_peak
from seqlab.runtime.precision import autocast, resolve_precision
from seqlab.tasks.translation import build_experiment
from seqlab.tokens import PAD
from seqlab.training.optim import build_optimizer

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


class ReferenceTransformer(nn.Module):
    """The usual hand-written wrapper around ``nn.Transformer`` (batch_first, post-norm)."""

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d: int,
        heads: int,
        enc: int,
        dec: int,
        ff: int,
        dropout: float,
    ):
        super().__init__()
        self.d = d
        self.src_embed = nn.Embedding(src_vocab, d)
        self.tgt_embed = nn.Embedding(tgt_vocab, d)
        self.register_buffer("pe", sinusoidal_table(1024, d), persistent=False)
        self.transformer = nn.Transformer(d, heads, enc, dec, ff, dropout, batch_first=True)
        self.out = nn.Linear(d, tgt_vocab)

    def forward(self, src, tgt_in):
        s = self.src_embed(src) * math.sqrt(self.d) + self.pe[: src.shape[1]]
        t = self.tgt_embed(tgt_in) * math.sqrt(self.d) + self.pe[: tgt_in.shape[1]]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        h = self.transformer(
            s,
            t,
            tgt_mask=causal,
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=src == PAD,
        )
        return self.out(h)


def training_flops(batch: Batch, m: TransformerConfig, tgt_vocab: int) -> int:
    """Matrix-product FLOPs of one training step (forward + backward = 3 × forward) on ``batch``'s
    real tokens (see the module docstring)."""
    d, ff = m.d_model, m.d_ff
    src, tgt = batch.src_lengths.tolist(), batch.tgt_lengths.tolist()
    forward = 0
    for s, t in zip(src, tgt, strict=True):
        encoder = m.encoder_layers * (2 * s * (4 * d * d + 2 * d * ff) + 4 * s * s * d)
        causal = t * (t + 1) // 2
        decoder = m.decoder_layers * (
            2 * t * (4 * d * d + 2 * d * ff)  # self-attention projections, FFN
            + 4 * causal * d  # self-attention scores and weighted sums, causal
            + 2 * t * 2 * d * d  # cross-attention queries and output
            + 2 * s * 2 * d * d  # cross-attention keys and values
            + 4 * t * s * d  # cross-attention scores and weighted sums
        )
        forward += encoder + decoder + 2 * t * d * tgt_vocab
    return 3 * forward


def update(model: nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One optimizer step, as the trainer takes it (gradient clipping at 1)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def training_throughput(steps: int, config: Path) -> dict:
    cfg = load_config(config)
    exp = build_experiment(cfg)
    m = cfg.model
    ref = ReferenceTransformer(
        exp.meta["src_vocab_size"],
        exp.meta["tgt_vocab_size"],
        m.d_model,
        m.num_heads,
        m.encoder_layers,
        m.decoder_layers,
        m.d_ff,
        m.dropout,
    )
    ours = exp.model
    plain = copy.deepcopy(ours)  # the same model, trained with F.cross_entropy
    opt_ours, opt_ref = build_optimizer(ours, cfg.train), build_optimizer(ref, cfg.train)
    opt_plain = build_optimizer(plain, cfg.train)
    data = exp.train_batches.data
    bucketed = iter(TranslationBatches(data, cfg.data.batch_tokens, bucket=True, seed=1))
    unbucketed = iter(TranslationBatches(data, cfg.data.batch_tokens, bucket=False, seed=1))
    precision = resolve_precision(cfg.train.precision)
    totals = {"seqlab": [0.0, 0], "reference": [0.0, 0], "seqlab_plain_loss": [0.0, 0]}
    useful = 0
    ours.train()
    ref.train()
    plain.train()
    smoothing = cfg.train.label_smoothing
    for i in range(steps + 2):
        batch = next(bucketed)
        start = time.perf_counter()
        with autocast(precision):
            loss, n = ours.loss(batch, label_smoothing=smoothing)
        update(ours, opt_ours, loss)
        if i >= 2:  # the first steps warm up allocators and kernels
            totals["seqlab"][0] += time.perf_counter() - start
            totals["seqlab"][1] += n
            useful += training_flops(batch, m, exp.meta["tgt_vocab_size"])

        start = time.perf_counter()
        with autocast(precision):
            logits = plain(batch.src, batch.src_lengths, batch.tgt_in)
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(),
                batch.tgt_out.masked_fill(batch.tgt_out == PAD, -100).flatten(),
                label_smoothing=smoothing,
            )
        update(plain, opt_plain, loss)
        if i >= 2:
            totals["seqlab_plain_loss"][0] += time.perf_counter() - start
            totals["seqlab_plain_loss"][1] += n

        batch = next(unbucketed)
        start = time.perf_counter()
        logits = ref(batch.src, batch.tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            batch.tgt_out.reshape(-1),
            ignore_index=PAD,
            label_smoothing=cfg.train.label_smoothing,
        )
        update(ref, opt_ref, loss)
        if i >= 2:
            totals["reference"][0] += time.perf_counter() - start
            totals["reference"][1] += int((batch.tgt_out != PAD).sum())
    rate = {k: n / s for k, (s, n) in totals.items()}
    achieved = useful / totals["seqlab"][0]
    peak = matmul_peak(torch.bfloat16 if precision.precision == "bf16" else torch.float32)
    return {
        "config": str(config),
        "steps": steps,
        "precision": precision.precision,
        "precision_reason": precision.reason,
        "target_tokens_per_s": rate,
        "ratio": rate["seqlab"] / rate["reference"],
        "ratio_goal": 3.0,
        "fused_loss_speedup": rate["seqlab"] / rate["seqlab_plain_loss"],
        "useful_flop_per_s": achieved,
        "matmul_peak_flop_per_s": peak,
        "fp32_matmul_peak_flop_per_s": matmul_peak(torch.float32),
        "share_of_peak": achieved / peak,
        "share_goal": 0.5,
    }


def main() -> None:
    use_huge_pages()  # as the seqlab command does: before the first tensor
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = default")
    parser.add_argument(
        "--config", type=Path, default=ROOT / "configs" / "multi30k-en-de-transformer.yaml"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    training = training_throughput(args.steps, args.config)
    result = {"training": training, "machine": machine(training["precision"])}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "translation_training.json").write_text(json.dumps(result, indent=2) + "\n")
    t = training
    print(
        f"machine: {result['machine']['cpu']}, {result['machine']['threads']} threads, {t['precision']}"
    )
    print(
        f"training: seqlab {t['target_tokens_per_s']['seqlab']:,.0f} vs nn.Transformer reference "
        f"{t['target_tokens_per_s']['reference']:,.0f} target tokens/s = {t['ratio']:.2f}x (goal >= 3)"
    )
    print(
        f"fused loss: {t['fused_loss_speedup']:.2f}x the same model trained with F.cross_entropy "
        f"({t['target_tokens_per_s']['seqlab_plain_loss']:,.0f} target tokens/s)"
    )
    print(
        f"useful matmul throughput {t['useful_flop_per_s'] / 1e9:.1f} GFLOP/s = "
        f"{t['share_of_peak']:.0%} of the measured torch.mm peak "
        f"{t['matmul_peak_flop_per_s'] / 1e9:.1f} GFLOP/s (goal >= 50%)"
    )


if __name__ == "__main__":
    main()
