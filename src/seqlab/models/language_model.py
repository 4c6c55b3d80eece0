"""The interface shared by every language model, and the one generation loop written on it.

Notation (shapes in comments): B batch, P prefix length, T tokens fed at once, V vocabulary.

A language model predicts token t+1 from the tokens up to t (d2l.ai §9.3). A model
(:class:`~seqlab.models.rnn_lm.RNNLanguageModel`,
:class:`~seqlab.models.transformer_lm.TransformerLanguageModel`) subclasses :class:`CausalLM` and
writes two methods and one attribute:

- ``forward(tokens, state=None) -> (logits, state)``: next-token logits ``(B, T, V)`` for ``T``
  consecutive tokens that continue ``state``, and the state after them. ``state=None`` starts
  afresh and is what training and scoring pass; what comes back is carried into the next window
  of the same text (a recurrent state, d2l.ai §9.5) or is None (a Transformer sees each window on
  its own).
- ``init_state(batch_size) -> state``: the state that incremental decoding starts from (a
  recurrent model's zeros, a Transformer's empty key/value cache).
- ``context_size``: the most tokens the model reads at once (a Transformer's positional table),
  or None when unbounded (a recurrent model).

The base class derives the rest: the next-token :meth:`~CausalLM.loss` of a minibatch, and
:func:`generate`, greedy or sampled continuation through :func:`continuation`. Nothing is stored
on the module between calls: the state is passed in and returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.sampling import next_token


class CausalLM(nn.Module):
    """Base class of the language models (see the module docstring).

    Attributes:
        context_size: the most tokens read at once, or None when unbounded.
    """

    context_size: int | None = None

    # ---------------------------------------------------------------- written by each model
    def forward(self, tokens: Tensor, state: Any = None) -> tuple[Tensor, Any]:
        raise NotImplementedError

    def init_state(self, batch_size: int) -> Any:
        raise NotImplementedError

    # --------------------------------------------------------------------- derived, shared
    def loss(self, x: Tensor, y: Tensor, state: Any = None) -> tuple[Tensor, int, Any]:
        """Mean next-token cross-entropy of ``x`` against ``y`` (each ``(B, T)``), the number of
        predicted tokens, and the state to carry into the next window (None if there is none)."""
        logits, state = self(x, state)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        return loss, y.numel(), state


@torch.no_grad()
def continuation(
    model: CausalLM, tokens: Tensor, num_tokens: int, choose: Callable[[Tensor], Tensor]
) -> Iterator[Tensor]:
    """The next ``num_tokens`` tokens after each row of ``tokens``, one ``(B,)`` step at a time.

    The prefix is read in one pass; then each chosen token is fed alone with the carried state
    (the recurrent state, or the key/value cache), so nothing is recomputed. Each token is
    predicted from the last ``min(length, context_size)`` tokens, exactly as a loop that re-runs
    the model on ``tokens[:, -context_size:]`` at every step (nanoGPT): once the sequence
    outgrows the context, the positions of the kept tokens shift and a cache is stale, so each
    further step re-reads the last ``context_size`` tokens from a fresh state.

    Args:
        tokens: the prefix ``(B, P)``, at least one token per row.
        choose: next-token logits ``(B, V)`` -> the chosen tokens ``(B,)``.
    """
    window = model.context_size
    batch = tokens.shape[0]
    start = tokens if window is None else tokens[:, -window:]
    logits, state = model(start, model.init_state(batch))  # (B, P, V)
    for step in range(num_tokens):
        token = choose(logits[:, -1])  # (B,)
        yield token
        if step + 1 == num_tokens:  # the last token's logits are not needed
            break
        tokens = torch.cat([tokens, token[:, None]], dim=1)  # (B, P + step + 1)
        if window is None or tokens.shape[1] <= window:
            logits, state = model(token[:, None], state)  # (B, 1, V)
        else:  # the context is full: re-read its last window from a fresh state
            logits, state = model(tokens[:, -window:], model.init_state(batch))


def generate(
    model: CausalLM,
    prefix_ids: Sequence[int] | Tensor,
    num_tokens: int,
    strategy: Literal["greedy", "sample"] = "greedy",
    temperature: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
    never: Sequence[int] = (),
) -> list[int] | Tensor:
    """Continue ``prefix_ids`` by ``num_tokens`` tokens; return the new tokens only.

    The model is in eval mode while generating (its previous mode is restored). See
    :func:`continuation` for how the state is carried.

    Args:
        model: the language model.
        prefix_ids: one prefix as a list of ids, or a batch as a tensor; at least one token.
        num_tokens: how many tokens to emit (>= 0).
        strategy: ``greedy`` (argmax) or ``sample`` (from softmax(logits / temperature),
            restricted to the ``top_k`` most likely tokens when ``top_k > 0``).
        temperature: > 0; below 1 sharpens, above 1 flattens (sampling only).
        generator: random source for sampling (reproducible draws).
        never: token ids never generated (see :func:`seqlab.nn.sampling.next_token`).

    Shape:
        prefix_ids ``(B, P)`` -> ``(B, num_tokens)``; a list of P ids -> a list of num_tokens.
    """
    if strategy not in ("greedy", "sample"):
        raise ValueError(f"strategy must be 'greedy' or 'sample', got {strategy!r}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if top_k < 0 or num_tokens < 0:
        raise ValueError(f"top_k and num_tokens must be >= 0, got {top_k} and {num_tokens}")
    as_list = not isinstance(prefix_ids, Tensor)
    device = next(model.parameters()).device
    tokens = torch.tensor([list(prefix_ids)], dtype=torch.long) if as_list else prefix_ids
    tokens = tokens.to(device)  # (B, P)
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(
            f"prefix_ids is empty (shape {tuple(tokens.shape)}): generation needs at least one "
            "token to start from"
        )
    was_training = model.training
    model.eval()
    try:
        steps = list(
            continuation(
                model,
                tokens,
                num_tokens,
                lambda logits: next_token(logits, strategy, temperature, top_k, generator, never),
            )
        )
    finally:
        model.train(was_training)
    new = torch.stack(steps, dim=1) if steps else tokens.new_zeros(tokens.shape[0], 0)
    return new[0].tolist() if as_list else new  # (B, num_tokens)
