"""The translation predictor (:class:`Translator`): translate sentences, their n-best hypotheses,
attention, scores, ensembles. Decoding runs on an engine
(:mod:`seqlab.tasks.translation.engines`); scoring is :mod:`seqlab.tasks.translation.scoring`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from seqlab import catalog
from seqlab.config import ExperimentConfig
from seqlab.data.translation_batching import TranslationVocabs
from seqlab.data.vocab import quiet_unknown, unknown_tokens, warn_unknown
from seqlab.deprecation import renamed_kwargs
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.models.ensemble import Ensemble
from seqlab.models.search import Hypothesis, token_log_probs
from seqlab.runtime.precision import autocast
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.base import Predictor, Run, load_weights
from seqlab.tasks.options import Option
from seqlab.tasks.report import Prediction
from seqlab.tasks.translation import figures, scoring
from seqlab.tasks.translation.artefacts import ARTEFACTS, _sizes, load_vocabs
from seqlab.tasks.translation.decoding import as_sentences, decode_options
from seqlab.tasks.translation.engines import (
    CTRANSLATE2,
    SEQLAB,
    Engine,
    SeqlabSearch,
    check_engine,
    decode_batches,
    engine_decodes,
    engine_name,
)
from seqlab.tasks.translation.ensemble import Member, ensemble_members
from seqlab.tasks.translation.options import OPTIONS, USAGE
from seqlab.tokens import BOS, EOS

#: sentences whose source tokens a translator keeps (:meth:`Translator.source_tokens`)
TOKEN_CACHE = 4096


@dataclass
class Translations(Prediction):
    """The n-best hypotheses of each sentence, detokenised: ``(text, score)`` best first.

    Attributes:
        numbers: the input line of each sentence (n-best lines start with it).
        nbest: hypotheses printed per sentence (1: the best translation alone).
    """

    hypotheses: list[list[tuple[str, float]]]
    numbers: list[int]
    nbest: int = 1

    def lines(self) -> list[str]:
        if self.nbest == 1:
            return [hyps[0][0] for hyps in self.hypotheses]
        return [
            f"{number}\t{rank}\t{score:.4f}\t{text}"
            for number, hyps in zip(self.numbers, self.hypotheses, strict=True)
            for rank, (text, score) in enumerate(hyps[: self.nbest])
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "translations": [
                {"text": hyps[0][0], "hypotheses": [{"text": t, "score": s} for t, s in hyps]}
                for hyps in self.hypotheses
            ]
        }


@dataclass
class TranslationAttention:
    """One translation read back in a teacher-forced pass (:meth:`Translator.attention`): what
    each output token cost and where the model looked. Weights are float, on the CPU.

    Attributes:
        source_tokens: the S tokens the encoder read (the last ``<eos>``).
        target_tokens: the T output tokens (the last ``<eos>``).
        target_inputs: the T tokens the decoder read (``<bos>``, then the output's).
        log_probs: ``(T,)``: each output token's log-probability as the search scored it; their
            sum is the hypothesis's ``log_prob``.
        alignment: ``(T, S)``: the weights over the source (None without attention).
        layers: by kind (:attr:`Translator.attention_kinds`), one ``(h, ·, ·)`` tensor per layer:
            ``encoder`` ``(h, S, S)``, ``decoder`` ``(h, T, T)``, ``cross`` ``(h, T, S)``.
    """

    source_tokens: list[str]
    target_tokens: list[str]
    target_inputs: list[str]
    log_probs: torch.Tensor
    alignment: torch.Tensor | None
    layers: dict[str, list[torch.Tensor]]


class Translator(Predictor):
    """A trained translation model: translate sentences, score them against references.

    Usable on a model being trained too (validation): ``Translator(model, cfg, vocabs)``.
    """

    task = "translation"
    kind = "translation"
    capabilities: ClassVar[tuple[str, ...]] = (
        "translate",
        "hypotheses",
        "attention",
        "score",
        "predict",
        "evaluate",
    )
    commands: ClassVar[tuple[str, ...]] = ("translate", "evaluate")
    options: ClassVar[tuple[Option, ...]] = OPTIONS
    usage: ClassVar[dict[str, str]] = USAGE

    def __init__(
        self,
        model: EncoderDecoder,
        cfg: ExperimentConfig,
        vocabs: TranslationVocabs,
        run: Run | None = None,
    ) -> None:
        super().__init__(model, cfg, run)
        self.model: EncoderDecoder = model
        self.vocabs = vocabs
        self._engines: dict[tuple[str, int, int], Any] = {}  # CTranslate2 engines, by settings
        self._tokens: dict[str, tuple[str, ...]] = {}  # :meth:`source_tokens`
        self.members: list[str] = []  # the other runs of an ensemble (:meth:`ensemble_with`)

    @classmethod
    def load(cls, run: Run) -> Translator:
        """The trained model of ``run`` (its vocabularies, tokenizers and checkpoint only)."""
        for name in ARTEFACTS[:4]:
            run.file(name)
        vocabs = load_vocabs(run.run_dir)
        for key, value in _sizes(vocabs).items():
            run.check_size(key, value)
        model = build_model(
            run.cfg.model,
            src_vocab_size=len(vocabs.src_vocab),
            tgt_vocab_size=len(vocabs.tgt_vocab),
        )
        return cls(load_weights(model, run), run.cfg, vocabs, run)

    def ensemble_with(
        self,
        others: Member | Sequence[Member],
        names: Sequence[str] | None = None,
        which: str = "best",
    ) -> Translator:
        """This run and ``others`` — one or a list of run directories (``str`` or ``Path``,
        loaded at ``which``) or translators :func:`seqlab.load` returned, named ``names`` in
        messages (default: their run directories) — as one translator whose model is their
        :class:`~seqlab.models.ensemble.Ensemble`: the mean of the models' next-token
        probabilities. Tokenising, decoding settings and precision stay this run's, so every
        other run must be a translation run with the same vocabularies and tokenizers.
        Anything else is a :class:`TypeError`."""
        members = ensemble_members(self, others, names, which)
        models = [self.model, *(o.model for o in members)]  # type: ignore[attr-defined]
        joined = Translator(Ensemble(models).eval(), self.cfg, self.vocabs, self.run)
        joined.precision = self.precision
        joined.members = [*self.members, *(str(o.checkpoint) for o in members)]
        return joined

    @property
    def checkpoint(self) -> str | None:
        """The checkpoint file the weights come from, an ensemble's joined by `` + ``."""
        own = super().checkpoint
        return " + ".join([own, *self.members]) if own is not None and self.members else own

    def check(self, command: str, options: Mapping[str, Any]) -> None:
        """The decoding options (:func:`decode_options`), the engine (:func:`check_engine`) and
        attention heatmaps, which need a model that attends to the source."""
        decode_options(
            self.cfg.decode,
            options.get("beam"),
            options.get("nbest"),
            options.get("length_penalty"),
        )
        heatmaps = bool(options.get("attention_png"))
        self.check_ensemble_engine(options.get("engine") or "pytorch")
        check_engine(
            options.get("engine") or "pytorch",
            options.get("quantize"),
            self.cfg.model.arch,
            need_weights=heatmaps,
        )
        if heatmaps and not self.has_attention:
            raise SeqlabError(
                f"--attention-png: model.arch={self.cfg.model.arch} has no attention over the "
                "source to draw (it encodes the source into one vector)"
            )

    def check_ensemble_engine(self, engine: str) -> None:
        """An ensemble decodes with seqlab only: a CTranslate2 export holds one model."""
        if self.members and engine_name(engine) != SEQLAB:
            raise SeqlabError(
                "--ensemble decodes with seqlab (--engine pytorch) only: a CTranslate2 export "
                "holds one model"
            )

    @property
    def has_attention(self) -> bool:
        return bool(getattr(self.model, "has_attention", False))

    @property
    def attention_kinds(self) -> list[str]:
        """What :meth:`attention` gives besides log-probabilities: each layer's and head's
        weights by kind (``cross``, ``encoder``, ``decoder``) where the model has attention
        layers, and the ``alignment`` of a model that attends to the source; none otherwise."""
        if not self.has_attention:
            return []
        return [*self.model.attention_layers, "alignment"]

    @property
    def languages(self) -> tuple[str, str] | None:
        """Source and target language (``data.src_lang``, ``data.tgt_lang``), or None for a
        dataset of generated strings rather than sentences (dates)."""
        d = self.cfg.data
        if not catalog.datasets()[d.dataset].natural_language:
            return None
        return str(d.src_lang), str(d.tgt_lang)

    def decodes_with(self, engine: str) -> bool:
        """Whether ``engine`` (``seqlab``/``pytorch``, ``ctranslate2``) can decode this model
        (:func:`engine_decodes`; CTranslate2 must also be installed to run)."""
        return engine_decodes(engine, self.cfg.model.arch)

    @property
    def max_source_tokens(self) -> int:
        """The most source tokens the encoder reads (``data.max_len`` positions, the last one
        ``<eos>``); a longer sentence is cut to its first ones (:meth:`is_cut`)."""
        return self.cfg.data.max_len - 1

    def source_tokens(self, sentence: str) -> list[str]:
        """The source tokenizer's tokens of ``sentence``, tokenised once: the last
        :data:`TOKEN_CACHE` sentences' are kept, so that :meth:`hypotheses`, :meth:`is_cut`,
        :meth:`unknown_tokens` and :meth:`source_ids` on one request (the server calls them all)
        tokenise each sentence once."""
        found = self._tokens.get(sentence)
        if found is None:
            if len(self._tokens) >= TOKEN_CACHE:
                self._tokens.clear()
            found = self._tokens[sentence] = tuple(self.vocabs.src_tokenizer.tokenize(sentence))
        return list(found)

    def is_cut(self, sentence: str) -> bool:
        """Whether the encoder reads only the first :attr:`max_source_tokens` of ``sentence``."""
        return len(self.source_tokens(sentence)) > self.max_source_tokens

    def source_ids(self, sentence: str) -> list[int]:
        """Token ids the encoder reads: the tokens (cut to ``data.max_len - 1``) and ``<eos>``."""
        ids = self.vocabs.src_vocab[self.source_tokens(sentence)]
        return ids[: self.max_source_tokens] + [EOS]

    def unknown_tokens(self, sentence: str) -> list[str]:
        """The tokens of ``sentence`` that the source vocabulary lacks (the encoder reads each as
        ``<unk>``), in order."""
        return unknown_tokens(self.vocabs.src_vocab, self.source_tokens(sentence))

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.vocabs.tgt_tokenizer.detokenize(self.vocabs.tgt_vocab.to_tokens(list(ids)))

    @renamed_kwargs(need_attention="need_weights")
    @torch.no_grad()
    def hypotheses(
        self,
        sentences: Sequence[str] | str,
        *,
        beam: int | None = None,
        nbest: int | None = None,
        length_penalty: float | None = None,
        need_weights: bool = False,
        batch_size: int = 128,
        engine: str = "pytorch",
        quantize: str | None = None,
    ) -> Any:
        """n-best hypotheses per sentence, in input order (batched by length); given one
        sentence (a string), its n-best list.

        Blank sentences get one empty hypothesis without decoding. Over-long inputs are cut to
        ``data.max_len`` positions, with one warning. A sentence holding tokens that the source
        vocabulary lacks is read with ``<unk>`` in their place, with an
        :class:`~seqlab.data.vocab.UnknownTokenWarning` naming it (``sentence I``, its index) and
        the tokens; a line break other than ``\\n`` in a sentence is refused.

        Args:
            engine: ``seqlab`` (``pytorch``: seqlab's own search) or ``ctranslate2`` (the model
                exported to CTranslate2, :mod:`~seqlab.tasks.translation.ctranslate2_engine`'s
                cache): :mod:`seqlab.tasks.translation.engines`.
            quantize: with ``ctranslate2``: a compute type such as ``int8``.
        """
        sentences, single = as_sentences(sentences)
        if single:
            return self.hypotheses(
                sentences,
                beam=beam,
                nbest=nbest,
                length_penalty=length_penalty,
                need_weights=need_weights,
                batch_size=batch_size,
                engine=engine,
                quantize=quantize,
            )[0]
        decode = decode_options(self.cfg.decode, beam, nbest, length_penalty)
        self.check_ensemble_engine(engine)
        check_engine(engine, quantize, self.cfg.model.arch, need_weights)
        vocab = self.vocabs.src_vocab
        pieces = [self.source_tokens(s) for s in sentences]  # once: ids, cuts and unknown tokens
        src_ids = [
            vocab[p][: self.max_source_tokens] + [EOS] if s.strip() else []
            for s, p in zip(sentences, pieces, strict=True)
        ]
        warn_unknown(((f"sentence {i}", unknown_tokens(vocab, p)) for i, p in enumerate(pieces)), 4)
        cut = sum(len(p) > self.max_source_tokens for p in pieces)
        if cut:
            warnings.warn(
                f"truncated {cut} of {len(sentences)} input sentences to "
                f"data.max_len={self.cfg.data.max_len} positions",
                stacklevel=2,
            )
        results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in src_ids]
        order = sorted((i for i, ids in enumerate(src_ids) if ids), key=lambda i: len(src_ids[i]))
        found = decode_batches(
            self.engine(engine, quantize),
            [src_ids[i] for i in order],
            decode,
            need_weights,
            batch_size,
        )
        for i, hyps in zip(order, found, strict=True):
            results[i] = hyps
        return results

    @torch.no_grad()
    def attention(self, sentence: str, tokens: Sequence[int] | None = None) -> TranslationAttention:
        """``tokens`` (target ids without ``<bos>`` and ``<eos>``; default: the best translation
        of ``sentence``) read back in one teacher-forced pass: each token's log-probability and
        every attention weight the model has (:meth:`EncoderDecoder.attention_maps`): for a
        Transformer each layer and head (Vaswani et al. 2017, §3.2), for an RNN with attention its
        alignment (Bahdanau et al. 2014, §3.1)."""
        if tokens is None:
            tokens = self.hypotheses(sentence)[0].tokens
        else:
            check_line_breaks(sentence, "the sentence")
            warn_unknown([("the sentence", self.unknown_tokens(sentence))], 4)
        device = next(self.model.parameters()).device
        src_ids, out_ids = self.source_ids(sentence), [*tokens, EOS]
        src = torch.tensor([src_ids], device=device)  # (1, S)
        src_len = torch.tensor([len(src_ids)], device=device)  # (1,)
        tgt_in = torch.tensor([[BOS, *tokens]], device=device)  # (1, T)
        with autocast(self.precision, device):
            maps = self.model.attention_maps(src, src_len, tgt_in)
        log_probs = token_log_probs(maps.logits[0], torch.tensor(out_ids, device=device))  # (T,)
        tgt_vocab = self.vocabs.tgt_vocab
        return TranslationAttention(
            source_tokens=self.vocabs.src_vocab.to_tokens(src_ids),
            target_tokens=tgt_vocab.to_tokens(out_ids),
            target_inputs=tgt_vocab.to_tokens([BOS, *tokens]),
            log_probs=log_probs.cpu(),
            alignment=None if maps.alignment is None else maps.alignment[0].float().cpu(),
            layers={k: [w[0].float().cpu() for w in ws] for k, ws in maps.layers.items()},
        )

    def engine(self, engine: str, quantize: str | None = None) -> Engine:
        """The engine ``engine`` names (:func:`~seqlab.tasks.translation.engines.engine_name`):
        seqlab's own search in this translator's precision, or CTranslate2 in ``compute_type``
        ``quantize`` (fp32 when None), opened once per setting
        (:class:`~seqlab.tasks.translation.ctranslate2_engine.CTranslate2Search`) on the export
        cache ``RUN/exports/``, written on first use
        (:func:`~seqlab.tasks.translation.ctranslate2_engine.cached_export`)."""
        if engine_name(engine) == SEQLAB:
            return SeqlabSearch(self.model, self.precision)
        from seqlab.tasks.translation.ctranslate2_engine import CTranslate2Search

        key = CTranslate2Search.key(quantize)
        if key not in self._engines:
            sizes = (len(self.vocabs.src_vocab), len(self.vocabs.tgt_vocab))
            self._engines[key] = CTranslate2Search(self.model, sizes, self.run, quantize)
        return self._engines[key]

    def ctranslate2_engine(self, quantize: str | None = None) -> Any:
        """The :class:`~seqlab.export.ctranslate2.CTranslate2Engine` that
        ``engine("ctranslate2", quantize)`` decodes with (see :meth:`engine`)."""
        return self.engine(CTRANSLATE2, quantize).engine  # type: ignore[attr-defined]

    def translate(
        self,
        sentences: Sequence[str] | str,
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
        batch_size: int = 128,
        engine: str = "pytorch",
        quantize: str | None = None,
    ) -> Any:
        """The best translation of each sentence (``beam``, ``length_penalty``: None = the run's
        ``decode``): a list for a list of sentences, a string for one sentence (a string)."""
        sentences, single = as_sentences(sentences)
        found = self.hypotheses(
            sentences,
            beam=beam,
            nbest=1,
            length_penalty=length_penalty,
            batch_size=batch_size,
            engine=engine,
            quantize=quantize,
        )
        outputs = [self.detokenize(h[0].tokens) for h in found]
        return outputs[0] if single else outputs

    def score(
        self,
        sources: Sequence[str],
        references: Sequence[str],
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
        engine: str = "pytorch",
        quantize: str | None = None,
    ) -> dict[str, Any]:
        """Translate ``sources`` and score them against ``references``: BLEU, chrF, …, and the
        outputs (key ``translations``). Both are lists of sentences, at least one."""
        if isinstance(sources, str) or isinstance(references, str):
            raise SeqlabError(
                "score takes lists of sentences (sources and references), not a string"
            )
        sources, _ = as_sentences(sources)
        references, _ = as_sentences(references, "reference")
        if not sources and not references:
            raise SeqlabError("nothing to score: 0 source sentences and 0 references")
        if len(sources) != len(references):
            raise SeqlabError(
                f"{len(sources)} source sentences but {len(references)} references; they must "
                "pair up line by line"
            )
        outputs = self.translate(
            sources, beam=beam, length_penalty=length_penalty, engine=engine, quantize=quantize
        )
        scores = scoring.score_translations(outputs, references, scoring.paper_lang(self.cfg))
        return {**scores, "translations": outputs}

    def predict(
        self,
        inputs: Sequence[str] | str,
        *,
        beam: int | None = None,
        nbest: int | None = None,
        length_penalty: float | None = None,
        engine: str = "pytorch",
        quantize: str | None = None,
        attention_png: str | Path | None = None,
        numbers: Sequence[int] | None = None,
    ) -> Translations:
        """Translations of ``inputs`` (``seqlab translate``): the best of each, or the ``nbest``
        best with their scores; with ``attention_png`` one source × output heatmap per sentence
        in that directory, ``attention-NNNN.png`` after its input line (``numbers``, default 1,
        2, …). Unknown tokens are reported by input line (``input line N``)."""
        sentences, _ = as_sentences(inputs)
        options = {
            "beam": beam,
            "nbest": nbest,
            "length_penalty": length_penalty,
            "engine": engine,
            "quantize": quantize,
        }
        self.check("translate", {**options, "attention_png": attention_png})
        numbers = list(numbers) if numbers is not None else list(range(1, len(sentences) + 1))
        warn_unknown(
            (
                (f"input line {n}", self.unknown_tokens(s))
                for n, s in zip(numbers, sentences, strict=True)
            ),
            2,
        )
        with quiet_unknown():  # reported above, by input line
            found = self.hypotheses(sentences, need_weights=bool(attention_png), **options)
        out = Translations(
            [[(self.detokenize(h.tokens), h.score) for h in hyps] for hyps in found],
            numbers,
            decode_options(self.cfg.decode, beam, nbest).nbest,
        )
        if attention_png:
            out.figures = [
                self.draw_alignment(Path(attention_png), number, line, hyps[0])
                for number, line, hyps in zip(numbers, sentences, found, strict=True)
                if line.strip()
            ]
        return out

    @property
    def alignment_name(self) -> str:
        """Which attention :meth:`draw_alignment` draws
        (:func:`seqlab.tasks.translation.figures.alignment_name`)."""
        return figures.alignment_name(self)

    def draw_alignment(self, directory: Path, number: int, line: str, hyp: Hypothesis) -> Path:
        """The source × output heatmap of ``line``'s hypothesis ``hyp`` as
        ``directory/attention-NNNN.png``
        (:func:`seqlab.tasks.translation.figures.draw_alignment`)."""
        return figures.draw_alignment(self, directory, number, line, hyp)

    def evaluate(
        self,
        split: str | None = None,
        files: Mapping[str, str | Path] | None = None,
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
        engine: str = "pytorch",
        quantize: str | None = None,
        output: str | Path | None = None,
    ) -> scoring.TranslationReport:
        """BLEU, chrF and paper-style BLEU on a ``split`` of the run's dataset (default ``val``)
        or on ``files={"src": FILE, "ref": FILE}``; ``output``: also write the translations there
        (atomically): :func:`seqlab.tasks.translation.scoring.evaluate`."""
        return scoring.evaluate(
            self,
            split,
            files,
            beam=beam,
            length_penalty=length_penalty,
            engine=engine,
            quantize=quantize,
            output=output,
        )
