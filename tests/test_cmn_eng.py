"""Chinese–English (cmn-eng): the ``simplified`` normalisation, the split that keeps every sentence
on one side, BLEU of Chinese output, and a run's normalisation applied alike on the command line,
the Python API and the server."""

import json
import warnings
import zipfile

import pytest
import sacrebleu

import seqlab
from cli_checks import succeeds
from seqlab.config import config_from_dict
from seqlab.data import cmn_eng
from seqlab.data.chinese import changed_characters, has_han, normalize_chinese
from seqlab.data.parallel import ParallelCorpus
from seqlab.data.tokenizers import (
    NormalisedTextWarning,
    SubwordTokenizer,
    normalisation_messages,
    normalize_text,
)
from seqlab.errors import ConfigError, DataError
from seqlab.tasks.translation import score_translations
from tiny_runs import CMN_ENG_ZIP

DATA = CMN_ENG_ZIP
needs_data = pytest.mark.skipif(not DATA.is_file(), reason="no cmn-eng/ in $SEQLAB_DATA_DIR")


# ----------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("我愛你。", "我爱你。"),  # script: OpenCC t2s
        ("乾淨的頭髮", "干净的头发"),  # phrase-aware: 乾 -> 干 here
        ("我 爱 你", "我爱你"),  # no spaces between Chinese characters
        ("我爱你.", "我爱你。"),  # ASCII punctuation after a Chinese character is full-width
        ("他说: 好 ?", "他说：好？"),
        ("２０１２年", "2012年"),  # full-width digits and letters are ASCII
        ("我\u200b爱\u3000你", "我爱你"),  # zero-width and ideographic spaces
        ("Tom is here. I love you!", "Tom is here. I love you!"),  # English unchanged
        ("  I  love   机器学习 .  ", "I love 机器学习。"),
    ],
)
def test_simplified_reads_chinese_one_documented_way(typed, read):
    assert normalize_chinese(typed) == read
    assert normalize_text(typed, "simplified") == read
    assert normalize_chinese(read) == read  # idempotent


def test_what_the_normalisation_changed_is_named_and_spacing_is_not():
    assert changed_characters("我愛你。") == [("愛", "爱")]
    assert changed_characters("我 爱 你") == []
    assert changed_characters("I love you.") == []
    (message,) = normalisation_messages([("sentence 1", "我愛你。")], "simplified")
    assert message == "sentence 1: normalised (data.normalize=simplified): '愛' -> '爱'"
    assert normalisation_messages([("sentence 1", "我爱你。")], "simplified") == []


def test_a_subword_tokenizer_applies_the_normalisation_and_refuses_lowercasing():
    sentences = ["我爱你。", "你好。", "我们爱学习。"] * 5
    tok = SubwordTokenizer.train(sentences, 40, "char", normalize="simplified")
    assert tok.tokenize("我愛你。") == tok.tokenize("我爱你。") == tok.tokenize("我 爱 你.")
    assert tok.to_dict() == {"kind": "subword", "normalize": "simplified"}
    with pytest.raises(ValueError, match="keeps case"):
        SubwordTokenizer(tok.model_proto, "nmt")
    # SentencePiece's own NFKC is off: Chinese punctuation is written back full-width
    tok = SubwordTokenizer.train(
        ["你好吗？我很好，谢谢！", "他说：好。"] * 20, 30, normalize="simplified"
    )
    assert tok.detokenize(tok.tokenize("你好吗?我很好,谢谢!")) == "你好吗？我很好，谢谢！"


def test_too_small_a_subword_vocabulary_is_a_data_error_naming_the_key():
    with pytest.raises(DataError, match=r"cannot train a bpe model of 5 pieces .*data.subword"):
        SubwordTokenizer.train(["我爱你。", "你好吗？", "今天天气很好。"] * 5, 5, "bpe")


def _raw(**data):
    return {
        "data": {"dataset": "cmn-eng", "src_lang": "zh", "tgt_lang": "en", **data},
        "model": {"arch": "transformer"},
    }


def test_config_rules_of_the_chinese_recipes():
    with pytest.raises(ConfigError, match=r"data.normalize=nmt lowercases"):
        config_from_dict(_raw(tokenizer="subword", normalize="nmt"))
    with pytest.raises(ConfigError, match=r"data.subword.src sets one side's model"):
        config_from_dict(_raw(tokenizer="subword", subword={"src": {"model_type": "char"}}))
    cfg = config_from_dict(
        _raw(
            tokenizer="subword",
            normalize="simplified",
            subword={"joint": False, "vocab_size": 6000, "src": {"model_type": "char"}},
        )
    )
    src, tgt = cfg.data.subword.side("src"), cfg.data.subword.side("tgt")
    assert (src.model_type, src.vocab_size) == ("char", 6000)
    assert (tgt.model_type, tgt.vocab_size) == ("bpe", 6000)
    with pytest.raises(DataError, match="cmn-eng pairs English with Chinese"):
        cmn_eng.cmn_eng_splits("zh", "de", corpus=ParallelCorpus([("a", "b")] * 10))


# ------------------------------------------------------------------------------------ the split
def _keys(pairs):
    """English (spaces collapsed, case folded) and normalised Chinese of (english, chinese)."""
    return {cmn_eng._english_key(e) for e, _ in pairs}, {normalize_chinese(z) for _, z in pairs}


def _assert_apart(splits):
    """No English and no Chinese sentence in two of the splits (zh→en pairs)."""
    keys = {n: _keys([(e, z) for z, e in c.pairs]) for n, c in splits.items()}
    for a, b in [("train", "val"), ("train", "test"), ("val", "test")]:
        assert not keys[a][0] & keys[b][0], (a, b, sorted(keys[a][0] & keys[b][0])[:5])
        assert not keys[a][1] & keys[b][1], (a, b, sorted(keys[a][1] & keys[b][1])[:5])


def test_pairs_sharing_a_sentence_in_either_script_stay_on_one_side():
    pairs = []
    for i in range(60):  # each English sentence twice; each Chinese one in both scripts
        pairs += [(f"Sentence {i}.", f"我愛{i}。"), (f"sentence  {i}.", f"我爱{i}号。")]
        pairs += [(f"Other {i}.", f"我爱{i}号。")]
    corpus = ParallelCorpus(pairs, 0, "made up", [f"#{i}" for i in range(len(pairs))])
    assert len(cmn_eng.sentence_groups(pairs)) == 60
    splits = cmn_eng.cmn_eng_splits("zh", "en", val_examples=20, corpus=corpus)
    _assert_apart(splits)
    assert len(splits["val"]) >= 20 and len(splits["test"]) >= 20
    assert sum(len(c) for c in splits.values()) == len(pairs)
    again = cmn_eng.cmn_eng_splits("en", "zh", val_examples=20, corpus=corpus)
    for name in splits:  # the same split in both directions, pairs turned round
        assert again[name].pairs == [(e, z) for z, e in splits[name].pairs]
        assert len(again[name].attribution) == len(again[name].pairs)


def test_a_zip_without_its_member_or_not_utf8_is_refused_by_name(tmp_path):
    path = tmp_path / "cmn-eng.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("other.txt", "x")
    with pytest.raises(DataError, match=r"has no member 'cmn.txt'; it holds other.txt"):
        list(cmn_eng.read_zip_lines(path, "cmn.txt"))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("cmn.txt", b"Hi.\t\xe5\x97\xa8\xe3\x80\x82\nBad.\t\xff\n")
    with pytest.raises(DataError, match=r"cmn-eng.zip:cmn.txt:2: not valid UTF-8"):
        list(cmn_eng.read_zip_lines(path, "cmn.txt"))
    (tmp_path / "not.zip").write_text("plain text")
    with pytest.raises(DataError, match="not a readable zip file"):
        list(cmn_eng.read_zip_lines(tmp_path / "not.zip", "cmn.txt"))


@needs_data
def test_the_real_split_keeps_every_sentence_on_one_side_and_its_attribution():
    corpus = cmn_eng.load_cmn_eng(DATA)
    assert len(corpus) == 32_028 and corpus.skipped == 0
    assert corpus.attribution[0].startswith("CC-BY 2.0 (France) Attribution: tatoeba.org #538123")
    splits = cmn_eng.cmn_eng_splits("zh", "en", corpus=corpus)
    assert {n: len(c) for n, c in splits.items()} == {"train": 30_028, "val": 1_000, "test": 1_000}
    _assert_apart(splits)


# ----------------------------------------------------------------------------------------- BLEU
def test_bleu_of_chinese_output_uses_sacrebleus_zh_tokenizer():
    refs = ["我爱机器学习。", "今天天气很好。"]
    hyps = ["我喜欢机器学习。", "今天天气很好。"]
    scores = score_translations(hyps, refs, None, "zh")
    assert "tok:zh" in scores["bleu_signature"]
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="zh").score
    assert scores["bleu"] == pytest.approx(expected)
    # 13a would read each sentence as one word: a different, meaningless number
    assert scores["bleu"] != pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert (
        "tok:13a"
        in score_translations(["I love you."], ["I love you."], None, "en")["bleu_signature"]
    )


# --------------------------------------------------------------- one run, every surface alike
@pytest.fixture(scope="module")
def zh_run(tiny_runs):
    """A tiny zh→en Transformer on the first 600 pairs, 3 steps (``zh_en_raw`` in tiny_runs.py)."""
    if not DATA.is_file():
        pytest.skip("no cmn-eng/ in $SEQLAB_DATA_DIR")
    return tiny_runs["zh-en"]


TYPED = ["我爱你。", "我愛你。"]


def test_the_run_records_its_normalisation_and_reads_both_scripts_alike(zh_run):
    assert json.loads((zh_run / "src_tokenizer.json").read_text())["normalize"] == "simplified"
    m = seqlab.load(zh_run)
    assert m.cfg.data.normalize == "simplified"
    simplified, traditional = (m.sentence(t) for t in TYPED)
    assert simplified.tokens == traditional.tokens and not simplified.unknown
    with pytest.warns(NormalisedTextWarning, match=r"sentence 1: .*'愛' -> '爱'"):
        out = m.translate(TYPED)
    assert out[0] == out[1]


def test_the_cli_the_api_and_the_server_say_the_same(zh_run, tmp_path, capsys):
    from fastapi.testclient import TestClient

    from seqlab.serve import create_app

    m = seqlab.load(zh_run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api = m.translate(TYPED)
    api_warning = [str(w.message) for w in caught if w.category is NormalisedTextWarning]
    inputs = tmp_path / "in.txt"
    inputs.write_text("".join(t + "\n" for t in TYPED), encoding="utf-8")
    said = r"input line 2: normalised \(data.normalize=simplified\): '愛' -> '爱'"
    with pytest.warns(NormalisedTextWarning, match=said):
        cli = succeeds(capsys, ["translate", "--run", zh_run, "--input", inputs])
    assert cli.out.splitlines() == api
    assert api_warning == ["sentence 1: normalised (data.normalize=simplified): '愛' -> '爱'"]
    with TestClient(create_app({"zh": m}, engine="seqlab")) as client:
        r = client.post("/translate", json={"model": "zh", "text": TYPED})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [t["text"] for t in body["translations"]] == api
    assert body["warnings"] == ["text 2: normalised (data.normalize=simplified): '愛' -> '爱'"]


def test_references_are_scored_in_the_runs_script(zh_run, monkeypatch):
    m = seqlab.load(zh_run)
    simplified = ["我们爱机器学习。", "今天天气很好。"]
    monkeypatch.setattr(type(m), "translate", lambda self, sources, *a, **k: list(simplified))
    scores = m.score(["a", "b"], ["我們愛機器學習。", "今天天氣很好。"])  # traditional
    assert scores["exact_match"] == 1.0
    monkeypatch.setattr(m.cfg.data, "normalize", "none")
    assert m.score(["a", "b"], ["我們愛機器學習。", "今天天氣很好。"])["exact_match"] == 0.0


@pytest.fixture(scope="module")
def en_zh_run(tmp_path_factory):
    """The tiny zh→en run's twin the other way round: en→zh, Chinese output."""
    if not CMN_ENG_ZIP.is_file():
        pytest.skip("no cmn-eng/ in $SEQLAB_DATA_DIR")
    from seqlab.experiment import train
    from tiny_runs import zh_en_raw

    raw = zh_en_raw()
    raw["data"].update(src_lang="en", tgt_lang="zh")
    out = tmp_path_factory.mktemp("en-zh") / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(config_from_dict(raw), out)
    return out


def test_chinese_output_is_printed_as_characters_and_scored_with_the_zh_tokenizer(
    en_zh_run, tmp_path, capsys
):
    m = seqlab.load(en_zh_run)
    inputs = tmp_path / "in.txt"
    inputs.write_text("I love you.\n", encoding="utf-8")
    (hyps,) = m.hypotheses(["I love you."], beam=2, nbest=2)
    texts = [m.detokenize(h.tokens) for h in hyps]
    assert any(has_han(t) for t in texts), texts  # the tiny model writes Chinese characters
    out = succeeds(capsys, ["translate", "--run", en_zh_run, "--input", inputs, "--beam", "2"])
    nbest = succeeds(
        capsys, ["translate", "--run", en_zh_run, "--input", inputs, "--beam", "2", "--nbest", "2"]
    )
    assert [line.split("\t")[3] for line in nbest.out.splitlines()] == texts
    assert out.out.splitlines() == texts[:1]
    report = succeeds(capsys, ["evaluate", "--run", en_zh_run, "--split", "val", "--json"]).out
    assert "tok:zh" in json.loads(report)["bleu_signature"]


def test_attention_png_of_a_chinese_sentence_draws_its_characters(zh_run, tmp_path, capsys):
    from seqlab.fonts import MissingGlyphWarning, installed_cjk_families

    inputs = tmp_path / "in.txt"
    inputs.write_text("我爱你。\n", encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        argv = ["translate", "--run", zh_run, "--input", inputs, "--attention-png", tmp_path / "a"]
        succeeds(capsys, argv)
    assert (tmp_path / "a" / "attention-0001.png").stat().st_size > 1000
    missing = [w for w in caught if issubclass(w.category, MissingGlyphWarning)]
    if not installed_cjk_families():
        assert missing and "apt-get install fonts-wqy-microhei" in str(missing[0].message)
        pytest.skip("no CJK font installed: apt-get install fonts-wqy-microhei")
    glyphs = [w for w in caught if "missing from font" in str(w.message)]
    assert not missing and not glyphs, [str(w.message) for w in missing + glyphs]
