"""Translation: parallel data, encoder–decoder models, decoding, BLEU.

Evaluation follows the field's convention: hypotheses are detokenised and scored against the raw
reference sentences with sacreBLEU (cased, 13a tokenisation), whose signature is reported; chrF
alongside. The score the Multi30k papers report — lowercased, punctuation-normalised,
Moses-tokenised text, ``multi-bleu.perl`` style — is given too as ``bleu_paper`` with its own
signature (:mod:`seqlab.tasks.paper_bleu`); it is not comparable with cased detokenised BLEU.
``bleu_lc`` (sacreBLEU of the same detokenised text, lowercased) stays in the JSON for older
readers; it is neither the headline nor the papers' scale.

**Decoding options** (:func:`decode_options`): the run's ``decode`` section, changed by ``beam``
and ``nbest``. ``beam=1`` is greedy search, ``beam=K > 1`` beam search of width K; ``nbest``
hypotheses per sentence need a beam at least that wide (greedy has one). Anything else is
refused, never silently adjusted.

A run directory holds ``src_vocab.json``, ``tgt_vocab.json``, ``src_tokenizer.json`` and
``tgt_tokenizer.json`` (with ``*.spm.model`` for subwords) besides the config and checkpoints;
:func:`load` needs nothing else.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.dates import date_splits
from seqlab.data.parallel import load_translation_splits
from seqlab.data.tokenizers import load_tokenizer, save_tokenizer
from seqlab.data.translation_batching import (
    Batch,
    TranslationBatches,
    TranslationVocabs,
    build_vocabs,
    encode_pairs,
    pad_sequences,
)
from seqlab.data.vocab import Vocab
from seqlab.deprecation import renamed_kwargs
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.models.search import Hypothesis, beam_search, greedy_search
from seqlab.objective import LossOutput, Selection
from seqlab.precision import autocast
from seqlab.progress import progress
from seqlab.rundir import RunDir
from seqlab.tasks.base import Experiment, Predictor, Run, as_batch, load_weights
from seqlab.tasks.paper_bleu import paper_bleu
from seqlab.tokens import EOS

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
    """Train / val (/ test) sentence pairs of ``cfg.data.dataset``."""
    d = cfg.data
    if d.dataset == "dates":
        return date_splits(
            num_train=d.num_examples or 20000,
            num_val=d.val_examples,
            num_test=d.val_examples,
            seed=cfg.train.seed,
        )
    splits = load_translation_splits(
        d.dataset, d.src_lang, d.tgt_lang, d.val_examples, d.num_examples
    )
    return {name: list(corpus.pairs) for name, corpus in splits.items()}


def translation_loss(
    model: nn.Module, batch: Batch, state: Any, label_smoothing: float = 0.0
) -> LossOutput:
    """Masked (padding-free) cross-entropy with label smoothing, as the model computes it."""
    loss, num_tokens = model.loss(batch, label_smoothing=label_smoothing)
    return LossOutput(loss, num_tokens, None)


def decode_options(
    decode: DecodeConfig, beam: int | None = None, nbest: int | None = None
) -> DecodeConfig:
    """The run's decoding changed by ``beam`` and ``nbest`` (see the module docstring)."""
    if beam is not None and beam < 1:
        raise SeqlabError(f"beam size must be >= 1 (1 = greedy), got {beam}")
    if nbest is not None and nbest < 1:
        raise SeqlabError(f"nbest must be >= 1, got {nbest}")
    d = decode.model_copy()
    if beam is not None:
        d.strategy = "greedy" if beam == 1 else "beam"
        d.beam_size = beam if beam > 1 else d.beam_size
    width = d.beam_size if d.strategy == "beam" else 1
    want = nbest if nbest is not None else min(d.nbest, width)
    if want > width:
        now = f"beam {width}" if width > 1 else "greedy search"
        raise SeqlabError(
            f"nbest {want} needs a beam of at least {want}, but decoding is {now}; "
            f"ask for a beam too (e.g. --beam {max(want, 5)} --nbest {want})"
        )
    d.nbest = want
    return d


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
    """:func:`~seqlab.tasks.base.as_batch` for text: every item must be a string."""
    batch, single = as_batch(items, what)
    for i, item in enumerate(batch):
        if not isinstance(item, str):
            raise SeqlabError(f"{what} {i} is not a string but {type(item).__name__} {item!r:.40}")
    return batch, single


class Translator(Predictor):
    """A trained translation model: translate sentences, score them against references.

    Usable on a model being trained too (validation): ``Translator(model, cfg, vocabs)``.
    """

    task = "translation"
    capabilities: ClassVar[tuple[str, ...]] = (
        "translate",
        "hypotheses",
        "score",
        "evaluate_split",
    )
    commands: ClassVar[tuple[str, ...]] = ("translate", "evaluate")

    def __init__(
        self,
        model: nn.Module,
        cfg: ExperimentConfig,
        vocabs: TranslationVocabs,
        run: Run | None = None,
    ) -> None:
        super().__init__(model, cfg, run)
        self.vocabs = vocabs
        self._engines: dict[tuple[str, int], Any] = {}  # CTranslate2 engines, by compute type

    @property
    def has_attention(self) -> bool:
        return bool(getattr(self.model, "has_attention", False))

    def source_ids(self, sentence: str) -> list[int]:
        """Token ids the encoder reads: the tokens (cut to ``data.max_len - 1``) and ``<eos>``."""
        ids = self.vocabs.src_vocab[self.vocabs.src_tokenizer.tokenize(sentence)]
        return ids[: self.cfg.data.max_len - 1] + [EOS]

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
        need_weights: bool = False,
        batch_size: int = 128,
        engine: str = "pytorch",
        quantize: str | None = None,
    ) -> Any:
        """n-best hypotheses per sentence, in input order (batched by length); given one
        sentence (a string), its n-best list.

        Blank sentences get one empty hypothesis without decoding. Over-long inputs are cut to
        ``data.max_len`` positions, with one warning.

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
                need_weights=need_weights,
                batch_size=batch_size,
                engine=engine,
                quantize=quantize,
            )[0]
        decode = decode_options(self.cfg.decode, beam, nbest)
        if engine not in ("pytorch", "ctranslate2"):
            raise SeqlabError(f"engine must be pytorch or ctranslate2, not {engine!r}")
        if engine == "pytorch" and quantize is not None:
            raise SeqlabError("quantization applies to the ctranslate2 engine")
        if engine == "ctranslate2" and need_weights:
            raise SeqlabError("the ctranslate2 engine returns no attention weights to draw")
        src_ids = [self.source_ids(s) if s.strip() else [] for s in sentences]
        cut = sum(
            len(self.vocabs.src_tokenizer.tokenize(s)) > self.cfg.data.max_len - 1
            for s in sentences
        )
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
        fast = self.ctranslate2_engine(quantize) if engine == "ctranslate2" else None
        with autocast(self.precision, device):
            starts = range(0, len(order), batch_size)
            for start in progress(starts, "decoding", unit="batch"):
                chunk = order[start : start + batch_size]
                if fast is not None:
                    found = fast.search(
                        [src_ids[i] for i in chunk],
                        beam_size=decode.beam_size if decode.strategy == "beam" else 1,
                        nbest=decode.nbest,
                        length_penalty=decode.length_penalty,
                        max_decode_len=self.model.max_decode_len,
                        **limits,
                    )
                    for i, hyps in zip(chunk, found, strict=True):
                        results[i] = hyps
                    continue
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

    def ctranslate2_engine(self, quantize: str | None = None) -> Any:
        """The model exported to CTranslate2 (once, into ``RUN/exports/``) and loaded with
        ``compute_type`` ``quantize`` (fp32 when None), using as many threads as PyTorch."""
        from seqlab.export.ctranslate2 import (
            CTranslate2Engine,
            check_compute_type,
            export_ctranslate2,
        )

        check_compute_type(quantize)  # before any export
        key = (quantize or "float32", torch.get_num_threads())
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
            self._engines[key] = CTranslate2Engine(where, compute_type=key[0], threads=key[1])
        return self._engines[key]

    def translate(
        self,
        sentences: Sequence[str] | str,
        *,
        beam: int | None = None,
        batch_size: int = 128,
        engine: str = "pytorch",
        quantize: str | None = None,
    ) -> Any:
        """The best translation of each sentence (``beam``: None = the run's ``decode``): a list
        for a list of sentences, a string for one sentence (a string)."""
        sentences, single = as_sentences(sentences)
        found = self.hypotheses(
            sentences, beam=beam, nbest=1, batch_size=batch_size, engine=engine, quantize=quantize
        )
        outputs = [self.detokenize(h[0].tokens) for h in found]
        return outputs[0] if single else outputs

    def score(
        self,
        sources: Sequence[str],
        references: Sequence[str],
        *,
        beam: int | None = None,
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
        outputs = self.translate(sources, beam=beam, engine=engine, quantize=quantize)
        scores = score_translations(outputs, references, self.cfg.data.tgt_lang)
        return {**scores, "translations": outputs}

    def evaluate_split(
        self,
        split: str = "val",
        *,
        beam: int | None = None,
        engine: str = "pytorch",
        quantize: str | None = None,
    ) -> dict[str, Any]:
        """Score the configured dataset's ``split`` (reads the data; the model is the run's)."""
        splits = load_pairs(self.cfg)
        if split not in splits:
            raise SeqlabError(
                f"{self.cfg.data.dataset} has no {split!r} split; choose from {', '.join(splits)}"
            )
        pairs = splits[split]
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
        return self.score(sources, references, beam=beam, engine=engine, quantize=quantize)


# ------------------------------------------------------------------------------- training
def save_vocabs(vocabs: TranslationVocabs, run_dir: Path) -> None:
    vocabs.src_vocab.save(Path(run_dir) / "src_vocab.json")
    vocabs.tgt_vocab.save(Path(run_dir) / "tgt_vocab.json")
    save_tokenizer(vocabs.src_tokenizer, run_dir, "src_tokenizer")
    save_tokenizer(vocabs.tgt_tokenizer, run_dir, "tgt_tokenizer")


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


def validation(cfg: ExperimentConfig, vocabs: TranslationVocabs, val: Pairs):
    """``evaluate(model)``: teacher-forced loss, then greedy decoding of ``val`` → BLEU
    (sacreBLEU's and the paper-style one), chrF, exact match."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation was reported when the data was built
        data = encode_pairs(val, vocabs, cfg.data.max_len)
    batches = TranslationBatches(data, cfg.data.batch_tokens, bucket=True, shuffle=False)
    greedy = cfg.model_copy(
        update={
            "decode": DecodeConfig(
                strategy="greedy",
                max_len_a=cfg.decode.max_len_a,
                max_len_b=cfg.decode.max_len_b,
                precision=cfg.decode.precision,
            )
        }
    )

    def evaluate(model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for batch in batches:
            loss, n = model.loss(batch.to(device))
            total, count = total + loss.item() * n, count + n
        translator = Translator(model, greedy, vocabs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = translator.score([s for s, _ in val], [t for _, t in val])
        return {
            "val_loss": total / max(count, 1),
            "val_bleu": scores["bleu"],
            "val_bleu_paper": scores["bleu_paper"],  # about 0.1 s per 1,000 sentences
            "val_chrf": scores["chrf"],
            "val_exact": scores["exact_match"],
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
        select=Selection("val_bleu", "max"),
        save_artefacts=lambda directory: save_vocabs(vocabs, directory),
        predictor=Translator(model, cfg, vocabs),
        meta=_sizes(vocabs),
    )


def load(run: Run) -> Translator:
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
    return Translator(load_weights(model, run), run.cfg, vocabs, run)
