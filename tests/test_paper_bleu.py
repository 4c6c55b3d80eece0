"""Paper-style BLEU: Multi30k's lc.norm.tok preprocessing and multi-bleu.perl's corpus BLEU."""

import gzip
import math
import os
from pathlib import Path

import pytest

from seqlab.errors import SeqlabError
from seqlab.tasks.paper_bleu import moses_lc_norm_tok, paper_bleu
from seqlab.tasks.translation import score_translations

# Raw sentence → the line Moses 3a0631a wrote (lowercase.perl | normalize-punctuation.perl -l L |
# tokenizer.perl -l L). The first three are Multi30k lines (test_2016_flickr line 2, train), the
# rest made up; each checked by hand against the Perl rules.
TOKENISED = [
    # no -a: hyphenated words stay whole; the final period splits off
    (
        "de",
        "Ein Boston Terrier läuft über saftig-grünes Gras vor einem weißen Zaun.",
        "ein boston terrier läuft über saftig-grünes gras vor einem weißen zaun .",
    ),
    # „…“ → "…" → &quot;; the period leaves the quotes because Perl's line ends in a newline
    (
        "de",
        "Ein Mann hält ein Schild mit der Aufschrift: „Wir sind alle Arbeitnehmer.“",
        "ein mann hält ein schild mit der aufschrift : &quot; wir sind alle arbeitnehmer &quot; .",
    ),
    # Moses 3a0631a turns a ’ that is not between two letters into "
    (
        "de",
        "Ein Mann macht das „Hook ’em Horns“-Zeichen.",
        "ein mann macht das &quot; hook &quot; em horns &quot; -zeichen .",
    ),
    # English: the clitic splits with its apostrophe ('s), escaped; brackets and comma split
    ("en", "A man's hat, (red).", "a man &apos;s hat , ( red ) ."),
    # English quotation style: the period moves inside the quotes
    ("en", 'He wrote "Hi".', "he wrote &quot; hi . &quot;"),
    # French elision: the apostrophe stays with the left part
    ("fr", "Un homme qui s'appelle Paul.", "un homme qui s&apos; appelle paul ."),
]


@pytest.mark.parametrize("lang, raw, tokenised", TOKENISED)
def test_lc_norm_tok_matches_moses(lang, raw, tokenised):
    assert moses_lc_norm_tok([raw], lang) == [tokenised]


def test_identical_text_scores_100_whatever_its_case_and_quotes():
    refs = ["Ein Hund läuft im „Schnee“.", "Zwei Kinder spielen Fußball."]
    assert paper_bleu(refs, refs, "de").score == pytest.approx(100.0)
    # the same words cased and quoted differently are the same text on this scale
    hyps = ['ein Hund läuft im "Schnee".', "ZWEI Kinder spielen Fußball ."]
    assert paper_bleu(hyps, refs, "de").score == pytest.approx(100.0)
    cased = score_translations(hyps, refs)
    assert cased["bleu"] < 90  # sacreBLEU's cased, 13a score sees the differences


def test_corpus_bleu_computed_by_hand():
    """Two pairs, after preprocessing:

    hyp 1  ein mann fährt fahrrad .            (5 tokens)
    ref 1  ein mann fährt ein fahrrad .        (6 tokens)
    hyp 2 = ref 2  zwei hunde spielen im schnee .  (6 tokens)

    Matches over the corpus: 1-grams 5+6 of 5+6, 2-grams 3+5 of 4+5 ("fährt fahrrad" is not in
    ref 1), 3-grams 1+4 of 3+4, 4-grams 0+3 of 2+3. Hypothesis length 11 < reference length 12,
    so the brevity penalty is exp(1 - 12/11).
    """
    hyps = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]
    refs = ["Ein Mann fährt ein Fahrrad.", "Zwei Hunde spielen im Schnee."]
    precisions = [11 / 11, 8 / 9, 5 / 7, 3 / 5]
    expected = 100 * math.exp(1 - 12 / 11) * math.exp(sum(map(math.log, precisions)) / 4)
    assert paper_bleu(hyps, refs, "de").score == pytest.approx(expected, abs=1e-9)
    assert expected == pytest.approx(71.74, abs=0.01)


def test_no_smoothing_like_multi_bleu():
    """One pair without a shared 4-gram: multi-bleu.perl (and this score) gives 0, where
    sacreBLEU's default exponential smoothing gives credit."""
    hyps, refs = ["Ein Mann fährt Fahrrad."], ["Ein Mann fährt ein Fahrrad."]
    assert paper_bleu(hyps, refs, "de").score == 0.0
    assert score_translations(hyps, refs)["bleu"] > 0.0


def test_score_translations_reports_paper_bleu_with_its_signature():
    refs = ["Ein Mann fährt ein Fahrrad.", "Zwei Hunde spielen im Schnee."]
    scores = score_translations(refs, refs, lang="de")
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["bleu_paper"] == pytest.approx(100.0)
    signature = scores["bleu_paper_signature"]
    assert signature.startswith("moses:lc+norm+tok|lang:de|moses-scripts:3a0631a|sacremoses:")
    for part in ("nrefs:1", "case:lc", "tok:none", "smooth:none"):
        assert part in signature.split("|")
    assert "bleu_paper" not in score_translations(refs, refs)  # no language, no paper score


def test_unpaired_input_is_refused():
    with pytest.raises(SeqlabError, match="2 hypotheses but 1 references"):
        paper_bleu(["a .", "b ."], ["a ."], "en")


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.mark.parametrize("split", ["test_2016_flickr", "val"])
@pytest.mark.parametrize("lang", ["de", "en", "fr"])
def test_reproduces_multi30k_lc_norm_tok_files(split, lang):
    """The raw Multi30k file put through the pipeline equals the dataset's own
    ``<split>.lc.norm.tok.<lang>`` (from github.com/multi30k/dataset, data/task1/tok/), line for
    line, when both are in ``$SEQLAB_DATA_DIR/multi30k/``; the reference against itself is 100."""
    root = Path(os.environ.get("SEQLAB_DATA_DIR", "")) / "multi30k"
    raw = root / f"{split}.{lang}.gz"
    tok = next(
        (
            p
            for p in (root / f"{split}.lc.norm.tok.{lang}", root / f"{split}.lc.norm.tok.{lang}.gz")
            if p.is_file()
        ),
        None,
    )
    if not os.environ.get("SEQLAB_DATA_DIR") or not raw.is_file() or tok is None:
        pytest.skip(f"no {split}.{lang}.gz and {split}.lc.norm.tok.{lang} in $SEQLAB_DATA_DIR")
    sentences, expected = _lines(raw), _lines(tok)
    assert len(sentences) == len(expected)
    ours = moses_lc_norm_tok(sentences, lang)
    differing = [
        (i + 1, a, b) for i, (a, b) in enumerate(zip(ours, expected, strict=True)) if a != b
    ]
    assert differing == []
    assert paper_bleu(sentences, sentences, lang).score == pytest.approx(100.0)
