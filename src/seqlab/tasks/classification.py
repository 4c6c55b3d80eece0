"""Classification: one label per sentence or image (Transformer, BiLSTM and CNN text classifiers;
the Vision Transformer of Dosovitskiy et al. 2021 and a ConvNet for images).

**Splits.** The validation split that chooses checkpoints is always held out of the training
data (``data.val_examples``, a seeded choice); the dataset's evaluation split is never used to
choose anything. SST-2: ``train`` / ``val`` / ``dev`` (GLUE's labelled evaluation split; its
test labels are not public). SST-2's training file holds every phrase of each sentence's parse
tree as its own example, so a random hold-out would validate on phrases whose sentence is in
training; ``val`` is instead ``data.val_examples`` whole sentences, and every phrase contained in
one of them is left out of training (:func:`sentence_holdout`). MNIST and AG News: ``train`` / ``val`` / ``test``. A user's file
(``data.dataset: text-classification``): ``train`` / ``val``.

**Metrics.** Accuracy, macro-F1 (the unweighted mean over classes of F1 = 2PR / (P + R)) and the
confusion matrix (rows: true class, columns: predicted).

A run directory holds ``classes.json`` (label names; for images the input size and the training
set's mean and standard deviation) and, for text, ``vocab.json`` and ``tokenizer.json``;
:func:`load` needs nothing else.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.config import IMAGE_DATASETS, ExperimentConfig
from seqlab.data.classification import (
    AG_NEWS_LABELS,
    SST2_LABELS,
    ClassBatch,
    ClassificationBatches,
    Examples,
    label_ids,
    label_set,
    load_ag_news,
    load_sst2,
    read_user_file,
)
from seqlab.data.images import MNIST_LABELS, load_image, load_mnist
from seqlab.data.parallel import DataWarning
from seqlab.data.tokenizers import Tokenizer, load_tokenizer, make_tokenizer, save_tokenizer
from seqlab.data.vocab import Vocab
from seqlab.errors import CheckpointError, DataError, SeqlabError
from seqlab.io import atomic_write_json
from seqlab.models import build_model
from seqlab.objective import LossOutput, Selection
from seqlab.precision import autocast
from seqlab.progress import progress
from seqlab.tasks.base import Experiment, Predictor, Run, as_batch, load_weights
from seqlab.tokens import UNK

ARTEFACTS = ("classes.json", "vocab.json", "tokenizer.json")
CLASSES_FORMAT = "seqlab.classes/1"
EVAL_SPLIT = {"sst2": "dev", "ag_news": "test", "mnist": "test", "text-classification": None}


def is_image_task(cfg: ExperimentConfig) -> bool:
    return cfg.data.dataset in IMAGE_DATASETS


# ------------------------------------------------------------------------------------ data
def _hold_out(n: int, val: int, seed: int, what: str) -> tuple[list[int], list[int]]:
    """Indices of the training and held-out validation examples (both in file order)."""
    if not 0 < val < n:
        raise DataError(
            f"{what}: cannot hold out data.val_examples={val} validation examples from {n}; "
            "expected 0 < val_examples < number of examples"
        )
    order = list(range(n))
    random.Random(seed).shuffle(order)
    held = set(order[n - val :])
    return [i for i in range(n) if i not in held], sorted(held)


#: shortest SST-2 example considered a validation sentence (tokens)
MIN_SENTENCE_TOKENS = 6


def _spans(words: list[str], shortest: int = 1) -> Iterator[str]:
    """Every contiguous span of at least ``shortest`` words, as text."""
    for a in range(len(words)):
        for b in range(a + shortest, len(words) + 1):
            yield " ".join(words[a:b])


def sentence_holdout(examples: Examples, val: int, seed: int) -> tuple[list[int], list[int], int]:
    """Hold out ``val`` whole sentences of a phrase-level corpus (SST-2) without leakage.

    A sentence is an example of at least :data:`MIN_SENTENCE_TOKENS` words that is no proper
    span of a longer example. ``val`` of them (a seeded choice) are held out, and every example
    that is a span of a held-out sentence (its phrases) leaves the training set.

    Returns:
        training indices, validation indices (file order), and how many phrases were dropped.
    """
    words = [text.split() for text, _ in examples]
    long = [i for i, w in enumerate(words) if len(w) >= MIN_SENTENCE_TOKENS]
    inner = {
        span
        for i in long
        for span in _spans(words[i], MIN_SENTENCE_TOKENS)
        if span.count(" ") + 1 < len(words[i])
    }
    sentences = [i for i in long if " ".join(words[i]) not in inner]
    if not 0 < val < len(sentences):
        raise DataError(
            f"sst2: cannot hold out data.val_examples={val} sentences from {len(sentences)}"
        )
    random.Random(seed).shuffle(sentences)
    held = set(sentences[:val])
    phrases = {span for i in held for span in _spans(words[i])}
    train = [i for i in range(len(examples)) if i not in held and " ".join(words[i]) not in phrases]
    return train, sorted(held), len(examples) - len(held) - len(train)


def text_splits(cfg: ExperimentConfig) -> dict[str, Examples]:
    """``(text, label)`` examples of each split (see the module docstring)."""
    d = cfg.data
    if d.dataset == "sst2":
        full, extra = load_sst2("train"), {"dev": lambda: load_sst2("dev")}
    elif d.dataset == "ag_news":
        full, extra = load_ag_news("train"), {"test": lambda: load_ag_news("test")}
    else:
        assert d.path is not None
        full, extra = read_user_file(d.path, d.text_column, d.label_column), {}
        if len(full) < 2:
            raise DataError(f"{d.path}: {len(full)} usable example(s); need at least 2")
    val_n = (
        d.val_examples
        if d.dataset != "text-classification"
        else min(d.val_examples, max(1, len(full) // 10))
    )
    if d.dataset == "sst2":
        train_idx, val_idx, _ = sentence_holdout(full, val_n, cfg.train.seed)
    else:
        train_idx, val_idx = _hold_out(len(full), val_n, cfg.train.seed, d.path or d.dataset)
    train = [full[i] for i in train_idx][: d.num_examples]
    return {"train": train, "val": [full[i] for i in val_idx], **{k: f() for k, f in extra.items()}}


def known_labels(cfg: ExperimentConfig) -> tuple[str, ...]:
    return {"sst2": SST2_LABELS, "ag_news": AG_NEWS_LABELS, "mnist": MNIST_LABELS}.get(
        cfg.data.dataset, ()
    )


def image_splits(cfg: ExperimentConfig) -> dict[str, tuple[Tensor, Tensor]]:
    """MNIST images ``(N, 1, 28, 28)`` in [0, 1] and labels, per split."""
    d = cfg.data
    x, y = load_mnist("train")
    train_idx, val_idx = _hold_out(len(y), d.val_examples, cfg.train.seed, "mnist")
    train_idx = train_idx[: d.num_examples]
    return {
        "train": (x[train_idx], y[train_idx]),
        "val": (x[val_idx], y[val_idx]),
        "test": load_mnist("test"),
    }


# ---------------------------------------------------------------------------------- metrics
def classification_metrics(pred: Tensor, gold: Tensor, num_classes: int) -> dict[str, Any]:
    """Accuracy, macro-F1 and the confusion matrix (rows true, columns predicted)."""
    confusion = torch.zeros(num_classes, num_classes, dtype=torch.long)
    confusion.index_put_((gold, pred), torch.ones_like(gold), accumulate=True)
    tp = confusion.diag().double()
    precision = tp / confusion.sum(0).double().clamp(min=1)
    recall = tp / confusion.sum(1).double().clamp(min=1)
    f1 = torch.where(
        precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros_like(tp)
    )
    present = (confusion.sum(1) + confusion.sum(0)) > 0  # classes seen as gold or prediction
    return {
        "accuracy": float(tp.sum() / max(len(gold), 1)),
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "confusion": confusion.tolist(),
        "examples": len(gold),
    }


# ------------------------------------------------------------------------------ inference
@dataclass
class Classes:
    """The label names and, for images, the input geometry and normalisation of the run."""

    labels: list[str]
    image: dict[str, float] | None = None  # size, channels, mean, std

    def save(self, path: Path) -> None:
        atomic_write_json(
            path, {"format": CLASSES_FORMAT, "labels": self.labels, "image": self.image}
        )

    @classmethod
    def load(cls, path: Path) -> Classes:
        from seqlab.io import read_format_json

        data = read_format_json(path, CLASSES_FORMAT, "classes file")
        labels = data.get("labels")
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise CheckpointError(f"{path}: 'labels' must be a list of names")
        return cls(labels, data.get("image"))


class Classifier(Predictor):
    """A trained classifier: labels and probabilities for sentences or images, scores on
    labelled data, attention maps.

    Usable on a model being trained too (validation): ``Classifier(model, cfg, classes, ...)``.
    """

    task = "classification"
    capabilities: ClassVar[tuple[str, ...]] = (
        "classify",
        "probabilities",
        "score",
        "evaluate_split",
        "attention",
    )
    commands: ClassVar[tuple[str, ...]] = ("classify", "evaluate")

    def __init__(
        self,
        model: nn.Module,
        cfg: ExperimentConfig,
        classes: Classes,
        vocab: Vocab | None = None,
        tokenizer: Tokenizer | None = None,
        run: Run | None = None,
    ) -> None:
        super().__init__(model, cfg, run)
        self.classes, self.vocab, self.tokenizer = classes, vocab, tokenizer
        self.notes: list[str] = []  # conversions made to the last inputs (images)

    @property
    def labels(self) -> list[str]:
        return self.classes.labels

    @property
    def images(self) -> bool:
        return self.classes.image is not None

    # -- inputs
    def token_ids(self, text: str) -> list[int]:
        """The ids the model reads: tokens cut to ``data.max_len``; an empty text reads ``<unk>``."""
        assert self.vocab is not None and self.tokenizer is not None
        ids = self.vocab[self.tokenizer.tokenize(text)][: self.cfg.data.max_len]
        return ids or [UNK]

    def tokens(self, text: str) -> list[str]:
        assert self.vocab is not None
        return self.vocab.to_tokens(self.token_ids(text))

    def normalise(self, images: Tensor) -> Tensor:
        """``(B, C, H, W)`` in [0, 1] → the model's input scale (the training set's statistics)."""
        assert self.classes.image is not None
        return (images - self.classes.image["mean"]) / self.classes.image["std"]

    def read_images(self, paths: Sequence[str | Path]) -> Tensor:
        """Image files as ``(B, C, H, W)`` in [0, 1]; conversions are noted in ``self.notes``."""
        assert self.classes.image is not None
        size, channels = int(self.classes.image["size"]), int(self.classes.image["channels"])
        out, self.notes = [], []
        for path in paths:
            x, note = load_image(path, size, channels)
            if note:
                self.notes.append(f"{path}: {note}")
            out.append(x)
        return torch.stack(out)

    # -- prediction
    @torch.no_grad()
    def _batch_probs(self, batch: ClassBatch) -> Tensor:
        device = next(self.model.parameters()).device
        batch = batch.to(device)
        inputs = self.normalise(batch.inputs) if self.images else batch.inputs
        with autocast(self.precision, device):
            logits = self.model(inputs, batch.lengths)  # (B, C)
        return logits.float().softmax(-1).cpu()

    def probabilities(
        self, items: Sequence[str] | Sequence[Path] | str | Path | Tensor, batch_size: int = 256
    ) -> Tensor:
        """Class probabilities ``(N, C)``: sentences, image files, or images ``(N, C, H, W)`` in
        [0, 1]; ``(C,)`` for one sentence or image file (a string or path).

        A blank sentence is refused (there is nothing to classify); sentences longer than
        ``data.max_len`` tokens are cut to it, with one warning.
        """
        if not isinstance(items, Tensor):
            items, single = as_batch(items, "image file" if self.images else "sentence")
            if single:
                return self.probabilities(items, batch_size)[0]
        if self.images:
            x = items if isinstance(items, Tensor) else self.read_images(items)  # type: ignore[arg-type]
            inputs: Any = x
        else:
            if isinstance(items, Tensor) or any(not isinstance(s, str) for s in items):
                raise SeqlabError("this is a text classifier: give it sentences (strings)")
            blank = [i for i, s in enumerate(items) if not s.strip()]  # type: ignore[union-attr]
            if blank:
                raise SeqlabError(
                    f"sentence {blank[0]} (of {len(items)}) is blank: there is nothing to "
                    f"classify in it ({len(blank)} blank in all); leave blank sentences out"
                )
            assert self.tokenizer is not None
            limit = self.cfg.data.max_len
            cut = sum(len(self.tokenizer.tokenize(s)) > limit for s in items)  # type: ignore[arg-type]
            if cut:
                warnings.warn(
                    f"truncated {cut} of {len(items)} input sentences to data.max_len={limit} "
                    "tokens (the model reads no more)",
                    stacklevel=3,
                )
            inputs = [self.token_ids(s) for s in items]  # type: ignore[arg-type]
        if not len(inputs):
            return torch.zeros(0, len(self.labels))
        batches = ClassificationBatches(
            inputs, [0] * len(inputs), batch_size, shuffle=False, bucket=False
        )
        return torch.cat([self._batch_probs(b) for b in batches])

    def classify(
        self, items: Sequence[str] | Sequence[Path] | str | Path | Tensor, batch_size: int = 256
    ) -> Any:
        """The most probable label of each sentence or image, with its probability: a list of
        ``(label, probability)``, or one pair for one sentence or image file (a string or path).
        Blank sentences are refused, long ones cut with a warning (see :meth:`probabilities`)."""
        single = isinstance(items, str | Path)
        probs = self.probabilities(items, batch_size)
        if single:
            probs = probs[None]  # (1, C)
        best = probs.argmax(-1)
        found = [(self.labels[int(i)], float(p[i])) for i, p in zip(best, probs, strict=True)]
        return found[0] if single else found

    def score(
        self, items: Sequence[str] | Tensor, labels: Sequence[str] | Tensor
    ) -> dict[str, Any]:
        """Accuracy, macro-F1 and confusion matrix of the predictions against ``labels`` (names,
        or ids for images), at least one. An unknown label name is an error."""
        if isinstance(items, str) or isinstance(labels, str):
            raise SeqlabError("score takes a list of examples and a list of labels, not a string")
        if not len(items) and not len(labels):
            raise SeqlabError("nothing to score: 0 examples and 0 labels")
        if len(items) != len(labels):
            raise SeqlabError(f"{len(items)} examples but {len(labels)} labels")
        gold = (
            labels.long()
            if isinstance(labels, Tensor)
            else torch.tensor(label_ids(labels, self.labels, "evaluation data"))
        )
        pred = self.probabilities(items).argmax(-1)
        return {**classification_metrics(pred, gold, len(self.labels)), "labels": self.labels}

    def evaluate_split(self, split: str | None = None) -> dict[str, Any]:
        """Scores on a split of the configured dataset (default: its evaluation split)."""
        split = split or EVAL_SPLIT[self.cfg.data.dataset] or "val"
        if self.images:
            splits = image_splits(self.cfg)
            if split not in splits:
                raise SeqlabError(f"mnist has no {split!r} split; choose from {', '.join(splits)}")
            x, y = splits[split]
            return {"split": split, **self.score(x, y)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)  # reported when the run was trained
            texts = text_splits(self.cfg)
        if split not in texts:
            raise SeqlabError(
                f"{self.cfg.data.dataset} has no {split!r} split; choose from {', '.join(texts)}"
            )
        examples = texts[split]
        return {
            "split": split,
            **self.score([t for t, _ in examples], [lab for _, lab in examples]),
        }

    @torch.no_grad()
    def attention(self, item: str | Path | Tensor) -> tuple[list[str], list[Tensor]]:
        """Self-attention of one sentence or image: the token (or patch) names and each layer's
        weights ``(h, T, T)``. Only Transformer models have it."""
        if not hasattr(self.model, "attention"):
            raise SeqlabError(
                f"model.arch={self.cfg.model.arch} has no self-attention to draw; the "
                "transformer_classifier and vit models do"
            )
        device = next(self.model.parameters()).device
        if self.images:
            x = item if isinstance(item, Tensor) else self.read_images([item])[0]  # type: ignore[list-item]
            weights = self.model.attention(self.normalise(x[None]).to(device))
            n = weights[0].shape[-1] - 1
            names = ["[CLS]"] + [f"p{i}" for i in range(n)]
        else:
            if not isinstance(item, str):
                raise SeqlabError("this is a text classifier: give it a sentence")
            ids = self.token_ids(item)
            weights = self.model.attention(
                torch.tensor([ids], device=device), torch.tensor([len(ids)], device=device)
            )
            names = self.tokens(item)
            if getattr(self.model, "pooling", None) == "cls":
                names = ["[CLS]", *names]
        return names, [w[0].float().cpu() for w in weights]


# ------------------------------------------------------------------------------- training
def _loss(label_smoothing: float):
    def loss_fn(model: nn.Module, batch: ClassBatch, state: Any) -> LossOutput:
        logits = model(batch.inputs, batch.lengths)  # (B, C)
        loss = F.cross_entropy(logits.float(), batch.labels, label_smoothing=label_smoothing)
        return LossOutput(loss, len(batch.labels), None)

    return loss_fn


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Examples, labels, vocabulary (the run's own when resuming), batches and the model."""
    d = cfg.data
    vocab: Vocab | None = None
    tokenizer: Tokenizer | None = None
    if is_image_task(cfg):
        splits = image_splits(cfg)
        x_train, y_train = splits["train"]
        x_val, y_val = splits["val"]
        if run_dir is not None:
            classes = Classes.load(Path(run_dir) / "classes.json")
        else:
            classes = Classes(
                list(MNIST_LABELS),
                {
                    "size": x_train.shape[-1],
                    "channels": x_train.shape[1],
                    "mean": float(x_train.mean()),
                    "std": float(x_train.std()),
                },
            )
        stats = classes.image
        assert stats is not None
        train_x = (x_train - stats["mean"]) / stats["std"]
        val_x = (x_val - stats["mean"]) / stats["std"]
        train_inputs: Any = train_x
        val_inputs: Any = val_x
        train_labels, val_labels = y_train.tolist(), y_val.tolist()
    else:
        texts = text_splits(cfg)
        if run_dir is not None:
            classes = Classes.load(Path(run_dir) / "classes.json")
            vocab = Vocab.load(Path(run_dir) / "vocab.json")
            tokenizer = load_tokenizer(run_dir)
        else:
            classes = Classes(label_set(texts["train"], known_labels(cfg)))
            tokenizer = make_tokenizer(d.tokenizer, d.normalize)
            vocab = Vocab(
                [tokenizer.tokenize(t) for t, _ in texts["train"]], d.min_freq, d.max_vocab
            )
        where = d.path or d.dataset

        def encode(examples: Examples) -> list[list[int]]:
            assert vocab is not None and tokenizer is not None
            return [(vocab[tokenizer.tokenize(t)][: d.max_len] or [UNK]) for t, _ in examples]

        train_inputs, val_inputs = encode(texts["train"]), encode(texts["val"])
        train_labels = label_ids([lab for _, lab in texts["train"]], classes.labels, where)
        val_labels = label_ids([lab for _, lab in texts["val"]], classes.labels, f"{where} (val)")
    batches = ClassificationBatches(
        train_inputs, train_labels, d.batch_size, shuffle=True, seed=cfg.train.seed
    )
    val_batches = ClassificationBatches(
        val_inputs, val_labels, max(d.batch_size, 256), shuffle=False
    )
    num_classes = len(classes.labels)
    torch.manual_seed(cfg.train.seed)
    model = build_model(
        cfg.model, vocab_size=len(vocab) if vocab else None, num_classes=num_classes
    )
    loss_fn = _loss(cfg.train.label_smoothing)

    @torch.no_grad()
    def evaluate(m: nn.Module) -> dict[str, float]:
        device = next(m.parameters()).device
        total, preds, golds = 0.0, [], []
        for batch in progress(val_batches, "validating", unit="batch"):
            batch = batch.to(device)
            logits = m(batch.inputs, batch.lengths).float()  # (B, C)
            total += F.cross_entropy(logits, batch.labels, reduction="sum").item()
            preds.append(logits.argmax(-1).cpu())
            golds.append(batch.labels.cpu())
        scores = classification_metrics(torch.cat(preds), torch.cat(golds), num_classes)
        return {
            "val_loss": total / max(len(val_labels), 1),
            "val_acc": scores["accuracy"],
            "val_f1": scores["macro_f1"],
        }

    def save_artefacts(directory: Path) -> None:
        classes.save(Path(directory) / "classes.json")
        if vocab is not None and tokenizer is not None:
            vocab.save(Path(directory) / "vocab.json")
            save_tokenizer(tokenizer, directory)

    meta: dict[str, Any] = {"num_classes": num_classes}
    if vocab is not None:
        meta["vocab_size"] = len(vocab)
    return Experiment(
        model=model,
        train_batches=batches,
        loss_fn=loss_fn,
        evaluate=evaluate,
        select=Selection("val_acc", "max"),
        save_artefacts=save_artefacts,
        predictor=Classifier(model, cfg, classes, vocab, tokenizer),
        meta=meta,
        unit="ex",
        perplexity=False,
    )


def load(run: Run) -> Classifier:
    """The trained classifier of ``run`` (its classes, vocabulary, tokenizer and checkpoint)."""
    classes = Classes.load(run.file("classes.json"))
    run.check_size("num_classes", len(classes.labels))
    vocab = tokenizer = None
    if not is_image_task(run.cfg):
        vocab = Vocab.load(run.file("vocab.json"))
        run.file("tokenizer.json")
        tokenizer = load_tokenizer(run.run_dir)
        run.check_size("vocab_size", len(vocab))
    model = build_model(
        run.cfg.model, vocab_size=len(vocab) if vocab else None, num_classes=len(classes.labels)
    )
    return Classifier(load_weights(model, run), run.cfg, classes, vocab, tokenizer, run)
