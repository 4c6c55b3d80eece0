"""Translation: parallel data, encoder–decoder models, decoding, BLEU.

Evaluation follows the field's convention: hypotheses are detokenised and scored against the raw
reference sentences with sacreBLEU (cased, 13a tokenisation), whose signature is reported; chrF
alongside. The score the Multi30k papers report — lowercased, punctuation-normalised,
Moses-tokenised text, ``multi-bleu.perl`` style — is given too as ``bleu_paper`` with its own
signature (:mod:`seqlab.tasks.paper_bleu`); it is not comparable with cased detokenised BLEU.
``bleu_lc`` (sacreBLEU of the same detokenised text, lowercased) stays in the JSON for older
readers; it is neither the headline nor the papers' scale.

**Decoding options** (:func:`decode_options`): the run's ``decode`` section, changed by ``beam``,
``nbest`` and ``length_penalty``. ``beam=1`` is greedy search, ``beam=K > 1`` beam search of width
K; ``nbest`` hypotheses per sentence need a beam at least that wide (greedy has one); the length
penalty α ranks beam hypotheses by ``log_prob / length^α`` (Wu et al. 2016 use a smoothed
variant; fairseq's ``--lenpen`` is this one), so it needs a beam. Anything else is refused, never
silently adjusted.

A run directory holds ``src_vocab.json``, ``tgt_vocab.json``, ``src_tokenizer.json`` and
``tgt_tokenizer.json`` (with ``*.spm.model`` for subwords) besides the config and checkpoints;
:meth:`Translator.load` needs nothing else. **Engines**: seqlab's own search (``pytorch``) or
the model exported to CTranslate2, under the rules of :func:`check_engine`.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from seqlab import catalog
from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.tokenizers import load_tokenizer, save_tokenizer
from seqlab.data.translation_batching import (
    Batch,
    TranslationBatches,
    TranslationVocabs,
    build_vocabs,
    encode_pairs,
    pad_sequences,
)
from seqlab.data.vocab import Vocab, quiet_unknown, unknown_tokens, warn_unknown
from seqlab.deprecation import renamed_kwargs
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.models.ensemble import Ensemble
from seqlab.models.search import Hypothesis, beam_search, greedy_search, token_log_probs
from seqlab.objective import LossOutput, Selection
from seqlab.runtime.precision import autocast
from seqlab.runtime.progress import progress
from seqlab.storage.atomic import atomic_write_text
from seqlab.storage.outputs import FILE_RULE, RULE
from seqlab.storage.rundir import RunDir
from seqlab.storage.text import check_line_breaks, own_data, read_lines
from seqlab.tasks.base import Experiment, Predictor, Run, as_batch, load_weights
from seqlab.tasks.options import Option
from seqlab.tasks.paper_bleu import paper_bleu
from seqlab.tasks.report import Prediction, Report
from seqlab.tokens import BOS, EOS

#: what :meth:`Translator.ensemble_with` takes: a run directory or a loaded run
Member = str | Path | Predictor
_NOT_A_MEMBER = (
    "ensemble_with takes run directories (str or Path) or translators that seqlab.load returned"
)

ARTEFACTS = (
    "src_vocab.json",
    "tgt_vocab.json",
    "src_tokenizer.json",
    "tgt_tokenizer.json",
    "src_tokenizer.spm.model",
    "tgt_tokenizer.spm.model",
)
Pairs = list[tuple[str, str]]


def load_pairs(cfg: ExperimentConfig) -> dict[str, Pairs]:
    """Train / val (/ test) sentence pairs of ``cfg.data.dataset``, from its reader
    (:attr:`seqlab.catalog.DatasetSpec.read`)."""
    return catalog.datasets()[cfg.data.dataset].read(cfg.data, cfg.train.seed)


def check_config(cfg: ExperimentConfig) -> None:
    """Translation's rules across sections: greedy or beam decoding; shared embeddings need one
    vocabulary for both languages; the model's positions (``model.max_len``) cover the longest
    sentence (``data.max_len``)."""
    data, model = cfg.data, cfg.model
    if cfg.decode.strategy == "sample":
        raise ValueError(
            "decode.strategy=sample is for language models; translation decodes with greedy or beam"
        )
    if getattr(model, "share_embeddings", False) and not (
        data.tokenizer == "subword" and data.subword.joint
    ):
        raise ValueError(
            "model.share_embeddings needs one vocabulary for both sides: data.tokenizer: subword "
            "with data.subword.joint: true (or set model.share_embeddings: false)"
        )
    model_len = getattr(model, "max_len", None)
    if model_len is not None and model_len < data.max_len:
        raise ValueError(
            f"model.max_len={model_len} is smaller than data.max_len={data.max_len}: "
            "the model could not read the longest sentences; raise model.max_len"
        )


catalog.register_task_rules("translation", check_config)


def translation_loss(
    model: nn.Module, batch: Batch, state: Any, label_smoothing: float = 0.0
) -> LossOutput:
    """Masked (padding-free) cross-entropy with label smoothing, as the model computes it."""
    loss, num_tokens = model.loss(batch, label_smoothing=label_smoothing)
    return LossOutput(loss, num_tokens, None)


#: the largest length penalty accepted (``decode.length_penalty``'s bound)
MAX_LENGTH_PENALTY = 10.0


def decode_options(
    decode: DecodeConfig,
    beam: int | None = None,
    nbest: int | None = None,
    length_penalty: float | None = None,
) -> DecodeConfig:
    """The run's decoding changed by ``beam``, ``nbest`` and ``length_penalty`` (see the module
    docstring)."""
    for name, value in (("beam size", beam), ("nbest", nbest)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise SeqlabError(f"{name} must be a whole number, got {value!r}")
    if beam is not None and beam < 1:
        raise SeqlabError(f"beam size must be >= 1 (1 = greedy), got {beam}")
    if nbest is not None and nbest < 1:
        raise SeqlabError(f"nbest must be >= 1, got {nbest}")
    if length_penalty is not None and (
        isinstance(length_penalty, bool)
        or not isinstance(length_penalty, int | float)
        or not 0.0 <= length_penalty <= MAX_LENGTH_PENALTY
    ):
        raise SeqlabError(
            f"length penalty must be a number from 0 to {MAX_LENGTH_PENALTY:g} (0 = raw "
            f"log-probability, 1 = per-token average), got {length_penalty!r}"
        )
    d = decode.model_copy()
    if beam is not None:
        d.strategy = "greedy" if beam == 1 else "beam"
        d.beam_size = beam if beam > 1 else d.beam_size
    width = d.beam_size if d.strategy == "beam" else 1
    if length_penalty is not None:
        if width == 1:
            raise SeqlabError(
                f"a length penalty ranks the hypotheses of a beam search, but decoding is greedy "
                f"search; ask for a beam too (e.g. --beam 5 --length-penalty {length_penalty:g})"
            )
        d.length_penalty = float(length_penalty)
    want = nbest if nbest is not None else min(d.nbest, width)
    if want > width:
        now = f"beam {width}" if width > 1 else "greedy search"
        raise SeqlabError(
            f"nbest {want} needs a beam of at least {want}, but decoding is {now}; "
            f"ask for a beam too (e.g. --beam {max(want, 5)} --nbest {want})"
        )
    d.nbest = want
    return d


def paper_lang(cfg: ExperimentConfig) -> str | None:
    """The target language for the paper-style BLEU, or None where it does not apply."""
    spec = catalog.datasets()[cfg.data.dataset]
    return cfg.data.tgt_lang if spec.natural_language else None


def score_translations(
    hypotheses: Sequence[str], references: Sequence[str], lang: str | None = None
) -> dict[str, Any]:
    """sacreBLEU BLEU and chrF (cased, detokenised) with signatures, lowercased BLEU, and with
    the target language ``lang`` the paper-style BLEU (``bleu_paper``, see
    :mod:`seqlab.tasks.paper_bleu`)."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf, bleu_lc = BLEU(), CHRF(), BLEU(lowercase=True)
    refs = [list(references)]
    b, c, lc = (
        bleu.corpus_score(list(hypotheses), refs),
        chrf.corpus_score(list(hypotheses), refs),
        bleu_lc.corpus_score(list(hypotheses), refs),
    )
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references, strict=True))
    scores: dict[str, Any] = {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_lc": lc.score,
        "exact_match": exact / max(len(references), 1),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_lc_signature": str(bleu_lc.get_signature()),
        "sentences": len(references),
    }
    if lang is not None:
        paper = paper_bleu(hypotheses, references, lang)
        scores["bleu_paper"], scores["bleu_paper_signature"] = paper.score, paper.signature
    return scores


# ------------------------------------------------------------------------------ inference
def as_sentences(items: Any, what: str = "sentence") -> tuple[list[str], bool]:
    """:func:`~seqlab.tasks.base.as_batch` for text: every item must be a string holding no line
    break other than ``\\n`` (:func:`~seqlab.storage.text.check_line_breaks`)."""
    batch, single = as_batch(items, what)
    for i, item in enumerate(batch):
        if not isinstance(item, str):
            raise SeqlabError(f"{what} {i} is not a string but {type(item).__name__} {item!r:.40}")
        check_line_breaks(item, f"{what} {i}")
    return batch, single


#: the engines that decode a translation model
ENGINES = ("pytorch", "ctranslate2")
#: longest source/output drawn in an attention heatmap (tokens); longer ones are cut, with a note
MAX_PLOT_TOKENS = 80


def engine_decodes(engine: str, arch: str) -> bool:
    """Whether ``engine`` decodes translation models of ``model.arch`` ``arch``: seqlab's own
    search (``pytorch``) every one, CTranslate2 the Transformer (the one seqlab exports to it)."""
    return engine == "pytorch" or (engine == "ctranslate2" and arch == "transformer")


def check_engine(engine: str, quantize: str | None, arch: str, need_weights: bool = False) -> None:
    """Refuse an engine setting before any work: the one place these rules are written (the
    command line, :meth:`Translator.hypotheses` and every other caller go through it).

    ``ctranslate2`` runs Transformer models exported to CTranslate2, in a compute type this CPU
    supports (``quantize``), and returns no attention weights.
    """
    if engine not in ENGINES:
        raise SeqlabError(f"--engine must be {' or '.join(ENGINES)}, not {engine!r}")
    if quantize and engine != "ctranslate2":
        raise SeqlabError("--quantize applies to --engine ctranslate2")
    if engine == "ctranslate2":
        from seqlab.export.ctranslate2 import check_compute_type, require_ctranslate2

        require_ctranslate2()
        check_compute_type(quantize)
        if not engine_decodes(engine, arch):
            raise SeqlabError(
                f"--engine ctranslate2 runs Transformer translation models, not model.arch={arch}"
            )
        if need_weights:
            raise SeqlabError(
                "--attention-png needs --engine pytorch (CTranslate2 returns no attention)"
            )


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
class TranslationReport(Report):
    """BLEU, chrF and the paper-style BLEU with their signatures; ``outputs``: the
    translations scored (not part of the JSON)."""

    outputs: list[str] = field(default_factory=list)

    def summary(self) -> str:
        s = self.scores
        return "\n".join(
            [
                f"{self.where}: BLEU {s['bleu']:.2f}  chrF {s['chrf']:.2f}  "
                f"(exact match {s['exact_match']:.1%}; {s['sentences']} sentences, "
                f"beam {s['beam_size']}"
                + (f", length penalty {s['length_penalty']:g})" if "length_penalty" in s else ")"),
                f"  {s['bleu_signature']}",
                f"  {s['chrf_signature']}",
            ]
            + (
                [
                    f"{self.where}: paper-style BLEU {s['bleu_paper']:.2f} (lowercased, "
                    "Moses-normalised and tokenised, as multi-bleu.perl on Multi30k's "
                    "lc.norm.tok files)",
                    f"  {s['bleu_paper_signature']}",
                ]
                if "bleu_paper" in s
                else []
            )
        )


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
    options: ClassVar[tuple[Option, ...]] = (
        Option(
            "--input",
            "one sentence a line (default: stdin)",
            ("translate",),
            role="cli",
            metavar="FILE",
        ),
        Option(
            "--src",
            "your source sentences (text or .gz)",
            ("evaluate",),
            role="file",
            metavar="FILE",
        ),
        Option(
            "--ref", "their references, line by line", ("evaluate",), role="file", metavar="FILE"
        ),
        Option(
            "--beam",
            "beam size; 1 = greedy (default: the run's decode section)",
            ("translate", "evaluate"),
            type="positive_int",
        ),
        Option(
            "--nbest",
            "print the K best hypotheses (needs a beam >= K): index, rank, score, text",
            ("translate",),
            type="positive_int",
        ),
        Option(
            "--length-penalty",
            "beam search ranks by log_prob / length^ALPHA: 0 = raw log-probability, 1 = "
            "per-token average (default: the run's decode section)",
            ("translate", "evaluate"),
            type="non_negative_float",
            metavar="ALPHA",
        ),
        Option(
            "--output",
            f"also write the hypotheses into FILE (atomically): {FILE_RULE}",
            ("evaluate",),
            role="output",
            metavar="FILE",
        ),
        Option(
            "--attention-png",
            f"write one source×output heatmap per sentence into DIR: {RULE}",
            ("translate",),
            role="figure_dir",
            metavar="DIR",
            figure="attention heatmaps",
        ),
        Option(
            "--ensemble",
            "decode with these trained runs too (each at --which), averaging the models' "
            "next-token probabilities (their vocabularies and tokenizers must be this run's)",
            ("translate", "evaluate"),
            type="paths",
            role="cli",
            metavar="RUN_DIR",
        ),
        Option(
            "--engine",
            "decode with seqlab (pytorch) or the model exported to CTranslate2",
            ("translate", "evaluate"),
            choices=ENGINES,
            default="pytorch",
        ),
        Option(
            "--quantize",
            "ctranslate2: quantized weights (e.g. int8); only the types this "
            "CPU runs are accepted (the error lists them)",
            ("translate", "evaluate"),
            choices=("int8", "int16", "bfloat16"),
        ),
    )
    usage: ClassVar[dict[str, str]] = {
        "evaluate": "a translation model is scored on --split, or on --src FILE with --ref FILE"
    }

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
        from seqlab.tasks import load

        given = [others] if isinstance(others, str | Path | Predictor) else others
        if not isinstance(given, Sequence):
            raise TypeError(_NOT_A_MEMBER + f", or a list of them; got {type(others).__name__}")
        for item in given:
            if not isinstance(item, str | Path | Predictor):
                raise TypeError(_NOT_A_MEMBER + f"; got {type(item).__name__} in the list")
        if names is None:
            names = [
                str(o) if not isinstance(o, Predictor) else str(o.run.run_dir) if o.run else repr(o)
                for o in given
            ]
        if len(names) != len(given):
            raise SeqlabError(f"ensemble_with: {len(names)} names for {len(given)} runs")
        members = [o if isinstance(o, Predictor) else load(o, which) for o in given]
        mine = self.run.run_dir if self.run is not None else "this run"
        for other, name in zip(members, names, strict=True):
            if not isinstance(other, Translator):
                raise SeqlabError(
                    f"--ensemble {name}: holds {other.kind} model (model.arch="
                    f"{other.cfg.model.arch}); an ensemble takes translation runs only"
                )
            for side in ("src", "tgt"):
                theirs: Vocab = getattr(other.vocabs, f"{side}_vocab")
                ours: Vocab = getattr(self.vocabs, f"{side}_vocab")
                if theirs.idx_to_token != ours.idx_to_token:
                    raise SeqlabError(
                        f"--ensemble {name}: its {side}_vocab.json differs from {mine}'s "
                        f"({len(theirs)} tokens against {len(ours)}, or other tokens): the "
                        "models of an ensemble must share their vocabularies"
                    )
                if _splits(getattr(other.vocabs, f"{side}_tokenizer")) != _splits(
                    getattr(self.vocabs, f"{side}_tokenizer")
                ):
                    raise SeqlabError(
                        f"--ensemble {name}: its {side} tokenizer differs from {mine}'s: the "
                        "models of an ensemble must split text the same way"
                    )
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
        if self.members and engine != "pytorch":
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
        """Whether ``engine`` (``pytorch``, ``ctranslate2``) can decode this model
        (:func:`engine_decodes`; CTranslate2 must also be installed to run)."""
        return engine_decodes(engine, self.cfg.model.arch)

    @property
    def max_source_tokens(self) -> int:
        """The most source tokens the encoder reads (``data.max_len`` positions, the last one
        ``<eos>``); a longer sentence is cut to its first ones (:meth:`is_cut`)."""
        return self.cfg.data.max_len - 1

    def is_cut(self, sentence: str) -> bool:
        """Whether the encoder reads only the first :attr:`max_source_tokens` of ``sentence``."""
        return len(self.vocabs.src_tokenizer.tokenize(sentence)) > self.max_source_tokens

    def source_ids(self, sentence: str) -> list[int]:
        """Token ids the encoder reads: the tokens (cut to ``data.max_len - 1``) and ``<eos>``."""
        ids = self.vocabs.src_vocab[self.vocabs.src_tokenizer.tokenize(sentence)]
        return ids[: self.max_source_tokens] + [EOS]

    def unknown_tokens(self, sentence: str) -> list[str]:
        """The tokens of ``sentence`` that the source vocabulary lacks (the encoder reads each as
        ``<unk>``), in order."""
        return unknown_tokens(self.vocabs.src_vocab, self.vocabs.src_tokenizer.tokenize(sentence))

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
            engine: ``pytorch`` (seqlab's own search) or ``ctranslate2`` (the model exported to
                CTranslate2 on first use, see :meth:`ctranslate2_engine`).
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
        vocab, tokenize = self.vocabs.src_vocab, self.vocabs.src_tokenizer.tokenize
        pieces = [tokenize(s) for s in sentences]  # once: ids, cuts and unknown tokens
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
        device = next(self.model.parameters()).device
        results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in src_ids]
        order = sorted((i for i, ids in enumerate(src_ids) if ids), key=lambda i: len(src_ids[i]))
        limits = {"max_len_a": decode.max_len_a, "max_len_b": decode.max_len_b}
        starts = range(0, len(order), batch_size)
        if engine == "ctranslate2":
            fast = self.ctranslate2_engine(quantize)

            def search(start: int) -> list[list[Hypothesis]]:
                return fast.search(
                    [src_ids[i] for i in order[start : start + batch_size]],
                    beam_size=decode.beam_size if decode.strategy == "beam" else 1,
                    nbest=decode.nbest,
                    length_penalty=decode.length_penalty,
                    max_decode_len=self.model.max_decode_len,
                    **limits,
                )

            # an engine with several workers decodes that many batches at once (in order)
            with ThreadPoolExecutor(min(fast.workers, len(starts)) or 1) as pool:
                found_all = pool.map(search, starts) if len(starts) > 1 else map(search, starts)
                for start, found in zip(
                    starts,
                    progress(found_all, "decoding", total=len(starts), unit="batch"),
                    strict=True,
                ):
                    for i, hyps in zip(order[start : start + batch_size], found, strict=True):
                        results[i] = hyps
            return results
        with autocast(self.precision, device):
            for start in progress(starts, "decoding", unit="batch"):
                chunk = order[start : start + batch_size]
                src, src_len = pad_sequences([src_ids[i] for i in chunk])
                src, src_len = src.to(device), src_len.to(device)
                if decode.strategy == "beam":
                    found = beam_search(
                        self.model,
                        src,
                        src_len,
                        beam_size=decode.beam_size,
                        length_penalty=decode.length_penalty,
                        nbest=decode.nbest,
                        need_weights=need_weights,
                        **limits,
                    )
                else:
                    best = greedy_search(
                        self.model, src, src_len, need_weights=need_weights, **limits
                    )
                    found = [[h] for h in best]
                for i, hyps in zip(chunk, found, strict=True):
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

    def ctranslate2_engine(self, quantize: str | None = None) -> Any:
        """The model exported to CTranslate2 (once, into ``RUN/exports/``) and loaded with
        ``compute_type`` ``quantize`` (fp32 when None), using as many threads as PyTorch, or
        those and the workers kept by
        :func:`~seqlab.export.ctranslate2.give_cores_to_ctranslate2`."""
        from seqlab.export.ctranslate2 import (
            CTranslate2Engine,
            check_compute_type,
            engine_threads,
            engine_workers,
            export_ctranslate2,
        )

        check_compute_type(quantize)  # before any export
        key = (quantize or "float32", engine_threads(), engine_workers())
        if key not in self._engines:
            sizes = (len(self.vocabs.src_vocab), len(self.vocabs.tgt_vocab))
            origin = {"checkpoint": str(self.run.checkpoint)} if self.run else {}
            where = None
            if self.run is not None:
                where = RunDir(self.run.run_dir).export_dir("ctranslate2", self.run.checkpoint)
                if not (where / "seqlab.json").is_file():
                    try:
                        export_ctranslate2(self.model, *sizes, where, origin)
                    except OSError:  # a read-only run directory: export elsewhere
                        where = None
            if where is None:
                where = Path(tempfile.mkdtemp(prefix="seqlab-ct2-")) / "model"
                export_ctranslate2(self.model, *sizes, where, origin)
            self._engines[key] = CTranslate2Engine(
                where, compute_type=key[0], threads=key[1], workers=key[2]
            )
        return self._engines[key]

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
        scores = score_translations(outputs, references, paper_lang(self.cfg))
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
        """Which attention :meth:`draw_alignment` draws: one decoder layer's cross-attention,
        averaged over its heads, for a Transformer (``attention_layer``); the decoder's one
        attention over the source for an RNN (``model.attention``, its score); the mean over the
        models of an ensemble."""
        m = self.cfg.model
        layer = getattr(self.model, "attention_layer", None)
        if self.members:
            return f"attention over the source, mean over the {len(self.members) + 1} models"
        if layer is not None:
            n = m.decoder_layers  # type: ignore[attr-defined]
            return (  # counted from 0, as attention_layer and classify's --layer count
                f"decoder layer {layer % n} (layers 0–{n - 1}), mean of its "
                f"{m.num_heads} heads — cross-attention"  # type: ignore[attr-defined]
            )
        score = getattr(m, "attention", None)
        return f"the decoder's {score + ' ' if isinstance(score, str) else ''}attention over the source"

    def draw_alignment(self, directory: Path, number: int, line: str, hyp: Hypothesis) -> Path:
        """The source × output heatmap of ``line``'s hypothesis ``hyp`` (decoded with
        ``need_weights``) as ``directory/attention-NNNN.png`` after ``number``
        (:func:`~seqlab.plotting.attention_png_name`), titled with the line and
        :attr:`alignment_name`."""
        from seqlab.plotting import attention_png_name, plot_attention

        x_tokens = self.vocabs.src_vocab.to_tokens(self.source_ids(line))
        y_tokens = self.vocabs.tgt_vocab.to_tokens(hyp.tokens) + ["<eos>"]
        assert hyp.attention is not None
        weights = hyp.attention[: len(y_tokens), : len(x_tokens)]
        title = line if len(line) <= 100 else line[:97] + "..."
        if len(x_tokens) > MAX_PLOT_TOKENS or len(y_tokens) > MAX_PLOT_TOKENS:
            title += f" (first {MAX_PLOT_TOKENS} tokens shown)"
            x_tokens, y_tokens = x_tokens[:MAX_PLOT_TOKENS], y_tokens[:MAX_PLOT_TOKENS]
            weights = weights[: len(y_tokens), : len(x_tokens)]
        return plot_attention(
            weights,
            directory / attention_png_name(number),
            x_tokens=x_tokens,
            y_tokens=y_tokens,
            title=f"{title}\n{self.alignment_name}",
            xlabel="source",
            ylabel="output",
        )

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
    ) -> TranslationReport:
        """BLEU, chrF and paper-style BLEU on a ``split`` of the run's dataset (default ``val``;
        reads the data) or on ``files={"src": FILE, "ref": FILE}``; ``output``: also write the
        translations there (atomically). Unknown tokens of ``src`` are reported by ``FILE:LINE``
        (those of the run's own data are not: its vocabulary was built leaving them out)."""
        split, files = self._source(split, files, "val")
        options = {"beam": beam, "length_penalty": length_penalty}
        self.check("evaluate", {**options, "engine": engine, "quantize": quantize})
        if output:  # before any work: never a run's own file, nor one being read
            from seqlab.storage.atomic import check_replaceable
            from seqlab.storage.outputs import check_not_input, check_not_run_file

            check_replaceable(output, "output")
            check_not_run_file(output, "output")
            check_not_input(output, {f"--{k}": v for k, v in files.items()}, "output")
        if files:
            if set(files) != {"src", "ref"}:
                raise SeqlabError(
                    "--src and --ref go together: the source sentences and their references"
                )
            sources, references = (
                read_lines(files["src"], "--src"),
                read_lines(files["ref"], "--ref"),
            )
            if not sources and not references:
                raise SeqlabError(
                    f"--src {files['src']} and --ref {files['ref']} are empty: there is nothing "
                    "to score"
                )
            if len(sources) != len(references):
                raise SeqlabError(
                    f"--src {files['src']} has {len(sources)} lines but --ref {files['ref']} has "
                    f"{len(references)}; they must pair up line by line"
                )
            source = dict(files)
            warn_unknown(
                (
                    (f"{files['src']}:{n}", self.unknown_tokens(s))
                    for n, s in enumerate(sources, start=1)
                ),
                2,
            )
        else:
            assert split is not None
            splits = load_pairs(self.cfg)
            if split not in splits:
                raise SeqlabError(
                    f"{self.cfg.data.dataset} has no {split!r} split; choose from "
                    f"{', '.join(splits)}"
                )
            sources, references = [s for s, _ in splits[split]], [t for _, t in splits[split]]
            source = {"split": split}
        # --src: unknown tokens reported above, by line; a split: the run's own data
        with quiet_unknown(), own_data() if not files else contextlib.nullcontext():
            scores = self.score(sources, references, **options, engine=engine, quantize=quantize)
        outputs = scores.pop("translations")
        decode = decode_options(self.cfg.decode, beam, None, length_penalty)
        scores["beam_size"] = decode.beam_size if decode.strategy == "beam" else 1
        if decode.strategy == "beam":
            scores["length_penalty"] = decode.length_penalty
        report = TranslationReport(self.checkpoint, source, scores, outputs=outputs)
        report.check_finite()
        if output:
            atomic_write_text(output, "".join(o + "\n" for o in outputs))
        return report


# ------------------------------------------------------------------------------- training
def save_vocabs(vocabs: TranslationVocabs, run_dir: Path) -> None:
    vocabs.src_vocab.save(Path(run_dir) / "src_vocab.json")
    vocabs.tgt_vocab.save(Path(run_dir) / "tgt_vocab.json")
    save_tokenizer(vocabs.src_tokenizer, run_dir, "src_tokenizer")
    save_tokenizer(vocabs.tgt_tokenizer, run_dir, "tgt_tokenizer")


def _splits(tokenizer: Any) -> tuple[Any, ...]:
    """What decides how a tokenizer splits text: its settings and its subword model."""
    return (tokenizer.to_dict(), getattr(tokenizer, "model_proto", None))


def load_vocabs(run_dir: Path) -> TranslationVocabs:
    src_vocab = Vocab.load(Path(run_dir) / "src_vocab.json")
    tgt_vocab = Vocab.load(Path(run_dir) / "tgt_vocab.json")
    if tgt_vocab == src_vocab:
        tgt_vocab = src_vocab  # a joint vocabulary stays one object (shared embeddings)
    return TranslationVocabs(
        load_tokenizer(run_dir, "src_tokenizer"),
        load_tokenizer(run_dir, "tgt_tokenizer"),
        src_vocab,
        tgt_vocab,
    )


def _sizes(vocabs: TranslationVocabs) -> dict[str, int]:
    return {"src_vocab_size": len(vocabs.src_vocab), "tgt_vocab_size": len(vocabs.tgt_vocab)}


def validation(cfg: ExperimentConfig, vocabs: TranslationVocabs, val: Pairs, final: bool = False):
    """``evaluate(model)``: teacher-forced loss, then decoding of ``val`` → BLEU (sacreBLEU's and
    the paper-style one), chrF, exact match. Greedy during training; ``final``: as the run's
    ``decode`` section says (beam search), for the choice between the average of the last
    checkpoints and the best one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation was reported when the data was built
        data = encode_pairs(val, vocabs, cfg.data.max_len)
    batches = TranslationBatches(data, cfg.data.batch_tokens, bucket=True, shuffle=False)
    greedy = DecodeConfig(
        strategy="greedy",
        max_len_a=cfg.decode.max_len_a,
        max_len_b=cfg.decode.max_len_b,
        precision=cfg.decode.precision,
    )
    decoding = cfg if final else cfg.model_copy(update={"decode": greedy})

    def evaluate(model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for batch in batches:
            loss, n = model.loss(batch.to(device))
            total, count = total + loss.item() * n, count + n
        translator = Translator(model, decoding, vocabs)
        with warnings.catch_warnings(), own_data():
            warnings.simplefilter("ignore")
            scores = translator.score([s for s, _ in val], [t for _, t in val])
        return {
            "val_loss": total / max(count, 1),
            "val_bleu": scores["bleu"],
            "val_chrf": scores["chrf"],
            "val_exact": scores["exact_match"],
            # about 0.1 s per 1,000 sentences; natural-language datasets only
            **({"val_bleu_paper": scores["bleu_paper"]} if "bleu_paper" in scores else {}),
        }

    return evaluate


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Pairs, vocabularies (the run's own when resuming), token-budget batches and the model."""
    splits = load_pairs(cfg)
    d = cfg.data
    if run_dir is not None:
        vocabs = load_vocabs(run_dir)
    else:
        vocabs = build_vocabs(
            splits["train"], d.tokenizer, d.min_freq, d.max_vocab, d.subword, d.normalize
        )
    train_data = encode_pairs(splits["train"], vocabs, d.max_len)
    batches = TranslationBatches(
        train_data, d.batch_tokens, bucket=True, shuffle=True, seed=cfg.train.seed
    )
    torch.manual_seed(cfg.train.seed)
    model = build_model(
        cfg.model, src_vocab_size=len(vocabs.src_vocab), tgt_vocab_size=len(vocabs.tgt_vocab)
    )
    smoothing = cfg.train.label_smoothing
    return Experiment(
        model=model,
        train_batches=batches,
        loss_fn=lambda m, batch, state: translation_loss(m, batch, state, smoothing),
        evaluate=validation(cfg, vocabs, splits["val"]),
        select=SELECT,
        save_artefacts=lambda directory: save_vocabs(vocabs, directory),
        predictor=Translator(model, cfg, vocabs),
        meta=_sizes(vocabs),
        final_evaluate=(
            validation(cfg, vocabs, splits["val"], final=True)
            if cfg.decode.strategy == "beam" and cfg.decode.beam_size > 1
            else None
        ),
    )


#: translation chooses checkpoints by validation BLEU, higher is better
SELECT = Selection("val_bleu", "max")

#: the kinds of run this task loads (:func:`seqlab.tasks.predictor_for`)
PREDICTORS = (Translator,)
