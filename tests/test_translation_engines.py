"""The translation engines' one set of names (seqlab.tasks.translation.engines), and what the
command line and the server accept."""

from __future__ import annotations

import pytest

from seqlab.errors import SeqlabError
from seqlab.tasks.translation import (
    ENGINE_SPELLINGS,
    ENGINES,
    SERVER_ENGINES,
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


def test_every_spelling_names_one_engine():
    assert engine_name("pytorch") == engine_name("seqlab") == "seqlab"
    assert engine_name("ctranslate2") == "ctranslate2"
    assert set(ENGINE_SPELLINGS.values()) == {"seqlab", "ctranslate2"}
    with pytest.raises(SeqlabError, match=r"--engine must be pytorch, seqlab or ctranslate2"):
        engine_name("torch")
    assert engine_decodes("pytorch", "bahdanau") and engine_decodes("seqlab", "bahdanau")
    assert not engine_decodes("ctranslate2", "bahdanau") and not engine_decodes("auto", "x")


def test_the_command_lines_take_the_task_s_names():
    assert _choices(["serve"], "--engine") == list(SERVER_ENGINES)
    engine = next(o for o in Translator.options if o.flag == "--engine")
    assert tuple(engine.choices) == ENGINES and engine.default in ENGINE_SPELLINGS


def test_a_request_tokenises_each_sentence_once(tiny_runs, monkeypatch):
    """The server's path — hypotheses, is_cut, unknown_tokens, attention's source_ids — reads
    the source tokenizer once per sentence, and decodes as before."""
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
    found = m.hypotheses(sentences, beam=2)
    for s in sentences:
        m.is_cut(s), m.unknown_tokens(s), m.source_ids(s)
    assert sorted(calls) == sorted(sentences)
    assert [[h.tokens for h in hs] for hs in found] == [[h.tokens for h in hs] for hs in before]
