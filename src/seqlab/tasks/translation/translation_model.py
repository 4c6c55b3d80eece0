"""A trained translation model and its vocabularies as the commands of
:class:`~seqlab.tasks.translation.Translator` use them (:class:`TranslationModel`): the source
side read (:class:`~seqlab.tasks.translation.decoding.SourceReader`), the target side written,
what the model has (attention, languages, an ensemble's members: :meth:`TranslationModel.ensemble_with`),
the run's decoding changed by an options model (:meth:`TranslationModel.decoding`), and the
engines that decode it (:mod:`seqlab.tasks.translation.engines`), opened once per setting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import torch

from seqlab import catalog
from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.translation_batching import TranslationVocabs
from seqlab.errors import SeqlabError
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.models.ensemble import Ensemble
from seqlab.models.search import Hypothesis
from seqlab.tasks.base import Predictor, Run
from seqlab.tasks.translation import figures
from seqlab.tasks.translation.ctranslate2_engine import CTranslate2Search
from seqlab.tasks.translation.decoding import Sentence, SourceReader, decode_sentences
from seqlab.tasks.translation.engines import (
    CTRANSLATE2,
    SEQLAB,
    Engine,
    SeqlabSearch,
    check_engine,
    engine_decodes,
    engine_name,
)
from seqlab.tasks.translation.ensemble import Joining, Member
from seqlab.tasks.translation.options import DecodeOptions, EngineOptions

#: a sentence as the methods take it: its text, or read already (:meth:`TranslationModel.sentence`)
Text = str | Sentence


class TranslationModel(Predictor):
    """The model of a translation run and its vocabularies, before any command: owns the source
    reader (``reader``), the CTranslate2 engines opened (by compute type, threads and
    workers) and the other runs of an ensemble (``members``); says what the model has and
    which engines may decode it (:meth:`check_use`), and decodes sentences read already
    (:meth:`decode`). :class:`~seqlab.tasks.translation.Translator` adds the commands.

    Attributes:
        reader: reads a source sentence once into its tokens, ids and unknown tokens
            (:meth:`sentence`).
        members: the checkpoints of the other runs of an ensemble
            (:meth:`~seqlab.tasks.translation.Translator.ensemble_with`); empty for one run.
    """

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
        self.reader = SourceReader(vocabs, cfg.data.max_len - 1)  # :meth:`sentence`
        self.members: list[str] = []  # the other runs of an ensemble (:meth:`ensemble_with`)
        self._decoded: tuple[DecodeOptions, DecodeConfig] | None = None  # the last decoding()

    def ensemble_with(
        self,
        others: Member | Sequence[Member],
        names: Sequence[str] | None = None,
        which: str = "best",
    ) -> Self:
        """This run and ``others`` (run directories loaded at ``which``, or loaded translators;
        ``names`` in messages) as one translator whose model is their
        :class:`~seqlab.models.ensemble.Ensemble` (the mean of next-token probabilities);
        tokenising, decoding and precision stay this run's
        (:class:`~seqlab.tasks.translation.ensemble.Joining`)."""
        mine = str(self.run.run_dir) if self.run is not None else "this run"
        members = Joining(type(self), self.vocabs, mine).members(others, names, which)
        models = [self.model, *(o.model for o in members)]  # type: ignore[attr-defined]
        joined = type(self)(Ensemble(models).eval(), self.cfg, self.vocabs, self.run)
        joined.precision = self.precision
        joined.members = [*self.members, *(str(o.checkpoint) for o in members)]
        return joined

    def decoding(self, options: DecodeOptions) -> DecodeConfig:
        """The run's ``decode`` section changed by ``options``
        (:meth:`~seqlab.tasks.translation.options.DecodeOptions.decode`), worked out once per
        options model: the last one is kept, so a method and those it calls (``evaluate`` →
        ``score`` → ``translate``) and the command line's check before its calls share it."""
        last = self._decoded
        if last is not None and last[0] is options:
            return last[1]
        decode = options.decode(self.cfg.decode)
        self._decoded = (options, decode)
        return decode

    @property
    def checkpoint(self) -> str | None:
        """The checkpoint file the weights come from, an ensemble's joined by `` + ``."""
        own = super().checkpoint
        return " + ".join([own, *self.members]) if own is not None and self.members else own

    def check_use(self, how: EngineOptions, need_weights: bool = False) -> None:
        """The engine and compute type of ``how``
        (:func:`~seqlab.tasks.translation.engines.check_engine`; an ensemble's engine is
        seqlab's) and attention weights, which need a model that attends to the source."""
        if self.members and how.engine != SEQLAB:
            raise SeqlabError(
                "--ensemble decodes with seqlab (--engine seqlab) only: a CTranslate2 export "
                "holds one model"
            )
        check_engine(how.engine, how.quantize, self.cfg.model, need_weights, self.device.type)
        if need_weights and not self.has_attention:
            raise SeqlabError(
                f"--attention-png: model.arch={self.cfg.model.arch} has no attention over the "
                "source to draw (it encodes the source into one vector)"
            )

    @property
    def has_attention(self) -> bool:
        return bool(getattr(self.model, "has_attention", False))

    @property
    def attention_kinds(self) -> list[str]:
        """What :meth:`~seqlab.tasks.translation.Translator.attention` gives besides
        log-probabilities: each layer's and head's weights by kind (``cross``, ``encoder``,
        ``decoder``) where the model has attention layers, and the ``alignment`` of a model
        that attends to the source; none otherwise."""
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

    @property
    def alignment_name(self) -> str:
        """Which attention the heatmaps draw (``figures.alignment_name``)."""
        return figures.alignment_name(self.model, self.cfg.model, len(self.members) + 1)

    def decodes_with(self, engine: str) -> bool:
        """Whether ``engine`` (``seqlab``, ``ctranslate2``) can decode this model
        (:func:`engine_decodes`; CTranslate2 must also be installed to run)."""
        return engine_decodes(engine, self.cfg.model)

    @property
    def max_source_tokens(self) -> int:
        """The most source tokens the encoder reads (``data.max_len`` positions, the last one
        ``<eos>``); a longer sentence is cut to its first ones (:meth:`is_cut`)."""
        return self.cfg.data.max_len - 1

    def sentence(self, text: Text) -> Sentence:
        """``text`` read by the source tokenizer and vocabulary once, into the
        :class:`~seqlab.tasks.translation.decoding.Sentence` that carries its tokens, ids and
        unknown tokens wherever it goes (a sentence read already is itself)."""
        return self.reader.read(text)

    def is_cut(self, sentence: Text) -> bool:
        """Whether the encoder reads only the first :attr:`max_source_tokens` of ``sentence``."""
        return self.sentence(sentence).cut

    def source_ids(self, sentence: Text) -> list[int]:
        """Token ids the encoder reads: the tokens (cut to ``data.max_len - 1``) and ``<eos>``."""
        return list(self.sentence(sentence).ids)

    def unknown_tokens(self, sentence: Text) -> list[str]:
        """The tokens of ``sentence`` that the source vocabulary lacks (the encoder reads each as
        ``<unk>``), in order."""
        return list(self.sentence(sentence).unknown)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.vocabs.tgt_tokenizer.detokenize(self.vocabs.tgt_vocab.to_tokens(list(ids)))

    def decode(
        self,
        sentences: Sequence[Sentence],
        decode: DecodeConfig,
        need_weights: bool = False,
        batch_size: int = 128,
        how: EngineOptions | None = None,
    ) -> list[list[Hypothesis]]:
        """Sentences read already, decoded by ``decode``
        (:meth:`~seqlab.tasks.translation.Translator.decoding`) on the engine of ``how``
        (checked already, :meth:`check_use`; None: seqlab's): nothing is checked again."""
        with torch.no_grad():
            search = self.engine(how.engine, how.quantize) if how else self.engine(SEQLAB)
            max_len = self.cfg.data.max_len
            return decode_sentences(search, sentences, decode, need_weights, batch_size, max_len)

    def engine(self, engine: str, quantize: str | None = None) -> Engine:
        """The engine ``engine`` names: seqlab's own search in this translator's precision, or
        CTranslate2 in ``compute_type`` ``quantize`` (fp32 when None), opened once per setting on
        the export cache ``RUN/exports/``, written on first use
        (:class:`~seqlab.tasks.translation.ctranslate2_engine.CTranslate2Search`)."""
        if engine_name(engine) == SEQLAB:
            return SeqlabSearch(self.model, self.precision)
        key = CTranslate2Search.key(quantize)
        if key not in self._engines:
            sizes = (len(self.vocabs.src_vocab), len(self.vocabs.tgt_vocab))
            self._engines[key] = CTranslate2Search(self.model, sizes, self.run, quantize)
        return self._engines[key]

    def ctranslate2_engine(self, quantize: str | None = None) -> Any:
        """The CTranslate2 engine that ``engine("ctranslate2", quantize)`` decodes with."""
        return self.engine(CTRANSLATE2, quantize).engine  # type: ignore[attr-defined]
