"""The translation predictor (:class:`Translator`): translate sentences, their n-best hypotheses,
attention, scores, ensembles. Decoding is :mod:`seqlab.tasks.translation.decoding` on an engine
(:mod:`seqlab.tasks.translation.engines`); scoring is :mod:`seqlab.tasks.translation.scoring`;
reading the attention back is :mod:`seqlab.tasks.translation.attention`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from seqlab import catalog
from seqlab.config import ExperimentConfig
from seqlab.data.translation_batching import TranslationVocabs
from seqlab.data.vocab import unknown_tokens
from seqlab.deprecation import renamed_kwargs
from seqlab.errors import SeqlabError
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.models.ensemble import Ensemble
from seqlab.models.search import Hypothesis
from seqlab.tasks.base import Predictor, Run
from seqlab.tasks.options import Option
from seqlab.tasks.translation import decoding, figures, scoring
from seqlab.tasks.translation.artefacts import load_trained
from seqlab.tasks.translation.attention import TranslationAttention, read_attention
from seqlab.tasks.translation.ctranslate2_engine import CTranslate2Search
from seqlab.tasks.translation.decoding import Translations, as_sentences, decode_options
from seqlab.tasks.translation.engines import (
    CTRANSLATE2,
    SEQLAB,
    Engine,
    SeqlabSearch,
    engine_decodes,
    engine_name,
)
from seqlab.tasks.translation.ensemble import Member, ensemble_members
from seqlab.tasks.translation.options import OPTIONS, USAGE, check_options
from seqlab.tokens import EOS

#: sentences whose source tokens a translator keeps (:meth:`Translator.source_tokens`)
TOKEN_CACHE = 4096


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
        """The trained model of ``run`` (its vocabularies, tokenizers and checkpoint only):
        :func:`seqlab.tasks.translation.artefacts.load_trained`."""
        model, vocabs = load_trained(run)
        return cls(model, run.cfg, vocabs, run)

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
        """The decoding options, the engine and attention heatmaps, which need a model that
        attends to the source: :func:`seqlab.tasks.translation.options.check_options`."""
        check_options(self, options)

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
        decode = decode_options(self.cfg.decode, beam, nbest, length_penalty)
        found = decoding.decode_sentences(
            self, sentences, decode, need_weights, batch_size, engine, quantize
        )
        return found[0] if single else found

    @torch.no_grad()
    def attention(self, sentence: str, tokens: Sequence[int] | None = None) -> TranslationAttention:
        """``tokens`` (target ids without ``<bos>`` and ``<eos>``; default: the best translation
        of ``sentence``) read back in one teacher-forced pass: each token's log-probability and
        every attention weight the model has (:meth:`EncoderDecoder.attention_maps`): for a
        Transformer each layer and head (Vaswani et al. 2017, §3.2), for an RNN with attention its
        alignment (Bahdanau et al. 2014, §3.1)."""
        return read_attention(self, sentence, tokens)

    def engine(self, engine: str, quantize: str | None = None) -> Engine:
        """The engine ``engine`` names (:func:`~seqlab.tasks.translation.engines.engine_name`):
        seqlab's own search in this translator's precision, or CTranslate2 in ``compute_type``
        ``quantize`` (fp32 when None), opened once per setting
        (:class:`~seqlab.tasks.translation.ctranslate2_engine.CTranslate2Search`) on the export
        cache ``RUN/exports/``, written on first use
        (:func:`~seqlab.tasks.translation.ctranslate2_engine.cached_export`)."""
        if engine_name(engine) == SEQLAB:
            return SeqlabSearch(self.model, self.precision)
        key = CTranslate2Search.key(quantize)
        if key not in self._engines:
            sizes = (len(self.vocabs.src_vocab), len(self.vocabs.tgt_vocab))
            self._engines[key] = CTranslate2Search(self.model, sizes, self.run, quantize)
        return self._engines[key]

    def ctranslate2_engine(self, quantize: str | None = None) -> Any:
        """The :class:`~seqlab.export.ctranslate2_engine.CTranslate2Engine` that
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
        return scoring.score(self, sources, references, beam, length_penalty, engine, quantize)

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
        options = dict(
            beam=beam, nbest=nbest, length_penalty=length_penalty, engine=engine, quantize=quantize
        )
        return decoding.predict(self, inputs, options, attention_png, numbers)

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
        return scoring.evaluate(self, split, files, beam, length_penalty, engine, quantize, output)
