"""The translation engines' one set of names (seqlab.tasks.translation.engines), and what the
command line and the server accept."""

from __future__ import annotations

import pytest

from seqlab.errors import SeqlabError
from seqlab.tasks.translation import (
    ENGINE_SPELLINGS,
    ENGINES,
    SERVER_ENGINES,
    TranslateOptions,
    Translator,
    engine_decodes,
    engine_name,
)


def _choices(argv: list[str], flag: str) -> list[str]:
    from seqlab.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    command = sub.choices[argv[0]]
    return list(next(a for a in command._actions if flag in a.option_strings).choices)


def test_every_spelling_names_one_engine(monkeypatch):
    from seqlab import deprecation

    monkeypatch.setattr(deprecation, "_warned", set())  # one warning per process: this test's
    with pytest.warns(FutureWarning, match="engine=pytorch is deprecated; use engine=seqlab"):
        assert engine_name("pytorch") == engine_name("seqlab") == "seqlab"
    assert engine_name("ctranslate2") == "ctranslate2"
    assert set(ENGINE_SPELLINGS.values()) == {"seqlab", "ctranslate2"}
    with pytest.raises(SeqlabError, match=r"--engine must be seqlab or ctranslate2"):
        engine_name("torch")
    assert engine_decodes("pytorch", "bahdanau") and engine_decodes("seqlab", "bahdanau")
    assert not engine_decodes("ctranslate2", "bahdanau") and not engine_decodes("auto", "x")


def test_the_command_lines_take_the_task_s_names(monkeypatch):
    assert _choices(["serve"], "--engine") == list(SERVER_ENGINES)
    engine = next(o for o in Translator.options_for("translate") if o.flag == "--engine")
    assert tuple(engine.choices) == ENGINES == ("seqlab", "ctranslate2")
    assert engine.default == "seqlab"
    # the old name still parses, as the new one, with its deprecation warning
    from seqlab import deprecation
    from seqlab.cli import build_parser

    monkeypatch.setattr(deprecation, "_warned", set())

    with pytest.warns(FutureWarning, match="engine=pytorch is deprecated; use engine=seqlab"):
        args = build_parser().parse_args(["translate", "--run", "R", "--engine", "pytorch"])
    assert args.engine == "seqlab"


def test_a_request_tokenises_each_sentence_once(tiny_runs, monkeypatch):
    """The server's path — a sentence read once, decoded, asked whether it was cut, for its
    unknown tokens and the ids attention reads — runs the source tokenizer once per sentence:
    the tokens travel with the sentence (no memo on the translator), and decode as before."""
    from seqlab import load

    m = load(tiny_runs["mt"])
    sentences = ["saturday 9 may 1998", "09/05/98"]
    before = m.hypotheses(sentences, beam=2)
    m = load(tiny_runs["mt"])
    tokenizer, calls = m.vocabs.src_tokenizer, []
    real = tokenizer.tokenize

    def counted(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(tokenizer, "tokenize", counted)
    read = [m.sentence(s) for s in sentences]
    found = m.decode(read, m.decoding(TranslateOptions(beam=2)))
    for s in read:
        m.is_cut(s), m.unknown_tokens(s), m.source_ids(s), m.attention(s, found[0][0].tokens)
    assert not hasattr(m, "_tokens")
    assert sorted(calls) == sorted(sentences)
    assert [[h.tokens for h in hs] for hs in found] == [[h.tokens for h in hs] for hs in before]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"positions": "alibi"}, "model.positions: alibi"),
        ({"positions": "t5_bias"}, "model.positions: t5_bias"),
        ({"attention": "linear", "positions": "rope"}, "model.attention: linear"),
    ],
)
def test_serving_a_scheme_ctranslate2_cannot_hold_uses_seqlab_and_says_so(
    tiny_runs, change, reason, caplog
):
    """``seqlab serve`` (engine auto) of a Transformer whose position scheme or attention the
    CTranslate2 export cannot write runs on seqlab's engine, and says why in /models and the log;
    asked for CTranslate2 by name, the error names the engine that works."""
    import copy
    import logging

    from seqlab import load
    from seqlab.serve import Limits
    from seqlab.tasks.translation.service import TranslationHandler

    mt = copy.copy(load(tiny_runs["mt"]))
    mt.cfg = mt.cfg.model_copy(update={"model": mt.cfg.model.model_copy(update=change)})
    assert not mt.decodes_with("ctranslate2") and mt.decodes_with("seqlab")
    with caplog.at_level(logging.INFO, logger="seqlab.serve"):
        handler = TranslationHandler("mt", mt, Limits(), {"engine": "auto"})
    assert handler.engine == "seqlab" and reason in handler.why
    assert handler.details()["engine_reason"] == handler.why
    (line,) = [
        r.getMessage() for r in caplog.records if "runs on seqlab's engine" in r.getMessage()
    ]
    assert reason in line
    with pytest.raises(SeqlabError, match=f"{reason}.*use --engine seqlab.*--engine auto"):
        TranslationHandler("mt", mt, Limits(), {"engine": "ctranslate2"})
    with pytest.raises(SeqlabError, match="use --engine seqlab"):
        mt.translate(["may 9 1998"], engine="ctranslate2")


def test_seqlab_serve_of_an_alibi_run_says_which_engine_and_why(tiny_runs, tmp_path, capsys):
    """``seqlab serve`` of an ALiBi translation run starts (engine auto) on seqlab's engine with
    one line saying why; ``--engine ctranslate2`` is refused naming the engines that work."""
    import shutil
    import socket

    import uvicorn
    import yaml

    from seqlab.cli import main

    run = tmp_path / "alibi"
    shutil.copytree(tiny_runs["mt"], run)
    cfg = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    cfg["model"]["positions"] = "alibi"  # no weights of its own: the checkpoint still loads
    (run / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    with pytest.MonkeyPatch.context() as m:
        m.setattr(uvicorn.Server, "run", lambda self, *a, **k: None)  # started, not served
        assert main(["serve", str(run), "--port", port, "--engine", "auto"]) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if "model.arch=transformer" in x]
    assert "engine seqlab (CTranslate2 cannot hold model.positions: alibi" in line
    assert main(["serve", str(run), "--port", port, "--engine", "ctranslate2"]) == 2
    err = capsys.readouterr().err
    assert "model.positions: alibi" in err and "use --engine seqlab" in err and "auto" in err


def test_seqlab_s_engine_decodes_several_batches_at_once_with_the_same_outputs(
    tiny_runs, tmp_path, capsys, monkeypatch
):
    """``seqlab translate --threads T --workers W``: W batches decoded at once, each by T / W
    PyTorch threads (the layout CTranslate2 calls inter_threads); the outputs are those of one
    batch after the other. More workers than threads is refused."""
    import torch

    from seqlab.cli import main
    from seqlab.tasks.translation import engines

    monkeypatch.setattr(engines, "_SEQLAB_WORKERS", engines._SEQLAB_WORKERS)  # restored after
    threads = torch.get_num_threads()
    sources = tmp_path / "dates.txt"
    days = [f"{m} {d} {1990 + d % 20}" for m in ("may", "june", "july") for d in range(1, 29)]
    sources.write_text("\n".join(days * 4) + "\n", encoding="utf-8")  # 336 lines: 3 batches
    common = ["translate", "--run", str(tiny_runs["mt"]), "--input", str(sources), "--beam", "2"]
    try:
        assert main([*common, "--threads", "2", "--workers", "1"]) == 0
        assert engines._SEQLAB_WORKERS == 1 and torch.get_num_threads() == 2
        one_at_a_time = capsys.readouterr().out
        assert main([*common, "--threads", "2", "--workers", "2"]) == 0
        at_once = capsys.readouterr().out
        assert engines._SEQLAB_WORKERS == 2 and torch.get_num_threads() == 1
        assert at_once == one_at_a_time and len(at_once.splitlines()) == len(days) * 4
        assert main([*common, "--threads", "2", "--workers", "3"]) == 2
        assert "3 workers need at least 3 threads, not 2" in capsys.readouterr().err
    finally:
        torch.set_num_threads(threads)
