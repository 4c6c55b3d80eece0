"""Language-model experiments: data, model, loss and perplexity, wired for the trainer.

Perplexity is exp of the mean per-token cross-entropy (d2l §8.4.4): PPL = exp(-1/n Σ log p(x_t | x_<t)).
Validation walks the held-out tail of the text in B contiguous rows, T tokens at a time; a
recurrent model carries its state along each row (as in training with sequential
partitioning), a Transformer sees each window of T tokens on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.config import ExperimentConfig, RNNLMConfig, TransformerLMConfig
from seqlab.data.lm_batching import LMBatches
from seqlab.data.lm_corpus import LMCorpus, build_lm_corpus, corpus_path, read_text
from seqlab.data.tokenizers import load_tokenizer, save_tokenizer
from seqlab.data.vocab import Vocab
from seqlab.training.trainer import LossOutput

LM_ARCHS = ("rnn_lm", "transformer_lm")


def build_lm_model(cfg: ExperimentConfig, vocab_size: int) -> nn.Module:
    """The one place a language model is constructed from its config."""
    if isinstance(cfg.model, RNNLMConfig):
        from seqlab.models.rnn_lm import RNNLanguageModel

        return RNNLanguageModel(vocab_size, cfg.model)
    if isinstance(cfg.model, TransformerLMConfig):
        from seqlab.models.transformer_lm import TransformerLanguageModel

        return TransformerLanguageModel(vocab_size, cfg.model)
    raise ValueError(
        f"model.arch={cfg.model.arch!r} is not a language model ({', '.join(LM_ARCHS)})"
    )


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
    """Validation loss and perplexity over the whole of ``ids`` (every token predicted once)."""
    device = next(model.parameters()).device
    rows = min(batch_size, max((len(ids) - 1) // num_steps, 1))
    n = (len(ids) - 1) // rows * rows
    xs = ids[:n].reshape(rows, -1).to(device)  # (B, N/B)
    ys = ids[1 : n + 1].reshape(rows, -1).to(device)  # (B, N/B)
    total, count, state = 0.0, 0, None
    for start in range(0, xs.shape[1], num_steps):
        x, y = xs[:, start : start + num_steps], ys[:, start : start + num_steps]
        if is_recurrent(model):
            logits, state = model(x, state)  # (B, T, V)
        else:
            logits, _ = model(x)  # (B, T, V)
        total += F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), reduction="sum"
        ).item()
        count += y.numel()
    loss = total / max(count, 1)
    return {"val_loss": loss, "val_ppl": float(torch.tensor(loss).exp())}


@dataclass
class LMExperiment:
    model: nn.Module
    corpus: LMCorpus
    train_batches: LMBatches
    select: tuple[str, str] = ("val_loss", "min")
    loss_fn = staticmethod(lm_loss)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        cfg = self.train_batches
        return evaluate_lm(model, self.corpus.val, cfg.batch_size, cfg.num_steps)

    def save_artefacts(self, run_dir: Path) -> None:
        self.corpus.vocab.save(Path(run_dir) / "vocab.json")
        save_tokenizer(self.corpus.tokenizer, run_dir)

    def extra_meta(self) -> dict[str, int]:
        return {"vocab_size": len(self.corpus.vocab)}


def build_lm_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> LMExperiment:
    """Load the corpus (reusing a run's saved vocabulary and tokenizer when present), build the model."""
    vocab = tokenizer = None
    if run_dir is not None and (Path(run_dir) / "vocab.json").exists():
        vocab = Vocab.load(Path(run_dir) / "vocab.json")
        tokenizer = load_tokenizer(run_dir)
    d = cfg.data
    corpus = build_lm_corpus(
        read_text(corpus_path(d.dataset, d.path)),
        tokenizer=d.tokenizer,
        normalize=d.normalize,
        val_fraction=d.val_fraction,
        min_freq=d.min_freq,
        max_vocab=d.max_vocab,
        tok=tokenizer,
        vocab=vocab,
    )
    batches = LMBatches(
        corpus.train,
        cfg.data.batch_size,
        cfg.data.num_steps,
        cfg.data.sampling,
        seed=cfg.train.seed,
    )
    torch.manual_seed(cfg.train.seed)
    model = build_lm_model(cfg, len(corpus.vocab))
    return LMExperiment(model, corpus, batches)


def generate_text(
    model: nn.Module,
    corpus: LMCorpus,
    prefix: str,
    num_tokens: int,
    strategy: str = "greedy",
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
) -> str:
    """Warm up on ``prefix`` and continue it by ``num_tokens`` tokens; returns prefix + continuation."""
    tok, vocab = corpus.tokenizer, corpus.vocab
    prefix_tokens = tok.tokenize(prefix)
    if not prefix_tokens:  # start from a random training token rather than nothing
        prefix_tokens = [vocab.to_tokens(int(corpus.train[0]))]
    ids = vocab[prefix_tokens]
    if is_recurrent(model):
        from seqlab.models.rnn_lm import generate
    else:
        from seqlab.models.transformer_lm import generate
    gen = torch.Generator().manual_seed(seed)
    out = generate(
        model,
        ids,
        num_tokens,
        strategy=strategy,
        temperature=temperature,
        top_k=top_k,
        generator=gen,
    )
    return tok.detokenize(vocab.to_tokens(list(ids) + list(out)))
