"""Greedy and beam search for the encoder–decoder models, batched, driving only ``decode_step``.

Notation (shapes in comments): B sentences, K beam size, R rows of the decoding batch
(B for greedy, B·K for beam search: the K beams of sentence b are rows b·K .. b·K + K - 1),
S source length, V target vocabulary.

Both searches work on a batch of sentences at once: every step is one ``decode_step`` call on all
live rows. The model's explicit state is reordered with ``reorder_state`` (an ``index_select``
on the batch axis) when beams are selected, and sentences that are done leave the batch
(``reorder_memory`` / ``reorder_state``; greedy search once they make up a quarter of it, beam
search, which reorders its state at every step anyway, at once), so long sentences do not keep
short ones' rows busy. Beam search gives each sentence's memory to its K rows with
``expand_memory``: the Transformer's K beams share one copy of the projected source.
``use_cache=False`` instead re-runs teacher-forced ``decode`` on the whole prefix at every step:
the slow reference the cache must agree with.

**Lengths.** Sentence b may produce at most ``floor(a · S_b + b)`` tokens before ``<eos>``
(``max_len_a``, ``max_len_b``; S_b = ``src_lengths[b]``, which counts the source ``<eos>``), further
capped by ``max_len`` and by the model's ``max_decode_len`` positions. At that length ``<eos>`` is
forced. The returned token lists hold neither ``<bos>`` nor ``<eos>``; ``<pad>`` and ``<bos>``
are never chosen: they are removed from the model's distribution (their logits set to -inf before
the softmax), so the remaining probabilities are renormalised, as CTranslate2 does.

**Beam search** (as fairseq): each step scores all K·V extensions of the K live beams per
sentence and takes the best 2K (in two stages over groups of tokens, exact:
:mod:`seqlab.models.vocab_select`). An ``<eos>`` among the best K closes a hypothesis, the K
best that do not end stay live. A sentence is done when it has K finished hypotheses or reaches
its length limit; its ``nbest`` best are returned, sorted by score. The score is the
length-normalised log-probability ``log p(y | x) / |y|^α``, where |y| counts the tokens and
``<eos>`` and α is ``length_penalty`` (α = 0: raw log-probability; α = 1: per-token average,
the default). This simple form (fairseq's) is used rather than GNMT's ((5 + |y|) / 6)^α: for
α = 1 it is just the mean log-probability, easy to read. With K = 1 beam search makes exactly
the greedy choices.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.models.vocab_select import best_extensions, best_tokens, group_max, log_normaliser
from seqlab.tokens import BOS, EOS, PAD

_NEVER_OUTPUT = [PAD, BOS]  # tokens no hypothesis may contain


@dataclass
class Hypothesis:
    """One output sentence.

    Attributes:
        tokens: target ids, without ``<bos>`` and ``<eos>``.
        score: what the search ranks by: ``log_prob / (len(tokens) + 1) ** α`` for beam search,
            ``log_prob`` for greedy search.
        log_prob: log p(tokens, <eos> | source), summed over the tokens and ``<eos>``.
        attention: when asked for, the model's attention over the real source positions for each
            output token and the final ``<eos>``, ``(len(tokens) + 1, src_lengths)``.
    """

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor | None = None


def max_output_lengths(
    model: EncoderDecoder,
    src_lengths: Tensor,
    max_len_a: float,
    max_len_b: int,
    max_len: int | None = None,
) -> Tensor:
    """Most tokens before ``<eos>`` per sentence: ``floor(a · S_b + b)``, capped (see module).

    Shape:
        src_lengths ``(B,)`` -> ``(B,)``.
    """
    limits = torch.floor(max_len_a * src_lengths.double() + max_len_b).long()  # (B,)
    if max_len is not None:
        limits = limits.clamp(max=max_len)  # (B,)
    if model.max_decode_len is not None:
        # decoder positions 0 .. L-1 hold <bos> and the tokens: <eos> is predicted at L-1
        limits = limits.clamp(max=model.max_decode_len - 1)  # (B,)
    return limits.clamp(min=0)  # (B,)


@contextmanager
def _eval_mode(model: EncoderDecoder) -> Iterator[None]:
    was_training = model.training
    model.train(False)
    try:
        yield
    finally:
        model.train(was_training)


def _predict(
    model: EncoderDecoder,
    memory: Any,
    state: Any,
    prefix: Tensor,
    use_cache: bool,
    need_weights: bool,
) -> tuple[Tensor, Any, Tensor | None]:
    """Next-token scores of every row, from the state or the whole prefix.

    Returns the logits with the never-output tokens at -inf (renormalising over the rest is the
    caller's: greedy search needs only the log normaliser, beam search every log-probability).

    Shape:
        prefix ``(R, 1 + t)`` (``<bos>`` and t tokens) -> logits ``(R, V)``, state,
        attention ``(R, S)``.
    """
    if use_cache:
        logits, state, attn = model.decode_step(
            memory, state, prefix[:, -1], need_weights=need_weights
        )  # (R, V), (R, S)
    else:
        logits, attn = model.decode(memory, prefix, need_weights=need_weights)  # (R, 1+t, V)
        logits, attn = logits[:, -1], (None if attn is None else attn[:, -1])  # (R, V), (R, S)
    logits = logits.float().contiguous()  # (R, V): the searches change it in place
    logits[:, _NEVER_OUTPUT] = -math.inf  # removed from the distribution (renormalised)
    return logits, state, attn


def token_log_probs(logits: Tensor, targets: Tensor) -> Tensor:
    """The log-probability of each of ``targets`` in the distribution the searches choose from
    (``<pad>`` and ``<bos>`` removed, the rest renormalised): over a hypothesis's tokens and its
    ``<eos>`` they sum to its :attr:`Hypothesis.log_prob`.

    Shape:
        logits ``(..., T, V)``, targets ``(..., T)`` -> ``(..., T)``.
    """
    logits = logits.float().clone()  # (..., T, V)
    logits[..., _NEVER_OUTPUT] = -math.inf
    return logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]  # (..., T)


def _append_attention(history: Tensor | None, attn: Tensor | None) -> Tensor | None:
    """Add one step ``(R, S)`` to the attention history ``(R, t, S)``."""
    if attn is None:
        return None
    step = attn.float()[:, None, :]  # (R, 1, S)
    return step if history is None else torch.cat([history, step], dim=1)  # (R, t + 1, S)


@torch.no_grad()
def greedy_search(
    model: EncoderDecoder,
    src: Tensor,
    src_lengths: Tensor,
    *,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    max_len: int | None = None,
    need_weights: bool = False,
    use_cache: bool = True,
) -> list[Hypothesis]:
    """Pick the most likely next token until ``<eos>``, for all sentences at once.

    Args:
        src, src_lengths: a padded source batch and its lengths.
        max_len_a, max_len_b, max_len: output length limit (see the module docstring).
        need_weights: return each hypothesis' attention weights (models with attention).
        use_cache: decode step by step with the model's state (else recompute the prefix).

    Returns:
        one :class:`Hypothesis` per sentence, in input order; its score is the log-probability.

    Shape:
        src ``(B, S)``, src_lengths ``(B,)``.
    """
    with _eval_mode(model):
        num, device = src.shape[0], src.device
        limits = max_output_lengths(model, src_lengths, max_len_a, max_len_b, max_len).to(device)
        memory = model.encode(src, src_lengths)
        state = model.init_state(memory) if use_cache else None
        sent = torch.arange(num, device=device)  # (R,) sentence of each row
        prefix = src.new_full((num, 1), BOS)  # (R, 1): <bos>, then the chosen tokens
        log_prob = torch.zeros(num, device=device)  # (R,)
        alive = torch.ones(num, dtype=torch.bool, device=device)  # (R,)
        history: Tensor | None = None  # (R, t, S)
        results: list[Hypothesis | None] = [None] * num
        for t in range(int(limits.max()) + 1):
            logits, state, attn = _predict(
                model, memory, state, prefix, use_cache, need_weights
            )  # (R, V)
            # log p(best) = logit - logsumexp: no full (R, V) log-probabilities needed
            best, top, _ = best_tokens(logits)  # (R, 1) each
            forced = ((limits[sent] <= t) | ~alive)[:, None]  # (R, 1): only <eos> may follow
            chosen = top if not forced.any() else torch.where(forced, logits[:, EOS, None], top)
            log_prob += (chosen - log_normaliser(logits, top)).squeeze(1)  # (R,)
            best = best.squeeze(1).masked_fill(forced.squeeze(1), EOS)  # (R,)
            prefix = torch.cat([prefix, best[:, None]], dim=1)  # (R, 2 + t)
            history = _append_attention(history, attn) if need_weights else None
            ended = alive & (best == EOS)  # (R,)
            if not ended.any():
                continue
            rows = ended.nonzero().squeeze(1)  # rows that end now
            for r, b, tokens, lp in zip(
                rows.tolist(),
                sent[rows].tolist(),
                prefix[rows, 1:-1].tolist(),
                log_prob[rows].tolist(),
                strict=True,
            ):
                attention = None if history is None else history[r, :, : int(src_lengths[b])]
                results[b] = Hypothesis(tokens, lp, lp, attention)
            alive &= ~ended
            if not alive.any():
                break
            if 4 * int((~alive).sum()) >= alive.numel():  # drop finished rows
                keep = alive.nonzero().squeeze(1)  # (R',)
                memory = model.reorder_memory(memory, keep)
                state = model.reorder_state(state, keep) if use_cache else None
                sent, prefix, log_prob, alive = (
                    sent[keep],
                    prefix[keep],
                    log_prob[keep],
                    alive[keep],
                )
                history = None if history is None else history[keep]
    return results  # type: ignore[return-value]


@torch.no_grad()
def beam_search(
    model: EncoderDecoder,
    src: Tensor,
    src_lengths: Tensor,
    *,
    beam_size: int = 5,
    length_penalty: float = 1.0,
    nbest: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    max_len: int | None = None,
    need_weights: bool = False,
    use_cache: bool = True,
) -> list[list[Hypothesis]]:
    """Beam search for all sentences at once (see the module docstring for the rules).

    Args:
        beam_size: K, live hypotheses per sentence.
        length_penalty: α of the score ``log_prob / length^α``.
        nbest: how many finished hypotheses to return per sentence (at most K).
        max_len_a, max_len_b, max_len, need_weights, use_cache: as :func:`greedy_search`.

    Returns:
        per sentence, in input order, its ``nbest`` hypotheses, best first (distinct token lists).

    Shape:
        src ``(B, S)``, src_lengths ``(B,)``.
    """
    if beam_size < 1 or not 1 <= nbest <= beam_size:
        raise ValueError(f"need 1 <= nbest <= beam_size, got nbest={nbest}, beam_size={beam_size}")
    k = beam_size
    with _eval_mode(model):
        num, device = src.shape[0], src.device
        limits = max_output_lengths(model, src_lengths, max_len_a, max_len_b, max_len).to(device)
        memory = model.encode(src, src_lengths)
        beams = torch.arange(k, device=device)  # (K,)
        state = model.init_state(memory) if use_cache else None
        sent = torch.arange(num, device=device)  # (B,) sentence of each live block of K rows
        scores = torch.full((num, k), -math.inf, device=device)  # (B, K) beam log-probabilities
        scores[:, 0] = 0.0  # one live beam at first, so the K beams never repeat a prefix
        prefix = src.new_full((num, 1), BOS)  # (B, 1), then (B·K, 1 + t)
        history: Tensor | None = None  # (B·K, t, S)
        done = torch.zeros(num, dtype=torch.bool, device=device)  # (B,)
        finished: list[list[Hypothesis]] = [[] for _ in range(num)]
        scratch: Tensor | None = None  # room for exp(logits) of the largest step
        for t in range(int(limits.max()) + 1):
            logits, state, attn = _predict(model, memory, state, prefix, use_cache, need_weights)
            per_block = 1 if t == 0 else k  # rows per sentence: the K beams start alike
            maxima = group_max(logits)  # (R, G)
            if scratch is None or scratch.numel() < logits.numel():
                scratch = torch.empty(num * k * logits.shape[1], device=device)
            exps = scratch[: logits.numel()].view_as(logits)  # (R, V): logits stay
            top = maxima.amax(dim=1, keepdim=True)  # (R, 1)
            # log p(prefix) + log p(token | prefix) = logit + offset, one offset per row
            offsets = scores[:, :per_block].reshape(-1, 1) - log_normaliser(logits, top, exps)
            at_limit = limits[sent] <= t  # (B,)
            if at_limit.any():  # only <eos> may follow
                stop = at_limit.repeat_interleave(per_block).nonzero().squeeze(1)  # (R',)
                eos = logits[stop, EOS]  # (R',)
                logits[stop] = -math.inf
                logits[stop, EOS] = eos
                maxima[stop] = group_max(logits[stop])
            # the best 2K extensions of each sentence, over its rows × V (vocab_select: exact)
            top_scores, top_rows, top_tokens = best_extensions(
                logits, offsets, maxima, per_block, 2 * k
            )  # (B, 2K) each, best first; rows of this step's batch
            width = top_scores.shape[1]
            if t == 0:
                memory = model.expand_memory(memory, num, k)  # the Transformer: not copied
            is_eos = top_tokens == EOS  # (B, 2K)
            history = _append_attention(history, attn) if need_weights else None

            # 1. an <eos> among the K best closes a hypothesis of a sentence not yet done
            close = is_eos[:, :k] & (top_scores[:, :k] > -math.inf) & ~done[:, None]  # (B, K)
            if close.any():
                where = close.nonzero()  # (C, 2): (block, candidate)
                rows = top_rows[where[:, 0], where[:, 1]]  # (C,)
                full = []  # blocks whose sentence now has K finished hypotheses
                for i, r, b, tokens, lp in zip(
                    where[:, 0].tolist(),
                    rows.tolist(),
                    sent[where[:, 0]].tolist(),
                    prefix[rows, 1:].tolist(),
                    top_scores[where[:, 0], where[:, 1]].tolist(),
                    strict=True,
                ):
                    if len(finished[b]) < k:
                        attention = (
                            None if history is None else history[r, :, : int(src_lengths[b])]
                        )
                        score = lp / (t + 1) ** length_penalty
                        finished[b].append(Hypothesis(tokens, score, lp, attention))
                    if len(finished[b]) == k:
                        full.append(i)
                if full:
                    done[torch.tensor(full, device=device)] = True
            done |= at_limit
            if done.all():
                break

            # 2. the K best candidates that do not end stay live, of unfinished sentences only:
            #    the state is reordered at every step anyway, so a sentence leaves when done
            live = (~done).nonzero().squeeze(1) if bool(done.any()) else None  # (B',)
            order = torch.arange(width, device=device) + is_eos * width  # (B, 2K) <eos> last
            pick = order.topk(k, dim=1, largest=False).indices  # (B, K)
            rows = top_rows.gather(1, pick)  # (B, K)
            tokens = top_tokens.gather(1, pick)  # (B, K)
            scores = top_scores.gather(1, pick)  # (B, K)
            if live is not None:
                rows, tokens, scores = rows[live], tokens[live], scores[live]  # (B', K)
                sent, done = sent[live], done[live]  # (B',)
                memory = model.reorder_memory(memory, (live[:, None] * k + beams).view(-1))
            # at t = 0 these index the B-row batch: the K beams of each sentence arise here
            rows = rows.view(-1)  # (B·K,)
            prefix = torch.cat([prefix[rows], tokens.view(-1, 1)], dim=1)  # (B·K, 2 + t)
            history = None if history is None else history[rows]  # (B·K, t + 1, S)
            state = model.reorder_state(state, rows) if use_cache else None
    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]
