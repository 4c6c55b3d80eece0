"""Translation speed on real Multi30k en→de data, each number a ratio measured in one process.

1. Training throughput (real target tokens per second) of seqlab's Transformer as configured in
   ``configs/multi30k-en-de-transformer.yaml`` (length-bucketed token batches, the config's
   precision) against a reference written the usual way: ``nn.Transformer`` of the same size with
   embeddings, sinusoidal positions and an output layer, fp32, unbucketed token batches of the
   same budget, the same loss and optimizer. Steps alternate between the two.
2. Greedy decoding of the 1,014 validation sentences with seqlab's caches (self-attention
   keys/values of the prefix, encoder keys/values projected once) against decoding with no cache,
   the way ``nn.TransformerDecoder`` or ``use_cache=False`` does it: the decoder re-run on the
   whole prefix from the encoder output at every step. Also reported: recomputing the prefix
   while keeping the projected encoder keys/values (``greedy_search(use_cache=False)``). All
   outputs must be identical. Sentences are decoded in batches of 256 sorted by source length,
   the same for every variant. The model is the trained run ``runs/m30-en-de-transformer`` if
   it exists (``--checkpoint`` to choose), else a freshly initialised one (which tends to run
   to the length limit: more steps, so a larger gap).

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

from seqlab.config import load_config
from seqlab.data.translation_batching import PAD, TranslationBatches, pad_sequences
from seqlab.experiment import load_run
from seqlab.optim import build_optimizer
from seqlab.positional_encoding import sinusoidal_table
from seqlab.search import greedy_search
from seqlab.translation import build_translation_experiment, encode_sources

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
    encoder output is kept. Drives the same :func:`greedy_search` with ``use_cache=False``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.max_decode_len = model.max_decode_len

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> EncoderOutput:
        hidden, _ = self.model.encoder(src, src_len)  # (B, S, d)
        return EncoderOutput(hidden, src_len)

    def decode(self, memory: EncoderOutput, prefix: torch.Tensor, *, need_attention=False):
        out = self.model.decoder(prefix, memory.hidden, memory.src_len)  # (B, T, d)
        return self.model.output(out.hidden), None  # (B, T, V)

    def reorder_memory(self, memory: EncoderOutput, indices: torch.Tensor) -> EncoderOutput:
        return EncoderOutput(memory.hidden.index_select(0, indices), memory.src_len[indices])


def training_throughput(steps: int, config: Path) -> dict:
    cfg = load_config(config)
    exp = build_translation_experiment(cfg)
    m = cfg.model
    ref = ReferenceTransformer(
        len(exp.vocabs.src_vocab),
        len(exp.vocabs.tgt_vocab),
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
    bf16 = cfg.train.precision == "bf16"
    totals = {"seqlab": [0.0, 0], "reference": [0.0, 0]}
    ours.train()
    ref.train()
    for i in range(steps + 2):
        batch = next(bucketed)
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
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
    if checkpoint:
        cfg, model, exp, _ = load_run(checkpoint)
    else:
        cfg = load_config(config)
        exp = build_translation_experiment(cfg)
        model = exp.model
    model.eval()
    sources = [s for s, _ in exp.splits["val"]][:limit]
    ids, _ = encode_sources(sources, exp.vocabs, cfg.data.max_len)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    variants = {  # name: (model, use_cache)
        "cached": (model, True),
        "prefix_recomputed": (model, False),  # encoder keys/values still projected once
        "no_cache": (UncachedDecoding(model), False),
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
    return {
        "sentences": len(ids),
        "batch_size": chunk,
        "model": checkpoint or "freshly initialised",
        "seconds": times,
        "ratio": times["no_cache"] / times["cached"],
        "ratio_prefix_only": times["prefix_recomputed"] / times["cached"],
        "identical_outputs": all(o == outputs["cached"] for o in outputs.values()),
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
    sec = d["seconds"]
    print(
        f"greedy decoding of {d['sentences']} sentences: cached {sec['cached']:.1f} s, "
        f"no cache {sec['no_cache']:.1f} s = {d['ratio']:.1f}x (goal >= 5); prefix recomputed with "
        f"the encoder projection kept {sec['prefix_recomputed']:.1f} s = "
        f"{d['ratio_prefix_only']:.1f}x; identical outputs: {d['identical_outputs']}"
    )


if __name__ == "__main__":
    main()
