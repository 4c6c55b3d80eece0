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
from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.tokenizers import warn_normalised
from seqlab.data.translation_batching import TranslationVocabs
from seqlab.data.vocab import quiet_unknown, warn_unknown
from seqlab.deprecation import renamed_kwargs
from seqlab.errors import SeqlabError
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.models.ensemble import Ensemble
from seqlab.models.search import Hypothesis
from seqlab.storage.output_dirs import api_output_dir
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.base import Predictor, Run
from seqlab.tasks.options import CommandOptions, Option, show_options
from seqlab.tasks.translation import figures, scoring
from seqlab.tasks.translation.artefacts import load_trained
from seqlab.tasks.translation.attention import TranslationAttention, read_attention
from seqlab.tasks.translation.ctranslate2_engine import CTranslate2Search
from seqlab.tasks.translation.decoding import (
    Sentence,
    SourceReader,
    Translations,
    as_sentences,
    decode_sentences,
    normalised_inputs,
)
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
from seqlab.tasks.translation.options import (
    OPTIONS,
    USAGE,
    DecodeOptions,
    TranslateOptions,
)

#: a sentence as the methods take it: its text, or read already (:meth:`Translator.sentence`)
Text = str | Sentence


class Translator(scoring.Scoring, Predictor):
    """A trained translation model: translate sentences, score them against references
    (:class:`~seqlab.tasks.translation.scoring.Scoring`: ``translate``, ``score``,
    ``evaluate``).

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
    command_options: ClassVar[dict[str, type[CommandOptions]]] = {
        "translate": TranslateOptions,
        "evaluate": DecodeOptions,
    }
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
        self.reader = SourceReader(vocabs, cfg.data.max_len - 1)  # :meth:`sentence`
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
        """This run and ``others`` (run directories loaded at ``which``, or loaded translators;
        ``names`` in messages) as one translator whose model is their
        :class:`~seqlab.models.ensemble.Ensemble` (the mean of next-token probabilities);
        tokenising, decoding and precision stay this run's
        (:class:`~seqlab.tasks.translation.ensemble.Joining`)."""
        mine = str(self.run.run_dir) if self.run is not None else "this run"
        members = Joining(type(self), self.vocabs, mine).members(others, names, which)
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
        """``options`` of ``command``: its decoding options, the engine, heatmaps."""
        model = self.command_options[command]
        self.decoding(model.of({k: options.get(k) for k in model.model_fields}))
        engine = options.get("engine") or SEQLAB
        self.check_use(engine, options.get("quantize"), bool(options.get("attention_png")))

    def decoding(self, options: DecodeOptions) -> DecodeConfig:
        """The run's ``decode`` section changed by ``options``
        (:meth:`~seqlab.tasks.translation.options.DecodeOptions.decode`)."""
        return options.decode(self.cfg.decode)

    def check_use(self, engine: str, quantize: str | None, need_weights: bool = False) -> None:
        """The engine (:func:`~seqlab.tasks.translation.engines.check_engine`; an ensemble's
        is seqlab's) and attention weights, which need a model that attends to the source."""
        if self.members and engine_name(engine) != SEQLAB:
            raise SeqlabError(
                "--ensemble decodes with seqlab (--engine seqlab) only: a CTranslate2 export "
                "holds one model"
            )
        check_engine(engine, quantize, self.cfg.model, need_weights, self.device.type)
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

    @renamed_kwargs(need_attention="need_weights")
    @torch.no_grad()
    def hypotheses(
        self,
        sentences: Sequence[str] | str,
        options: TranslateOptions | None = None,
        *,
        need_weights: bool = False,
        batch_size: int = 128,
        engine: str = SEQLAB,
        quantize: str | None = None,
        **keywords: Any,
    ) -> Any:
        """n-best hypotheses per sentence, in input order (batched by length); given one
        sentence (a string), its n-best list.

        Blank sentences get one empty hypothesis without decoding; over-long ones are cut to
        ``data.max_len`` positions (one warning); tokens the vocabulary lacks are read as
        ``<unk>``, with an :class:`~seqlab.data.vocab.UnknownTokenWarning` (``sentence I``).

        Args:
            options: the decoding options (a
                :class:`~seqlab.tasks.translation.options.TranslateOptions`), or given as keyword
                arguments (``beam=5, nbest=2``), one per field.
            engine: ``seqlab`` (seqlab's own search) or ``ctranslate2`` (the model exported to
                CTranslate2, :mod:`~seqlab.tasks.translation.ctranslate2_engine`'s cache):
                :mod:`seqlab.tasks.translation.engines`.
            quantize: with ``ctranslate2``: a compute type such as ``int8``.
        """
        texts, single = as_sentences(sentences)
        decode = self.decoding(self.options_of("translate", options, keywords))
        self.check_use(engine, quantize, need_weights)
        how = self.cfg.data.normalize  # 我愛你 read as 我爱你: said
        named = ((f"sentence {i}", t) for i, t in enumerate(texts))
        warn_normalised(normalised_inputs(named, how), how, 3)
        found = self.decode(
            [self.sentence(t) for t in texts], decode, need_weights, batch_size, engine, quantize
        )
        return found[0] if single else found

    def decode(
        self,
        sentences: Sequence[Sentence],
        decode: DecodeConfig,
        need_weights: bool = False,
        batch_size: int = 128,
        engine: str = SEQLAB,
        quantize: str | None = None,
    ) -> list[list[Hypothesis]]:
        """Sentences read already, decoded by ``decode`` (:meth:`decoding`) on ``engine``
        (:meth:`check_use`): nothing is checked again."""
        with torch.no_grad():
            search = self.engine(engine, quantize)
            max_len = self.cfg.data.max_len
            return decode_sentences(search, sentences, decode, need_weights, batch_size, max_len)

    @torch.no_grad()
    def attention(
        self, sentence: Text, tokens: Sequence[int] | None = None
    ) -> TranslationAttention:
        """``tokens`` (target ids without ``<bos>`` and ``<eos>``; default: the best translation
        of ``sentence``) read back in one teacher-forced pass: each token's log-probability and
        every attention weight the model has (:meth:`EncoderDecoder.attention_maps`): for a
        Transformer each layer and head (Vaswani et al. 2017, §3.2), for an RNN with attention its
        alignment (Bahdanau et al. 2014, §3.1)."""
        if isinstance(sentence, str):
            check_line_breaks(sentence, "the sentence")
        read = self.sentence(sentence)
        if tokens is None:
            tokens = self.hypotheses(read.text)[0].tokens
        else:
            warn_unknown([("the sentence", read.unknown)], 3)
        return read_attention(self.model, self.vocabs, self.precision, read, tokens)

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

    def predict(
        self,
        inputs: Sequence[str] | str,
        options: TranslateOptions | None = None,
        *,
        engine: str = SEQLAB,
        quantize: str | None = None,
        attention_png: str | Path | None = None,
        numbers: Sequence[int] | None = None,
        **keywords: Any,
    ) -> Translations:
        """Translations of ``inputs`` (``seqlab translate``): the best of each, or the ``nbest``
        best with their scores (``options``, or its fields as keyword arguments:
        :class:`~seqlab.tasks.translation.options.TranslateOptions`); with ``attention_png`` one
        source × output heatmap per sentence in that directory, ``attention-NNNN.png`` after its
        input line (``numbers``, default 1, 2, …), by the rule of ``--attention-png``. Unknown
        tokens are reported by input line (``input line N``)."""
        texts, _ = as_sentences(inputs)
        decode = self.decoding(self.options_of("translate", options, keywords))
        self.check_use(engine, quantize, bool(attention_png))
        numbers = list(numbers) if numbers is not None else list(range(1, len(texts) + 1))
        folder = api_output_dir(attention_png, "attention_png")  # checked now, before any work
        sentences = [self.sentence(t) for t in texts]
        lines = [f"input line {n}" for n in numbers]
        how = self.cfg.data.normalize
        warn_normalised(normalised_inputs(zip(lines, texts, strict=True), how), how, 2)
        warn_unknown(zip(lines, (s.unknown for s in sentences), strict=True), 2)
        with quiet_unknown():  # reported above, by input line
            found = self.decode(sentences, decode, bool(attention_png), 128, engine, quantize)
        out = Translations(
            [[(self.detokenize(h.tokens), h.score) for h in hyps] for hyps in found],
            numbers,
            decode.nbest,
        )
        if attention_png:
            what = self.alignment_name
            with folder:
                out.figures = [
                    figures.draw_alignment(Path(attention_png), n, s, hyps[0], self.vocabs, what)
                    for n, s, hyps in zip(numbers, sentences, found, strict=True)
                    if s.text.strip()
                ]
        return out

    @property
    def alignment_name(self) -> str:
        """Which attention the heatmaps draw (``figures.alignment_name``)."""
        return figures.alignment_name(self.model, self.cfg.model, len(self.members) + 1)


for _method, _command in (
    (Translator.predict, "translate"),
    (Translator.hypotheses, "translate"),
    (Translator.translate, "evaluate"),
    (Translator.score, "evaluate"),
    (Translator.evaluate, "evaluate"),
):  # their keyword arguments are the fields of the command's options model
    show_options(_method, Translator.command_options[_command])
