"""n-gram language models counted on a language-modelling config's own data
(``seqlab ngram``): the same text, tokenizer, vocabulary and split as the neural model, so their
perplexities compare (d2l.ai §9.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seqlab.config import ExperimentConfig
from seqlab.data.lm_corpus import LMCorpus
from seqlab.errors import DataError
from seqlab.models.ngram import NGramLM
from seqlab.nn.losses import perplexity
from seqlab.tasks.language_modeling.task import load_corpus


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
