"""Each call validates its options once: the options model (and the model of how it runs, the
engine's) is built (``CommandOptions.of``) and
what it means for the run worked out (``DecodeOptions.decode``) once per call of the Python API,
and once per command on the command line (its check before any work hands the validated model on
to the calls), however many batches the command then decodes. The calls are counted."""

from __future__ import annotations

from collections import Counter

import pytest

from seqlab import load
from seqlab.cli import main
from seqlab.tasks.options import CommandOptions
from seqlab.tasks.translation import translator
from seqlab.tasks.translation.options import DecodeOptions


@pytest.fixture
def counted(monkeypatch):
    """How often options are validated, decodings worked out and sentences checked."""
    calls: Counter[str] = Counter()
    of, decode = CommandOptions.of.__func__, DecodeOptions.decode
    as_sentences = translator.as_sentences

    def counting_of(cls, *args, **kwargs):  # the decoding's model, and how the call runs
        calls["of" if issubclass(cls, DecodeOptions) else "engine"] += 1
        return of(cls, *args, **kwargs)

    def counting_decode(self, run):
        calls["decode"] += 1
        return decode(self, run)

    monkeypatch.setattr(CommandOptions, "of", classmethod(counting_of))
    monkeypatch.setattr(DecodeOptions, "decode", counting_decode)

    def counting_as_sentences(*args, **kwargs):
        calls["as_sentences"] += 1
        return as_sentences(*args, **kwargs)

    monkeypatch.setattr(translator, "as_sentences", counting_as_sentences)
    return calls


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("translate", {"of": 1, "engine": 1, "decode": 1, "as_sentences": 1}),
        ("predict", {"of": 1, "engine": 1, "decode": 1, "as_sentences": 1}),
        ("hypotheses", {"of": 1, "engine": 1, "decode": 1, "as_sentences": 1}),
        ("score", {"of": 1, "engine": 1, "decode": 1, "as_sentences": 1}),
    ],
)
def test_a_translation_call_validates_its_options_once(tiny_runs, counted, call, expected):
    model = load(tiny_runs["mt"])
    counted.clear()
    sentences = ["a man rides a bike .", "two dogs play ."]
    if call == "score":
        model.score(sentences, ["x", "y"], beam=2)
    else:
        getattr(model, call)(sentences, beam=2)
    assert dict(counted) == expected


def test_the_command_line_validates_once_for_every_line_it_translates(
    tiny_runs, counted, tmp_path, capsys
):
    """``seqlab translate`` on a file: the check before any work validates, each call reuses."""
    source = tmp_path / "in.txt"
    source.write_text("a man rides a bike .\ntwo dogs play .\n", encoding="utf-8")
    run = str(tiny_runs["mt"])
    assert main(["translate", "--run", run, "--input", str(source), "--beam", "2"]) == 0
    assert counted["of"] == 1 and counted["engine"] == 1 and counted["decode"] == 1
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_options_validated_once_are_still_refused_when_wrong(tiny_runs):
    """The one check still refuses: a length penalty with greedy decoding, by its message."""
    model = load(tiny_runs["mt"])
    with pytest.raises(Exception, match="length penalty"):
        model.translate(["a man ."], beam=1, length_penalty=0.6)
