"""Attentive RNN encoder–decoder (Bahdanau, Cho & Bengio 2014, "RNNsearch").

Notation (shapes in comments): B batch, S source length, T target length, E embedding width,
H hidden width (per direction in the encoder), L layers, V vocabulary.

Equations (Bahdanau et al. 2014, §3 and appendix A), i = 1..T target steps, j = 1..S sources:

- encoder (§3.2, A.2.1): a bidirectional GRU; annotations h_j = [→h_j; ←h_j]  ``(B, S, 2H)``.
- initial decoder state (A.2.2): s_0 = tanh(W_s ←h_1), ←h_1 the backward RNN's final state.
- alignment (eq. 6, A.1.2): e_ij = vᵀ tanh(W s_{i-1} + U h_j), scored against the *previous*
  decoder state; α_ij = softmax_j(e_ij) over the real source positions only (padding masked).
  U h_j does not depend on i: :meth:`Bahdanau.encode` computes it once per source, so a decoding
  step costs O(S·H).
- context (eq. 5): c_i = Σ_j α_ij h_j.
- decoder (eq. 4 and A.2.2): s_i = GRU([E y_{i-1}; c_i], s_{i-1}). The gates follow PyTorch's
  GRU (reset applied as r ∘ (U s + b) rather than the paper's U (r ∘ s)), so the step equals
  ``nn.GRUCell`` on the concatenated input.
- output (eq. 4 and A.2.2, deep output with one maxout layer): t̃_i = U_o s_i + C_o c_i + V_o E y_{i-1},
  t_i = max(t̃_{i,2k-1}, t̃_{i,2k}) for k = 1..E, p(y_i | ...) = softmax(W_o t_i). The appendix
  feeds s_{i-1} to t̃; this uses s_i, as in eq. 4, g(y_{i-1}, s_i, c_i). The maxout width l is E.

``model.cell`` (GRU by default, the paper's) may name any registered cell
(:func:`seqlab.catalog.cells`): the encoder and the upper decoder layers are
:func:`seqlab.nn.rnn.recurrent_layer`'s for it, and the bottom decoder layer steps the cell's own
equations on [E y_{i-1}; c_i] (input weights split into the y and c blocks as for the GRU). For the
LSTMs the decoder state is (s, m), the memory cells m_0 = 0.

With ``num_layers`` L > 1 the encoder is an L-layer bidirectional GRU (annotations from the top
layer), and the attentive GRU above is the bottom decoder layer; L - 1 further GRU layers read
[s_i; c_i] and the top one feeds the output layer (attention from the bottom layer, as in GNMT,
Wu et al. 2016). Every decoder layer l starts from tanh(W_s^l ←h_1^l) of encoder layer l. With
L = 1 (the default) the model is the paper's. Dropout (``cfg.dropout``) applies to both
embeddings, between stacked GRU layers and to t_i before W_o.

Teacher-forced decoding runs the recurrent loop over T but computes everything that does not
depend on s_{i-1} (input-gate terms of the embeddings, the upper layers, the whole output layer)
for all positions at once. Teacher forcing and decoding steps share this one code path
(:meth:`Bahdanau.run_decoder`). The interface is :class:`~seqlab.models.encoder_decoder.EncoderDecoder`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, Sizes, register_model
from seqlab.config.models import BahdanauConfig
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.nn.attention import padding_mask
from seqlab.nn.attention_scores import attention_pool, make_score
from seqlab.nn.cells import make_cell
from seqlab.nn.rnn import State, recurrent_layer, run_layer


@dataclass(frozen=True)
class BahdanauMemory:
    """What the decoder needs from the source, computed once by ``encode``."""

    annotations: Tensor  # (B, S, K) h_j: [→h_j; ←h_j] (paper, K = 2H) or h_j (d2l, K = H)
    keys: Tensor  # (B, S, ·) the keys' part of the score, e.g. U h_j (additive)
    mask: Tensor  # (B, S) bool, True = real source position
    final: State  # (L, B, H) ←h_1 of each encoder layer (paper), the final states (d2l)

    def rows(self, indices: Tensor) -> BahdanauMemory:
        """Rows ``indices`` (select, repeat or permute sentences)."""
        return BahdanauMemory(
            annotations=self.annotations.index_select(0, indices),
            keys=self.keys.index_select(0, indices),
            mask=self.mask.index_select(0, indices),
            final=_state_map(self.final, lambda s: s.index_select(1, indices)),
        )


def _state_map(state: State, fn) -> State:
    """``fn`` applied to ``h``, or to each of ``(h, c)`` (the LSTMs)."""
    return tuple(fn(s) for s in state) if isinstance(state, tuple) else fn(state)


def _hidden(state: State) -> Tensor:
    """``h`` of a state ``h`` or ``(h, c)``."""
    return state[0] if isinstance(state, tuple) else state


class Bahdanau(EncoderDecoder):
    """RNNsearch: bidirectional GRU encoder, additive attention, GRU decoder, maxout output
    (``model.decoder: maxout``).

    The decoder state is a tensor ``(L, B, H)``: s_i of each decoder layer.
    """

    has_attention = True

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, cfg: BahdanauConfig):
        super().__init__()
        self.cfg = cfg
        e, h, layers = cfg.embed_dim, cfg.hidden_size, cfg.num_layers
        self.src_embed = nn.Embedding(src_vocab_size, e)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, e)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = recurrent_layer(cfg.cell, e, h, layers, cfg.dropout, bidirectional=True)
        self.init_proj = nn.ModuleList(nn.Linear(h, h) for _ in range(layers))  # W_s per layer
        # additive: w_q = W, w_k = U, w_v = v of e_ij = vᵀ tanh(W s_{i-1} + U h_j)
        self.attention = make_score(cfg.attention, h, 2 * h, h, cfg.max_len)
        self.cell = None  # the bottom decoder layer of a cell other than the GRU
        if cfg.cell == "gru":
            # bottom decoder GRU; its input weights split into the y and c blocks (3 gates each)
            self.gru_y = nn.Linear(e, 3 * h)  # W [E y_{i-1}] + b_ih
            self.gru_c = nn.Linear(2 * h, 3 * h, bias=False)  # C c_i
            self.gru_s = nn.Linear(h, 3 * h)  # U s_{i-1} + b_hh
        else:
            self.cell = make_cell(cfg.cell, e + 2 * h, h)  # input weights: [y block, c block]
        self.upper = None  # decoder layers 2 .. L
        if layers > 1:
            self.upper = recurrent_layer(cfg.cell, 3 * h, h, layers - 1, cfg.dropout)
        self.maxout = nn.Linear(h + 2 * h + e, 2 * e)  # [U_o; C_o; V_o]
        self.output = nn.Linear(e, tgt_vocab_size)  # W_o

    # ------------------------------------------------------------------------------ encoder
    def encode(self, src: Tensor, src_lengths: Tensor) -> BahdanauMemory:
        """Annotate the source (§3.2) and project the annotations for the alignment model.

        Shape:
            src ``(B, S)``, src_lengths ``(B,)`` -> annotations ``(B, S, 2H)``, keys ``(B, S, H)``,
            mask ``(B, S)``, backward_final ``(L, B, H)``.
        """
        num_src = src.shape[1]
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        # final (2L, B, H), index layer * 2 + direction; annotations zero at padding
        annotations, final = run_layer(self.encoder, x, None, src_lengths)  # (B, S, 2H)
        return BahdanauMemory(
            annotations=annotations,  # (B, S, 2H), zero at padding
            keys=self.attention.prepare(annotations),  # (B, S, ·)
            mask=padding_mask(src_lengths.to(src.device), num_src)[:, 0],  # (B, S)
            final=_hidden(final)[1::2],  # (L, B, H)
        )

    def init_state(self, memory: BahdanauMemory) -> State:
        """s_0 = tanh(W_s ←h_1) for each decoder layer (appendix A.2.2); for the LSTMs
        ``(s_0, 0)``.

        Shape:
            ``(L, B, H)``, or a tuple of two.
        """
        finals = memory.final  # (L, B, H)
        s0 = torch.stack(
            [torch.tanh(p(finals[i])) for i, p in enumerate(self.init_proj)]
        )  # (L, B, H)
        if self.cell is not None and self.cell.state_size == 2:
            return (s0, torch.zeros_like(s0))
        return s0

    # ------------------------------------------------------------------------------ decoder
    def _attend(self, memory: BahdanauMemory, s: Tensor) -> tuple[Tensor, Tensor]:
        """α_ij = softmax_j(a(s_{i-1}, h_j)), c_i = Σ_j α_ij h_j (eqs. 5-6; additive
        a = vᵀ tanh(W s_{i-1} + U h_j) unless ``model.attention`` says otherwise).

        Shape:
            s ``(B, H)`` -> context ``(B, 2H)``, weights ``(B, S)``.
        """
        return attention_pool(self.attention, s, memory.keys, memory.annotations, memory.mask)

    def _gru_step(self, gates_in: Tensor, s: Tensor) -> Tensor:
        """One GRU update given the input terms of its three gates (``nn.GRUCell``'s equations).

        r = σ(i_r + U_r s + b_r), z = σ(i_z + U_z s + b_z), n = tanh(i_n + r ∘ (U_n s + b_n)),
        s' = (1 - z) ∘ n + z ∘ s.

        Shape:
            gates_in ``(B, 3H)``, s ``(B, H)`` -> ``(B, H)``.
        """
        h = s.shape[-1]
        gates_s = self.gru_s(s)  # (B, 3H)
        rz = torch.sigmoid(gates_in[:, : 2 * h] + gates_s[:, : 2 * h])  # (B, 2H)
        r, z = rz[:, :h], rz[:, h:]  # (B, H) each
        n = torch.tanh(gates_in[:, 2 * h :] + r * gates_s[:, 2 * h :])  # (B, H)
        return n + z * (s - n)  # (B, H)

    def run_decoder(
        self, memory: BahdanauMemory, tokens: Tensor, state: State, need_weights: bool
    ) -> tuple[Tensor, State, Tensor | None]:
        """Decode ``tokens`` (y_{i-1} for T consecutive steps) from ``state`` (s_{i-1} per layer).

        Shape:
            tokens ``(B, T)``, state ``(L, B, H)`` (a tuple of two for the LSTMs) -> logits
            ``(B, T, V)``, state like ``state``, weights ``(B, T, S)`` or None.
        """
        y = self.dropout(self.tgt_embed(tokens))  # (B, T, E)
        if self.cell is None:
            gates_y = self.gru_y(y)  # (B, T, 3H): the E y_{i-1} terms of every step at once
        else:
            e = y.shape[-1]
            gates_y = F.linear(y, self.cell.weight_ih[:, :e], self.cell.bias_ih)  # (B, T, G*H)
        s = tuple(part[0] for part in state) if isinstance(state, tuple) else (state[0],)
        states, contexts, alphas = [], [], []
        # unbind, not gates_y[:, i]: each indexing op's backward would write a full (B, T, 3H)
        # gradient, T of them per sequence
        for gates_y_i in gates_y.unbind(dim=1):
            context, alpha = self._attend(memory, s[0])  # (B, 2H), (B, S): uses s_{i-1}
            if self.cell is None:
                s = (self._gru_step(gates_y_i + self.gru_c(context), s[0]),)  # (B, H): s_i
            else:
                e = self.cell.input_size - context.shape[-1]
                s = self.cell.step(gates_y_i + F.linear(context, self.cell.weight_ih[:, e:]), s)
            states.append(s[0])
            contexts.append(context)
            alphas.append(alpha)
        s_all = torch.stack(states, dim=1)  # (B, T, H)
        c_all = torch.stack(contexts, dim=1)  # (B, T, 2H)
        top, new_state = s_all, tuple(part[None] for part in s)  # (B, T, H), (1, B, H) each
        if self.upper is not None:
            upper_in = self.dropout(torch.cat([s_all, c_all], dim=-1))  # (B, T, 3H)
            rest = _state_map(state, lambda part: part[1:])  # (L-1, B, H)
            top, upper_state = run_layer(self.upper, upper_in, rest)  # (B, T, H)
            if not isinstance(upper_state, tuple):
                upper_state = (upper_state,)
            new_state = tuple(
                torch.cat([a, b]) for a, b in zip(new_state, upper_state, strict=True)
            )  # (L, B, H) each
        new_state = new_state if len(new_state) == 2 else new_state[0]
        t_tilde = self.maxout(torch.cat([top, c_all, y], dim=-1))  # (B, T, 2E)
        t = t_tilde.unflatten(-1, (-1, 2)).amax(-1)  # (B, T, E): maxout over pairs
        logits = self.output(self.dropout(t))  # (B, T, V)
        weights = torch.stack(alphas, dim=1) if need_weights else None  # (B, T, S)
        return logits, new_state, weights

    def reorder_memory(self, memory: BahdanauMemory, indices: Tensor) -> BahdanauMemory:
        """Rows ``indices`` of the memory (select, repeat or permute sentences)."""
        return memory.rows(indices)

    def reorder_state(self, state: State, indices: Tensor) -> State:
        """Rows ``indices`` of the decoder state ``(L, B, H)`` (or of each of ``(h, c)``)."""
        return _state_map(state, lambda s: s.index_select(1, indices))


class BahdanauD2L(EncoderDecoder):
    """The attentive decoder of d2l.ai §11.4, The Bahdanau Attention Mechanism
    (``model.decoder: linear``).

    - encoder: a unidirectional L-layer GRU (or ``model.cell``); h_j its top-layer outputs ``(B, S, H)``, which are
      both keys and values;
    - initial decoder state: the encoder's final states, layer by layer (no projection);
    - step i: query = s_{i-1}^{(L)}, the previous *top-layer* decoder state;
      c_i = Σ_j α_ij h_j with α_i = softmax_j(a(s_{i-1}^{(L)}, h_j)); the L-layer GRU reads
      [E y_{i-1}; c_i]; logits = W_o s_i^{(L)} + b (no maxout).

    Differences from the paper's model (:class:`Bahdanau`): one encoder direction, so h_j does
    not see the words after j; no learned initial state; queries of size H against keys of size H,
    so dot and scaled-dot scores apply; a plainer output layer. The source is packed, so padding
    does not reach the final states (d2l's listing runs the GRU over the padding).
    """

    has_attention = True

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, cfg: BahdanauConfig):
        super().__init__()
        self.cfg = cfg
        e, h, layers = cfg.embed_dim, cfg.hidden_size, cfg.num_layers
        self.src_embed = nn.Embedding(src_vocab_size, e)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, e)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = recurrent_layer(cfg.cell, e, h, layers, cfg.dropout)
        self.attention = make_score(cfg.attention, h, h, h, cfg.max_len)
        self.decoder = recurrent_layer(cfg.cell, e + h, h, layers, cfg.dropout)
        self.output = nn.Linear(h, tgt_vocab_size)

    def encode(self, src: Tensor, src_lengths: Tensor) -> BahdanauMemory:
        """h_j for every source position and the encoder's final states.

        Shape:
            src ``(B, S)``, src_lengths ``(B,)`` -> annotations ``(B, S, H)``, final ``(L, B, H)``.
        """
        num_src = src.shape[1]
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        annotations, final = run_layer(self.encoder, x, None, src_lengths)  # final (L, B, H)
        return BahdanauMemory(
            annotations=annotations,  # (B, S, H)
            keys=self.attention.prepare(annotations),  # (B, S, ·)
            mask=padding_mask(src_lengths.to(src.device), num_src)[:, 0],  # (B, S)
            final=final,  # (L, B, H)
        )

    def init_state(self, memory: BahdanauMemory) -> State:
        """The encoder's final states. Shape: ``(L, B, H)`` (a tuple of two for the LSTMs)."""
        return memory.final

    def run_decoder(
        self, memory: BahdanauMemory, tokens: Tensor, state: State, need_weights: bool
    ) -> tuple[Tensor, State, Tensor | None]:
        """Decode ``tokens`` from ``state`` one step at a time (the query needs s_{i-1}).

        Shape:
            tokens ``(B, T)``, state ``(L, B, H)`` -> logits ``(B, T, V)``, state ``(L, B, H)``,
            weights ``(B, T, S)`` or None.
        """
        y = self.dropout(self.tgt_embed(tokens))  # (B, T, E)
        outputs, alphas = [], []
        for y_i in y.unbind(dim=1):  # (B, E)
            context, alpha = attention_pool(
                self.attention, _hidden(state)[-1], memory.keys, memory.annotations, memory.mask
            )  # (B, H), (B, S)
            out, state = run_layer(self.decoder, torch.cat([y_i, context], dim=-1)[:, None], state)
            outputs.append(out)  # (B, 1, H)
            alphas.append(alpha)
        logits = self.output(self.dropout(torch.cat(outputs, dim=1)))  # (B, T, V)
        weights = torch.stack(alphas, dim=1) if need_weights else None  # (B, T, S)
        return logits, state, weights

    def reorder_memory(self, memory: BahdanauMemory, indices: Tensor) -> BahdanauMemory:
        return memory.rows(indices)

    def reorder_state(self, state: State, indices: Tensor) -> State:
        return _state_map(state, lambda s: s.index_select(1, indices))


def _build(cfg: BahdanauConfig, sizes: Sizes) -> Bahdanau | BahdanauD2L:
    """``decoder: maxout`` builds the paper's RNNsearch, ``decoder: linear`` d2l's model."""
    model = Bahdanau if cfg.decoder == "maxout" else BahdanauD2L
    return model(sizes.need("src_vocab_size"), sizes.need("tgt_vocab_size"), cfg)


register_model(ModelSpec(BahdanauConfig, _build))
