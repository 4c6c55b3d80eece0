"""Dataset statistics, for ``seqlab data stats NAME [--src en --tgt de] [--batch-tokens N] [--json]``.

- **Translation** (``multi30k``, ``fra-eng``): per split and side, the number of sentences and
  tokens, the vocabulary size (distinct tokens in that split and side) and sentence-length
  percentiles, in tokens of the chosen tokenizer (``word``/``char`` with the ``nmt`` cleaning
  the models use, or ``subword`` trained on the training split). With ``batch_tokens``, also the
  padded/real token ratio of bucketed and of random token-budget batches over the training split
  (epoch 0, seed 0; see :mod:`seqlab.data.translation_batching`). fra–eng's splits are the seeded
  held-out split of :func:`seqlab.data.parallel.split_heldout`.
- **Language modelling** (``timemachine``, ``tinyshakespeare``): lines, characters (line breaks
  included), whitespace-separated words, distinct characters and words, and percentiles of the
  length of the non-empty lines, in characters and in words.

Percentiles are observed values (``numpy``'s ``inverted_cdf``): p50, p90, p95, p99 and max.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seqlab.data import registry
from seqlab.data.cmn_eng import cmn_eng_splits
from seqlab.data.lm_corpus import LM_FILES, read_text
from seqlab.data.parallel import load_translation_splits
from seqlab.data.tokenizers import Tokenizer, normalize_text
from seqlab.data.translation_batching import (
    TranslationBatches,
    build_vocabs,
    encode_pairs,
    padding_ratio,
)
from seqlab.errors import DataError
from seqlab.runtime.progress import progress

TRANSLATION = {"multi30k": ("en", "de"), "fra-eng": ("en", "fr"), "cmn-eng": ("zh", "en")}
PERCENTILES = (50, 90, 95, 99)


def length_summary(lengths: Sequence[int]) -> dict[str, int]:
    """``{"p50", "p90", "p95", "p99", "max"}`` of a list of lengths (all 0 when it is empty)."""
    if not lengths:
        return {**{f"p{q}": 0 for q in PERCENTILES}, "max": 0}
    values = np.percentile(np.asarray(lengths), PERCENTILES, method="inverted_cdf")
    return {
        **{f"p{q}": int(v) for q, v in zip(PERCENTILES, values, strict=True)},
        "max": int(max(lengths)),
    }


def side_stats(sentences: Sequence[str], tokenizer: Tokenizer) -> dict[str, Any]:
    """Sentence count, token count, distinct tokens and length percentiles of one side."""
    tokenized = [tokenizer.tokenize(s) for s in progress(sentences, "tokenizing", len(sentences))]
    lengths = [len(t) for t in tokenized]
    distinct = {tok for sent in tokenized for tok in sent}
    return {
        "sentences": len(sentences),
        "tokens": sum(lengths),
        "vocab": len(distinct),
        **length_summary(lengths),
    }


def translation_stats(
    name: str,
    src: str,
    tgt: str,
    batch_tokens: int | None = None,
    tokenizer: str = "word",
    max_len: int = 100,
    val_examples: int = 1000,
) -> dict[str, Any]:
    """Statistics of a translation dataset (see the module docstring)."""
    if name == "cmn-eng":
        splits = cmn_eng_splits(src, tgt, val_examples)
    else:
        splits = load_translation_splits(name, src, tgt, val_examples=val_examples)
    vocabs = build_vocabs(splits["train"].pairs, tokenizer)
    out: dict[str, Any] = {
        "dataset": name,
        "kind": "translation",
        "src": src,
        "tgt": tgt,
        "tokenizer": tokenizer,
    }
    out["splits"] = {
        split: {
            "pairs": len(corpus),
            "skipped": corpus.skipped,
            "src": side_stats([s for s, _ in corpus.pairs], vocabs.src_tokenizer),
            "tgt": side_stats([t for _, t in corpus.pairs], vocabs.tgt_tokenizer),
        }
        for split, corpus in splits.items()
    }
    if batch_tokens is not None:
        data = encode_pairs(splits["train"].pairs, vocabs, max_len)
        padding: dict[str, Any] = {
            "split": "train",
            "batch_tokens": batch_tokens,
            "max_len": max_len,
        }
        for label, bucket in (("bucketed", True), ("random", False)):
            ratio = padding_ratio(TranslationBatches(data, batch_tokens, bucket=bucket, seed=0))
            padding[label] = {"tgt": ratio["tgt"], "src": ratio["src"], "batches": ratio["batches"]}
        out["padding"] = padding
    return out


def lm_stats(name: str) -> dict[str, Any]:
    """Statistics of a language-modelling text file (see the module docstring)."""
    path = registry.resolve(name, LM_FILES[name])
    text = read_text(path)
    lines = text.splitlines()
    nonempty = [line for line in lines if line.strip()]
    words = text.split()
    return {
        "dataset": name,
        "kind": "lm",
        "file": str(path),
        "lines": len(lines),
        "nonempty_lines": len(nonempty),
        "characters": len(text),
        "words": len(words),
        "char_vocab": len(set(text)),
        "word_vocab": len(set(words)),
        "line_chars": length_summary([len(line) for line in nonempty]),
        "line_words": length_summary([len(line.split()) for line in nonempty]),
    }


def dataset_stats(
    name: str,
    src: str | None = None,
    tgt: str | None = None,
    batch_tokens: int | None = None,
    tokenizer: str = "word",
    max_len: int = 100,
    val_examples: int = 1000,
) -> dict[str, Any]:
    """Statistics of a dataset by name, as a JSON-ready dict (render it with :func:`format_stats`).

    Args:
        name: ``multi30k``, ``fra-eng``, ``timemachine`` or ``tinyshakespeare``.
        src, tgt: translation languages; defaults en→de (Multi30k) and en→fr (fra–eng).
        batch_tokens: translation only: also measure padding of bucketed vs random batches.
        tokenizer: translation only: ``word``, ``char`` or ``subword``.
        max_len: translation only: truncation length used for the padding measurement.
        val_examples: fra–eng only: pairs held out for validation.
    """
    if name in TRANSLATION:
        default_src, default_tgt = TRANSLATION[name]
        return translation_stats(
            name,
            src or default_src,
            tgt or default_tgt,
            batch_tokens,
            tokenizer,
            max_len,
            val_examples,
        )
    if name in LM_FILES:
        if src is not None or tgt is not None or batch_tokens is not None:
            raise DataError(
                f"{name} is a single text: --src, --tgt and --batch-tokens apply to translation datasets"
            )
        return lm_stats(name)
    known = ", ".join([*TRANSLATION, *LM_FILES])
    raise DataError(f"no statistics for dataset {name!r}; expected one of {known}")


def _percentile_cells(d: dict[str, Any]) -> list[str]:
    return [f"{d[f'p{q}']:>5}" for q in PERCENTILES] + [f"{d['max']:>5}"]


def format_stats(d: dict[str, Any]) -> str:
    """A readable table of :func:`dataset_stats`' result."""
    pct = "".join(f"{'p' + str(q):>6}" for q in PERCENTILES) + f"{'max':>6}"
    if d["kind"] == "lm":
        lines = [
            f"{d['dataset']}  ({d['file']})",
            f"  lines {d['lines']:,} ({d['nonempty_lines']:,} non-empty), characters {d['characters']:,}, "
            f"words {d['words']:,}",
            f"  distinct characters {d['char_vocab']:,}, distinct words {d['word_vocab']:,}",
            f"  non-empty line length     {pct}",
            "  " + f"{'in characters':<25}" + " " + " ".join(_percentile_cells(d["line_chars"])),
            "  " + f"{'in words':<25}" + " " + " ".join(_percentile_cells(d["line_words"])),
        ]
        return "\n".join(lines)
    lines = [
        f"{d['dataset']} {d['src']}→{d['tgt']}  ({d['tokenizer']} tokens)",
        f"  {'split':<18}{'side':<6}{'sentences':>10}{'tokens':>10}{'vocab':>8}{pct}",
    ]
    for split, s in d["splits"].items():
        for side in ("src", "tgt"):
            x = s[side]
            lang = d[side]
            lines.append(
                f"  {split:<18}{lang:<6}{x['sentences']:>10,}{x['tokens']:>10,}{x['vocab']:>8,} "
                + " ".join(_percentile_cells(x))
            )
    skipped = {split: s["skipped"] for split, s in d["splits"].items() if s["skipped"]}
    if skipped:
        lines.append(
            "  skipped malformed lines: " + ", ".join(f"{k} {v}" for k, v in skipped.items())
        )
    if "padding" in d:
        p = d["padding"]
        lines.append(f"  padded/real tokens, {p['split']}, batch_tokens={p['batch_tokens']}:")
        for label in ("bucketed", "random"):
            r = p[label]
            lines.append(
                f"    {label:<9} target {r['tgt']:.3f}  source {r['src']:.3f}  ({r['batches']} batches)"
            )
    return "\n".join(lines)


def ngram_frequencies(tokens: Sequence[str], n_max: int = 3) -> dict[int, list[int]]:
    """Counts of the distinct 1- … ``n_max``-grams of ``tokens``, largest first (d2l.ai §9.2.5)."""
    from collections import Counter

    out = {}
    for n in range(1, n_max + 1):
        grams = Counter(zip(*(tokens[i:] for i in range(n)), strict=False))
        out[n] = sorted(grams.values(), reverse=True)
    return out


def zipf_slope(freqs: Sequence[int], lo: int = 10, hi: int = 1000) -> float:
    """Least-squares slope of log frequency against log rank over ranks ``lo`` … ``hi`` (Zipf's
    law: n_i ∝ 1 / i^α, so the slope is −α)."""
    import math

    hi = min(hi, len(freqs))
    if hi - lo < 2:
        return float("nan")
    xs = [math.log(r) for r in range(lo, hi + 1)]
    ys = [math.log(freqs[r - 1]) for r in range(lo, hi + 1)]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def zipf_stats(name: str, plot: str | Path | None = None) -> dict[str, Any]:
    """Word unigram/bigram/trigram frequency against rank for a language-modelling text, after
    d2l's cleaning (letters only, lower case), with each fitted log–log slope; optionally drawn
    on log–log axes as PNG."""
    text = read_text(registry.resolve(name, LM_FILES[name]))
    words = normalize_text(text, "letters").split()
    freqs = ngram_frequencies(words, 3)
    out = {
        "dataset": name,
        "words": len(words),
        "zipf": {
            label: {
                "distinct": len(freqs[n]),
                "top": freqs[n][:5],
                "slope_10_1000": zipf_slope(freqs[n]),
            }
            for n, label in ((1, "unigram"), (2, "bigram"), (3, "trigram"))
        },
    }
    if plot is not None:
        import torch

        from seqlab.plotting import plot_loglog  # deferred: matplotlib

        plot_loglog(
            {
                label: torch.tensor(freqs[n], dtype=torch.float)
                for n, label in ((1, "unigram"), (2, "bigram"), (3, "trigram"))
            },
            plot,
            title=f"{name}: word n-gram frequency by rank",
        )
        out["plot"] = str(plot)
    return out
