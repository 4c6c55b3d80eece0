"""Translation end to end on the generated dates task: train, reload, translate, evaluate."""

import json
import warnings

import pytest
import torch

from cli_checks import fails
from precision_helpers import PRECISIONS, assert_same_outputs, computing_in
from seqlab import load
from seqlab.cli import main
from seqlab.config import config_from_dict
from seqlab.data.dates import NUM_FORMATS, date_splits, make_date_pairs, render
from seqlab.errors import SeqlabError
from seqlab.experiment import train
from seqlab.tasks.translation import load_pairs, score_translations


def test_date_pairs_are_correct_and_splits_disjoint():
    import datetime as dt

    for human, iso in make_date_pairs(200, seed=3):
        d = dt.date.fromisoformat(iso)
        assert human in [render(d, f) for f in range(NUM_FORMATS)]
    splits = date_splits(num_train=500, num_val=50, num_test=50, seed=1)
    sources = [set(s for s, _ in pairs) for pairs in splits.values()]
    assert sum(len(s) for s in sources) == len(set().union(*sources)) == 600
    assert date_splits(500, 50, 50, seed=1) == splits


def test_scores_use_sacrebleu_and_report_signatures():
    refs = ["a man is riding a bike .", "two dogs play in the snow ."]
    perfect = score_translations(refs, refs)
    assert perfect["bleu"] == pytest.approx(100.0) and perfect["exact_match"] == 1.0
    assert "tok:13a" in perfect["bleu_signature"] and "case:mixed" in perfect["bleu_signature"]
    assert "case:lc" in perfect["bleu_lc_signature"]
    worse = score_translations(["a man rides a bicycle .", "dogs in snow ."], refs)
    assert worse["bleu"] < 50 and worse["exact_match"] == 0.0


@pytest.fixture(scope="module")
def dates_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("dates") / "run"
    raw = {
        "data": {
            "dataset": "dates",
            "tokenizer": "char",
            "num_examples": 300,
            "val_examples": 20,
            "max_len": 40,
            "batch_tokens": 1024,
        },
        "model": {"arch": "bahdanau", "embed_dim": 8, "hidden_size": 16, "dropout": 0.0},
        "train": {
            "max_steps": 6,
            "eval_every": 3,
            "log_every": 3,
            "threads": 1,
            "keep_last": 2,
            "average_last": 2,
        },
        "decode": {"max_len_a": 0.0, "max_len_b": 12},
    }
    summary = train(config_from_dict(raw), run)
    return run, summary


def test_training_selects_on_bleu_and_averages(dates_run):
    run, summary = dates_run
    assert summary["select"] == "val_bleu" and summary["step"] == 6
    assert "averaged" in summary and summary["averaged"]["steps"] == [3, 6]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["kind"] == "eval"]
    assert {"val_loss", "val_bleu", "val_chrf", "val_exact"} <= set(evals[0])
    assert "val_bleu_paper" not in evals[0]  # dates: see the paper-style test below
    average = [r for r in records if r["kind"] == "average"]  # the decision, kept with the run
    assert average == [{"kind": "average", **summary["averaged"]}]
    assert (run / "curves.png").is_file() and (run / "src_vocab.json").is_file()


def test_translate_cli_handles_long_input_and_writes_attention(
    dates_run, tmp_path, capsys, monkeypatch
):
    run, _ = dates_run
    inputs = tmp_path / "in.txt"
    inputs.write_text("saturday 9 may 1998\n" + "9 " * 200 + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert (
            main(
                [
                    "translate",
                    "--run",
                    str(run),
                    "--input",
                    str(inputs),
                    "--attention-png",
                    str(tmp_path / "att"),
                ]
            )
            == 0
        )
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2  # one line per input, even for the over-long one
    assert any("truncated 1 of 2 input sentences" in str(w.message) for w in caught)
    assert sorted(p.name for p in (tmp_path / "att").glob("*.png")) == [
        "attention-0001.png",
        "attention-0002.png",
    ]


def test_translate_nbest_and_evaluate_json(dates_run, tmp_path, capsys):
    run, _ = dates_run
    inputs = tmp_path / "in.txt"
    inputs.write_text("May 9, 1998\n")
    assert (
        main(
            [
                "translate",
                "--run",
                str(run),
                "--input",
                str(inputs),
                "--beam",
                "5",
                "--nbest",
                "3",
            ]
        )
        == 0
    )
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[1] for r in rows] == ["0", "1", "2"]
    scores = [float(r[2]) for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert main(["evaluate", "--run", str(run), "--split", "test", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["sentences"] == 20 and "tok:13a" in result["bleu_signature"]
    # an ISO date is one Moses token: the paper-style BLEU (4-grams) does not apply to dates
    assert "bleu_paper" not in result
    assert main(["evaluate", "--run", str(run), "--split", "test"]) == 0
    text = capsys.readouterr().out
    assert f"BLEU {result['bleu']:.2f}" in text
    assert "paper-style" not in text and "lowercased BLEU" not in text


def test_paper_style_bleu_applies_to_natural_language_datasets_only():
    from seqlab.tasks.translation import paper_lang

    raw = {"data": {"dataset": "multi30k", "src_lang": "en", "tgt_lang": "fr"}}
    raw["model"] = {"arch": "transformer"}
    assert paper_lang(config_from_dict(raw)) == "fr"
    raw["data"] = {"dataset": "dates"}
    assert paper_lang(config_from_dict(raw)) is None


@pytest.mark.parametrize("precision", PRECISIONS)
def test_greedy_and_beam1_agree_through_translate(dates_run, precision):
    """Greedy (the run's decode section, sorted batches) and beam 1 (one padded batch) give the
    same outputs in fp32, and in bf16 up to near-ties; a sentence alone gives its batch output."""
    from seqlab.data.translation_batching import pad_sequences
    from seqlab.models.search import beam_search

    run, _ = dates_run
    m = load(run, precision=precision)
    assert m.precision.precision == precision
    sources = [s for s, _ in load_pairs(m.cfg)["val"]]
    greedy = m.hypotheses(sources)  # the run's decode section: greedy
    assert m.cfg.decode.strategy == "greedy"
    ids = [m.source_ids(s) for s in sources]
    src, src_lengths = pad_sequences(ids)
    limits = {"max_len_a": m.cfg.decode.max_len_a, "max_len_b": m.cfg.decode.max_len_b}
    with computing_in(precision):
        beam1 = beam_search(m.model, src, src_lengths, beam_size=1, **limits)
    tokens = [g[0].tokens for g in greedy]
    assert_same_outputs(m.model, ids, tokens, [b[0].tokens for b in beam1], precision, alpha=1.0)
    alone = [m.hypotheses([s])[0][0].tokens for s in sources[:4]]
    assert_same_outputs(m.model, ids[:4], alone, tokens[:4], precision)


def test_inference_is_fp32_unless_asked(dates_run):
    run, _ = dates_run
    assert load(run).precision.precision == "fp32"
    assert load(run, precision="bf16").precision.dtype == torch.bfloat16
    with pytest.raises(SeqlabError, match="precision must be fp32 or bf16, got 'fp16'"):
        load(run, precision="fp16")


def test_the_end_of_training_choice_decodes_as_the_run_will(dates_run):
    """A beam run's ``final_evaluate`` (average or best, at the end of training) scores
    validation exactly as ``evaluate`` with that beam does; its ``evaluate`` stays greedy. A
    greedy run needs none."""
    from seqlab.tasks.translation import build_experiment

    run, _ = dates_run
    m = load(run)
    assert build_experiment(m.cfg, run).final_evaluate is None
    decode = m.cfg.decode.model_copy(update={"strategy": "beam", "beam_size": 3})
    exp = build_experiment(m.cfg.model_copy(update={"decode": decode}), run)
    exp.model.load_state_dict(m.model.state_dict())
    exp.model.eval()
    with torch.no_grad():
        final, greedy = exp.final_evaluate(exp.model), exp.evaluate(exp.model)
    beam3, greedy_report = m.evaluate("val", beam=3), m.evaluate("val")
    assert (final["val_bleu"], final["val_chrf"]) == (beam3.scores["bleu"], beam3.scores["chrf"])
    assert (greedy["val_bleu"], greedy["val_chrf"]) == (
        greedy_report.scores["bleu"],
        greedy_report.scores["chrf"],
    )
    assert final["val_chrf"] != greedy["val_chrf"]  # the two decoders differ on this model


def test_length_penalty_option_ranks_beams_as_the_config_would(dates_run):
    """``length_penalty=α`` decodes as a run whose ``decode.length_penalty`` is α: every beam
    hypothesis scores log_prob / (tokens + <eos>)^α; evaluate reports the α it used."""
    from seqlab.tasks.translation import Translator

    run, _ = dates_run
    m = load(run)
    sources = [s for s, _ in load_pairs(m.cfg)["val"]]
    for alpha in (0.0, 0.5, 2.0):
        found = m.hypotheses(sources, beam=4, nbest=3, length_penalty=alpha)
        for hyps in found:
            for h in hyps:
                assert h.score == pytest.approx(h.log_prob / (len(h.tokens) + 1) ** alpha)
            assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        decode = m.cfg.decode.model_copy(update={"length_penalty": alpha})
        configured = Translator(m.model, m.cfg.model_copy(update={"decode": decode}), m.vocabs)
        assert [[h.tokens for h in hyps] for hyps in found] == [
            [h.tokens for h in hyps] for hyps in configured.hypotheses(sources, beam=4, nbest=3)
        ]
    report = m.evaluate("val", beam=4, length_penalty=0.5)
    assert report.scores["length_penalty"] == 0.5 and "length penalty 0.5)" in report.format()
    assert "length_penalty" not in m.evaluate("val").scores  # greedy: no ranking to penalise
    with pytest.raises(SeqlabError, match="decoding is greedy search"):
        m.translate(sources, length_penalty=1.0)
    for bad in (-0.1, float("nan"), True, "1"):
        with pytest.raises(SeqlabError, match="length penalty must be a number from 0 to 10"):
            m.translate(sources, beam=3, length_penalty=bad)


def test_unknown_source_tokens_are_named_on_the_api_the_command_line_and_in_evaluate(
    tiny_runs, tmp_path, capsys
):
    """A character the run's vocabulary lacks is read as <unk>, never silently: the API names
    the sentence (its index), the command line the input line, ``evaluate --src`` FILE:LINE;
    a known sentence warns nothing."""
    from seqlab.data.vocab import UnknownTokenWarning

    run = tiny_runs["mt"]
    capsys.readouterr()  # the run's training, if it happened now
    mt = load(run)
    lines = ["May 9, 1998", "May 9, 1998 \u2603\u20ac\u2603"]
    told = "3 tokens not in the model's vocabulary, read as <unk>: '\u2603', '\u20ac'"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mt.translate(lines)
        mt.hypotheses(lines[1])
    assert [(w.category, str(w.message)) for w in caught] == [
        (UnknownTokenWarning, f"sentence 1: {told}"),
        (UnknownTokenWarning, f"sentence 0: {told}"),
    ]
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("".join(line + "\n" for line in lines))
    ref.write_text("1998-05-09\n1998-05-09\n")
    with warnings.catch_warnings(record=True) as caught:  # the CLI prints each as one line
        warnings.simplefilter("always")
        assert main(["translate", "--run", str(run), "--input", str(src)]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 2
        evaluate = ["evaluate", "--run", str(run), "--src", str(src), "--ref", str(ref)]
        assert main(evaluate) == 0
    assert [str(w.message) for w in caught] == [f"input line 2: {told}", f"{src}:2: {told}"]


def test_attention_png_needs_attention(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n")
    out = tmp_path / "att"
    fails(
        capsys,
        ["translate", "--run", runs / "s2s", "--input", src, "--attention-png", out],
        "model.arch=seq2seq has no attention",
    )
    assert not out.exists()


def test_beam_and_nbest_rules(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n1.3.1969\n")
    base = ["translate", "--run", runs / "mt", "--input", src]
    assert main([str(a) for a in base]) == 0
    greedy = capsys.readouterr().out
    assert main([str(a) for a in base + ["--nbest", "1"]]) == 0  # stays greedy
    assert capsys.readouterr().out == greedy
    assert main([str(a) for a in base + ["--beam", "1"]]) == 0  # beam 1 is greedy
    assert capsys.readouterr().out == greedy
    fails(capsys, base + ["--beam", "1", "--nbest", "3"], "nbest 3 needs a beam of at least 3")
    fails(capsys, base + ["--nbest", "3"], "decoding is greedy search", "--beam 5 --nbest 3")
    assert main([str(a) for a in base + ["--beam", "3", "--nbest", "3"]]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6
    fails(capsys, base + ["--length-penalty", "0.6"], "decoding is greedy search", "--beam 5")
    with pytest.raises(SystemExit) as exit_:  # the parser reads it by the option's own bounds
        main([str(a) for a in base + ["--beam", "3", "--length-penalty", "11"]])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--length-penalty: must be a number from 0 to 10" in err
    assert main([str(a) for a in base + ["--beam", "3", "--length-penalty", "0"]]) == 0


def test_a_huge_line_draws_a_bounded_heatmap(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("9 " * 5000 + "\n")
    out = tmp_path / "att"
    with pytest.warns(UserWarning, match="truncated 1 of 1 input sentences"):
        code = main(
            [
                "translate",
                "--run",
                str(runs / "mt"),
                "--input",
                str(src),
                "--attention-png",
                str(out),
            ]
        )
    assert code == 0
    png = (out / "attention-0001.png").read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width < 4000 and height < 4000


def test_evaluate_on_empty_files_and_score_of_nothing(runs, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    fails(capsys, ["evaluate", "--run", runs / "mt", "--src", empty, "--ref", empty], "empty")
    argv = ["evaluate", "--run", runs / "cls", "--src", empty, "--labels", empty]
    fails(capsys, argv, "empty")
    with pytest.raises(SeqlabError, match="nothing to score"):
        load(runs / "mt").score([], [])
    with pytest.raises(SeqlabError, match="nothing to score"):
        load(runs / "cls").score([], [])
    assert load(runs / "mt").score(["May 9, 1998"], ["1998-05-09"])["sentences"] == 1
