"""Ensembles of translation models: the mean of the members' distributions, decoded by the same
searches (cached = recomputed, batch of 1 = batch of N), and `--ensemble` on the command line."""

import json
import shutil

import pytest
import torch

from conftest import make_encoder_decoder, random_translation_batch
from precision_helpers import PRECISIONS, SCORE_TOL, assert_close_in, computing_in
from seqlab import load
from seqlab.cli import main
from seqlab.errors import SeqlabError
from seqlab.models.ensemble import Ensemble
from seqlab.models.search import beam_search, greedy_search

MEMBERS = ["transformer-post", "bahdanau-2", "transformer-pre"]


def members():
    torch.manual_seed(1)
    return [make_encoder_decoder(name) for name in MEMBERS]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_ensemble_predicts_the_mean_of_its_members_distributions(precision):
    models, batch = members(), random_translation_batch()
    with computing_in(precision):
        probs = [m(batch.src, batch.src_lengths, batch.tgt_in).float().softmax(-1) for m in models]
        ours = Ensemble(models)(batch.src, batch.src_lengths, batch.tgt_in)  # (B, T, V)
    expected = torch.stack(probs).mean(0)  # (B, T, V)
    assert_close_in(precision, ours.exp(), expected, atol=1e-6)
    assert_close_in(precision, ours.exp().sum(-1), torch.ones(ours.shape[:2]), atol=1e-5)


def test_an_ensemble_of_one_model_or_of_copies_decodes_as_the_model():
    model, batch = members()[0], random_translation_batch(b=6)
    src, lengths = batch.src, batch.src_lengths
    alone = beam_search(model, src, lengths, beam_size=3, nbest=3, need_weights=True)
    for ensemble in (Ensemble([model]), Ensemble([model, model, model])):
        together = beam_search(ensemble, src, lengths, beam_size=3, nbest=3, need_weights=True)
        for hyps, hyps_e in zip(alone, together, strict=True):
            assert [h.tokens for h in hyps] == [h.tokens for h in hyps_e]
            for h, he in zip(hyps, hyps_e, strict=True):
                assert he.score == pytest.approx(h.score, abs=1e-5)
                torch.testing.assert_close(he.attention, h.attention, atol=1e-6, rtol=0)
        assert [h.tokens for h in greedy_search(ensemble, src, lengths)] == [
            h.tokens for h in greedy_search(model, src, lengths)
        ]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_ensemble_search_cached_equals_recomputed_and_batch_of_one_equals_batch(precision):
    ensemble, batch = Ensemble(members()), random_translation_batch(b=5, seed=3)
    src, lengths = batch.src, batch.src_lengths
    tol = SCORE_TOL[precision]
    with computing_in(precision):
        cached = beam_search(ensemble, src, lengths, beam_size=3, max_len_a=0, max_len_b=6)
        full = beam_search(
            ensemble, src, lengths, beam_size=3, max_len_a=0, max_len_b=6, use_cache=False
        )
        alone = [
            beam_search(
                ensemble,
                src[i : i + 1, : lengths[i]],
                lengths[i : i + 1],
                beam_size=3,
                max_len_a=0,
                max_len_b=6,
            )[0]
            for i in range(len(lengths))
        ]
    for a, b, c in zip(cached, full, alone, strict=True):
        if precision == "fp32":
            assert a[0].tokens == b[0].tokens == c[0].tokens
        for other in (b, c):
            if other[0].tokens == a[0].tokens:
                assert other[0].score == pytest.approx(a[0].score, abs=tol)


def test_evaluate_with_ensemble_scores_the_runs_together(tiny_runs, capsys):
    mt, bahdanau = tiny_runs["mt"], tiny_runs["bahdanau"]  # the same dates, one vocabulary

    def scores(*extra):
        args = ["evaluate", "--run", str(mt), "--split", "test", "--json", *extra]
        assert main(args) == 0
        return json.loads(capsys.readouterr().out)

    alone, itself = scores(), scores("--ensemble", str(mt))
    assert itself["bleu"] == pytest.approx(alone["bleu"], abs=1e-6)  # p = mean(p, p)
    assert itself["checkpoint"].count(" + ") == 1 and str(mt) in itself["checkpoint"]
    both = scores("--ensemble", str(bahdanau))
    assert str(bahdanau) in both["checkpoint"]
    # the same outputs through the Python API
    joined = load(mt).ensemble_with([load(bahdanau)])
    assert joined.evaluate("test").to_json()["bleu"] == pytest.approx(both["bleu"], abs=1e-9)


def test_ensemble_with_takes_run_directories_and_translators_one_or_a_list(tiny_runs):
    mt, bahdanau = tiny_runs["mt"], tiny_runs["bahdanau"]
    translator = load(mt)
    expected = translator.ensemble_with([load(bahdanau)]).translate("9 may 1998")
    for others in (str(bahdanau), bahdanau, [str(bahdanau)], (bahdanau,), load(bahdanau)):
        joined = translator.ensemble_with(others)
        assert joined.translate("9 may 1998") == expected, others
        assert str(bahdanau) in joined.checkpoint
    for wrong, named in ((3, "int"), ([bahdanau, {"run": 1}], "dict in the list")):
        with pytest.raises(TypeError, match=f"run directories .str or Path. .*got {named}"):
            translator.ensemble_with(wrong)
    with pytest.raises(SeqlabError, match="run directory not found"):
        translator.ensemble_with(str(bahdanau) + "-missing")
    with pytest.raises(SeqlabError, match="translation runs only"):
        translator.ensemble_with(tiny_runs["cls"])
    with pytest.raises(SeqlabError, match="ensemble_with: 2 names for 1 runs"):
        translator.ensemble_with(bahdanau, ["a", "b"])


def test_ensemble_refuses_other_vocabularies_tasks_and_the_ctranslate2_engine(
    tiny_runs, tmp_path, capsys
):
    mt = tiny_runs["mt"]
    other = tmp_path / "other"
    shutil.copytree(mt, other)
    vocab = json.loads((other / "tgt_vocab.json").read_text())
    translator = load(other)
    reordered = load(other)
    tokens = reordered.vocabs.tgt_vocab.idx_to_token
    tokens[-1], tokens[-2] = tokens[-2], tokens[-1]  # same size, two tokens swapped
    with pytest.raises(SeqlabError, match=r"--ensemble x: its tgt_vocab.json differs") as exc:
        translator.ensemble_with([reordered], ["x"])
    assert "must share their vocabularies" in str(exc.value)
    with pytest.raises(SeqlabError) as exc:  # named by its run directory by default
        translator.ensemble_with([reordered])
    assert f"--ensemble {other}: its tgt_vocab.json differs from {other}'s" in str(exc.value)
    assert vocab  # the files themselves are untouched

    def fails(*args, needles):
        assert main(["evaluate", "--run", str(mt), "--split", "test", *args]) == 2
        err = capsys.readouterr().err
        for needle in needles:
            assert needle in err, err

    fails("--ensemble", str(tiny_runs["cls"]), needles=["--ensemble", "translation runs only"])
    fails(
        "--ensemble",
        str(mt),
        "--engine",
        "ctranslate2",
        needles=["--ensemble decodes with seqlab", "--engine seqlab"],
    )
    with pytest.raises(SeqlabError, match="--ensemble decodes with seqlab"):  # Python API too
        load(mt).ensemble_with([load(mt)]).translate("9 may 1998", engine="ctranslate2")
    assert main(["evaluate", "--run", str(tiny_runs["cls"]), "--ensemble", str(mt)]) == 2
    assert "--ensemble" in capsys.readouterr().err
