"""Language modelling: next-token prediction on one text, perplexity, generation.

Perplexity is exp of the mean per-token cross-entropy (d2l.ai §9.3.2):
PPL = exp(-1/n Σ log p(x_t | x_<t)). Evaluation walks a token sequence in B contiguous rows, T
tokens at a time, every token predicted once; a recurrent model carries its state along each row
(as in training with sequential partitioning), a Transformer sees each window of T tokens on its
own.

A run directory holds ``vocab.json`` and ``tokenizer.json`` besides the config and checkpoints;
:func:`load` needs nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.config import ExperimentConfig
from seqlab.data.lm_batching import LMBatches
from seqlab.data.lm_corpus import LMCorpus, build_lm_corpus, corpus_path, read_text
from seqlab.data.tokenizers import Tokenizer, load_tokenizer, save_tokenizer
from seqlab.data.vocab import Vocab
from seqlab.errors import DataError, SeqlabError
from seqlab.models import build_model
from seqlab.nn.losses import perplexity
from seqlab.objective import LossOutput, Selection
from seqlab.precision import autocast
from seqlab.progress import progress
from seqlab.tasks.base import Experiment, Predictor, Run, load_weights

ARTEFACTS = ("vocab.json", "tokenizer.json")
#: the highest sampling temperature accepted (``decode.temperature``'s bound): softmax(z / 100) is
#: already flat
MAX_TEMPERATURE = 100.0


def is_recurrent(model: nn.Module) -> bool:
    return hasattr(model, "begin_state")


def lm_loss(model: nn.Module, batch: tuple[Tensor, Tensor], state: object) -> LossOutput:
    """Mean next-token cross-entropy of one ``(X, Y)`` minibatch, each (B, T)."""
    x, y = batch
    if is_recurrent(model):
        logits, state = model(x, state)  # (B, T, V)
    else:
        logits, _ = model(x)  # (B, T, V)
        state = None
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
    return LossOutput(loss, y.numel(), state)


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
        if is_recurrent(model):
            logits, state = model(x, state)  # (B, T, V)
        else:
            logits, _ = model(x)  # (B, T, V)
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
        read_text(corpus_path(d.dataset, d.path)),
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
        select=Selection("val_loss", "min"),
        save_artefacts=save_artefacts,
        predictor=LanguageModel(model, cfg, corpus.vocab, corpus.tokenizer),
        meta={"vocab_size": len(corpus.vocab)},
    )


# ------------------------------------------------------------------------------ inference
class LanguageModel(Predictor):
    """A trained language model: generate text, measure perplexity."""

    task = "language_modeling"
    capabilities: ClassVar[tuple[str, ...]] = ("generate", "perplexity", "evaluate_split")
    commands: ClassVar[tuple[str, ...]] = ("generate", "evaluate")

    def __init__(
        self,
        model: nn.Module,
        cfg: ExperimentConfig,
        vocab: Vocab,
        tokenizer: Tokenizer,
        run: Run | None = None,
    ) -> None:
        super().__init__(model, cfg, run)
        self.vocab, self.tokenizer = vocab, tokenizer

    def generate(
        self,
        prefix: str = "",
        tokens: int = 100,
        *,
        temperature: float | None = None,
        top_k: int | None = None,
        seed: int = 0,
    ) -> str:
        """Continue ``prefix`` by ``tokens`` tokens; returns prefix + continuation.

        Args:
            temperature: None = the config's ``decode`` section; 0 = greedy (argmax); > 0 =
                sample from softmax(logits / temperature).
            top_k: sample among the k most likely tokens (0 = all); given alone it samples at
                temperature 1.
            seed: the sampling seed (reproducible text).

        The reserved tokens (``<unk>``, ``<pad>``, ``<bos>``, ``<eos>``) are never generated:
        the text holds only the vocabulary's own tokens.
        """
        strategy, temp, k = self._sampling(temperature, top_k)
        if tokens < 0:
            raise SeqlabError(f"number of tokens to generate must be >= 0, got {tokens}")
        reserved = range(self.vocab.num_reserved)
        if len(self.vocab) <= len(reserved):
            raise SeqlabError(
                "the vocabulary holds only the reserved tokens (<unk>, <pad>, <bos>, <eos>): "
                "there is nothing to generate"
            )
        pieces = self.tokenizer.tokenize(prefix)
        if not pieces:  # no context: start from the most frequent token
            pieces = [self.vocab.to_tokens(self.vocab.num_reserved)]
        ids = self.vocab[pieces]
        if is_recurrent(self.model):
            from seqlab.models.rnn_lm import generate
        else:
            from seqlab.models.transformer_lm import generate
        gen = torch.Generator().manual_seed(seed)
        with autocast(self.precision):
            out = generate(
                self.model,
                ids,
                tokens,
                strategy=strategy,
                temperature=temp,
                top_k=k,
                generator=gen,
                never=reserved,
            )
        return self.tokenizer.detokenize(self.vocab.to_tokens(list(ids) + list(out)))

    def _sampling(self, temperature: float | None, top_k: int | None) -> tuple[str, float, int]:
        d = self.cfg.decode
        if temperature is not None and not (0 <= temperature <= MAX_TEMPERATURE):
            raise SeqlabError(
                f"temperature must be a number from 0 (greedy) to {MAX_TEMPERATURE:g}, got "
                f"{temperature}"
            )
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)):
            raise SeqlabError(f"top_k must be a whole number (0 = all tokens), got {top_k!r}")
        if top_k is not None and top_k < 0:
            raise SeqlabError(f"top_k must be >= 0 (0 = all tokens), got {top_k}")
        if temperature is None and not top_k:
            return d.strategy, d.temperature, d.top_k
        if temperature == 0:
            if top_k:
                raise SeqlabError("top_k applies to sampling; temperature 0 means greedy")
            return "greedy", 1.0, 0
        return "sample", temperature if temperature is not None else 1.0, top_k or 0

    def perplexity(self, text: str) -> dict[str, float]:
        """Loss (nats/token) and perplexity of ``text`` under the model."""
        ids = torch.tensor(self.vocab[self.tokenizer.tokenize(text)], dtype=torch.long)
        return self._score(ids)

    def _score(self, ids: Tensor) -> dict[str, float]:
        d = self.cfg.data
        with autocast(self.precision):
            m = evaluate_lm(self.model, ids, d.batch_size, d.num_steps)
        return {"loss": m["val_loss"], "perplexity": m["val_ppl"], "tokens": len(ids) - 1}

    def evaluate_split(self, split: str = "val") -> dict[str, float]:
        """Perplexity on the configured corpus's ``train`` or ``val`` split (reads the data)."""
        if split not in ("train", "val"):
            raise SeqlabError(
                f"language-model corpora have train and val splits only, not {split!r}"
            )
        corpus = load_corpus(self.cfg, self.tokenizer, self.vocab)
        return self._score(corpus.val if split == "val" else corpus.train)


def load(run: Run) -> LanguageModel:
    """The trained model of ``run`` (its vocabulary, tokenizer and checkpoint only)."""
    vocab, tokenizer = load_artefacts(run)
    model = build_model(run.cfg.model, vocab_size=len(vocab))
    return LanguageModel(load_weights(model, run), run.cfg, vocab, tokenizer, run)


# ----------------------------------------------------------------------------- n-grams
def ngram_models(
    cfg: ExperimentConfig,
    orders: Sequence[int],
    smoothing: str = "kneser_ney",
    k: float = 1.0,
) -> tuple[LMCorpus, dict[int, dict[str, Any]]]:
    """Count n-gram models of each order on the config's training split and measure their
    validation perplexity: the same text, tokenizer, vocabulary and split as the config's neural
    model (each validation token predicted from the n − 1 tokens before it, the end of the
    training text included)."""
    from seqlab.models.ngram import NGramLM

    corpus = load_corpus(cfg)
    train, val = corpus.train.tolist(), corpus.val.tolist()
    d = cfg.data
    where = f"data.dataset={d.dataset}" + (f" ({d.path})" if d.path else "")
    if not train or not val:
        part = "training" if not train else "validation"
        held = (
            f"the {part} split holds 0 of its {len(train) + len(val)} token(s) "
            f"(data.val_fraction={d.val_fraction})"
            if train or val
            else "the text holds no tokens"
        )
        raise DataError(
            f"{where}: {held}; n-gram models count the training split and are measured on at "
            "least one validation token: use a longer text"
        )
    out: dict[int, dict[str, Any]] = {}
    for n in orders:
        lm = NGramLM(n, len(corpus.vocab), smoothing, k=k).fit(train)  # type: ignore[arg-type]
        history = train[-max(n - 1, 1) :]  # the first validation token is predicted too
        ll, count = lm.log_likelihood(val, history)
        out[n] = {
            "model": lm,
            "val_loss": -ll / count,
            "val_ppl": perplexity(-ll / count),
            "tokens": count,
        }
    return corpus, out
