"""RNN encoder–decoder without attention (Sutskever et al. 2014; Cho et al. 2014).

Notation (shapes in comments): B batch, S source length, T target length, E embedding width,
H hidden width, L layers, V vocabulary (source or target, by context).

The encoder reads the right-padded source with a stacked RNN of any registered cell
(``model.cell``, :func:`seqlab.catalog.cells`; GRU by default). The sequence is packed, so its
final state is the state after each sentence's last real token, whatever the padding. That
state initialises the decoder (Sutskever et al. 2014, §2), and the encoder's top-layer final
hidden state is also a fixed context c, concatenated to the decoder input at every step
(Cho et al. 2014, §2.2: h_t = f(h_{t-1}, y_{t-1}, c)). The output layer maps the decoder's
top hidden state to V logits. (Sutskever et al. also reverse the source; this model does not.)
Dropout (``cfg.dropout``) applies to both embeddings, between stacked layers and before the
output layer.

The encoder–decoder interface is :class:`seqlab.models.encoder_decoder.EncoderDecoder`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import Seq2SeqConfig
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.nn.rnn import recurrent_layer, run_layer

#: decoder RNN state: ``h`` (L, B, H), or ``(h, c)`` for the LSTMs (PyTorch's layout).
RNNState = Tensor | tuple[Tensor, Tensor]


def _index_state(state: RNNState, indices: Tensor) -> RNNState:
    """Rows ``indices`` of an RNN state (the batch axis is 1)."""
    if isinstance(state, tuple):
        return tuple(s.index_select(1, indices) for s in state)  # type: ignore[return-value]
    return state.index_select(1, indices)  # (L, B', H)


@dataclass(frozen=True)
class Seq2SeqMemory:
    """What the decoder needs from the source.

    ``context``: c, the encoder's top-layer final hidden state; ``final_state``: the encoder's
    final state, which initialises the decoder.
    """

    context: Tensor  # (B, H)
    final_state: RNNState  # (L, B, H), or (h, c) of that shape for the LSTM


class Seq2Seq(EncoderDecoder):
    """Stacked RNN encoder–decoder with a fixed context vector (see the module docstring); the
    layers are :func:`seqlab.nn.rnn.recurrent_layer`'s for ``cfg.cell``."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        e, h, layers = cfg.embed_dim, cfg.hidden_size, cfg.num_layers
        self.src_embed = nn.Embedding(src_vocab_size, e)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, e)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = recurrent_layer(cfg.cell, e, h, layers, cfg.dropout)
        self.decoder = recurrent_layer(cfg.cell, e + h, h, layers, cfg.dropout)
        self.output = nn.Linear(h, tgt_vocab_size)

    def encode(self, src: Tensor, src_lengths: Tensor) -> Seq2SeqMemory:
        """Read the source; padding after ``src_lengths`` does not change the result.

        Shape:
            src ``(B, S)``, src_lengths ``(B,)`` -> context ``(B, H)``, final state ``(L, B, H)``.
        """
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        _, final = run_layer(self.encoder, x, None, src_lengths)  # (L, B, H), or (h, c)
        top = final[0][-1] if isinstance(final, tuple) else final[-1]  # (B, H)
        return Seq2SeqMemory(context=top, final_state=final)

    def init_state(self, memory: Seq2SeqMemory) -> RNNState:
        """The decoder starts from the encoder's final state (Sutskever et al. 2014)."""
        return memory.final_state

    def run_decoder(
        self, memory: Seq2SeqMemory, tokens: Tensor, state: RNNState, need_weights: bool
    ) -> tuple[Tensor, RNNState, None]:
        """Decode ``tokens`` from ``state``: h_t = f(h_{t-1}, [y_{t-1}; c]) (Cho et al. eq. 3).

        This model has no attention; the third value is always None.

        Shape:
            tokens ``(B, T)`` -> logits ``(B, T, V)``, state ``(L, B, H)``.
        """
        y = self.dropout(self.tgt_embed(tokens))  # (B, T, E)
        c = memory.context[:, None, :].expand(-1, tokens.shape[1], -1)  # (B, T, H)
        out, state = run_layer(self.decoder, torch.cat([y, c], dim=-1), state)  # (B, T, H)
        return self.output(self.dropout(out)), state, None  # (B, T, V)

    def reorder_memory(self, memory: Seq2SeqMemory, indices: Tensor) -> Seq2SeqMemory:
        """Rows ``indices`` of the memory (select, repeat or permute sentences)."""
        return Seq2SeqMemory(
            memory.context.index_select(0, indices), _index_state(memory.final_state, indices)
        )

    def reorder_state(self, state: RNNState, indices: Tensor) -> RNNState:
        """Rows ``indices`` of the decoder state."""
        return _index_state(state, indices)


register_model(
    ModelSpec(
        Seq2SeqConfig,
        lambda cfg, sizes: Seq2Seq(sizes.need("src_vocab_size"), sizes.need("tgt_vocab_size"), cfg),
    )
)
