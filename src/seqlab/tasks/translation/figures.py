"""Attention heatmaps of translations (``seqlab translate --attention-png``):
:func:`draw_alignment`, titled with :func:`alignment_name`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.models.search import Hypothesis

#: longest source/output drawn in an attention heatmap (tokens); longer ones are cut, with a note
MAX_PLOT_TOKENS = 80


def alignment_name(translator: Any) -> str:
    """Which attention :meth:`draw_alignment` draws: one decoder layer's cross-attention,
    averaged over its heads, for a Transformer (``attention_layer``); the decoder's one
    attention over the source for an RNN (``model.attention``, its score); the mean over the
    models of an ensemble."""
    m = translator.cfg.model
    layer = getattr(translator.model, "attention_layer", None)
    if translator.members:
        return f"attention over the source, mean over the {len(translator.members) + 1} models"
    if layer is not None:
        n = m.decoder_layers  # type: ignore[attr-defined]
        return (  # counted from 0, as attention_layer and classify's --layer count
            f"decoder layer {layer % n} (layers 0–{n - 1}), mean of its "
            f"{m.num_heads} heads — cross-attention"  # type: ignore[attr-defined]
        )
    score = getattr(m, "attention", None)
    return f"the decoder's {score + ' ' if isinstance(score, str) else ''}attention over the source"


def draw_alignment(
    translator: Any, directory: Path, number: int, line: str, hyp: Hypothesis
) -> Path:
    """The source × output heatmap of ``line``'s hypothesis ``hyp`` (decoded with
    ``need_weights``) as ``directory/attention-NNNN.png`` after ``number``
    (:func:`~seqlab.plotting.attention_png_name`), titled with the line and
    :attr:`alignment_name`."""
    from seqlab.plotting import attention_png_name, plot_attention  # deferred: matplotlib

    x_tokens = translator.vocabs.src_vocab.to_tokens(translator.source_ids(line))
    y_tokens = translator.vocabs.tgt_vocab.to_tokens(hyp.tokens) + ["<eos>"]
    assert hyp.attention is not None
    weights = hyp.attention[: len(y_tokens), : len(x_tokens)]
    title = line if len(line) <= 100 else line[:97] + "..."
    if len(x_tokens) > MAX_PLOT_TOKENS or len(y_tokens) > MAX_PLOT_TOKENS:
        title += f" (first {MAX_PLOT_TOKENS} tokens shown)"
        x_tokens, y_tokens = x_tokens[:MAX_PLOT_TOKENS], y_tokens[:MAX_PLOT_TOKENS]
        weights = weights[: len(y_tokens), : len(x_tokens)]
    return plot_attention(
        weights,
        directory / attention_png_name(number),
        x_tokens=x_tokens,
        y_tokens=y_tokens,
        title=f"{title}\n{alignment_name(translator)}",
        xlabel="source",
        ylabel="output",
    )
