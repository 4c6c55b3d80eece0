"""Reading a translation back in one teacher-forced pass (:func:`read_attention`, behind
:meth:`~seqlab.tasks.translation.Translator.attention`): each output token's log-probability and
every attention weight the model has (:class:`TranslationAttention`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from seqlab.models.search import token_log_probs
from seqlab.runtime.precision import autocast
from seqlab.tasks.translation.decoding import Sentence
from seqlab.tokens import BOS, EOS


@dataclass
class TranslationAttention:
    """One translation read back in a teacher-forced pass
    (:meth:`~seqlab.tasks.translation.Translator.attention`): what each output token cost and
    where the model looked. Weights are float, on the CPU.

    Attributes:
        source_tokens: the S tokens the encoder read (the last ``<eos>``).
        target_tokens: the T output tokens (the last ``<eos>``).
        target_inputs: the T tokens the decoder read (``<bos>``, then the output's).
        log_probs: ``(T,)``: each output token's log-probability as the search scored it; their
            sum is the hypothesis's ``log_prob``.
        alignment: ``(T, S)``: the weights over the source (None without attention).
        layers: by kind (:attr:`~seqlab.tasks.translation.Translator.attention_kinds`), one
            ``(h, ·, ·)`` tensor per layer: ``encoder`` ``(h, S, S)``, ``decoder``
            ``(h, T, T)``, ``cross`` ``(h, T, S)``.
    """

    source_tokens: list[str]
    target_tokens: list[str]
    target_inputs: list[str]
    log_probs: torch.Tensor
    alignment: torch.Tensor | None
    layers: dict[str, list[torch.Tensor]]


def read_attention(
    model: Any, vocabs: Any, precision: str | None, sentence: Sentence, tokens: Sequence[int]
) -> TranslationAttention:
    """``tokens`` (target ids without ``<bos>`` and ``<eos>``) of ``sentence`` read back by
    ``model`` (:meth:`~seqlab.models.encoder_decoder.EncoderDecoder.attention_maps`) in
    ``precision``, with the run's ``vocabs`` (the caller runs it under ``no_grad``:
    :meth:`~seqlab.tasks.translation.Translator.attention`)."""
    device = next(model.parameters()).device
    src_ids, out_ids = list(sentence.ids), [*tokens, EOS]
    src = torch.tensor([src_ids], device=device)  # (1, S)
    src_len = torch.tensor([len(src_ids)], device=device)  # (1,)
    tgt_in = torch.tensor([[BOS, *tokens]], device=device)  # (1, T)
    with autocast(precision, device):
        maps = model.attention_maps(src, src_len, tgt_in)
    log_probs = token_log_probs(maps.logits[0], torch.tensor(out_ids, device=device))  # (T,)
    tgt_vocab = vocabs.tgt_vocab
    return TranslationAttention(
        source_tokens=vocabs.src_vocab.to_tokens(src_ids),
        target_tokens=tgt_vocab.to_tokens(out_ids),
        target_inputs=tgt_vocab.to_tokens([BOS, *tokens]),
        log_probs=log_probs.cpu(),
        alignment=None if maps.alignment is None else maps.alignment[0].float().cpu(),
        layers={k: [w[0].float().cpu() for w in ws] for k, ws in maps.layers.items()},
    )
