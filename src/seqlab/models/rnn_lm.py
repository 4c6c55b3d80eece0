"""Recurrent language model: embedding (or one-hot) → stacked RNN → linear map to the vocabulary.

Notation (every shape comment uses it):
    B batch size, T time steps, E embedding size (V when one-hot), H hidden size, L layers,
    V vocabulary size.

The model predicts token t+1 from tokens ≤ t (d2l.ai §9.5–9.6, Mikolov et al. 2010); it is
unidirectional. State is explicit, as everywhere in :mod:`seqlab.nn.rnn`: ``forward`` takes and
returns it, so a long text can be read in consecutive chunks and generation
(:func:`seqlab.models.language_model.generate`) can carry it token by token instead of re-reading
the prefix.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import RNNLMConfig
from seqlab.errors import ConfigError
from seqlab.models.language_model import CausalLM
from seqlab.nn.rnn import RNN, State


class RNNLanguageModel(CausalLM):
    """Next-token model over a vocabulary of V tokens.

    Args:
        vocab_size: V.
        cfg: ``cell``, ``backend``, ``hidden_size``, ``num_layers`` and ``dropout`` go to the
            :class:`seqlab.nn.rnn.RNN`; ``embed_dim`` E > 0 learns an embedding, 0 feeds one-hot
            vectors (as d2l does); ``tie_weights`` shares the output matrix with the embedding
            (Press & Wolf 2017; needs E = H > 0). ``dropout`` is also applied to the embedding
            and to the last layer's output.

    Equations:
        e_t = E[x_t]  (or one_hot(x_t)),   h_t = RNN(e_t, h_{t-1}),   logits_t = h_t W_hv + b_v

    Shape:
        tokens: (B, T) long → logits (B, T, V) and the final state (see :class:`seqlab.nn.rnn.RNN`).
    """

    def __init__(self, vocab_size: int, cfg: RNNLMConfig) -> None:
        super().__init__()
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be positive, got {vocab_size}")
        if cfg.cell == "peephole_lstm" and cfg.backend == "fused":
            raise ConfigError(
                "model.cell=peephole_lstm has no fused backend (nn.LSTM has no peephole "
                "connections); set model.backend=scratch"
            )
        if cfg.tie_weights and cfg.embed_dim != cfg.hidden_size:
            raise ConfigError(
                f"model.tie_weights=true needs model.embed_dim == model.hidden_size "
                f"(the output matrix is the embedding matrix), got embed_dim={cfg.embed_dim}, "
                f"hidden_size={cfg.hidden_size}"
                + (
                    " (embed_dim=0 means one-hot input: nothing to tie)"
                    if cfg.embed_dim == 0
                    else ""
                )
            )
        self.vocab_size = vocab_size
        self.cfg = cfg
        self.embedding = nn.Embedding(vocab_size, cfg.embed_dim) if cfg.embed_dim > 0 else None
        self.rnn = RNN(
            cfg.cell,
            cfg.embed_dim or vocab_size,
            cfg.hidden_size,
            num_layers=cfg.num_layers,
            dropout=cfg.dropout,
            backend=cfg.backend,
            truncation_keep=cfg.truncation_keep if cfg.truncation == "randomized" else None,
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.output = nn.Linear(cfg.hidden_size, vocab_size)
        if cfg.tie_weights:
            self.output.weight = self.embedding.weight

    def begin_state(self, batch_size: int, device: torch.device | str | None = None) -> State:
        """The zero state for ``batch_size`` sequences, in the parameters' dtype."""
        dtype = self.output.weight.dtype
        return self.rnn.begin_state(batch_size, device=device, dtype=dtype)

    def init_state(self, batch_size: int) -> None:
        """Generation starts from the zero state, which ``forward`` builds for ``None``."""
        return None

    def forward(self, tokens: Tensor, state: State | None = None) -> tuple[Tensor, State]:
        """Logits for the next token at every position, and the state after the last one.

        Shape:
            tokens: (B, T) long; state: (L, B, H) or a tuple (h, c) of those, None for zeros.
            returns logits (B, T, V) and the new state.
        """
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        if self.embedding is not None:
            inputs = self.dropout(self.embedding(tokens))  # (B, T, E)
        else:
            inputs = F.one_hot(tokens, self.vocab_size).to(self.output.weight.dtype)  # (B, T, V)
        hidden, state = self.rnn(inputs, state)  # (B, T, H)
        logits = self.output(self.dropout(hidden))  # (B, T, V)
        return logits, state


register_model(
    ModelSpec(RNNLMConfig, lambda cfg, sizes: RNNLanguageModel(sizes.need("vocab_size"), cfg))
)
