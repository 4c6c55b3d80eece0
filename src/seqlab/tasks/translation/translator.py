"""The translation predictor (:class:`Translator`): translate sentences, their n-best hypotheses,
attention, scores, ensembles. The model, its vocabularies and its engines are
:class:`~seqlab.tasks.translation.translation_model.TranslationModel`'s, which it extends;
decoding is :mod:`seqlab.tasks.translation.decoding` on an engine
(:mod:`seqlab.tasks.translation.engines`); scoring is its
:class:`~seqlab.tasks.translation.scorer.Scorer`'s (:mod:`seqlab.tasks.translation.scoring`);
reading the attention back is :mod:`seqlab.tasks.translation.attention`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.tokenizers import warn_normalised
from seqlab.data.translation_batching import TranslationVocabs
from seqlab.data.vocab import quiet_unknown, warn_unknown
from seqlab.deprecation import renamed_kwargs
from seqlab.export.ctranslate2 import give_cores_to_ctranslate2
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.storage.output_dirs import api_output_dir
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.base import Predictor, Run
from seqlab.tasks.options import CommandOptions, Option, show_options
from seqlab.tasks.translation import figures
from seqlab.tasks.translation.artefacts import load_trained
from seqlab.tasks.translation.attention import TranslationAttention, read_attention
from seqlab.tasks.translation.decoding import (
    Translations,
    as_sentences,
    normalised_inputs,
)
from seqlab.tasks.translation.engines import CTRANSLATE2, give_cores_to_seqlab
from seqlab.tasks.translation.options import (
    OPTIONS,
    USAGE,
    DecodeOptions,
    EngineOptions,
    TranslateEngineOptions,
    TranslateOptions,
)
from seqlab.tasks.translation.scorer import Scorer
from seqlab.tasks.translation.scoring import TranslationReport, check_pairs
from seqlab.tasks.translation.translation_model import Text, TranslationModel


class Translator(TranslationModel):
    """A trained translation model: translate sentences, score them against references
    (``translate``, ``score``, ``evaluate``; the scores are its ``scorer``'s).

    Usable on a model being trained too (validation): ``Translator(model, cfg, vocabs)``.

    Attributes:
        scorer: scores this run's translations and runs its evaluations
            (:class:`~seqlab.tasks.translation.scorer.Scorer`).
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
    run_options: ClassVar[dict[str, type[CommandOptions]]] = {
        "translate": TranslateEngineOptions,
        "evaluate": EngineOptions,
    }
    usage: ClassVar[dict[str, str]] = USAGE

    def __init__(
        self,
        model: EncoderDecoder,
        cfg: ExperimentConfig,
        vocabs: TranslationVocabs,
        run: Run | None = None,
    ) -> None:
        super().__init__(model, cfg, vocabs, run)
        self.scorer = Scorer(cfg, self.reader)

    @classmethod
    def load(cls, run: Run) -> Translator:
        """The trained model of ``run`` (its vocabularies, tokenizers and checkpoint only):
        :func:`seqlab.tasks.translation.artefacts.load_trained`."""
        model, vocabs = load_trained(run)
        return cls(model, run.cfg, vocabs, run)

    @classmethod
    def before_load(cls, command: str, options: Mapping[str, Any]) -> None:
        """With ``--engine ctranslate2``, the cores go to CTranslate2 before PyTorch starts its
        threads (``--threads``, ``--workers``: :func:`~seqlab.export.ctranslate2.give_cores_to_ctranslate2`)."""
        if options.get("engine") == CTRANSLATE2:
            give_cores_to_ctranslate2(options.get("threads") or 0, options.get("workers") or 0)

    def for_command(
        self, command: str, options: Mapping[str, Any], load: Callable[[str], Predictor]
    ) -> Translator:
        """This run joined by the ``--ensemble`` runs (each loaded by ``load``), its cores laid
        out for seqlab's own search unless CTranslate2 decodes (``--threads``, ``--workers``:
        :func:`~seqlab.tasks.translation.engines.give_cores_to_seqlab`)."""
        ensemble = options.get("ensemble")
        joined = self.ensemble_with([load(r) for r in ensemble], ensemble) if ensemble else self
        if options.get("engine") != CTRANSLATE2:
            give_cores_to_seqlab(options.get("threads") or 0, options.get("workers") or 0)
        return joined

    def check(self, command: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` of ``command``: its decoding options and how it runs (the engine, the
        heatmaps), each validated here, once: what is returned carries them as two models,
        ``options`` and ``how``."""
        model, runs = self.command_options[command], self.run_options[command]
        chosen = model.of({k: options.get(k) for k in model.model_fields})
        self.decoding(chosen)
        how = runs.of({k: options.get(k) for k in runs.called()})
        self.check_use(how, bool(getattr(how, "attention_png", None)))
        mine = {*model.model_fields, *runs.model_fields}
        rest = {k: v for k, v in options.items() if k not in mine}
        return {**rest, "options": chosen, "how": how}

    @renamed_kwargs(need_attention="need_weights")
    @torch.no_grad()
    def hypotheses(
        self,
        sentences: Sequence[str] | str,
        options: TranslateOptions | None = None,
        *,
        need_weights: bool = False,
        batch_size: int = 128,
        how: EngineOptions | None = None,
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
            how: the engine and its compute type (an
                :class:`~seqlab.tasks.translation.options.EngineOptions`), or given as keyword
                arguments: ``engine="seqlab"`` (seqlab's own search) or ``"ctranslate2"`` (the
                model exported to CTranslate2, :mod:`~seqlab.tasks.translation.ctranslate2_engine`'s
                cache; :mod:`seqlab.tasks.translation.engines`), ``quantize="int8"``.
        """
        texts, single = as_sentences(sentences)
        engine: Any = self.run_options["evaluate"].of_call(how, keywords)
        decode = self.decoding(self.options_of("translate", options, keywords))
        self.check_use(engine, need_weights)
        found = self._hypotheses(texts, decode, need_weights, batch_size, engine)
        return found[0] if single else found

    @torch.no_grad()
    def _hypotheses(
        self,
        texts: list[str],
        decode: DecodeConfig,
        need_weights: bool,
        batch_size: int,
        how: EngineOptions,
    ) -> list[list[Any]]:
        """:meth:`hypotheses` of sentences and a decoding already checked."""
        norm = self.cfg.data.normalize  # 我愛你 read as 我爱你: said
        named = ((f"sentence {i}", t) for i, t in enumerate(texts))
        warn_normalised(normalised_inputs(named, norm), norm, 4)
        sentences = [self.sentence(t) for t in texts]
        return self.decode(sentences, decode, need_weights, batch_size, how)

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

    def predict(
        self,
        inputs: Sequence[str] | str,
        options: TranslateOptions | None = None,
        *,
        numbers: Sequence[int] | None = None,
        how: TranslateEngineOptions | None = None,
        **keywords: Any,
    ) -> Translations:
        """Translations of ``inputs`` (``seqlab translate``): the best of each, or the ``nbest``
        best with their scores (``options``, or its fields as keyword arguments:
        :class:`~seqlab.tasks.translation.options.TranslateOptions`), on the engine of ``how``
        (or ``engine=``, ``quantize=``: :class:`~seqlab.tasks.translation.options.EngineOptions`);
        with ``attention_png`` one source × output heatmap per sentence in that directory,
        ``attention-NNNN.png`` after its input line (``numbers``, default 1, 2, …), by the rule
        of ``--attention-png``. Unknown tokens are reported by input line (``input line N``)."""
        texts, _ = as_sentences(inputs)
        engine: Any = self.run_options["translate"].of_call(how, keywords)
        attention_png = engine.attention_png
        decode = self.decoding(self.options_of("translate", options, keywords))
        self.check_use(engine, bool(attention_png))
        numbers = list(numbers) if numbers is not None else list(range(1, len(texts) + 1))
        folder = api_output_dir(attention_png, "attention_png")  # checked now, before any work
        sentences = [self.sentence(t) for t in texts]
        lines = [f"input line {n}" for n in numbers]
        norm = self.cfg.data.normalize
        warn_normalised(normalised_inputs(zip(lines, texts, strict=True), norm), norm, 2)
        warn_unknown(zip(lines, (s.unknown for s in sentences), strict=True), 2)
        with quiet_unknown():  # reported above, by input line
            found = self.decode(sentences, decode, bool(attention_png), 128, engine)
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

    def translate(
        self,
        sentences: Sequence[str] | str,
        options: DecodeOptions | None = None,
        *,
        batch_size: int = 128,
        how: EngineOptions | None = None,
        **keywords: Any,
    ) -> Any:
        """The best translation of each sentence (``options``, or ``beam=``,
        ``length_penalty=``: :class:`~seqlab.tasks.translation.options.DecodeOptions`; None =
        the run's ``decode``), on the engine of ``how`` (or ``engine=``, ``quantize=``): a list
        for a list of sentences, a string for one sentence."""
        texts, single = as_sentences(sentences)
        engine: Any = self.run_options["evaluate"].of_call(how, keywords)
        chosen = self.options_of("evaluate", options, keywords)
        decode = self.decoding(chosen)
        if decode.nbest != 1:  # the best alone, whatever the run's decode.nbest
            decode = decode.model_copy(update={"nbest": 1})
        self.check_use(engine)
        found = self._hypotheses(texts, decode, False, batch_size, engine)
        outputs = [self.detokenize(h[0].tokens) for h in found]
        return outputs[0] if single else outputs

    def score(
        self,
        sources: Sequence[str],
        references: Sequence[str],
        options: DecodeOptions | None = None,
        *,
        how: EngineOptions | None = None,
        **keywords: Any,
    ) -> dict[str, Any]:
        """Translate ``sources`` and score them against ``references``: BLEU, chrF, …, and the
        outputs (key ``translations``). Both are lists of sentences, at least one. A run that
        reads text through ``data.normalize: simplified`` writes simplified Chinese, and is
        scored against the references read the same way
        (:meth:`~seqlab.tasks.translation.scorer.Scorer.score`)."""
        check_pairs(sources, references)
        engine: Any = self.run_options["evaluate"].of_call(how, keywords)
        chosen = self.options_of("evaluate", options, keywords)
        outputs = self.translate(sources, chosen, how=engine)
        return self.scorer.score(outputs, references)

    def evaluate(
        self,
        split: str | None = None,
        files: Mapping[str, str | Path] | None = None,
        options: DecodeOptions | None = None,
        *,
        output: str | Path | None = None,
        force: bool = False,
        how: EngineOptions | None = None,
        **keywords: Any,
    ) -> TranslationReport:
        """BLEU, chrF and paper-style BLEU on a ``split`` of the run's dataset (default ``val``)
        or on ``files={"src": FILE, "ref": FILE}`` (``options``, or ``beam=``,
        ``length_penalty=``); ``output``: also write the translations there (atomically), by the
        rule of ``--output`` (:func:`seqlab.storage.outputs.output_file`: a file seqlab did not
        write is refused before any work unless ``force``):
        :meth:`~seqlab.tasks.translation.scorer.Scorer.evaluate`."""
        engine: Any = self.run_options["evaluate"].of_call(how, keywords)
        chosen = self.options_of("evaluate", options, keywords)
        decode = self.decoding(chosen)
        self.check_use(engine)
        split, named = self._source(split, files, "val")

        def score(sources: list[str], references: list[str]) -> dict[str, Any]:
            return self.score(sources, references, chosen, how=engine)

        report = self.scorer.evaluate(split, named, decode, score, self.checkpoint, output, force)
        report.device = str(self.device)  # CTranslate2 decodes where the model is, too
        return report


for _method, _command, _how in (
    (Translator.predict, "translate", TranslateEngineOptions),
    (Translator.hypotheses, "translate", EngineOptions),
    (Translator.translate, "evaluate", EngineOptions),
    (Translator.score, "evaluate", EngineOptions),
    (Translator.evaluate, "evaluate", EngineOptions),
):  # their keyword arguments are the fields of the command's options models
    show_options(_method, Translator.command_options[_command], _how)
