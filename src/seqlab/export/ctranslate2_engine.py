"""Decoding with a model exported by :mod:`seqlab.export.ctranslate2`: :class:`CTranslate2Engine`
runs CTranslate2's greedy and beam search on seqlab token ids and returns :class:`Decoded`
hypotheses with :class:`seqlab.models.search.Hypothesis`'s conventions (the engine of
``decode.engine: ctranslate2``). Its thread and worker counts come from
:func:`seqlab.export.ctranslate2.give_cores_to_ctranslate2`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.export.ctranslate2 import FORMAT, check_compute_type, require_ctranslate2, token_name
from seqlab.tokens import BOS, PAD, SPECIAL_TOKENS


class _NameOf(dict):
    """seqlab id → the token name CTranslate2 sees (:func:`token_name`), kept once computed (a
    server converts every token of every request, holding the GIL)."""

    def __missing__(self, key: int) -> str:
        name = token_name(int(key))
        if type(key) is int:  # (a tensor's element hashes by identity: not kept)
            self[key] = name
        return name


class _IdOf(dict):
    """A token name CTranslate2 returned → its seqlab id (the inverse of :func:`token_name`)."""

    def __missing__(self, name: str) -> int:
        self[name] = i = SPECIAL_TOKENS.index(name) if name in SPECIAL_TOKENS else int(name[1:])
        return i


_NAME_OF, _ID_OF = _NameOf(), _IdOf()


@dataclass
class Decoded:
    """One hypothesis, with :class:`seqlab.models.search.Hypothesis`'s conventions."""

    tokens: list[int]  # without <bos> and <eos>
    score: float
    log_prob: float | None = None
    attention: None = None


class CTranslate2Engine:
    """Decode seqlab token ids with an exported CTranslate2 model.

    Args:
        model_dir: written by :func:`~seqlab.export.ctranslate2.export_ctranslate2`.
        compute_type: ``default``/``float32`` or a quantized type such as ``int8``.
        threads: CPU threads of the engine (0: CTranslate2's default).
        workers: batches decoded at once, from different threads (CTranslate2's
            ``inter_threads``: that many model replicas, each with ``threads / workers``
            threads; one batch of a few sentences keeps two cores busy only part of the time).
    """

    def __init__(
        self,
        model_dir: str | Path,
        compute_type: str = "float32",
        threads: int = 0,
        workers: int = 1,
        device: str = "cpu",
    ):
        ct2 = require_ctranslate2()
        info_path = Path(model_dir) / "seqlab.json"
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = None
        if not isinstance(info, dict) or info.get("format") != FORMAT:
            raise SeqlabError(f"{model_dir} is not a CTranslate2 model exported by seqlab")
        check_compute_type(compute_type, device)
        if workers < 1 or (threads and workers > threads):
            raise SeqlabError(f"{workers} CTranslate2 workers for {threads} threads")
        self.model_dir, self.compute_type = Path(model_dir), compute_type
        self.workers = workers  # search() is thread-safe: up to this many calls run at once
        self.translator = ct2.Translator(
            str(model_dir),
            device=device,  # "cuda" runs CTranslate2 on the GPU
            compute_type=compute_type,
            inter_threads=workers,
            intra_threads=threads // workers if threads else 0,
        )

    @staticmethod
    def _source(ids: Sequence[int]) -> list[str]:
        return list(map(_NAME_OF.__getitem__, ids))

    @staticmethod
    def _ids(tokens: Sequence[str]) -> list[int]:
        return list(map(_ID_OF.__getitem__, tokens))

    def search(
        self,
        src_ids: Sequence[Sequence[int]],
        *,
        beam_size: int = 1,
        nbest: int = 1,
        length_penalty: float = 1.0,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        max_decode_len: int | None = None,
    ) -> list[list[Decoded]]:
        """n-best hypotheses for each source (token ids ending in ``<eos>``), in input order,
        with :func:`seqlab.models.search.greedy_search`'s and ``beam_search``'s conventions.

        Greedy search when ``beam_size`` is 1 (score: the log-probability), else beam search
        (score: log-probability / (tokens + 1)^α). Each sentence gets its own output limit
        floor(a·S + b) (capped by the model's positions), ``<eos>`` excluded. CTranslate2 takes
        one limit per call, so the batch is decoded once with the largest limit, and a sentence
        with a smaller one keeps that result only where its search provably ended before its own
        limit could act (:meth:`_ended_before`); the others (few: outputs rarely come near
        1.5·S + 10) are decoded again in groups of equal limits. CTranslate2 stops a hypothesis
        at its limit without ``<eos>``; seqlab forces ``<eos>`` there, so such a hypothesis is
        rescored with the forced ``<eos>`` (:meth:`_close_at_limit`) and the n-best list
        re-sorted.
        """
        if not src_ids:
            return []
        cap = max_decode_len - 1 if max_decode_len is not None else None
        limits = [math.floor(max_len_a * len(s) + max_len_b) for s in src_ids]
        limits = [max(min(n, cap) if cap is not None else n, 0) for n in limits]
        alpha = length_penalty if beam_size > 1 else 0.0
        results: list[list[Decoded]] = [[Decoded([], 0.0)] if n == 0 else [] for n in limits]
        todo = [i for i, n in enumerate(limits) if n > 0]  # limit 0: only <eos> may come
        # one call for all: where the end of a search does not depend on num_hypotheses
        # (greedy; beam search with a length penalty ends after beam_size hypotheses)
        if todo and (beam_size == 1 or alpha != 0):
            top = max(limits[i] for i in todo)
            every = beam_size if beam_size > 1 else nbest  # all finished ones: see _ended_before
            found = self._decode([src_ids[i] for i in todo], beam_size, every, alpha, top)
            redo = []
            for i, hyps in zip(todo, found, strict=True):
                if limits[i] == top or self._ended_before(hyps, limits[i], beam_size):
                    results[i] = hyps[:nbest]  # CTranslate2's n best, as with num_hypotheses
                else:
                    redo.append(i)
            at_top = [i for i in todo if limits[i] == top]
            self._close_at_limit(
                [list(src_ids[i]) for i in at_top], [results[i] for i in at_top], top, alpha
            )
            todo = redo
        for limit in sorted({limits[i] for i in todo}):
            group = [i for i in todo if limits[i] == limit]
            sources = [list(src_ids[i]) for i in group]
            found = self._decode(sources, beam_size, nbest, alpha, limit)
            self._close_at_limit(sources, found, limit, alpha)
            for i, hyps in zip(group, found, strict=True):
                results[i] = hyps
        return [sorted(hyps, key=lambda h: -h.score) for hyps in results]

    @staticmethod
    def _ended_before(hyps: list[Decoded], limit: int, beam_size: int) -> bool:
        """Whether a search run with a larger limit ended before step ``limit`` could differ
        from one with this limit, so that its hypotheses are that search's.

        Both searches are the same step by step until the smaller limit's last step (0-based
        ``limit - 1``), where that one ends every beam. A hypothesis ended by ``<eos>`` at step
        s holds s tokens. Greedy search ends at its one hypothesis's ``<eos>``: s ≤ limit - 1.
        Beam search with a length penalty ends at the step where the finished hypotheses reach
        ``beam_size``, and at least one of the best ``beam_size`` finished at that step (fewer
        had finished before it), so with all ``beam_size`` of them returned the longest one's
        length is that step: it must be ≤ limit - 2.
        """
        if beam_size == 1:
            return all(len(h.tokens) <= limit - 1 for h in hyps)
        return len(hyps) >= beam_size and all(len(h.tokens) <= limit - 2 for h in hyps)

    def _decode(
        self,
        sources: Sequence[Sequence[int]],
        beam_size: int,
        hypotheses: int,
        alpha: float,
        limit: int,
    ) -> list[list[Decoded]]:
        """CTranslate2's ``hypotheses`` best for each source (in its order: best first), at most
        ``limit`` tokens before ``<eos>``, with seqlab's conventions (no ``<pad>``/``<bos>``
        output, ``<eos>`` allowed first, no input cut)."""
        return [
            [
                Decoded(self._ids(tokens), float(score))
                for tokens, score in zip(r.hypotheses, r.scores, strict=True)
            ]
            for r in self.translator.translate_batch(
                [self._source(s) for s in sources],
                beam_size=beam_size,
                num_hypotheses=hypotheses,
                length_penalty=alpha,
                suppress_sequences=[[token_name(PAD)], [token_name(BOS)]],
                max_decoding_length=limit,  # tokens before <eos>, as seqlab's limit
                min_decoding_length=0,  # <eos> may come first, as in seqlab
                max_input_length=0,
                return_scores=True,
            )
        ]

    def _close_at_limit(
        self, sources: list[list[int]], found: list[list[Decoded]], limit: int, alpha: float
    ) -> None:
        """Give each hypothesis that reached ``limit`` tokens the ``<eos>`` seqlab forces there:
        its log-probability gains log p(<eos> | tokens), renormalised without ``<pad>`` and
        ``<bos>`` as in the search, and its score becomes log p / (tokens + 1)^α."""
        todo = [
            (src, h)
            for src, hyps in zip(sources, found, strict=True)
            for h in hyps
            if len(h.tokens) >= limit
        ]
        if not todo:
            return
        # log p(x | tokens) at the position after them, for x = <eos> (the last entry of a
        # plain scoring), <pad> and <bos> (scored as one more target token)
        scored = self.score(
            [src for src, _ in todo for _ in range(3)],
            [h.tokens + extra for _, h in todo for extra in ([], [PAD], [BOS])],
        )
        for k, (_, h) in enumerate(todo):
            n = len(h.tokens)
            eos, pad, bos = scored[3 * k][n], scored[3 * k + 1][n], scored[3 * k + 2][n]
            kept = max(1.0 - math.exp(pad) - math.exp(bos), 1e-30)
            tokens = h.score * n**alpha  # CTranslate2's score: log p(tokens) / n^α
            h.log_prob = tokens + eos - math.log(kept)
            h.score = h.log_prob / (n + 1) ** alpha

    def score(
        self, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """Teacher-forced log-probabilities of each target token and of the final ``<eos>``."""
        results = self.translator.score_batch(
            [self._source(s) for s in src_ids],
            [[token_name(int(i)) for i in t] for t in tgt_ids],
            max_input_length=0,
        )
        return [list(r.log_probs) for r in results]
