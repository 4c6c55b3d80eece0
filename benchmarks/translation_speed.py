"""Translation speed on real Multi30k en→de data, each number a ratio measured in one process.

1. Training throughput (real target tokens per second) of seqlab's Transformer as configured in
   ``configs/multi30k-en-de-transformer.yaml`` (length-bucketed token batches, the config's
   precision) against a reference written the usual way: ``nn.Transformer`` of the same size with
   embeddings, sinusoidal positions and an output layer, fp32, unbucketed token batches of the
   same budget, the same loss and optimizer. Steps alternate between the two.
2. Greedy decoding of the 1,014 validation sentences with seqlab's caches (self-attention
   keys/values of the prefix, encoder keys/values projected once) against three ways of
   recomputing the prefix at every step, all driving the same :func:`greedy_search`:

   - ``prefix_recomputed``: ``greedy_search(use_cache=False)``, the model's teacher-forced
     ``decode`` on the whole prefix (the encoder keys/values stay projected, logits at every
     position): what seqlab's tests compare the cache against;
   - ``no_cache``: the decoder re-run on the whole prefix from the encoder output, as
     ``nn.TransformerDecoder`` does (cross-attention keys/values projected again each step),
     logits at every position;
   - ``no_cache_last_position``: the same, but only the last position goes through the output
     layer, as the greedy loop of PyTorch's nn.Transformer translation tutorial does: the
     leanest recomputation.

   All outputs must be identical. Sentences are decoded in batches of 256 sorted by source
   length, the same for every variant. The model is the trained run
   ``runs/m30-en-de-transformer`` if it exists (``--checkpoint`` to choose), else a freshly
   initialised one (which tends to run to the length limit: more steps, so a larger gap).
   Besides the times, the matrix-product FLOPs of every variant are counted from the steps
   actually taken (rows, prefix and source lengths): their ratios are what each speed-up would
   be if every variant ran at the same FLOP/s, the ceiling that work the cache cannot remove
   (encoder, output layer) sets.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/translation_speed.py [--steps 20]

Writes ``benchmarks/results/translation_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from seqlab import load
from seqlab.config import load_config
from seqlab.data.translation_batching import PAD, TranslationBatches, pad_sequences
from seqlab.models.search import greedy_search
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq
from seqlab.nn.positional_encoding import sinusoidal_table
from seqlab.tasks.translation import build_experiment, load_pairs
from seqlab.training.optim import build_optimizer
from seqlab.training.precision import autocast, resolve_precision

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_RUN = ROOT / "runs" / "m30-en-de-transformer"


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


@dataclass(frozen=True)
class EncoderOutput:
    hidden: torch.Tensor  # (B, S, d)
    src_len: torch.Tensor  # (B,)


class UncachedDecoding(nn.Module):
    """A Transformer decoded with no cache at all, as ``nn.TransformerDecoder`` (or
    ``use_cache=False`` elsewhere) does: every step runs the decoder on the whole prefix from the
    encoder output, so self- *and* cross-attention keys/values are recomputed each time. Only the
    encoder output is kept. Drives the same :func:`greedy_search` with ``use_cache=False``.

    Args:
        last_position_only: put only the last position through the output layer (all search
            uses); else every position, as teacher-forced ``decode`` does.
    """

    def __init__(self, model: nn.Module, last_position_only: bool = False):
        super().__init__()
        self.model = model
        self.max_decode_len = model.max_decode_len
        self.last_position_only = last_position_only

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> EncoderOutput:
        hidden, _ = self.model.encoder(src, src_len)  # (B, S, d)
        return EncoderOutput(hidden, src_len)

    def decode(self, memory: EncoderOutput, prefix: torch.Tensor, *, need_attention=False):
        out = self.model.decoder(prefix, memory.hidden, memory.src_len).hidden  # (B, T, d)
        if self.last_position_only:
            out = out[:, -1:]  # (B, 1, d): greedy_search reads only the last position
        return self.model.output(out), None  # (B, T | 1, V)

    def reorder_memory(self, memory: EncoderOutput, indices: torch.Tensor) -> EncoderOutput:
        return EncoderOutput(memory.hidden.index_select(0, indices), memory.src_len[indices])


class TracedDecoding(nn.Module):
    """Passes everything to the model and records the shape of every source batch and, per
    ``decode_step``, rows, positions already decoded and source length ``(R, P, S)``: what
    :func:`decoding_flops` counts work from."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.max_decode_len = model.max_decode_len
        self.steps: list[tuple[int, int, int]] = []
        self.batches: list[tuple[int, int]] = []  # (B, S) of every source batch encoded

    def encode(self, src: torch.Tensor, src_len: torch.Tensor):
        self.batches.append((src.shape[0], src.shape[1]))
        return self.model.encode(src, src_len)

    def init_state(self, memory):
        return self.model.init_state(memory)

    def decode_step(self, memory, state, tokens, *, need_attention=False):
        self.steps.append((tokens.shape[0], state.length, memory.mask.shape[-1]))
        return self.model.decode_step(memory, state, tokens, need_attention=need_attention)

    def reorder_memory(self, memory, indices):
        return self.model.reorder_memory(memory, indices)

    def reorder_state(self, state, indices):
        return self.model.reorder_state(state, indices)


def decoding_flops(
    steps: list[tuple[int, int, int]],
    batches: list[tuple[int, int]],
    *,
    d: int,
    d_ff: int,
    vocab: int,
    encoder_layers: int,
    decoder_layers: int,
) -> dict[str, float]:
    """Matrix-product FLOPs (2 per multiply-add) of each decoding variant for the same steps.

    ``steps`` holds ``(R, P, S)`` per step (rows, positions decoded before it, source length),
    ``batches`` ``(B, S)`` per encoded source batch (padded positions count: they are computed).
    Per source position and encoder layer: projections 4d², FFN 2·d·d_ff, attention over S keys.
    Per position and decoder layer: self-attention
    projections 4d², cross-attention query/output 2d², FFN 2·d·d_ff; attention scores and sums
    2·2·d per key; cross-attention keys/values 2d² per source position (once per sentence with
    the cache and for ``prefix_recomputed``, every step for ``no_cache``); output layer d·V per
    position that goes through it.
    """
    per_pos = 2 * (6 * d * d + 2 * d * d_ff)  # one decoder layer, projections and FFN
    encoder = sum(
        b * s * encoder_layers * (2 * (4 * d * d + 2 * d * d_ff) + 4 * s * d) for b, s in batches
    )
    source_tokens = sum(b * s for b, s in batches)
    cross_kv = source_tokens * decoder_layers * 2 * 2 * d * d  # projected once per sentence
    out = {"cached": 0.0, "prefix_recomputed": 0.0, "no_cache": 0.0, "no_cache_last_position": 0}
    for r, p, s in steps:
        n = p + 1  # positions up to and including the new one
        attend_step = 4 * d * (n + s)  # one query over n prefix keys and s source keys
        attend_prefix = 4 * d * (n * (n + 1) // 2 + n * s)  # n queries, causal
        out["cached"] += r * (decoder_layers * (per_pos + attend_step) + 2 * d * vocab)
        prefix = r * n * decoder_layers * per_pos + r * decoder_layers * attend_prefix
        reproject = r * s * decoder_layers * 2 * 2 * d * d
        out["prefix_recomputed"] += prefix + r * n * 2 * d * vocab
        out["no_cache"] += prefix + reproject + r * n * 2 * d * vocab
        out["no_cache_last_position"] += prefix + reproject + r * 2 * d * vocab
    shared = {"cached": cross_kv, "prefix_recomputed": cross_kv}
    totals = {k: encoder + shared.get(k, 0) + v for k, v in out.items()}
    return {**totals, "encoder": encoder}


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
    opt_ours, opt_ref = build_optimizer(ours, cfg.train), build_optimizer(ref, cfg.train)
    data = exp.train_batches.data
    bucketed = iter(TranslationBatches(data, cfg.data.batch_tokens, bucket=True, seed=1))
    unbucketed = iter(TranslationBatches(data, cfg.data.batch_tokens, bucket=False, seed=1))
    precision = resolve_precision(cfg.train.precision)
    totals = {"seqlab": [0.0, 0], "reference": [0.0, 0]}
    ours.train()
    ref.train()
    for i in range(steps + 2):
        batch = next(bucketed)
        start = time.perf_counter()
        with autocast(precision):
            loss, n = ours.loss(batch, label_smoothing=cfg.train.label_smoothing)
        opt_ours.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(ours.parameters(), 1.0)
        opt_ours.step()
        if i >= 2:  # the first steps warm up allocators and kernels
            totals["seqlab"][0] += time.perf_counter() - start
            totals["seqlab"][1] += n

        batch = next(unbucketed)
        start = time.perf_counter()
        logits = ref(batch.src, batch.tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            batch.tgt_out.reshape(-1),
            ignore_index=PAD,
            label_smoothing=cfg.train.label_smoothing,
        )
        opt_ref.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt_ref.step()
        if i >= 2:
            totals["reference"][0] += time.perf_counter() - start
            totals["reference"][1] += int((batch.tgt_out != PAD).sum())
    rate = {k: n / s for k, (s, n) in totals.items()}
    return {
        "config": str(config),
        "steps": steps,
        "target_tokens_per_s": rate,
        "ratio": rate["seqlab"] / rate["reference"],
        "goal": 2.5,
    }


def decoding_speed(
    checkpoint: str | None, config: Path, limit: int | None, chunk: int = 256
) -> dict:
    translator = load(checkpoint) if checkpoint else build_experiment(load_config(config)).predictor
    cfg, model = translator.cfg, translator.model
    if not isinstance(model, TransformerSeq2Seq):
        raise SystemExit(
            f"--checkpoint {checkpoint}: a {type(model).__name__} run; the decoding benchmark "
            "needs a Transformer translation run (configs/multi30k-en-de-transformer.yaml)"
        )
    model.eval()
    sources = [s for s, _ in load_pairs(cfg)["val"]][:limit]
    ids = [translator.source_ids(s) for s in sources]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    traced = TracedDecoding(model)  # the cached run, with its steps recorded
    variants = {  # name: (model, use_cache)
        "cached": (traced, True),
        "prefix_recomputed": (model, False),  # encoder keys/values still projected once
        "no_cache": (UncachedDecoding(model), False),
        "no_cache_last_position": (UncachedDecoding(model, last_position_only=True), False),
    }
    times, outputs = {}, {}
    for name, (decoder, use_cache) in variants.items():
        start = time.perf_counter()
        found = {}
        with torch.no_grad():
            for k in range(0, len(order), chunk):
                rows = order[k : k + chunk]
                src, src_len = pad_sequences([ids[i] for i in rows])
                for i, h in zip(
                    rows,
                    greedy_search(
                        decoder,
                        src,
                        src_len,
                        max_len_a=cfg.decode.max_len_a,
                        max_len_b=cfg.decode.max_len_b,
                        use_cache=use_cache,
                    ),
                    strict=True,
                ):
                    found[i] = h.tokens
        times[name] = time.perf_counter() - start
        outputs[name] = [found[i] for i in range(len(ids))]
    m = cfg.model
    flops = decoding_flops(
        traced.steps,
        traced.batches,
        d=m.d_model,
        d_ff=m.d_ff,
        vocab=model.output.out_features,
        encoder_layers=m.encoder_layers,
        decoder_layers=m.decoder_layers,
    )
    references = [k for k in variants if k != "cached"]
    return {
        "sentences": len(ids),
        "batch_size": chunk,
        "model": checkpoint or "freshly initialised",
        "seconds": times,
        "ratios": {k: times[k] / times["cached"] for k in references},
        "gflop": {k: v / 1e9 for k, v in flops.items()},
        "encoder_share_of_cached_flops": flops["encoder"] / flops["cached"],
        "flop_ratios": {k: flops[k] / flops["cached"] for k in references},
        "gflop_per_s": {k: flops[k] / 1e9 / times[k] for k in variants},
        "identical_outputs": all(o == outputs["cached"] for o in outputs.values()),
        "decode_steps": len(traced.steps),
        "mean_output_tokens": sum(map(len, outputs["cached"])) / max(len(ids), 1),
        "goal": 5.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--config", type=Path, default=ROOT / "configs" / "multi30k-en-de-transformer.yaml"
    )
    parser.add_argument(
        "--checkpoint",
        default=str(DEFAULT_RUN) if (DEFAULT_RUN / "checkpoints").is_dir() else None,
        help="a trained en→de run directory for the decoding benchmark "
        "(default: runs/m30-en-de-transformer if it exists, the README's training command)",
    )
    parser.add_argument("--batch-size", type=int, default=256, help="sentences decoded at once")
    parser.add_argument(
        "--sentences", type=int, help="decode only the first N validation sentences"
    )
    args = parser.parse_args()
    result = {
        "training": training_throughput(args.steps, args.config),
        "decoding": decoding_speed(args.checkpoint, args.config, args.sentences, args.batch_size),
        "threads": torch.get_num_threads(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "translation_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    t, d = result["training"], result["decoding"]
    print(
        f"training: seqlab {t['target_tokens_per_s']['seqlab']:,.0f} vs reference "
        f"{t['target_tokens_per_s']['reference']:,.0f} target tokens/s = {t['ratio']:.2f}x (goal >= 2.5)"
    )
    sec, ratio, flop = d["seconds"], d["ratios"], d["flop_ratios"]
    print(
        f"greedy decoding of {d['sentences']} sentences: cached {sec['cached']:.1f} s; "
        f"identical outputs: {d['identical_outputs']} (goal >= 5x); the encoder is "
        f"{d['encoder_share_of_cached_flops']:.0%} of the cached run's FLOPs"
    )
    for name in ratio:
        print(
            f"  vs {name:<24} {sec[name]:5.1f} s = {ratio[name]:.1f}x "
            f"(FLOP ratio {flop[name]:.1f}x, the ceiling at equal FLOP/s)"
        )


if __name__ == "__main__":
    main()
