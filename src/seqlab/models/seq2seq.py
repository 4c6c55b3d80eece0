"""RNN encoder–decoder without attention (Sutskever et al. 2014; Cho et al. 2014).

Notation (shapes in comments): B batch, S source length, T target length, E embedding width,
H hidden width, L layers, V vocabulary (source or target, by context).

The encoder reads the right-padded source with a stacked GRU or LSTM. The sequence is packed, so
its final state is the state after each sentence's last real token, whatever the padding. That
state initialises the decoder (Sutskever et al. 2014, §2), and the encoder's top-layer final
hidden state is also a fixed context c, concatenated to the decoder input at every step
(Cho et al. 2014, §2.2: h_t = f(h_{t-1}, y_{t-1}, c)). The output layer maps the decoder's
top hidden state to V logits. (Sutskever et al. also reverse the source; this model does not.)
Dropout (``cfg.dropout``) applies to both embeddings, between stacked layers and before the
output layer.

**The encoder–decoder interface.** This model, :class:`seqlab.bahdanau.Bahdanau` and
:class:`seqlab.transformer_seq2seq.TransformerSeq2Seq` are plain ``nn.Module``s built as
``Model(src_vocab_size, tgt_vocab_size, cfg)`` with the same methods, which is all that
:mod:`seqlab.models.search` uses:

- ``encode(src, src_len) -> memory``: everything the decoder needs from the source, computed once.
- ``decode(memory, tgt_in, need_attention=False) -> (logits, attention)``: teacher forcing over
  the whole target; ``attention`` is ``(B, T, S)`` when asked for and the model has any, else None.
- ``init_state(memory) -> state`` and
  ``decode_step(memory, state, tokens, need_attention=False) -> (logits, state, attention)``:
  one token at a time with an explicit state; nothing is stored on the module between calls.
- ``reorder_memory(memory, indices)``, ``reorder_state(state, indices)``: select or repeat batch
  rows (beam search).
- ``loss(batch, label_smoothing=0.0) -> (loss, num_tokens)``; ``forward(src, src_len, tgt_in)``
  returns the teacher-forced logits; ``max_decode_len``: the most decoder positions, or None.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from seqlab.config import Seq2SeqConfig
from seqlab.data.translation_batching import PAD, Batch

#: decoder RNN state: ``h`` (L, B, H) for the GRU, ``(h, c)`` for the LSTM (PyTorch's layout).
RNNState = Tensor | tuple[Tensor, Tensor]


def masked_cross_entropy(
    logits: Tensor, targets: Tensor, lengths: Tensor, label_smoothing: float = 0.0
) -> tuple[Tensor, int]:
    """Mean token cross-entropy over the first ``lengths[b]`` positions of each row.

    Positions at or after a row's length are set to ``<pad>`` and ignored (``ignore_index``), so
    neither their logits nor their targets affect the loss. With ``label_smoothing`` ε the target
    distribution is (1 - ε) one-hot + ε uniform over V (Szegedy et al. 2016), as in
    ``F.cross_entropy``.

    Shape:
        logits ``(B, T, V)``, targets ``(B, T)``, lengths ``(B,)`` -> scalar loss, and the number of
        tokens it averages over.
    """
    steps = torch.arange(targets.shape[1], device=targets.device)  # (T,)
    valid = steps[None, :] < lengths[:, None].to(targets.device)  # (B, T)
    targets = targets.masked_fill(~valid, PAD)  # (B, T)
    loss = F.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )
    return loss, int(valid.sum())


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


class Seq2Seq(nn.Module):
    """Stacked GRU/LSTM encoder–decoder with a fixed context vector (see the module docstring)."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.max_decode_len: int | None = None
        rnn = {"gru": nn.GRU, "lstm": nn.LSTM}[cfg.cell]
        e, h, layers = cfg.embed_dim, cfg.hidden_size, cfg.num_layers
        between = cfg.dropout if layers > 1 else 0.0  # nn.GRU warns about dropout with 1 layer
        self.src_embed = nn.Embedding(src_vocab_size, e)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, e)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = rnn(e, h, layers, batch_first=True, dropout=between)
        self.decoder = rnn(e + h, h, layers, batch_first=True, dropout=between)
        self.output = nn.Linear(h, tgt_vocab_size)

    def encode(self, src: Tensor, src_len: Tensor) -> Seq2SeqMemory:
        """Read the source; padding after ``src_len`` does not change the result.

        Shape:
            src ``(B, S)``, src_len ``(B,)`` -> context ``(B, H)``, final state ``(L, B, H)``.
        """
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        _, final = self.encoder(packed)  # (L, B, H), or (h, c)
        top = final[0][-1] if isinstance(final, tuple) else final[-1]  # (B, H)
        return Seq2SeqMemory(context=top, final_state=final)

    def init_state(self, memory: Seq2SeqMemory) -> RNNState:
        """The decoder starts from the encoder's final state (Sutskever et al. 2014)."""
        return memory.final_state

    def _run(
        self, memory: Seq2SeqMemory, tokens: Tensor, state: RNNState
    ) -> tuple[Tensor, RNNState]:
        """Decode ``tokens`` from ``state``: h_t = f(h_{t-1}, [y_{t-1}; c]) (Cho et al. eq. 3).

        Shape:
            tokens ``(B, T)`` -> logits ``(B, T, V)``, state ``(L, B, H)``.
        """
        y = self.dropout(self.tgt_embed(tokens))  # (B, T, E)
        c = memory.context[:, None, :].expand(-1, tokens.shape[1], -1)  # (B, T, H)
        out, state = self.decoder(torch.cat([y, c], dim=-1), state)  # (B, T, H)
        return self.output(self.dropout(out)), state  # (B, T, V)

    def decode(
        self, memory: Seq2SeqMemory, tgt_in: Tensor, *, need_attention: bool = False
    ) -> tuple[Tensor, None]:
        """Teacher forcing: logits for every position of ``tgt_in`` (``<bos> y``), one RNN call.

        This model has no attention; the second value is always None.

        Shape:
            tgt_in ``(B, T)`` -> logits ``(B, T, V)``.
        """
        logits, _ = self._run(memory, tgt_in, self.init_state(memory))  # (B, T, V)
        return logits, None

    def decode_step(
        self,
        memory: Seq2SeqMemory,
        state: RNNState,
        tokens: Tensor,
        *,
        need_attention: bool = False,
    ) -> tuple[Tensor, RNNState, None]:
        """Next-token logits after feeding one token per row.

        Shape:
            tokens ``(B,)`` or ``(B, 1)`` -> logits ``(B, V)``, state ``(L, B, H)``, None.
        """
        logits, state = self._run(memory, tokens.reshape(-1, 1), state)  # (B, 1, V)
        return logits[:, 0], state, None  # (B, V)

    def reorder_memory(self, memory: Seq2SeqMemory, indices: Tensor) -> Seq2SeqMemory:
        """Rows ``indices`` of the memory (select, repeat or permute sentences)."""
        return Seq2SeqMemory(
            memory.context.index_select(0, indices), _index_state(memory.final_state, indices)
        )

    def reorder_state(self, state: RNNState, indices: Tensor) -> RNNState:
        """Rows ``indices`` of the decoder state."""
        return _index_state(state, indices)

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits. Shape: ``(B, S), (B,), (B, T) -> (B, T, V)``."""
        return self.decode(self.encode(src, src_len), tgt_in)[0]  # (B, T, V)

    def loss(self, batch: Batch, label_smoothing: float = 0.0) -> tuple[Tensor, int]:
        """Mean cross-entropy over the real target tokens of ``batch`` and their number."""
        logits = self(batch.src, batch.src_len, batch.tgt_in)  # (B, T, V)
        return masked_cross_entropy(logits, batch.tgt_out, batch.tgt_len, label_smoothing)
