"""Text classification: one label per sentence (Transformer, BiLSTM and CNN classifiers).

A sentence is read as the token ids of the run's tokenizer and vocabulary, cut to
``data.max_len`` tokens (:func:`encode_texts`, the one encoding of training and inference). A
run directory holds ``classes.json``, ``vocab.json`` and ``tokenizer.json``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from seqlab.config import ExperimentConfig
from seqlab.data.classification import Examples, label_ids, label_set
from seqlab.data.parallel import DataWarning
from seqlab.data.tokenizers import Tokenizer, load_tokenizer, make_tokenizer, save_tokenizer
from seqlab.data.vocab import (
    UnknownTokenWarning,
    Vocab,
    check_not_empty,
    reporting_unknown,
    unknown_tokens,
    warn_unknown,
)
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.storage.text import check_line_breaks, read_lines
from seqlab.tasks.base import Run, load_weights
from seqlab.tasks.classifier import splits
from seqlab.tasks.classifier.base import (
    Classes,
    Classifier,
    TrainingData,
    attention_layers,
)
from seqlab.tasks.options import Option
from seqlab.tokens import UNK


def encode_texts(
    texts: Sequence[str], vocab: Vocab, tokenizer: Tokenizer, max_len: int
) -> list[list[int]]:
    """The ids the model reads for each text: its tokens cut to ``max_len``; an empty text reads
    ``<unk>``."""
    return [vocab[tokenizer.tokenize(t)][:max_len] or [UNK] for t in texts]


class TextClassifier(Classifier):
    """A trained text classifier (see :class:`~seqlab.tasks.classifier.base.Classifier`)."""

    kind = "text classification"
    item = "sentence"
    options: ClassVar[tuple[Option, ...]] = (
        *Classifier.options,
        Option(
            "--input",
            "one sentence a line (default: stdin)",
            ("classify",),
            role="cli",
            metavar="FILE",
        ),
        Option("--src", "your sentences", ("evaluate",), role="file", metavar="FILE"),
        Option(
            "--labels", "the label of each --src line", ("evaluate",), role="file", metavar="FILE"
        ),
    )
    usage: ClassVar[dict[str, str]] = {
        "evaluate": "a text classifier is scored on --split, or on --src FILE with --labels FILE",
        "classify": "give sentences with --input FILE or on stdin, not file arguments",
    }

    def __init__(
        self,
        model: nn.Module,
        cfg: ExperimentConfig,
        classes: Classes,
        vocab: Vocab,
        tokenizer: Tokenizer,
        run: Run | None = None,
    ) -> None:
        super().__init__(model, cfg, classes, run)
        self.vocab, self.tokenizer = vocab, tokenizer

    @classmethod
    def load(cls, run: Run) -> TextClassifier:
        """The trained classifier of ``run`` (its classes, vocabulary, tokenizer, checkpoint)."""
        classes = Classes.load(run.file("classes.json"))
        run.check_size("num_classes", len(classes.labels))
        vocab = Vocab.load(run.file("vocab.json"))
        run.file("tokenizer.json")
        tokenizer = load_tokenizer(run.run_dir)
        run.check_size("vocab_size", len(vocab))
        model = build_model(run.cfg.model, vocab_size=len(vocab), num_classes=len(classes.labels))
        return cls(load_weights(model, run), run.cfg, classes, vocab, tokenizer, run)

    # -- inputs
    def token_ids(self, text: str) -> list[int]:
        """The ids the model reads: tokens cut to ``data.max_len``; an empty text reads ``<unk>``."""
        return encode_texts([text], self.vocab, self.tokenizer, self.cfg.data.max_len)[0]

    def tokens(self, text: str) -> list[str]:
        return self.vocab.to_tokens(self.token_ids(text))

    def unknown_tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` that the vocabulary lacks (the model reads each as ``<unk>``),
        in order."""
        return unknown_tokens(self.vocab, self.tokenizer.tokenize(text))

    def check_texts(self, items: Sequence[Any] | Tensor) -> None:
        """Refuse what is not a sentence the model can read: a non-string, a blank one, one
        holding a line break other than ``\\n`` (:func:`~seqlab.storage.text.check_line_breaks`)."""
        if isinstance(items, Tensor) or any(not isinstance(s, str) for s in items):
            raise SeqlabError("this is a text classifier: give it sentences (strings)")
        blank = [i for i, s in enumerate(items) if not s.strip()]
        if blank:
            raise SeqlabError(
                f"sentence {blank[0]} (of {len(items)}) is blank: there is nothing to "
                f"classify in it ({len(blank)} blank in all); leave blank sentences out"
            )
        for i, s in enumerate(items):
            check_line_breaks(s, f"sentence {i}")

    def report_inputs(self, items: Sequence[Any], numbers: Sequence[int]) -> None:
        """:meth:`check_texts`, then an :class:`~seqlab.data.vocab.UnknownTokenWarning` per
        input line holding tokens the vocabulary lacks (and one if some hold nothing else)."""
        self.check_texts(items)
        names = [f"input line {n}" for n in numbers]
        found = ((name, self.unknown_tokens(s)) for name, s in zip(names, items, strict=True))
        warn_unknown(found, 3)
        if reporting_unknown():
            ids = encode_texts(items, self.vocab, self.tokenizer, self.cfg.data.max_len)
            self._warn_unread(ids, names, 3)

    def _warn_unread(self, ids: list[list[int]], names: Sequence[str], stacklevel: int) -> None:
        """One :class:`~seqlab.data.vocab.UnknownTokenWarning` if some of the texts (their ids,
        named ``names``) hold no token the model knows: every one read as ``<unk>``."""
        unread = [name for name, row in zip(names, ids, strict=True) if all(t == UNK for t in row)]
        if unread:
            warnings.warn(
                f"{len(unread)} of {len(ids)} sentences hold no token the model knows (all "
                f"<unk>; the first is {unread[0]}): their labels come from nothing they say",
                UnknownTokenWarning,
                stacklevel=stacklevel + 1,
            )

    def encode(self, items: Sequence[Any] | Tensor) -> list[list[int]]:
        """Token ids of sentences (checked by :meth:`check_texts`); long ones are cut with one
        warning, and each sentence holding tokens that the vocabulary lacks (read as ``<unk>``)
        is named (``sentence I``, its index) with them in an
        :class:`~seqlab.data.vocab.UnknownTokenWarning`."""
        self.check_texts(items)
        assert not isinstance(items, Tensor)
        limit = self.cfg.data.max_len
        cut = sum(len(self.tokenizer.tokenize(s)) > limit for s in items)
        if cut:
            warnings.warn(
                f"truncated {cut} of {len(items)} input sentences to data.max_len={limit} "
                "tokens (the model reads no more)",
                stacklevel=4,
            )
        warn_unknown(((f"sentence {i}", self.unknown_tokens(s)) for i, s in enumerate(items)), 3)
        ids = encode_texts(items, self.vocab, self.tokenizer, limit)
        if reporting_unknown():
            self._warn_unread(ids, [f"sentence {i}" for i in range(len(ids))], 3)
        return ids

    # -- labelled examples
    def split_examples(self, split: str) -> tuple[list[str], list[str]]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)  # reported when the run was trained
            texts = splits.text_splits(self.cfg)
        if split not in texts:
            raise SeqlabError(
                f"{self.cfg.data.dataset} has no {split!r} split; choose from {', '.join(texts)}"
            )
        return [t for t, _ in texts[split]], [label for _, label in texts[split]]

    def file_examples(self, files: Mapping[str, str]) -> tuple[list[str], list[str]]:
        """The sentences of ``--src`` and the labels of ``--labels``, line by line."""
        if set(files) != {"src", "labels"}:
            raise SeqlabError("--src and --labels go together: the sentences and their labels")
        src, labels_file = files["src"], files["labels"]
        texts, labels = read_lines(src, "--src"), read_lines(labels_file, "--labels")
        if not texts and not labels:
            raise SeqlabError(
                f"--src {src} and --labels {labels_file} are empty: there is nothing to score"
            )
        if len(texts) != len(labels):
            raise SeqlabError(
                f"--src {src} has {len(texts)} lines but --labels {labels_file} has "
                f"{len(labels)}; they must pair up line by line"
            )
        warn_unknown(
            ((f"{src}:{n}", self.unknown_tokens(t)) for n, t in enumerate(texts, start=1)), 2
        )
        return texts, [label.strip() for label in labels]

    # -- attention
    @torch.no_grad()
    def attention(self, item: Any) -> tuple[list[str], list[Tensor]]:
        self._needs_attention()
        if not isinstance(item, str):
            raise SeqlabError("this is a text classifier: give it a sentence")
        check_line_breaks(item, "the sentence")
        warn_unknown([("the sentence", self.unknown_tokens(item))], 3)
        device = next(self.model.parameters()).device
        ids = self.token_ids(item)
        weights = self.model.attention(
            torch.tensor([ids], device=device), torch.tensor([len(ids)], device=device)
        )
        names = self.tokens(item)
        if getattr(self.model, "pooling", None) == "cls":
            names = ["[CLS]", *names]
        return names, attention_layers(weights)

    # -- training
    @classmethod
    def training_data(cls, cfg: ExperimentConfig, run_dir: Path | None) -> TrainingData:
        """Encoded splits, and the labels, vocabulary and tokenizer: the run's own when resuming,
        else built on the training split."""
        d = cfg.data
        texts = splits.text_splits(cfg)
        if run_dir is not None:
            classes = Classes.load(Path(run_dir) / "classes.json")
            vocab = Vocab.load(Path(run_dir) / "vocab.json")
            tokenizer = load_tokenizer(run_dir)
        else:
            classes = Classes(label_set(texts["train"], splits.known_labels(cfg)))
            tokenizer = make_tokenizer(d.tokenizer, d.normalize)
            vocab = Vocab(
                [tokenizer.tokenize(t) for t, _ in texts["train"]], d.min_freq, d.max_vocab
            )
            check_not_empty(vocab, "text", d.min_freq, d.max_vocab)
        where = d.path or d.dataset

        def encoded(examples: Examples, what: str) -> tuple[list[list[int]], list[int]]:
            ids = encode_texts([t for t, _ in examples], vocab, tokenizer, d.max_len)
            return ids, label_ids([label for _, label in examples], classes.labels, what)

        def save(directory: Path) -> None:
            classes.save(Path(directory) / "classes.json")
            vocab.save(Path(directory) / "vocab.json")
            save_tokenizer(tokenizer, directory)

        return TrainingData(
            classes,
            encoded(texts["train"], where),
            encoded(texts["val"], f"{where} (val)"),
            {"num_classes": len(classes.labels), "vocab_size": len(vocab)},
            save,
            lambda model: cls(model, cfg, classes, vocab, tokenizer),
        )
