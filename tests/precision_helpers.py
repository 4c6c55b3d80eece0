"""Running a comparison of two paths in fp32 and with bf16 forced, on any CPU.

In fp32 two equivalent paths (batch of 1 vs N, padded vs not, greedy vs beam 1, cached vs full,
seqlab vs CTranslate2) give the same tokens. In bf16 each product is rounded to 8 mantissa bits
and different shapes round differently, so the paths may swap two tokens whose log-probabilities
are within :data:`TIE` nats (in fp32) — the documented ties of ``seqlab.runtime.precision`` — and nothing
else. bf16 is emulated (slowly) where the CPU lacks it: keep the models tiny.
"""

import contextlib
import warnings

import pytest
import torch

from seqlab.runtime.precision import autocast, resolve_precision
from seqlab.tokens import BOS, EOS

PRECISIONS = ["fp32", "bf16"]
#: the same, bf16 in the full tier only: for the comparisons that train (seconds each, bf16 being
#: emulated on AVX2); fp32 keeps the property in the default tier (``make test``)
PRECISIONS_BF16_SLOW = ["fp32", pytest.param("bf16", marks=pytest.mark.slow)]
#: bf16 may swap two outputs whose fp32 log-probabilities (or scores) are this close, in nats
TIE = 0.15
#: how close two scores of the same output are, per precision
SCORE_TOL = {"fp32": 1e-4, "bf16": 0.1}


def resolved(precision):
    with warnings.catch_warnings():  # forced bf16 on a CPU without it warns: expected here
        warnings.simplefilter("ignore")
        return resolve_precision(precision)


@contextlib.contextmanager
def computing_in(precision, device="cpu"):
    """Inference in ``precision`` (as a predictor runs it) on ``device``: no_grad and bf16
    autocast."""
    with torch.no_grad(), autocast(resolved(precision), torch.device(device)):
        yield


def fp32_log_probs(model, src_ids, prefix, device="cpu"):
    """log p(· | prefix, source) at each position of ``<bos> prefix``, in fp32: (len+1, V), the
    model and the tensors on ``device``."""
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([[BOS, *prefix]], device=device)
    lengths = torch.tensor([len(src_ids)], device=device)
    with torch.no_grad():
        return model(src, lengths, tgt_in)[0].float().log_softmax(-1)


def is_near_tie(model, src_ids, a, b, alpha=None, device="cpu"):
    """Whether outputs ``a`` and ``b`` (token lists without bos/eos) are a bf16 tie for ``model``:
    at their first difference the two tokens are within TIE nats in fp32, or their whole-sentence
    fp32 scores (length-normalised with ``alpha`` for beam search) are."""
    t = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    x = a[t] if t < len(a) else EOS
    y = b[t] if t < len(b) else EOS
    step = fp32_log_probs(model, src_ids, a[:t], device)[t]
    if abs(float(step[x] - step[y])) < TIE:
        return True

    def score(tokens):
        lp = fp32_log_probs(model, src_ids, tokens, device)
        labels = torch.tensor([*tokens, EOS], device=device)
        total = float(lp[torch.arange(len(labels), device=device), labels].sum())
        return total if alpha is None else total / (len(tokens) + 1) ** alpha

    return abs(score(a) - score(b)) < TIE


def assert_same_outputs(model, sources, ours, theirs, precision, alpha=None, device="cpu"):
    """Token lists ``ours[i]`` and ``theirs[i]`` are equal (fp32), or equal up to ties (bf16);
    ``model`` on ``device``."""
    assert len(ours) == len(theirs)
    for src_ids, a, b in zip(sources, ours, theirs, strict=True):
        if a == b:
            continue
        assert precision == "bf16", f"fp32 outputs differ: {a} != {b} (source {src_ids})"
        assert is_near_tie(model, src_ids, a, b, alpha, device), (
            f"bf16 outputs differ beyond a tie: {a} != {b} (source {src_ids})"
        )


def assert_close_in(precision, actual, expected, atol=1e-5, rtol=0.0):
    """Two tensors of equivalent paths agree: to ``atol`` in fp32, to bf16's rounding in bf16."""
    if precision == "bf16":
        atol, rtol = max(atol, 0.05), max(rtol, 0.02)
    torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol)
