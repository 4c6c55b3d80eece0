"""Attention heatmaps of translations (``seqlab translate --attention-png``):
:func:`draw_alignment`, titled with :func:`alignment_name`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.models.search import Hypothesis
from seqlab.tasks.translation.decoding import Sentence

#: longest source/output drawn in an attention heatmap (tokens); longer ones are cut, with a note
MAX_PLOT_TOKENS = 80


def alignment_name(model: Any, cfg: Any, models: int = 1) -> str:
    """Which attention :func:`draw_alignment` draws: one decoder layer's cross-attention,
    averaged over its heads, for a Transformer (``attention_layer``); the decoder's one
    attention over the source for an RNN (``model.attention``, its score); the mean over the
    models of an ensemble (``models`` > 1). ``model``: the network; ``cfg``: its config
    (``cfg.model``)."""
    m = cfg
    layer = getattr(model, "attention_layer", None)
    if models > 1:
        return f"attention over the source, mean over the {models} models"
    if layer is not None:
        n = m.decoder_layers  # type: ignore[attr-defined]
        return (  # counted from 0, as attention_layer and classify's --layer count
            f"decoder layer {layer % n} (layers 0–{n - 1}), mean of its "
            f"{m.num_heads} heads — cross-attention"  # type: ignore[attr-defined]
        )
    score = getattr(m, "attention", None)
    return f"the decoder's {score + ' ' if isinstance(score, str) else ''}attention over the source"


def draw_alignment(
    directory: Path, number: int, sentence: Sentence, hyp: Hypothesis, vocabs: Any, what: str
) -> Path:
    """The source × output heatmap of ``sentence``'s hypothesis ``hyp`` (decoded with
    ``need_weights``) as ``directory/attention-NNNN.png`` after ``number``
    (:func:`~seqlab.plotting.attention_png_name`), titled with the sentence and ``what`` is
    drawn (:func:`alignment_name`); ``vocabs``: the run's vocabularies."""
    from seqlab.plotting_heatmaps import attention_png_name, plot_attention  # deferred: matplotlib

    x_tokens = vocabs.src_vocab.to_tokens(list(sentence.ids))
    y_tokens = vocabs.tgt_vocab.to_tokens(hyp.tokens) + ["<eos>"]
    assert hyp.attention is not None
    weights = hyp.attention[: len(y_tokens), : len(x_tokens)]
    line = sentence.text
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
        title=f"{title}\n{what}",
        xlabel="source",
        ylabel="output",
    )
