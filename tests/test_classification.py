"""Classification (issue 13): the models' padding invariance, ViT's patch embedding and size
presets, the metrics, readers and their bad-input messages, and a trained run used from a copied
run directory with no data present."""

import gzip
import os
import shutil
import warnings

import numpy as np
import pytest
import torch

import seqlab
from cli_checks import fails, succeeds
from conftest import png_claiming, run_offline
from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab import load
from seqlab.config import (
    CNNTextConfig,
    RNNClassifierConfig,
    TransformerClassifierConfig,
    ViTConfig,
    config_from_dict,
)
from seqlab.data.classification import (
    ClassificationBatches,
    label_ids,
    read_labelled_csv,
    read_labelled_tsv,
    read_user_file,
)
from seqlab.data.images import ImageTooLarge, load_image, read_idx
from seqlab.data.parallel import DataWarning
from seqlab.errors import ConfigError, DataError, SeqlabError
from seqlab.experiment import train
from seqlab.models import build_model
from seqlab.models.vit import PatchEmbedding, VisionTransformer, attention_rollout, patchify
from seqlab.nn.pooling import masked_max, masked_mean
from seqlab.tasks.classification import classification_metrics
from seqlab.tokens import PAD

V, C = 40, 3
TEXT_MODELS = {
    "transformer-mean": TransformerClassifierConfig(d_model=16, num_heads=2, d_ff=32, num_layers=2),
    "transformer-cls": TransformerClassifierConfig(
        d_model=16, num_heads=2, d_ff=32, num_layers=2, pooling="cls", norm="post"
    ),
    "transformer-max": TransformerClassifierConfig(
        d_model=16, num_heads=2, d_ff=32, num_layers=2, pooling="max", positions="sinusoidal"
    ),
    "bilstm-max": RNNClassifierConfig(embed_dim=8, hidden_size=12, pooling="max"),
    "bigru-last": RNNClassifierConfig(cell="gru", embed_dim=8, hidden_size=12, pooling="last"),
    "lstm-mean-2layer": RNNClassifierConfig(
        embed_dim=8, hidden_size=12, pooling="mean", bidirectional=False, num_layers=2
    ),
    "cnn": CNNTextConfig(embed_dim=8, channels=6),
}


@pytest.mark.parametrize("name", list(TEXT_MODELS))
@pytest.mark.parametrize("precision", PRECISIONS)
def test_padding_does_not_change_a_sentences_logits(name, precision):
    model = build_model(TEXT_MODELS[name], vocab_size=V, num_classes=C).eval()
    sentences = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15], [4], [20, 21]]
    width = max(map(len, sentences)) + 3
    batch = torch.full((len(sentences), width), PAD)
    for i, s in enumerate(sentences):
        batch[i, : len(s)] = torch.tensor(s)
    with computing_in(precision):
        alone = torch.cat([model(torch.tensor([s]), torch.tensor([len(s)])) for s in sentences])
        together = model(batch, torch.tensor([len(s) for s in sentences]))
    assert together.shape == (len(sentences), C)
    assert_close_in(precision, together, alone, atol=1e-5, rtol=1e-5)


def test_patch_embedding_is_a_linear_map_of_flattened_patches():
    embed = PatchEmbedding(channels=3, d_model=10, patch=4)
    images = torch.randn(2, 3, 12, 8)
    patches = patchify(images, 4)  # (B, N, C·P·P)
    assert patches.shape == (2, 6, 48)
    weight = embed.proj.weight.reshape(10, -1)  # (d, C·P·P), same (channel, row, col) order
    torch.testing.assert_close(
        embed(images), patches @ weight.T + embed.proj.bias, atol=1e-5, rtol=1e-5
    )
    # the second patch of the first row really is pixels [0:4, 4:8]
    torch.testing.assert_close(patches[0, 1], images[0, :, 0:4, 4:8].reshape(-1))


@pytest.mark.parametrize("preset,millions", [("base", 86), ("large", 307), ("huge", 632)])
def test_vit_presets_match_the_papers_parameter_counts(preset, millions):
    cfg = ViTConfig(preset=preset, image_size=224, patch_size=16, channels=3)
    with torch.device("meta"):  # no memory for the weights
        model = VisionTransformer(1000, cfg)
    count = sum(p.numel() for p in model.parameters())
    assert abs(count / 1e6 - millions) / millions < 0.01, count


def test_vit_preset_keys_can_be_overridden_and_shapes_are_checked():
    cfg = ViTConfig(preset="tiny", d_model=32, num_heads=2)
    assert (cfg.d_model, cfg.num_layers, cfg.num_heads) == (32, 6, 2)
    with pytest.raises(ValueError, match="num_layers is needed"):
        ViTConfig(d_model=32, d_ff=64, num_heads=2)
    with pytest.raises(ValueError, match="not a multiple of patch_size"):
        ViTConfig(preset="tiny", image_size=28, patch_size=5)
    model = VisionTransformer(10, ViTConfig(preset="tiny", num_layers=2))
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 1, 28, 28\)"):
        model(torch.zeros(2, 3, 28, 28))


def test_attention_rollout_rows_and_a_uniform_case():
    t = 5
    uniform = [torch.full((1, 2, t, t), 1.0 / t) for _ in range(3)]
    share = attention_rollout(uniform)
    assert share.shape == (1, t - 1)
    # each layer is A = (U + I) / 2 with U uniform; U² = U, so A³ = (1 - 1/8) U + I / 8
    torch.testing.assert_close(share, torch.full((1, t - 1), (1 - 1 / 8) / t))


def test_metrics_against_hand_computed_values():
    gold = torch.tensor([0, 0, 0, 1, 1, 2])
    pred = torch.tensor([0, 0, 1, 1, 2, 2])
    m = classification_metrics(pred, gold, 3)
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["confusion"] == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    f1 = [2 * 1 * (2 / 3) / (1 + 2 / 3), 0.5, 2 * 0.5 * 1 / 1.5]  # per class P/R by hand
    assert m["macro_f1"] == pytest.approx(sum(f1) / 3)
    assert m["uar"] == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)  # recalls by hand
    # a class never gold is not averaged into the UAR (it is into macro-F1, once predicted)
    m = classification_metrics(torch.tensor([0, 2]), torch.tensor([0, 0]), 3)
    assert m["uar"] == pytest.approx(1 / 2)


def test_batches_are_a_pure_function_of_seed_and_epoch_and_cover_everything():
    inputs = [[4] * (1 + i % 7) for i in range(50)]
    b = ClassificationBatches(inputs, list(range(50)), 8, seed=3)
    b.set_epoch(2)
    first = [x.labels.tolist() for x in b]
    b.set_epoch(2)
    assert [x.labels.tolist() for x in b] == first
    assert sorted(sum(first, [])) == list(range(50))
    b.set_epoch(3)
    assert [x.labels.tolist() for x in b] != first


# --------------------------------------------------------------------------- readers, errors
def test_tsv_reader_skips_malformed_rows_with_one_counted_warning(tmp_path):
    path = tmp_path / "data.tsv"
    path.write_text("text\tlabel\ngood film\tpos\nno tab here\nbad\tneg\textra\n\tneg\nfine\tneg\n")
    with pytest.warns(DataWarning, match=r"skipped 3 malformed line\(s\); first at .*data.tsv:3"):
        rows = read_labelled_tsv(path)
    assert rows == [("good film", "pos"), ("fine", "neg")]


def test_csv_reader_by_header_names_and_a_missing_column(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('id,review,stars\n1,"great, really",5\n2,meh,2\n3\n')
    with pytest.warns(DataWarning, match=r"data.csv:4"):
        rows = read_user_file(path, "review", "stars")
    assert rows == [("great, really", "5"), ("meh", "2")]
    with pytest.raises(DataError, match=r"data.csv:1: the header has no column 'text'.*'review'"):
        read_labelled_csv(path, "text", "stars")


def test_headerless_csv_by_column_numbers_joins_text_columns(tmp_path):
    path = tmp_path / "news.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write('"3","Title one","Body one."\n"1","Title two","Body two."\n')
    assert read_labelled_csv(path, (1, 2), 0) == [
        ("Title one Body one.", "3"),
        ("Title two Body two.", "1"),
    ]


def test_unknown_label_at_evaluation_is_named():
    with pytest.raises(DataError, match=r"evaluation data: label 'maybe' is not one the model"):
        label_ids(["pos", "maybe"], ["neg", "pos"], "evaluation data")


def test_idx_reader_and_its_errors(tmp_path):
    data = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    good = tmp_path / "x.idx"
    good.write_bytes(b"\0\0\x08\x03" + np.array([2, 3, 4], ">u4").tobytes() + data.tobytes())
    np.testing.assert_array_equal(read_idx(good), data)
    short = tmp_path / "short.idx"
    short.write_bytes(good.read_bytes()[:-1])
    with pytest.raises(DataError, match=r"promises 24 values \(2, 3, 4\), the file holds 23"):
        read_idx(short)
    foreign = tmp_path / "foreign.idx"
    foreign.write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(DataError, match="not an IDX file"):
        read_idx(foreign)


def test_images_are_converted_with_a_note_and_non_images_refused(tmp_path):
    from PIL import Image

    path = tmp_path / "digit.png"
    Image.new("RGB", (40, 30), "white").save(path)
    x, note = load_image(path, 28, 1)
    assert x.shape == (1, 28, 28)
    assert "RGB → L" in note and "40×30 → 28×28" in note and "inverted" in note
    assert float(x.max()) == 0.0  # white background inverted to black
    text = tmp_path / "notes.png"
    text.write_text("not a picture")
    with pytest.raises(DataError, match="notes.png: not an image file"):
        load_image(text, 28, 1)


def test_an_image_over_the_pixel_limit_is_refused_from_its_header(tmp_path, tiny_runs):
    from PIL import Image

    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_claiming(20000, 20000))  # PIL itself refuses to open it
    with pytest.raises(ImageTooLarge, match=r"bomb.png: the image is 400,000,000 pixels, over"):
        load_image(bomb, 28, 1)
    wide = tmp_path / "wide.png"
    wide.write_bytes(png_claiming(300, 200))
    with pytest.raises(ImageTooLarge, match=r"wide.png: the image is 300×200 = 60,000 pixels"):
        load_image(wide, 28, 1, max_pixels=59_999)
    small = tmp_path / "small.png"
    Image.new("L", (300, 200)).save(small)
    assert load_image(small, 28, 1, max_pixels=60_000)[0].shape == (1, 28, 28)
    classifier = seqlab.load(tiny_runs["vit"])  # the Python API reads images the same way
    with pytest.raises(SeqlabError, match=r"bomb.png: the image is 400,000,000 pixels"):
        classifier.classify([small, bomb])


def test_config_rules_for_classification():
    with pytest.raises(ConfigError, match="data.dataset=mnist is an image dataset, but"):
        config_from_dict({"data": {"dataset": "mnist"}, "model": {"arch": "cnn_text"}})
    with pytest.raises(ConfigError, match="data.dataset=sst2 is a text dataset"):
        config_from_dict({"data": {"dataset": "sst2"}, "model": {"arch": "vit", "preset": "tiny"}})
    with pytest.raises(ConfigError, match="data.path is required"):
        config_from_dict(
            {"data": {"dataset": "text-classification"}, "model": {"arch": "cnn_text"}}
        )
    with pytest.raises(ConfigError, match="is a classification dataset"):
        config_from_dict({"data": {"dataset": "sst2"}, "model": {"arch": "rnn_lm"}})


# -------------------------------------------------------------------- a trained run, portable
POS = ["a great film", "truly wonderful acting", "great fun", "a wonderful story", "loved it"]
NEG = ["a dull film", "truly awful acting", "boring mess", "an awful story", "hated it"]


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cls")
    data = root / "reviews.tsv"
    rows = [f"{s}\tpos" for s in POS] + [f"{s}\tneg" for s in NEG]
    data.write_text("\n".join(rows * 4) + "\n")
    cfg = config_from_dict(
        {
            "data": {
                "dataset": "text-classification",
                "path": str(data),
                "tokenizer": "word",
                "normalize": "none",
                "batch_size": 8,
            },
            "model": {
                "arch": "transformer_classifier",
                "d_model": 16,
                "num_heads": 2,
                "d_ff": 32,
                "num_layers": 1,
                "dropout": 0.0,
            },
            "train": {"max_steps": 30, "eval_every": 30, "lr": 0.01, "threads": 1},
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(cfg, root / "run")
    data.unlink()  # the training data is gone
    moved = tmp_path_factory.mktemp("copied") / "run"
    shutil.copytree(root / "run", moved)
    return moved


def run_cli(args, empty, stdin=""):
    return run_offline(args, empty, stdin=stdin)


def test_classify_from_a_copied_run_without_data(text_run, tmp_path):
    out = run_cli(
        ["classify", "--run", str(text_run), "--attention-png", str(tmp_path / "maps")],
        tmp_path,
        stdin="a great story\nan awful film\n",
    )
    assert out.returncode == 0, out.stderr
    lines = [line.split("\t") for line in out.stdout.splitlines()]
    assert [row[0] for row in lines] == ["pos", "neg"]
    assert all(0.5 < float(row[1]) <= 1.0 for row in lines)
    assert sorted(p.name for p in (tmp_path / "maps").glob("*.png")) == [
        "attention-0001-layer0.png",
        "attention-0002-layer0.png",
    ]


def test_evaluate_own_files_and_their_errors(text_run, tmp_path):
    import seqlab

    model = seqlab.load(text_run)
    src, labels = tmp_path / "s.txt", tmp_path / "l.txt"
    src.write_text("a great story\nan awful film\n")
    labels.write_text("pos\nneg\n")
    out = run_cli(
        [
            "evaluate",
            "--run",
            str(text_run),
            "--src",
            str(src),
            "--labels",
            str(labels),
            "--png",
            str(tmp_path / "c.png"),
            "--json",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert '"accuracy": 1.0' in out.stdout and (tmp_path / "c.png").is_file()
    labels.write_text("pos\nunsure\n")
    out = run_cli(
        ["evaluate", "--run", str(text_run), "--src", str(src), "--labels", str(labels)],
        tmp_path,
    )
    assert (
        out.returncode == 2 and "label 'unsure' is not one the model was trained on" in out.stderr
    )
    labels.write_text("pos\n")
    out = run_cli(
        ["evaluate", "--run", str(text_run), "--src", str(src), "--labels", str(labels)],
        tmp_path,
    )
    assert out.returncode == 2 and "has 2 lines but --labels" in out.stderr
    with pytest.raises(SeqlabError, match="text classifier: give it sentences"):
        model.classify(torch.zeros(1, 1, 28, 28))
    with pytest.raises(SeqlabError, match="has no 'translate'"):
        model.translate(["x"])
    probs = model.probabilities(["a great story", "an awful film", "loved it"])
    torch.testing.assert_close(probs.sum(-1), torch.ones(3))


def test_mnist_vit_trains_and_classifies_a_png(tmp_path):
    """Real MNIST when a local copy exists: a few steps, then a PNG classified from the run."""
    if not os.environ.get("SEQLAB_DATA_DIR"):
        pytest.skip("SEQLAB_DATA_DIR is not set: no local copy of MNIST")
    from PIL import Image

    cfg = config_from_dict(
        {
            "data": {"dataset": "mnist", "batch_size": 32, "num_examples": 256, "val_examples": 64},
            "model": {"arch": "vit", "preset": "tiny", "num_layers": 1, "patch_size": 7},
            "train": {"max_steps": 3, "eval_every": 3, "threads": 1},
        }
    )
    train(cfg, tmp_path / "vit")
    png = tmp_path / "seven.png"
    Image.new("L", (28, 28), 0).save(png)
    out = run_cli(["classify", "--run", str(tmp_path / "vit"), str(png)], tmp_path)
    assert out.returncode == 0, out.stderr
    label, prob, name = out.stdout.strip().split("\t")
    assert label in "0123456789" and 0.0 < float(prob) <= 1.0 and name == str(png)


def test_sst2_validation_holds_out_whole_sentences_and_their_phrases():
    from seqlab.data.classification import sentence_holdout

    sentences = [
        "the film is a quiet and moving portrait of grief",
        "an utterly tedious mess that never finds its story",
        "a bright funny and warm comedy for everyone here",
        "slow dull and far too long for its own good",
    ]
    examples = [(s, "pos") for s in sentences]
    for s in sentences:  # the phrases of each sentence, as SST-2 lists them
        w = s.split()
        examples += [(" ".join(w[:3]), "pos"), (" ".join(w[2:]), "pos"), (w[-1], "pos")]
    examples.append(("a quiet and moving portrait of grief", "pos"))  # a span, not a sentence
    train, val, dropped = sentence_holdout(examples, 2, seed=0)
    held = {examples[i][0] for i in val}
    assert held <= set(sentences) and len(held) == 2  # only whole sentences are held out
    for i in train:  # nothing in training is a piece of a held-out sentence
        assert not any(f" {examples[i][0]} " in f" {s} " for s in held)
    assert dropped == len(examples) - len(train) - 2 and dropped >= 6
    with pytest.raises(DataError, match="cannot hold out data.val_examples=9 sentences from 4"):
        sentence_holdout(examples, 9, seed=0)


def test_inner_spans_are_every_text_inside_a_longer_one():
    """The indexed search finds what listing every span of every text finds."""
    import random

    from seqlab.data.classification import _spans, inner_spans

    rng = random.Random(0)
    texts = [[rng.choice("abc") for _ in range(rng.randint(3, 12))] for _ in range(150)]
    texts += [t[a:b] for t in texts[:60] for a, b in [sorted(rng.sample(range(len(t) + 1), 2))]]
    texts += [list(texts[0])]  # a duplicate is no span of itself
    brute = {span for t in texts for span in _spans(t, 3) if span.count(" ") + 1 < len(t)} & {
        " ".join(t) for t in texts
    }
    found = inner_spans([t for t in texts if len(t) >= 3], 3)
    assert found == brute and 0 < len(found) < len(texts)


def test_sst2_sentences_are_found_once_per_corpus_and_each_caller_gets_its_own_lists(
    monkeypatch,
):
    from seqlab.data import classification

    calls = []
    spans = classification.inner_spans
    monkeypatch.setattr(classification, "inner_spans", lambda *a: calls.append(1) or spans(*a))
    classification._sentence_holdout.cache_clear()
    sentences = ["a quiet film of grief and of hope", "a warm and funny comedy for us all"]
    examples = [
        (" ".join(s.split()[i : i + n]), "pos")
        for s in sentences
        for n in (6, 8, 9)
        for i in range(2)
    ]
    first = classification.sentence_holdout(examples, 1, seed=0)
    first[0].clear()
    again = classification.sentence_holdout([list(e) for e in examples], 1, seed=0)
    assert again[0] and again[1:] == first[1:] and len(calls) == 1
    classification.sentence_holdout(examples[:-1], 1, seed=0)  # another corpus: found anew
    assert len(calls) == 2


def test_masked_pooling_matches_pooling_each_sentence_alone():
    x = torch.randn(3, 5, 4)  # (B, T, d)
    lengths = torch.tensor([5, 2, 1])
    for i, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(masked_mean(x, lengths)[i], x[i, :n].mean(0))
        torch.testing.assert_close(masked_max(x, lengths)[i], x[i, :n].amax(0))


def test_unknown_words_are_named_on_the_api_the_command_line_and_in_evaluate(
    tiny_runs, tmp_path, monkeypatch, capsys
):
    """Words the vocabulary lacks are read as <unk>, never silently: the API names the
    sentence (its index), ``classify`` the input line (blank lines skipped still count),
    ``evaluate --src`` FILE:LINE, the attention of one sentence "the sentence"."""
    import io

    from seqlab.cli import main
    from seqlab.data.vocab import UnknownTokenWarning

    run = tiny_runs["cls"]
    capsys.readouterr()  # the run's training, if it happened now
    classifier = seqlab.load(run)
    told = "2 tokens not in the model's vocabulary, read as <unk>: 'superb'"
    stdin, src, labels = (tmp_path / name for name in ("in.txt", "src.txt", "labels.txt"))
    stdin.write_text("great fun\n\na superb superb film\nzzz zzz\n")
    src.write_text("great fun\na superb superb film\n")
    labels.write_text("pos\npos\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        classifier.classify(["great fun", "a superb superb film"])
        classifier.attention("a superb superb film")
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.read_bytes())))
        assert main(["classify", "--run", str(run)]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 3
        assert (
            main(["evaluate", "--run", str(run), "--src", str(src), "--labels", str(labels)]) == 0
        )
    unknown = [str(w.message) for w in caught if w.category is UnknownTokenWarning]
    assert unknown == [
        f"sentence 1: {told}",
        f"the sentence: {told}",
        f"input line 3: {told}",
        f"input line 4: {told.replace('superb', 'zzz')}",
        "1 of 3 sentences hold no token the model knows (all <unk>; the first is input line 4): "
        "their labels come from nothing they say",
        f"{src}:2: {told}",
    ]


def test_layer_without_attention_png_and_unknown_sentences_are_reported(tiny_runs):
    model = load(tiny_runs["cls"])  # a text classifier
    with pytest.raises(SeqlabError, match="--layer picks the layer that --attention-png draws"):
        model.check("classify", {"layer": 0, "attention_png": None})
    model.check("classify", {"layer": -1, "attention_png": None})  # the default: fine
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.classify(["zzzqqq xxyyzz"])
    assert any("hold no token the model knows" in str(w.message) for w in caught)


def test_classify_skips_blank_lines_with_a_warning(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("a great film\n\n   \nan awful film\n")
    with pytest.warns(UserWarning, match=r"skipped 2 blank line\(s\) of .*in.txt \(lines 2, 3\)"):
        out = succeeds(capsys, ["classify", "--run", runs / "cls", "--input", src]).out
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[2] for r in rows] == ["a great film", "an awful film"]
    cls = load(runs / "cls")
    with pytest.raises(SeqlabError, match="sentence 1 .* is blank"):
        cls.classify(["a great film", " "])
    labels = tmp_path / "labels.txt"
    labels.write_text("pos\nneg\nneg\nneg\n")
    fails(
        capsys,
        ["evaluate", "--run", runs / "cls", "--src", src, "--labels", labels],
        "blank",
    )


def test_classify_warns_when_it_cuts_a_long_line(runs, tmp_path, capsys):
    long = "a great film " * 10  # 30 tokens, data.max_len is 8
    src = tmp_path / "in.txt"
    src.write_text(f"{long}\na great film\n")
    with pytest.warns(UserWarning, match="truncated 1 of 2 input sentences to data.max_len=8"):
        succeeds(capsys, ["classify", "--run", runs / "cls", "--input", src])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # short lines: no warning
        load(runs / "cls").classify(["a great film"])
