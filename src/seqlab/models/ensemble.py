"""An ensemble of translation models that decodes as one (averaged next-token probabilities).

Notation (shapes in comments): B batch, S source length, T target length, V target vocabulary.

N models that share the source and target vocabularies predict together: at every position the
ensemble's distribution is the mean of the members' distributions,

    p(y_t | y_<t, x) = (1/N) Σ_i p_i(y_t | y_<t, x),

as fairseq's and OpenNMT-py's ensembles decode (the usual ensemble of NMT systems, e.g. Sutskever
et al. 2014, §3.6). :class:`Ensemble` is an :class:`~seqlab.models.encoder_decoder.EncoderDecoder`
whose memory and state are the members' (one each, in a tuple) and whose logits are
``log p``: greedy and beam search (:mod:`seqlab.models.search`) drive it unchanged, each member
keeping its own cache. Its attention, when asked for, is the members' mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.models.encoder_decoder import EncoderDecoder


class Ensemble(EncoderDecoder):
    """Decode with the mean of ``models``' next-token distributions (see the module docstring).

    Args:
        models: at least one :class:`EncoderDecoder`, all over the same target vocabulary (the
            caller checks that their vocabularies are the same lists).
    """

    def __init__(self, models: Sequence[EncoderDecoder]) -> None:
        super().__init__()
        if not models:
            raise ValueError("an ensemble needs at least one model")
        self.members = nn.ModuleList(models)
        limits = [m.max_decode_len for m in models if m.max_decode_len is not None]
        self.max_decode_len = min(limits) if limits else None
        self.has_attention = all(m.has_attention for m in models)

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[Any, ...]:
        return tuple(m.encode(src, src_lengths) for m in self.members)

    def init_state(self, memory: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(m.init_state(mem) for m, mem in zip(self.members, memory, strict=True))

    def run_decoder(
        self, memory: tuple[Any, ...], tokens: Tensor, state: tuple[Any, ...], need_weights: bool
    ) -> tuple[Tensor, tuple[Any, ...], Tensor | None]:
        """Each member decodes ``tokens`` from its state; the logits returned are the log of
        the mean probability (log-sum-exp of the members' log-probabilities minus log N).

        Shape:
            tokens ``(B, T)`` -> logits ``(B, T, V)``, attention ``(B, T, S)`` or None.
        """
        log_probs, states, weights = [], [], []
        for m, mem, st in zip(self.members, memory, state, strict=True):
            logits, st, attn = m.run_decoder(mem, tokens, st, need_weights)  # (B, T, V)
            log_probs.append(torch.log_softmax(logits.float(), dim=-1))  # (B, T, V)
            states.append(st)
            weights.append(attn)
        mixed = torch.logsumexp(torch.stack(log_probs), dim=0) - math.log(len(log_probs))
        attention = None
        if need_weights and all(w is not None for w in weights):
            attention = torch.stack([w.float() for w in weights]).mean(dim=0)  # (B, T, S)
        return mixed, tuple(states), attention  # (B, T, V)

    def reorder_memory(self, memory: tuple[Any, ...], indices: Tensor) -> tuple[Any, ...]:
        return tuple(
            m.reorder_memory(mem, indices) for m, mem in zip(self.members, memory, strict=True)
        )

    def expand_memory(self, memory: tuple[Any, ...], sentences: int, beams: int) -> tuple[Any, ...]:
        return tuple(
            m.expand_memory(mem, sentences, beams)
            for m, mem in zip(self.members, memory, strict=True)
        )

    def reorder_state(self, state: tuple[Any, ...], indices: Tensor) -> tuple[Any, ...]:
        return tuple(
            m.reorder_state(st, indices) for m, st in zip(self.members, state, strict=True)
        )
