"""Recurrent language model: embedding (or one-hot) → stacked RNN → linear map to the vocabulary.

Notation (every shape comment uses it):
    B batch size, T time steps, E embedding size (V when one-hot), H hidden size, L layers,
    V vocabulary size.

The model predicts token t+1 from tokens ≤ t (d2l.ai §9.5–9.6, Mikolov et al. 2010); it is
unidirectional. State is explicit, as everywhere in :mod:`seqlab.nn.rnn`: ``forward`` takes and
returns it, so a long text can be read in consecutive chunks and generation can carry it token by
token instead of re-reading the prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.config import RNNLMConfig
from seqlab.errors import ConfigError
from seqlab.nn.rnn import RNN, State
from seqlab.nn.sampling import next_token


class RNNLanguageModel(nn.Module):
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


@torch.no_grad()
def generate(
    model: RNNLanguageModel,
    prefix_ids: list[int],
    num_tokens: int,
    strategy: str = "greedy",
    temperature: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
    never: Sequence[int] = (),
) -> list[int]:
    """Continue ``prefix_ids`` by ``num_tokens`` tokens; returns the new tokens only.

    The prefix is read in one forward pass (the warm-up); then each new token is fed alone with
    the carried state, so nothing is recomputed. The model is in eval mode while generating
    (its previous mode is restored).

    Args:
        model: the language model.
        prefix_ids: at least one token id.
        num_tokens: how many tokens to emit (≥ 0).
        strategy: ``greedy`` (argmax) or ``sample`` (from softmax(logits / temperature)).
        temperature: > 0; below 1 sharpens, above 1 flattens (sampling only).
        top_k: sample among the k most likely tokens only; 0 means all (sampling only).
        generator: random generator for sampling, for reproducible draws.
        never: token ids never generated (see :func:`seqlab.nn.sampling.next_token`).
    """
    if strategy not in ("greedy", "sample"):
        raise ValueError(f"strategy must be 'greedy' or 'sample', got {strategy!r}")
    if not prefix_ids:
        raise ValueError("prefix_ids is empty: generation needs at least one token to start from")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if top_k < 0 or num_tokens < 0:
        raise ValueError(f"top_k and num_tokens must be ≥ 0, got {top_k} and {num_tokens}")
    was_training = model.training
    model.eval()
    try:
        device = model.output.weight.device
        prefix = torch.tensor([prefix_ids], dtype=torch.long, device=device)  # (1, T)
        logits, state = model(prefix)  # (1, T, V)
        new_ids: list[int] = []
        for i in range(num_tokens):
            token = int(next_token(logits[:, -1], strategy, temperature, top_k, generator, never))
            new_ids.append(token)
            if i + 1 < num_tokens:  # the last token's logits are not needed
                step = torch.tensor([[token]], dtype=torch.long, device=device)  # (1, 1)
                logits, state = model(step, state)  # (1, 1, V)
    finally:
        model.train(was_training)
    return new_ids
