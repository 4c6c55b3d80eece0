"""n-gram language models (issue 14): probabilities sum to 1 under each smoothing, interpolated
Kneser–Ney against a hand-computed example, perplexity and sampling."""

import json
import math
import random

import pytest
import torch

from cli_checks import fails, succeeds, write_yaml
from seqlab.cli import main
from seqlab.models.ngram import NGramLM
from tiny_runs import LM_TEXT as TEXT


@pytest.mark.parametrize("smoothing", ["add_k", "kneser_ney"])
@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_probabilities_sum_to_one_for_random_contexts(smoothing, order):
    rng = random.Random(order)
    v = 12
    ids = [rng.randrange(v - 2) for _ in range(400)]  # two tokens never seen
    lm = NGramLM(order, v, smoothing, k=0.5).fit(ids)
    for _ in range(30):
        ctx = [rng.randrange(v) for _ in range(rng.randrange(0, order + 2))]
        p = lm.distribution(ctx)
        assert p.shape == (v,) and bool((p > 0).all())
        assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)


def test_kneser_ney_against_a_hand_computed_bigram():
    a, b, c = 0, 1, 2
    lm = NGramLM(2, 3, "kneser_ney", discount=0.75).fit([a, b, a, c, a, b])
    # bigrams ab ×2, ba, ac, ca: c(a·) = 3 with N1+(a·) = 2 distinct followers.
    # continuation counts N1+(·b) = 1, N1+(·a) = 2, N1+(·c) = 1 over N1+(··) = 4 bigram types;
    # unigram level: max(N1+(·w) − D, 0) / 4 + D · 3 / 4 · 1/3
    p1 = {a: 1.25 / 4 + 0.1875, b: 0.25 / 4 + 0.1875, c: 0.25 / 4 + 0.1875}
    assert p1 == {a: 0.5, b: 0.25, c: 0.25}
    # P(b | a) = (2 − D) / 3 + D · 2 / 3 · P1(b) = 13/24
    assert lm.prob([a], b) == pytest.approx((2 - 0.75) / 3 + 0.75 * 2 / 3 * p1[b])
    assert lm.prob([a], b) == pytest.approx(13 / 24)
    # P(a | b): c(ba) = 1, one follower: (1 − D) / 1 + D · P1(a)
    assert lm.prob([b], a) == pytest.approx(0.25 + 0.75 * 0.5)
    # an unseen context backs off to the unigram level
    assert lm.prob([c, c, b], c) == pytest.approx(lm.prob([b], c))


def test_add_k_formula_and_estimated_discounts():
    lm = NGramLM(2, 4, "add_k", k=1.0).fit([0, 1, 0, 1, 0, 2])
    assert lm.prob([0], 1) == pytest.approx((2 + 1) / (3 + 4))
    assert lm.prob([3], 1) == pytest.approx(1 / 4)  # unseen context: uniform
    kn = NGramLM(3, 4).fit([0, 1, 2, 3] * 5 + [0, 2])
    assert all(0 < d <= 1 for d in kn.discounts)


def test_perplexity_of_a_deterministic_cycle_and_of_uniform_counts():
    cycle = [0, 1, 2, 3] * 50
    lm = NGramLM(2, 4, "kneser_ney").fit(cycle)
    assert lm.perplexity([0, 1, 2, 3, 0], history=[3]) < 1.5
    uniform = NGramLM(1, 4, "add_k", k=1.0).fit([0, 1, 2, 3])
    assert uniform.perplexity([3, 2, 1, 0]) == pytest.approx(4.0)
    ll, n = uniform.log_likelihood([1, 2], history=[0])
    assert n == 2 and ll == pytest.approx(2 * math.log(1 / 4))


def test_sampling_follows_the_counts_and_is_seeded():
    lm = NGramLM(2, 5, "kneser_ney").fit([0, 1, 2, 3, 4] * 40)
    g = torch.Generator().manual_seed(0)
    out = lm.sample([0], 20, g)
    pairs = zip([0, *out[:-1]], out, strict=True)
    assert len(out) == 20 and sum(y == (x + 1) % 5 for x, y in pairs) >= 17  # P(next) ≈ 0.98
    assert lm.sample([0], 20, torch.Generator().manual_seed(0)) == out


def test_bad_arguments():
    with pytest.raises(ValueError, match="order must be >= 1"):
        NGramLM(0, 5)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 5\)"):
        NGramLM(2, 5).fit([0, 7])
    with pytest.raises(RuntimeError, match="call fit"):
        NGramLM(2, 5).distribution([1])


def test_zipf_slope_of_an_exact_power_law_and_ngram_counts():
    from seqlab.data.stats import ngram_frequencies, zipf_slope

    freqs = [round(1e6 / r) for r in range(1, 2001)]
    assert zipf_slope(freqs) == pytest.approx(-1.0, abs=0.01)
    counts = ngram_frequencies("a b a b c".split(), 3)
    assert counts == {1: [2, 2, 1], 2: [2, 1, 1], 3: [1, 1, 1]}


def test_ngram_command_on_a_users_text(tmp_path, capsys):
    import json

    from seqlab.cli import main

    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 40)
    cfg = tmp_path / "lm.yaml"
    cfg.write_text(
        f"data: {{dataset: text, path: {text}, tokenizer: char}}\nmodel: {{arch: rnn_lm}}\n"
    )
    assert main(["ngram", str(cfg), "--orders", "1,3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ppl = {int(n): r["val_ppl"] for n, r in out["orders"].items()}
    assert ppl[3] < ppl[1] and ppl[3] < 2.0  # a repeated sentence is nearly certain given 2 chars
    assert main(["ngram", "dates-bahdanau"]) == 2
    assert "n-gram models need a language-modelling config" in capsys.readouterr().err


def test_generating_more_than_the_cap_is_refused_at_once(tmp_path):
    from seqlab.tasks.language_modeling import MAX_GENERATE_TOKENS

    corpus = tmp_path / "c.txt"
    corpus.write_text("the time traveller was expounding a recondite matter to us " * 20)
    cfg = tmp_path / "lm.yaml"
    cfg.write_text(
        f"data: {{dataset: text, path: {corpus}}}\nmodel: {{arch: rnn_lm}}\n", encoding="utf-8"
    )
    from seqlab.cli import main

    too_many = str(MAX_GENERATE_TOKENS + 1)
    assert main(["ngram", str(cfg), "--generate", "the", "--tokens", too_many]) == 2


def ngram_config(tmp_path, text, name="lm.yaml"):
    corpus = tmp_path / f"{name}.txt"
    corpus.write_text(text)
    raw = {"data": {"dataset": "text", "path": str(corpus)}, "model": {"arch": "rnn_lm"}}
    return write_yaml(tmp_path / name, raw)


@pytest.mark.parametrize("k", ["nan", "inf", "0", "-1", "abc"])
def test_ngram_k_must_be_a_finite_positive_number(tmp_path, capsys, k):
    cfg = ngram_config(tmp_path, TEXT)
    with pytest.raises(SystemExit) as exc:  # argparse refuses it
        main(["ngram", str(cfg), "--smoothing", "add_k", "--k", k])
    assert exc.value.code == 2
    assert "--k" in capsys.readouterr().err
    with pytest.raises(ValueError, match="finite k > 0"):
        NGramLM(2, 10, "add_k", k=float(k) if k != "abc" else math.nan)


def test_ngram_k_applies_to_add_k_and_works_there(tmp_path, capsys):
    cfg = ngram_config(tmp_path, TEXT)
    fails(capsys, ["ngram", cfg, "--k", "0.5"], "--k", "--smoothing add_k")
    out = succeeds(capsys, ["ngram", cfg, "--smoothing", "add_k", "--k", "0.5", "--json"]).out
    ppl = [r["val_ppl"] for r in json.loads(out)["orders"].values()]
    assert all(math.isfinite(p) and p > 1 for p in ppl)


@pytest.mark.parametrize(
    "text,needle",
    [("", "the text holds no tokens"), ("a", "validation split holds 0"), ("\n", "0 of its")],
)
def test_ngram_on_a_corpus_too_small_to_measure(tmp_path, capsys, text, needle):
    cfg = ngram_config(tmp_path, text)
    out = fails(capsys, ["ngram", cfg, "--orders", "1,2", "--generate", "a"], needle)
    assert "-1 tokens" not in out.out and "ppl" not in out.out


def test_ngram_generation_never_emits_reserved_tokens(tmp_path, capsys):
    cfg = ngram_config(tmp_path, "a" * 60)  # one character: the reserved ids get real mass
    out = succeeds(capsys, ["ngram", cfg, "--orders", "1,2", "--generate", "a", "--tokens", "80"])
    sample = out.out.splitlines()[-1]
    assert sample == "a" * 81
    lm = NGramLM(1, 5).fit([4] * 10)
    drawn = lm.sample([4], 200, torch.Generator().manual_seed(0), never=range(4))
    assert set(drawn) == {4}
    assert set(lm.sample([4], 200, torch.Generator().manual_seed(0))) != {4}  # mass is there
