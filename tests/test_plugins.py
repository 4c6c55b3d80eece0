"""One source for each list (seqlab.catalog): an architecture, a dataset and a recurrent cell
defined in this file alone, registered with one line each, work through the ordinary command line
and Python API: trained, evaluated, used and loaded, with the configs, errors and listings
derived from their records."""

from __future__ import annotations

import json
import random
from typing import Any, ClassVar, Literal

import pytest
import torch
import yaml
from torch import Tensor, nn

import seqlab
from seqlab import catalog
from seqlab.catalog import CellSpec, DatasetSpec, ModelSpec, Sizes
from seqlab.cli import main
from seqlab.config import ModelConfigBase, Positive, config_from_dict
from seqlab.errors import ConfigError
from seqlab.nn.cells import RNNCell
from seqlab.nn.rnn import RNN
from seqlab.tokens import PAD


# ------------------------------------------------------- a new architecture: config + model
class ToyBagConfig(ModelConfigBase):
    """Mean of the word embeddings, then a linear layer: a bag-of-words text classifier."""

    arch: Literal["toy_bag"] = "toy_bag"
    task: ClassVar[str] = "classification"
    embed_dim: Positive = 8


class ToyBag(nn.Module):
    def __init__(self, vocab_size: int, num_classes: int, cfg: ToyBagConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, cfg.embed_dim, padding_idx=PAD)
        self.head = nn.Linear(cfg.embed_dim, num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """tokens (B, T), lengths (B,) → logits (B, C)."""
        x = self.embed(tokens).sum(1) / lengths[:, None]  # (B, d); padding embeds to 0
        return self.head(x)  # (B, C)


def build_toy_bag(cfg: ToyBagConfig, sizes: Sizes) -> ToyBag:
    return ToyBag(sizes.need("vocab_size"), sizes.need("num_classes"), cfg)


# ------------------------------------------------------------------------- a new dataset
GOOD, BAD = ["good", "great", "fun", "lovely"], ["bad", "dull", "awful", "boring"]
FILLER = ["the", "film", "was", "a", "plot", "and", "really"]


def toy_sentiment(data: Any, seed: int) -> dict[str, list[tuple[str, str]]]:
    """Sentences of filler words and one kind of sentiment word, labelled by that kind."""
    rng = random.Random(seed)

    def example() -> tuple[str, str]:
        label = rng.choice(["neg", "pos"])
        words = rng.choices(FILLER, k=4) + rng.choices(GOOD if label == "pos" else BAD, k=2)
        rng.shuffle(words)
        return " ".join(words), label

    return {
        split: [example() for _ in range(n)]
        for split, n in (("train", 240), ("val", 40), ("test", 60))
    }


TOY_MODEL = ModelSpec(ToyBagConfig, build_toy_bag)
TOY_DATA = DatasetSpec(
    "toy-sentiment",
    "classification",
    toy_sentiment,
    labels=("neg", "pos"),
    eval_split="test",
    summary="generated sentences, good or bad words (tests/test_plugins.py)",
)
RAW = {
    "data": {"dataset": "toy-sentiment", "tokenizer": "word", "batch_size": 16},
    "model": {"arch": "toy_bag", "embed_dim": 8},
    "train": {"epochs": 6, "lr": 0.05, "threads": 1, "log_every": 5, "precision": "fp32"},
}


@pytest.fixture
def toys():
    with catalog.registered(TOY_MODEL, TOY_DATA):  # the registration lines
        yield


def test_a_model_and_dataset_from_this_file_train_evaluate_classify_and_load(
    toys, tmp_path, capsys
):
    config, run = tmp_path / "toy.yaml", tmp_path / "run"
    config.write_text(yaml.safe_dump(RAW))
    assert main(["train", str(config), "--out", str(run)]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["model"] == {"arch": "toy_bag", "embed_dim": 8}  # the arch's own fields
    assert saved["data"]["dataset"] == "toy-sentiment"
    capsys.readouterr()

    assert main(["evaluate", "--run", str(run), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["split"] == "test"  # the record's evaluation split
    assert scores["accuracy"] >= 0.95 and scores["labels"] == ["neg", "pos"]

    sentences = tmp_path / "in.txt"
    sentences.write_text("the film was great fun\na dull and boring plot\n")
    assert main(["classify", "--run", str(run), "--input", str(sentences)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [row[0] for row in rows] == ["pos", "neg"]

    model = seqlab.load(run)
    assert isinstance(model.model, ToyBag)
    assert [label for label, _ in model.classify(["lovely", "awful"])] == ["pos", "neg"]


def test_the_lists_derive_from_the_records(toys, capsys):
    cfg = config_from_dict({"data": {"dataset": "toy-sentiment"}, "model": {"arch": "toy_bag"}})
    assert isinstance(cfg.model, ToyBagConfig) and cfg.task == "classification"
    with pytest.raises(
        ConfigError, match=r"model\.vocab: unknown key.*allowed keys here: arch, embed_dim"
    ):
        config_from_dict(
            {"data": {"dataset": "toy-sentiment"}, "model": {"arch": "toy_bag", "vocab": 3}}
        )
    with pytest.raises(ConfigError, match="toy-sentiment is a classification dataset"):
        config_from_dict({"data": {"dataset": "toy-sentiment"}, "model": {"arch": "rnn_lm"}})
    with pytest.raises(ConfigError, match="toy-sentiment is a text dataset, but model.arch=vit"):
        config_from_dict(
            {"data": {"dataset": "toy-sentiment"}, "model": {"arch": "vit", "preset": "tiny"}}
        )
    with pytest.raises(ConfigError, match="'toy_bag'"):  # listed among the choices
        config_from_dict({"model": {"arch": "toy_bagg"}})
    assert main(["data", "list"]) == 0
    listing = capsys.readouterr().out
    assert "toy-sentiment" in listing and TOY_DATA.summary in listing


def test_records_are_refused_twice_and_gone_after_the_block():
    twice = pytest.raises(ValueError, match="'toy_bag' is registered already")
    with catalog.registered(TOY_MODEL), twice:
        catalog.register_model(ModelSpec(ToyBagConfig, build_toy_bag))
    with pytest.raises(ValueError, match="'transformer' is registered already"):
        catalog.register_model(ModelSpec(catalog.models()["transformer"].config, build_toy_bag))
    assert "toy_bag" not in catalog.models() and "toy-sentiment" not in catalog.datasets()
    with pytest.raises(ConfigError, match="arch 'toy_bag' is not a registered architecture"):
        config_from_dict({"model": {"arch": "toy_bag"}})
    with pytest.raises(
        ConfigError, match=r"data\.dataset: .*'timemachine'.*\(got 'toy-sentiment'\)"
    ):
        config_from_dict({"data": {"dataset": "toy-sentiment"}})


def test_a_registered_cell_is_a_model_cell_choice_and_an_rnn_cell():
    """A cell registered here (a tanh RNN cell without PyTorch's fused layer) is a choice of
    ``model.cell`` with the scratch backend only, and computes what the ``rnn`` cell does."""
    toy = CellSpec("toy_tanh", RNNCell, {"nonlinearity": "tanh"}, why_not_fused="a test cell")
    with catalog.registered(toy):
        raw = {"model": {"arch": "rnn_lm", "cell": "toy_tanh", "backend": "scratch"}}
        assert config_from_dict(raw).model.cell == "toy_tanh"
        with pytest.raises(ConfigError, match=r"toy_tanh has no fused backend \(a test cell\)"):
            config_from_dict({"model": {**raw["model"], "backend": "fused"}})
        ours, reference = RNN("toy_tanh", 3, 5, num_layers=2), RNN("rnn", 3, 5, num_layers=2)
        reference.load_state_dict(ours.state_dict())
        x = torch.randn(2, 4, 3)
        torch.testing.assert_close(ours(x)[0], reference(x)[0])
    with pytest.raises(ValueError, match="unknown cell 'toy_tanh'"):
        RNN("toy_tanh", 3, 5)
