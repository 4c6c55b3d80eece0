"""The language-modelling task's predictor (:class:`LanguageModel`), its rules, loss,
validation and experiment.

Perplexity is exp of the mean per-token cross-entropy (d2l.ai §9.3.2):
PPL = exp(-1/n Σ log p(x_t | x_<t)). Evaluation walks a token sequence in B contiguous rows, T
tokens at a time, every token predicted once; a recurrent model carries its state along each row
(as in training with sequential partitioning), a Transformer sees each window of T tokens on its
own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.builtin_records import RUN_FILES
from seqlab.config import ExperimentConfig
from seqlab.data import readers
from seqlab.data.lm_batching import LMBatches
from seqlab.data.lm_corpus import LMCorpus, build_lm_corpus
from seqlab.data.tokenizers import (
    Normalize,
    Tokenizer,
    load_tokenizer,
    normalisation_messages,
    save_tokenizer,
    warn_normalised,
)
from seqlab.data.vocab import Vocab, quiet_unknown, unknown_messages, unknown_tokens, warn_unknown
from seqlab.errors import DataError, SeqlabError
from seqlab.models import build_model
from seqlab.models.language_model import CausalLM, continuation
from seqlab.nn.losses import perplexity
from seqlab.nn.sampling import next_token
from seqlab.objective import LossOutput, Selection
from seqlab.runtime.precision import autocast
from seqlab.runtime.progress import progress
from seqlab.storage.text import check_line_breaks, read_lines
from seqlab.tasks.base import Experiment, Predictor, Run, load_weights
from seqlab.tasks.language_modeling.options import GenerateOptions
from seqlab.tasks.options import CommandOptions, Option, show_options
from seqlab.tasks.report import Prediction, Report

ARTEFACTS = RUN_FILES["language_modeling"]


def lm_loss(model: CausalLM, batch: tuple[Tensor, Tensor], state: object) -> LossOutput:
    """Mean next-token cross-entropy of one ``(X, Y)`` minibatch, each (B, T)
    (:meth:`seqlab.models.language_model.CausalLM.loss`)."""
    x, y = batch
    loss, count, state = model.loss(x, y, state)
    return LossOutput(loss, count, state)


@torch.no_grad()
def evaluate_lm(model: nn.Module, ids: Tensor, batch_size: int, num_steps: int) -> dict[str, float]:
    """Loss and perplexity over the whole of ``ids`` (every token after the first predicted once).

    Raises:
        DataError: fewer than two tokens (nothing to predict).
    """
    if len(ids) < 2:
        raise DataError(f"cannot measure perplexity on {len(ids)} token(s); need at least 2")
    device = next(model.parameters()).device
    rows = min(batch_size, max((len(ids) - 1) // num_steps, 1))
    n = (len(ids) - 1) // rows * rows
    xs = ids[:n].reshape(rows, -1).to(device)  # (B, N/B)
    ys = ids[1 : n + 1].reshape(rows, -1).to(device)  # (B, N/B)
    total, count, state = 0.0, 0, None
    for start in progress(range(0, xs.shape[1], num_steps), "evaluating", unit="window"):
        x, y = xs[:, start : start + num_steps], ys[:, start : start + num_steps]
        logits, state = model(x, state)  # (B, T, V); a Transformer returns no state
        total += F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), reduction="sum"
        ).item()
        count += y.numel()
    loss = total / count
    return {"val_loss": loss, "val_ppl": perplexity(loss)}


# ------------------------------------------------------------------------------- training
def load_corpus(
    cfg: ExperimentConfig, tokenizer: Tokenizer | None = None, vocab: Vocab | None = None
) -> LMCorpus:
    """The configured text, split into train/val ids (with a run's own tokenizer and vocabulary
    when given, else built on the training part)."""
    d = cfg.data
    return build_lm_corpus(
        readers.read(d, cfg.train.seed),  # the whole text
        tokenizer=d.tokenizer,
        normalize=d.normalize,
        val_fraction=d.val_fraction,
        min_freq=d.min_freq,
        max_vocab=d.max_vocab,
        tok=tokenizer,
        vocab=vocab,
    )


def load_artefacts(run: Run) -> tuple[Vocab, Tokenizer]:
    vocab = Vocab.load(run.file("vocab.json"))
    run.file("tokenizer.json")
    run.check_size("vocab_size", len(vocab))
    return vocab, load_tokenizer(run.run_dir)


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Corpus, batches and model; reusing the run's vocabulary and tokenizer when resuming."""
    vocab = tokenizer = None
    if run_dir is not None:
        vocab = Vocab.load(Path(run_dir) / "vocab.json")
        tokenizer = load_tokenizer(run_dir)
    corpus = load_corpus(cfg, tokenizer, vocab)
    d = cfg.data
    where = f"data.dataset={d.dataset}" + (f" ({d.path})" if d.path else "")
    if len(corpus.train) + len(corpus.val) < 2:
        raise DataError(
            f"{where}: the text holds {len(corpus.train) + len(corpus.val)} token(s); a language "
            "model needs a text to learn from"
        )
    if len(corpus.val) < 2:
        raise DataError(
            f"{where}: the validation split (data.val_fraction={d.val_fraction}) holds "
            f"{len(corpus.val)} token(s); perplexity needs at least 2: use a longer text or a "
            "larger val_fraction"
        )
    try:
        batches = LMBatches(
            corpus.train, d.batch_size, d.num_steps, d.sampling, seed=cfg.train.seed
        )
    except ValueError as exc:
        raise DataError(
            f"{where}: {exc}; lower data.batch_size or data.num_steps, or use a longer text"
        ) from None
    if not len(batches):
        raise DataError(
            f"{where}: the training split ({len(corpus.train)} tokens) yields no minibatch of "
            f"data.batch_size={d.batch_size} × data.num_steps={d.num_steps}"
        )
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, vocab_size=len(corpus.vocab))

    def save_artefacts(directory: Path) -> None:
        corpus.vocab.save(Path(directory) / "vocab.json")
        save_tokenizer(corpus.tokenizer, directory)

    return Experiment(
        model=model,
        train_batches=batches,
        loss_fn=lm_loss,
        evaluate=lambda m: evaluate_lm(m, corpus.val, d.batch_size, d.num_steps),
        select=SELECT,
        save_artefacts=save_artefacts,
        predictor=LanguageModel(model, cfg, corpus.vocab, corpus.tokenizer),
        meta={"vocab_size": len(corpus.vocab)},
    )


# ------------------------------------------------------------------------------ inference
@dataclass
class Generation(Prediction):
    """Generated text: the prefix and its continuation."""

    text: str

    def lines(self) -> list[str]:
        return [self.text]

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text}


class Sampling(NamedTuple):
    """How each generated token is chosen (:func:`seqlab.nn.sampling.next_token`): ``greedy``
    (argmax) or ``sample`` at ``temperature``, among the ``top_k`` most likely (0 = all)."""

    strategy: str
    temperature: float
    top_k: int


@dataclass
class PerplexityReport(Report):
    """Loss (nats/token), perplexity and the number of tokens predicted."""

    def summary(self) -> str:
        s = self.scores
        return (
            f"{self.where}: loss {s['loss']:.4f} nats/token, perplexity {s['perplexity']:.3f} "
            f"({s['tokens']} tokens; {self.checkpoint})"
        )


class LanguageModel(Predictor):
    """A trained language model: generate text, measure perplexity."""

    task = "language_modeling"
    kind = "language modeling"
    capabilities: ClassVar[tuple[str, ...]] = ("generate", "perplexity", "predict", "evaluate")
    commands: ClassVar[tuple[str, ...]] = ("generate", "evaluate")
    options: ClassVar[tuple[Option, ...]] = (
        Option("--text", "perplexity of this text", ("evaluate",), role="file", metavar="FILE"),
        Option("--prefix", "text to warm up on", ("generate",), role="cli", default=""),
    )
    #: ``generate``'s options, one field each (--tokens, --temperature, --top-k, --seed)
    command_options: ClassVar[dict[str, type[CommandOptions]]] = {"generate": GenerateOptions}
    usage: ClassVar[dict[str, str]] = {
        "evaluate": "a language model is scored on --split train or val, or on --text FILE"
    }

    def __init__(
        self,
        model: CausalLM,
        cfg: ExperimentConfig,
        vocab: Vocab,
        tokenizer: Tokenizer,
        run: Run | None = None,
    ) -> None:
        super().__init__(model, cfg, run)
        self.model: CausalLM = model
        self.vocab, self.tokenizer = vocab, tokenizer

    @classmethod
    def load(cls, run: Run) -> LanguageModel:
        """The trained model of ``run`` (its vocabulary, tokenizer and checkpoint only)."""
        vocab, tokenizer = load_artefacts(run)
        model = build_model(run.cfg.model, vocab_size=len(vocab))
        return cls(load_weights(model, run), run.cfg, vocab, tokenizer, run)

    def predict(
        self, inputs: str = "", options: GenerateOptions | None = None, **keywords: Any
    ) -> Generation:
        """``seqlab generate``: the prefix ``inputs`` continued (see :meth:`generate`)."""
        return Generation(self.generate(inputs, options=options, **keywords))

    def check(self, command: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """``generate``: its options (a
        :class:`~seqlab.tasks.language_modeling.options.GenerateOptions`, validated here: the
        Python API's and the command line's one check, handed on as one ``options`` model) and
        what they mean for this run (:meth:`ready`)."""
        if command != "generate":
            return dict(options)
        given = {k: options.get(k) for k in GenerateOptions.model_fields}
        chosen = self.options_of(command, None, given)
        self.ready(chosen)
        rest = {k: v for k, v in options.items() if k not in GenerateOptions.model_fields}
        return {**rest, "options": chosen}

    def ready(self, options: GenerateOptions) -> Sampling:
        """How tokens are chosen for validated ``options`` (:meth:`sampling`), once the run is
        known to have tokens to generate: what the server's ``prepare`` asks before queuing."""
        sampling = self.sampling(options.temperature, options.top_k)
        if len(self.vocab) <= self.vocab.num_reserved:
            raise SeqlabError(
                "the vocabulary holds only the reserved tokens (<unk>, <pad>, <bos>, <eos>): "
                "there is nothing to generate"
            )
        return sampling

    def evaluate(
        self, split: str | None = None, files: Mapping[str, str | Path] | None = None
    ) -> PerplexityReport:
        """Perplexity on the run's corpus's ``train`` or ``val`` split (default ``val``; reads
        the data) or on ``files={"text": FILE}``."""
        split, files = self._source(split, files, "val")
        if files:
            lines = read_lines(files["text"], "--text")
            where = [f"{files['text']}:{n}" for n in range(1, len(lines) + 1)]
            warn_normalised(zip(where, lines, strict=True), self.normalize, 2)
            warn_unknown(
                ((f"{files['text']}:{n}", self.unknown_tokens(t)) for n, t in enumerate(lines, 1)),
                2,
            )
            with quiet_unknown():  # reported above, by line
                scores = self.perplexity("\n".join(lines))
            report = PerplexityReport(self.checkpoint, {"text": files["text"]}, scores)
        else:
            if split not in ("train", "val"):
                raise SeqlabError(
                    f"language-model corpora have train and val splits only, not {split!r}"
                )
            corpus = load_corpus(self.cfg, self.tokenizer, self.vocab)
            scores = self._score(corpus.val if split == "val" else corpus.train)
            report = PerplexityReport(self.checkpoint, {"split": split}, scores)
        report.device = str(self.device)
        report.check_finite()
        return report

    def generate(
        self,
        prefix: str = "",
        tokens: int | None = None,
        options: GenerateOptions | None = None,
        **keywords: Any,
    ) -> str:
        """Continue ``prefix`` by ``tokens`` tokens; returns prefix + continuation.

        The options are ``options`` (a validated
        :class:`~seqlab.tasks.language_modeling.options.GenerateOptions`, taken as it is) or
        its fields as keyword arguments, checked once:

        Args:
            tokens: how many (default 100, at most
                :data:`~seqlab.tasks.language_modeling.options.MAX_GENERATE_TOKENS`).
            temperature: None = the config's ``decode`` section; 0 = greedy (argmax); > 0 =
                sample from softmax(logits / temperature).
            top_k: sample among the k most likely tokens (0 = all); given alone it samples at
                temperature 1.
            seed: the sampling seed (reproducible text).

        The reserved tokens (``<unk>``, ``<pad>``, ``<bos>``, ``<eos>``) are never generated:
        the text holds only the vocabulary's own tokens.
        """
        new = self.stream(prefix, tokens, options, **keywords)
        return self.text_of(prefix, list(new))

    def stream(
        self,
        prefix: str = "",
        tokens: int | None = None,
        options: GenerateOptions | None = None,
        **keywords: Any,
    ) -> Iterator[int]:
        """The ids :meth:`generate` appends to ``prefix``, each as soon as it is chosen (to
        stream them); the options (as :meth:`generate`'s) are checked before the first. The
        prefix is read once, then each token is fed back with the carried state
        (:func:`seqlab.models.language_model.continuation`)."""
        if not isinstance(prefix, str):
            raise SeqlabError(
                f"the prefix is one text (a string), not {type(prefix).__name__}; generate from "
                "several prefixes one at a time"
            )
        o: GenerateOptions = self.options_of("generate", options, _with_tokens(keywords, tokens))
        sampling = self.ready(o)
        check_line_breaks(prefix, "the prefix")
        ids = self.prefix_ids(prefix)
        warn_normalised([("the prefix", prefix)], self.normalize, 2)
        warn_unknown([("the prefix", self.unknown_tokens(prefix))], 2)
        return self._continue(ids, o.tokens, sampling, torch.Generator().manual_seed(o.seed))

    def _continue(
        self, ids: list[int], tokens: int, sampling: Sampling, gen: torch.Generator
    ) -> Iterator[int]:
        device = next(self.model.parameters()).device
        never = range(self.vocab.num_reserved)

        def choose(logits: Tensor) -> Tensor:  # (1, V) -> (1,)
            return next_token(logits, *sampling, generator=gen, never=never)

        steps = continuation(self.model, torch.tensor([ids], device=device), tokens, choose)
        was_training = self.model.training
        self.model.eval()
        try:
            while True:
                with autocast(self.precision, self.device):  # each step, not across the yields
                    token = next(steps, None)
                if token is None:
                    return
                yield int(token)
        finally:
            self.model.train(was_training)

    def prefix_ids(self, prefix: str) -> list[int]:
        """The ids generation continues: the prefix's tokens, or, for an empty prefix (no
        context), the most frequent token."""
        pieces = self.tokenizer.tokenize(prefix)
        if not pieces:
            pieces = [self.vocab.to_tokens(self.vocab.num_reserved)]
        return list(self.vocab[pieces])

    def text_of(self, prefix: str, new: Sequence[int]) -> str:
        """The text :meth:`generate` returns: the prefix's tokens and the ``new`` ones as text;
        for an empty prefix, the new ones alone (the token generation started from, which
        :meth:`prefix_ids` puts in as context, is not the user's text)."""
        ids = self.prefix_ids(prefix)
        if self.tokenizer.tokenize(prefix):
            return self.detokenize([*ids, *new])
        return self.detokenize([*ids, *new])[len(self.detokenize(ids)) :].lstrip()

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of token ids."""
        return self.tokenizer.detokenize(self.vocab.to_tokens(list(ids)))

    def sampling(self, temperature: float | None = None, top_k: int | None = None) -> Sampling:
        """How :meth:`generate` chooses tokens for these options (values of
        :class:`~seqlab.tasks.language_modeling.options.GenerateOptions`, validated there): None
        for both = the run's ``decode`` section; ``temperature`` 0 = greedy, > 0 samples;
        ``top_k`` alone samples at temperature 1, and with temperature 0 is refused."""
        d = self.cfg.decode
        if temperature is None and not top_k:
            if d.strategy not in ("greedy", "sample"):
                raise SeqlabError(
                    f"decode.strategy={d.strategy} is for translation; a language model "
                    "generates with greedy or sample"
                )
            return Sampling(d.strategy, d.temperature, d.top_k)
        if temperature == 0:
            if top_k:
                raise SeqlabError("top_k applies to sampling; temperature 0 means greedy")
            return Sampling("greedy", 1.0, 0)
        return Sampling("sample", temperature if temperature is not None else 1.0, top_k or 0)

    @property
    def normalize(self) -> Normalize:
        """How the tokenizer cleans text before cutting it (``data.normalize``)."""
        return getattr(self.tokenizer, "normalize", "none")  # type: ignore[no-any-return]

    def input_warnings(self, text: str, where: str) -> list[str]:
        """What the model's reading of ``text`` changes or cannot read, as the server answers
        it (the command line and the Python API warn the same messages): what
        ``data.normalize`` changed (:func:`seqlab.data.tokenizers.normalisation_messages`),
        then the tokens outside the vocabulary (:func:`seqlab.data.vocab.unknown_messages`)."""
        return normalisation_messages([(where, text)], self.normalize) + unknown_messages(
            [(where, self.unknown_tokens(text))]
        )

    def unknown_tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` that the vocabulary lacks (the model reads each as ``<unk>``),
        in order."""
        return unknown_tokens(self.vocab, self.tokenizer.tokenize(text))

    def perplexity(self, text: str) -> dict[str, float]:
        """Loss (nats/token) and perplexity of ``text`` under the model; tokens that the
        vocabulary lacks are scored as ``<unk>``, with an
        :class:`~seqlab.data.vocab.UnknownTokenWarning` naming them."""
        if not isinstance(text, str):
            raise SeqlabError(f"perplexity takes one text (a string), not {type(text).__name__}")
        check_line_breaks(text, "the text")
        pieces = self.tokenizer.tokenize(text)
        warn_normalised([("the text", text)], self.normalize, 2)
        warn_unknown([("the text", unknown_tokens(self.vocab, pieces))], 2)
        ids = torch.tensor(self.vocab[pieces], dtype=torch.long)
        return self._score(ids)

    def _score(self, ids: Tensor) -> dict[str, float]:
        d = self.cfg.data
        with autocast(self.precision, self.device):
            m = evaluate_lm(self.model, ids, d.batch_size, d.num_steps)
        return {"loss": m["val_loss"], "perplexity": m["val_ppl"], "tokens": len(ids) - 1}


def _with_tokens(keywords: dict[str, Any], tokens: int | None) -> dict[str, Any]:
    """The keyword arguments with ``tokens`` (the second positional argument of
    :meth:`LanguageModel.generate`) among them when given."""
    return keywords if tokens is None else {**keywords, "tokens": tokens}


for _method in (LanguageModel.predict, LanguageModel.generate, LanguageModel.stream):
    show_options(_method, GenerateOptions)  # their keyword arguments are the model's fields

#: a language model chooses checkpoints by validation loss (cross-entropy), lower is better
SELECT = Selection("val_loss", "min")
